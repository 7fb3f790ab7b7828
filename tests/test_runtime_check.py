"""The runtime runner in its own process, parity arithmetic, gates and the latency report."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_PROFILE, environment_with, profile_runtime, with_litert, write_profile

from edge_build.board.parity import compare, load_golden
from edge_build.board.runtime import RUNTIME_VERSIONS, RUNTIMES
from edge_build.config.profile import load_profile
from edge_build.errors import StageError
from edge_build.layout import Target
from edge_build.runtime_envs import describe, launcher, read_environment
from edge_build.stages import runtime_check


def test_parity_arithmetic_on_hand_made_logits():
    reference = np.array([[2.0, 0.0], [0.0, 1.0], [1.0, 0.5], [0.2, 0.1]])
    candidate = np.array([[2.0, 0.1], [0.0, 1.0], [0.4, 0.5], [0.2, 0.1]])
    labels = np.array([0, 1, 0, 1])
    figures = compare(reference, candidate, labels)
    assert figures["max_abs_logit_error"] == pytest.approx(0.6)
    assert figures["mean_abs_logit_error"] == pytest.approx(0.7 / 8)
    assert figures["top1_agreement"] == 0.75 and figures["disagreeing_examples"] == [2]
    assert figures["reference_accuracy"] == 0.75 and figures["accuracy"] == 0.5
    assert compare(reference, reference, labels)["top1_agreement"] == 1.0
    with pytest.raises(ValueError):
        compare(reference, candidate[:3], labels)


def test_nan_logits_break_every_tolerance():
    from edge_build.artifacts import ARTIFACTS
    from edge_build.board.decision import breaches
    from edge_build.config.profile import Tolerances

    reference = np.array([[1.0, 0.0], [0.0, 1.0]])
    figures = compare(reference, np.full_like(reference, np.nan), np.array([0, 1]))
    for artifact in ("tflite_fp32", "tflite_fp16", "tflite_int8"):
        assert breaches(ARTIFACTS[artifact].parity, figures, Tolerances().limits()), artifact


def read_test_split(tiny_artifacts) -> runtime_check.TestSplit:
    layout = tiny_artifacts["layout"]
    return runtime_check.TestSplit.read(layout.data.split("test"), layout.token_ids("test"), layout.reference_logits, layout.data.labels)


def test_the_checks_cover_every_artifact_on_every_runtime(tiny_artifacts):
    summary = json.loads((tiny_artifacts["target"] / "runtime_checks.json").read_text())
    assert set(summary["checks"]) == {"tflite_fp32", "tflite_fp16", "tflite_int8"}
    # Every runtime ran in the stack's environment, which the record names.
    environment = read_environment(tiny_artifacts["runtime_env"])
    assert summary["environment"] == environment and summary["stack"] == describe(environment)
    assert summary["stack"].startswith("Debian 12 bookworm: CPython 3.11.") and "numpy 1.26.4; native x86_64" in summary["stack"]
    for per in summary["checks"].values():
        result = per["tflite-runtime"]
        assert result["status"] == "ok" and result["problems"] == [] and not result["emulated"]
        assert result["runtime_version"] == "2.14.0" and result["machine"]
        assert result["python"] == environment["python_version"]
        assert result["parity"]["examples"] == summary["golden_examples"] == 6
        latency = result["latency"]
        assert len(latency["invoke_us"]) == 20
        assert 0 < latency["min_us"] <= latency["p50_us"] <= latency["p90_us"] <= latency["p99_us"] <= latency["max_us"]
        assert latency["load_ms"] > 0 and latency["first_invoke_ms"] > 0 and latency["examples_per_second"] > 0
        assert 0 < result["peak_rss_mb"] < 500  # the runner's own memory, not TensorFlow's
    assert summary["checks"]["tflite_fp32"]["tflite-runtime"]["parity"]["max_abs_logit_error"] < 1e-4
    assert summary["checks"]["tflite_fp16"]["tflite-runtime"]["parity"]["max_abs_logit_error"] < 1e-2
    # The machine-independent figures the manifest records: no timings, nothing about the machine.
    runtime_parity = json.loads((tiny_artifacts["target"] / "runtime_parity.json").read_text())
    assert runtime_parity == {
        artifact: {"tflite-runtime": {key: per["tflite-runtime"]["parity"][key] for key in ("top1_agreement", "max_abs_logit_error", "accuracy")}}
        for artifact, per in summary["checks"].items()
    }
    golden = load_golden(str(tiny_artifacts["target"] / "golden.npz"))
    assert golden["ids"].dtype == np.int32 and golden["ids"].shape == (6, 24) and golden["reference_logits"].shape == (6, 3)
    assert (tiny_artifacts["target"] / "latency.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def copy_target(tiny_artifacts, tmp_path: Path) -> Path:
    target = tmp_path / "target"
    shutil.copytree(tiny_artifacts["target"], target)
    for path in Target(target, "tiny").runtime_check_outputs:
        path.unlink()
    return target


def outputs_of(target: Path) -> list[Path]:
    return Target(target, "tiny").runtime_check_outputs


def test_a_tolerance_tighter_than_the_model_fails_with_a_table(tiny_artifacts, tmp_path: Path, capsys):
    write_profile(tmp_path / "targets", "tiny", TINY_PROFILE.replace("fp32_max_abs_logit = 1e-4", "fp32_max_abs_logit = 1e-12"))
    target = copy_target(tiny_artifacts, tmp_path)
    with pytest.raises(StageError, match=re.escape(f"runtime checks failed for {tmp_path / 'targets' / 'tiny.toml'} (table above)")):
        runtime_check.runtime_checks(
            load_profile(tmp_path / "targets", "tiny"), read_test_split(tiny_artifacts), Target(target, "tiny"), tiny_artifacts["runtime_env"]
        )
    table = capsys.readouterr().err
    assert "tflite_fp32" in table and "tflite-runtime" in table and "max |Δlogit|" in table and "(allowed <= 1e-12, fp32_max_abs_logit)" in table
    assert not any(path.exists() for path in outputs_of(target))


def test_a_latency_budget_breach_fails(tiny_artifacts, tmp_path: Path, capsys):
    write_profile(tmp_path / "targets", "tiny", TINY_PROFILE.replace("int8_p50_ms = 1000.0", "int8_p50_ms = 0.000001"))
    target = copy_target(tiny_artifacts, tmp_path)
    with pytest.raises(StageError):
        runtime_check.runtime_checks(
            load_profile(tmp_path / "targets", "tiny"), read_test_split(tiny_artifacts), Target(target, "tiny"), tiny_artifacts["runtime_env"]
        )
    assert "(budget <= 1e-06 ms)" in capsys.readouterr().err


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda content: content[: len(content) // 3], "corrupted: {model} has {third} bytes, the conversion wrote {size} (truncated or replaced"),
        (lambda content: np.random.default_rng(0).bytes(len(content)), "corrupted: {model}'s SHA-256 differs from the one recorded at conversion"),
    ],
    ids=["truncated", "random-bytes"],
)
def test_a_corrupted_model_is_reported_as_such(tiny_artifacts, tmp_path: Path, capsys, damage, message: str):
    target = copy_target(tiny_artifacts, tmp_path)
    model = target / "model_int8.tflite"
    size = model.stat().st_size
    model.write_bytes(damage(model.read_bytes()))
    profile = load_profile(tiny_artifacts["profile"].parent, "tiny")
    with pytest.raises(StageError, match="runtime checks failed"):
        runtime_check.runtime_checks(profile, read_test_split(tiny_artifacts), Target(target, "tiny"), tiny_artifacts["runtime_env"])
    assert message.format(model=model, third=size // 3, size=size) in capsys.readouterr().err
    assert not any(path.exists() for path in outputs_of(target))


def with_unprovisioned_litert(tiny_artifacts, tmp_path: Path, required: bool) -> tuple:
    """The tiny profile with ai-edge-litert too, and the host environment where it was not provisioned."""
    profile = load_profile(write_profile(tmp_path / "targets", "tiny", with_litert(TINY_PROFILE, required)).parent, "tiny")
    reason = "not provisioned: pip install failed: ERROR: No matching distribution found for ai-edge-litert==2.3.0"
    return profile, environment_with(tiny_artifacts["runtime_env"], tmp_path / "env.json", "ai-edge-litert", reason, required), reason


def test_an_optional_runtime_that_cannot_run_is_reported_not_checked_and_never_gates(tiny_artifacts, tmp_path: Path):
    profile, runtime_env, reason = with_unprovisioned_litert(tiny_artifacts, tmp_path, required=False)
    target = copy_target(tiny_artifacts, tmp_path)
    summary = runtime_check.runtime_checks(profile, read_test_split(tiny_artifacts), Target(target, "tiny"), runtime_env)
    for artifact, per in summary["checks"].items():
        assert per["ai-edge-litert"] == {"status": f"not checked: {reason}", "problems": []}, artifact
        assert per["tflite-runtime"]["status"] == "ok"
    assert f"runtime check: tflite_int8 on ai-edge-litert: not checked: {reason}" in runtime_check.summary_lines(summary)
    # The manifest's record holds what ran, and only that.
    runtime_parity = json.loads((target / "runtime_parity.json").read_text())
    assert {runtime for per in runtime_parity.values() for runtime in per} == {"tflite-runtime"}


def test_a_required_runtime_that_cannot_run_fails_the_checks(tiny_artifacts, tmp_path: Path, capsys):
    profile, runtime_env, reason = with_unprovisioned_litert(tiny_artifacts, tmp_path, required=True)
    target = copy_target(tiny_artifacts, tmp_path)
    with pytest.raises(StageError, match=re.escape(f"runtime checks failed for {profile.source} (table above)")):
        runtime_check.runtime_checks(profile, read_test_split(tiny_artifacts), Target(target, "tiny"), runtime_env)
    assert capsys.readouterr().err.count(f"not checked: {reason}") == 3  # one row per TF Lite artifact
    assert not any(path.exists() for path in outputs_of(target))


def test_a_model_a_runtime_cannot_load_is_a_failure_not_a_traceback(tiny_artifacts, tmp_path: Path):
    junk = tmp_path / "junk.tflite"
    junk.write_bytes(b"not a flatbuffer at all" * 10)
    profile = load_profile(tiny_artifacts["profile"].parent, "tiny")
    golden, environment = tiny_artifacts["target"] / "golden.npz", read_environment(tiny_artifacts["runtime_env"])
    outcome = runtime_check.run_in_environment(junk, profile_runtime(profile, "tflite-runtime"), golden, profile, tmp_path, environment)
    assert outcome["status"].startswith("failed: ") and str(junk) in outcome["status"]


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda content: content[:100], "not a whole TF Lite model: its operator_codes (bytes "),
        (lambda content: content[: len(content) // 3], "not a whole TF Lite model: its operator_codes (bytes "),
        (lambda content: np.random.default_rng(0).bytes(len(content)), "not a TF Lite model (no TFL3 flatbuffer identifier at byte 4)"),
    ],
    ids=["first-100-bytes", "first-third", "random-bytes"],
)
def test_the_runtime_runner_refuses_a_damaged_model_in_one_line(tiny_artifacts, tmp_path: Path, damage, message: str):
    # Unchecked, tflite-runtime 2.14 dies of SIGSEGV on both cuts and answers "'utf-8' codec can't decode" to the random bytes.
    model = tmp_path / "model.tflite"
    model.write_bytes(damage(tiny_artifacts["tflite_int8"].read_bytes()))
    out = tmp_path / "result.json"
    python, environment = launcher(read_environment(tiny_artifacts["runtime_env"]))
    result = subprocess.run([*python, "-m", "edge_build.board.bench", str(model), "--out", str(out)], env=environment, capture_output=True, text=True)
    assert result.returncode == 4
    assert result.stderr.startswith(f"error: {model}: {message}") and result.stderr.count("\n") == 1
    assert not out.exists()


def test_a_crash_a_hang_and_a_missing_runtime_are_results_not_exceptions(tiny_artifacts, tmp_path: Path, monkeypatch):
    profile = load_profile(tiny_artifacts["profile"].parent, "tiny")
    golden, environment = tiny_artifacts["target"] / "golden.npz", read_environment(tiny_artifacts["runtime_env"])
    outcomes = {
        "crash": subprocess.CompletedProcess([], -11, "", ""),
        "missing": subprocess.CompletedProcess(
            [], 3, "", "error: ai-edge-litert is not installed for /usr/bin/python3 (pip install ai-edge-litert)\n"
        ),
    }
    for case, completed in outcomes.items():
        monkeypatch.setattr(subprocess, "run", lambda *a, completed=completed, **k: completed)
        outcome = runtime_check.run_in_environment(
            tiny_artifacts["tflite_int8"], profile_runtime(profile, "tflite-runtime"), golden, profile, tmp_path, environment
        )
        assert (
            outcome["status"]
            == {
                "crash": "crashed (signal 11)",
                "missing": "missing: ai-edge-litert is not installed for /usr/bin/python3 (pip install ai-edge-litert)",
            }[case]
        )

    def hang(*args, **kwargs):
        raise subprocess.TimeoutExpired(args[0], kwargs["timeout"])

    monkeypatch.setattr(subprocess, "run", hang)
    assert runtime_check.run_in_environment(
        tiny_artifacts["tflite_int8"], profile_runtime(profile, "tflite-runtime"), golden, profile, tmp_path, environment
    ) == {"status": "timed out after 300 s"}


@pytest.mark.parametrize(
    "runtime_python, status",
    [
        ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", "crashed (signal 11)"),
        ("import time; time.sleep(60)", "timed out after 1 s"),
    ],
    ids=["crash", "hang"],
)
def test_a_runtime_that_crashes_or_hangs_fails_the_stage_and_writes_nothing(tiny_artifacts, tmp_path: Path, capsys, runtime_python: str, status: str):
    from edge_build import cli

    assert TINY_PROFILE.rstrip().endswith("runs = 20")  # [checks] is the profile's last table
    profile = write_profile(tmp_path / "targets", "tiny", TINY_PROFILE + "timeout_s = 1\n")
    # A runtime environment's Python that dies of a signal or never answers, as a runtime does on a model it mishandles.
    runtime_env = tmp_path / "env.json"
    runtime_env.write_text(json.dumps({**read_environment(tiny_artifacts["runtime_env"]), "python": [sys.executable, "-c", runtime_python]}))
    target = copy_target(tiny_artifacts, tmp_path)
    layout = tiny_artifacts["layout"]
    argv = [
        "--profile",
        str(profile),
        "--target-dir",
        str(target),
        "--test",
        str(layout.data.split("test")),
        "--test-ids",
        str(layout.token_ids("test")),
        "--reference-logits",
        str(layout.reference_logits),
        "--labels",
        str(layout.data.labels),
        "--runtime-env",
        str(runtime_env),
    ]
    assert cli.run(runtime_check.build_parser, runtime_check.drive, argv) == cli.EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert err.count(status) == 3  # one row per TF Lite artifact
    assert err.endswith(f"error: {target}: runtime checks failed for {profile} (table above)\n")
    assert not any(path.exists() for path in outputs_of(target))


def test_the_board_code_never_imports_tensorflow():
    package = Path(__file__).resolve().parents[1] / "edge_build" / "board"
    sources = sorted(package.glob("*.py"))
    assert {"bench.py", "launch.py", "parity.py", "runtime.py", "wordpiece.py"} <= {source.name for source in sources}
    for source in sources:
        text = source.read_text()
        assert "import tensorflow" not in text and "from tensorflow" not in text, source
        assert "from edge_build" not in text and "import edge_build" not in text, f"{source}: board code must run without edge-build installed"
    modules = ", ".join(f"edge_build.board.{source.stem}" for source in sources if source.stem != "__init__")
    probe = f"import sys, {modules}; print('tensorflow' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_the_bundle_cli_verifies_and_extracts(tiny_artifacts, tmp_path: Path):
    archive = tmp_path / "evil.tar.gz"
    import io
    import tarfile

    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("../outside.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    result = subprocess.run(
        [sys.executable, "-m", "edge_build.board.launch", "extract", str(archive), str(tmp_path / "out")], capture_output=True, text=True
    )
    assert result.returncode == 2 and "would be written outside" in result.stderr
    result = subprocess.run([sys.executable, "-m", "edge_build.board.launch", "verify", str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 2 and "manifest.json: cannot read the manifest" in result.stderr


DELEGATED_NODES = """
import json, sys
from edge_build.board.runtime import make_interpreter
interpreter = make_interpreter(sys.argv[1], sys.argv[2])
interpreter.allocate_tensors()
print(json.dumps(sum(op["op_name"] == "DELEGATE" for op in interpreter._get_ops_details())))
"""


def test_the_runtime_tables_quantized_xnnpack_fact_is_what_each_runtime_does_with_an_int8_model(tiny_artifacts, gateway_runtime_env):
    # The default XNNPACK delegate replaces the nodes it takes with DELEGATE nodes: an INT8 model keeps none where it takes no
    # quantized op. The gateway's environment holds tflite-runtime 2.14 (none) and tensorflow-cpu 2.15.1 (it takes them);
    # ai-edge-litert 2.3 takes them too (TfLiteXNNPackDelegateOptionsDefault sets QS8|QU8), checked the same way by hand.
    environment = read_environment(gateway_runtime_env)
    python, variables = launcher(environment)
    # Both runtimes are required in the gateway profile: provisioning either fails the fixture, so none may be left unchecked.
    assert {runtime: entry["reason"] for runtime, entry in environment["runtimes"].items() if not entry["checkable"]} == {}
    delegates, table = {}, {}
    for runtime, entry in environment["runtimes"].items():
        command = [*python, "-c", DELEGATED_NODES, runtime, str(tiny_artifacts["tflite_int8"])]
        delegated = json.loads(subprocess.run(command, env=variables, capture_output=True, text=True, check=True).stdout)
        delegates[runtime], table[runtime] = delegated > 0, RUNTIMES[runtime][entry["version"]].quantized_xnnpack
    # One runtime of each answer, so the check tells the two apart.
    assert delegates == table == {"tflite-runtime": False, "tensorflow-cpu": True}


def test_every_runtime_row_names_a_runner_the_board_opens_models_with(monkeypatch):
    # A Tasks library that takes raw text is no TF Lite interpreter: its row says so, and the board's benchmark follows the row.
    from edge_build.board import bench, tasks

    assert {row.runner for row in RUNTIME_VERSIONS} == {"interpreter", "text_classifier"}
    monkeypatch.setattr(tasks, "TextClassifierModel", lambda *args: ("text classifier", args))
    monkeypatch.setattr(bench, "Model", lambda *args: ("interpreter", args))
    for row in RUNTIME_VERSIONS:
        monkeypatch.setattr(bench, "runner_of", lambda runtime, row=row: row.runner)
        opened, arguments = bench.open_model(row.name, "model.tflite", 1, 1)
        assert opened == row.runner.replace("_", " ") and arguments == (row.name, "model.tflite", 1, 1)
