"""The report renders from its records alone: a golden page and console headline from a BBC News host build's records.

The records in ``tests/testdata/report_host/`` are a real build's (the runtime environment's path made
relative); a change to a renderer shows up here as a diff of ``report.md`` or ``headline.txt``.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO, golden_difference

from edge_build.config.profile import read_profile
from edge_build.stages import report
from edge_build.typed_records import Evaluation, Recommended, RuntimeCheckRecord

RECORDS = REPO / "tests" / "testdata" / "report_host"


def record(name: str) -> dict:
    return json.loads((RECORDS / f"{name}.json").read_text(encoding="utf-8"))


def rendered_page(recommended: Recommended | None = None) -> tuple[str, str]:
    # The page names the profile's file: as in the build these records came from, wherever this checkout lies.
    profile = dataclasses.replace(read_profile(RECORDS / "host.toml"), source=Path("targets/host.toml"))
    context = report.Context(
        data_summary=record("data_summary"),
        data_report=record("data_report"),
        quality=record("quality"),
        train_log=record("train_log"),
        conversion_records={name: record(name) for name in profile.runtime_artifacts},
        runtime_checks=RuntimeCheckRecord.read(RECORDS / "runtime_checks.json"),
        xla_checks=None,
        calibration=record("calibration_summary"),
        recommended=recommended or Recommended.read(RECORDS / "recommended.json"),
    )
    evaluation = Evaluation.read(RECORDS / "eval.json")
    return report.render_markdown(evaluation, profile, context), report.headline(evaluation, Path("build/host/report.md")) + "\n"


def test_the_report_page_and_headline_match_the_golden_files(golden):
    page, headline = rendered_page()
    golden(page, RECORDS / "report.md")
    golden(headline, RECORDS / "headline.txt")


def test_the_deploy_table_is_what_recommended_json_says_not_a_choice_made_again():
    # The runtime checks decided fp16 on tflite-runtime from its timings; a record that says otherwise is what the page shows.
    recommended = Recommended.of(
        {
            "tflite-runtime": {"artifact": "tflite_fp32", "model": "model_fp32.tflite", "decided_by": "runtime table"},
            "ai-edge-litert": {"artifact": "tflite_int8", "model": "model_int8.tflite", "decided_by": "timing"},
        }
    )
    page, _ = rendered_page(recommended)
    (row,) = [line for line in page.splitlines() if line.startswith("| tflite-runtime ")]
    assert "| model_fp32.tflite |" in row and "| runtime table | emulated, so the runtime table decides:" in row


def test_a_renderer_that_changes_one_word_fails_with_a_diff_of_that_line(monkeypatch):
    render_data = report.render_data
    monkeypatch.setattr(report, "render_data", lambda *args: [line.replace("examples read", "texts read") for line in render_data(*args)])
    page, _ = rendered_page()
    difference = golden_difference(page, RECORDS / "report.md")
    assert difference.startswith("tests/testdata/report_host/report.md differs from what is rendered now (pytest --update-goldens")
    changed = [line for line in difference.splitlines() if line[:1] in "-+" and line[:3] not in ("---", "+++")]
    (removed, added) = changed
    assert "2225 examples read" in removed and added == "+" + removed[1:].replace("examples read", "texts read")


def test_rendering_loads_neither_tensorflow_nor_numpy():
    code = "import sys, test_report_golden; test_report_golden.rendered_page(); print('tensorflow' in sys.modules or 'numpy' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO / "tests", capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout) == (0, "False\n"), result.stderr[-2000:]
