"""The board report renders from its records alone: a golden page from a board check over ssh and this machine's runtime checks.

The records in ``tests/testdata/board_report/`` are a real tiny build's, checked on this machine through
sshd (paths replaced by ``/srv/...``); a change to the renderer shows up here as a diff of ``report.md``.
"""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import REPO

from edge_build import recommend
from edge_build.config.profile import read_profile
from edge_build.stages import board_report
from edge_build.typed_records import Evaluation, RuntimeCheckRecord

RECORDS = REPO / "tests" / "testdata" / "board_report"


def rendered_page() -> str:
    result = json.loads((RECORDS / "result.json").read_text(encoding="utf-8"))
    sizes = recommend.sizes_of(Evaluation.read(RECORDS / "eval.json"))
    profile = read_profile(RECORDS / "tiny.toml")
    return board_report.board_report([result], RuntimeCheckRecord.read(RECORDS / "runtime_checks.json"), sizes, profile)


def test_the_board_report_matches_the_golden_file(golden):
    golden(rendered_page(), RECORDS / "report.md")


def test_rendering_the_board_report_loads_neither_tensorflow_nor_numpy():
    code = "import sys, test_board_report_golden as t; t.rendered_page(); print('tensorflow' in sys.modules or 'numpy' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO / "tests", capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout) == (0, "False\n"), result.stderr[-2000:]
