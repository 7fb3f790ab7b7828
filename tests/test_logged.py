"""The stage wrapper: full output to a log, one line per stage on the console, the log's end on failure."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import REPO

from edge_build import logged, reproducible
from edge_build.layout import Layout

NOISE = "E0000 00:00:1.0 1 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error"

#: A stage as TensorFlow's make them: start-up lines on stderr, progress and results on stdout.
STAGE = f"""
import sys
print({NOISE!r}, file=sys.stderr)
print("Epoch 1/2")
print("3/3 - 0s - loss: 0.5")
print("  val_loss 0.4  val_accuracy 1.0000")
print("warning: only 12 calibration samples", file=sys.stderr)
print("fake: 36 examples -> build/fake")
print("== tiny: test split ==")
print("   tflite_int8   accuracy 1.0000")
print("fake check: int8 on tflite-runtime: top-1 agreement 1.0000")
"""


def wrapped(tmp_path: Path, script: str, *options: str, **popen) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "edge_build.logged", "--log", str(tmp_path / "logs" / "fake.log"), *options, "--", sys.executable, "-c", script]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60, **popen)


def test_a_stage_that_succeeds_prints_one_line_with_its_results_and_logs_everything(tmp_path: Path):
    done = wrapped(tmp_path, STAGE, "--name", "fake")
    assert done.returncode == 0 and done.stderr == ""
    first, *rest = done.stdout.splitlines()
    head = re.match(r"fake +\d+\.\d s  ", first)
    assert head, first
    assert all(line.startswith(" " * head.end()) for line in rest)
    shown = [first[head.end() :], *(line[head.end() :] for line in rest)]
    # stdout's lines in their order; the warning comes from stderr, read alongside.
    assert [line for line in shown if not line.startswith("warning: ")] == [
        "fake: 36 examples -> build/fake",
        "== tiny: test split ==",
        "   tflite_int8   accuracy 1.0000",
        "fake check: int8 on tflite-runtime: top-1 agreement 1.0000",
    ]
    assert "warning: only 12 calibration samples" in shown
    log = (tmp_path / "logs" / "fake.log").read_text().splitlines()
    assert log[0].startswith(f"$ {sys.executable} -c ")
    assert re.fullmatch(r"\[exit 0 after \d+\.\d\d s\]", log[-1])
    assert {NOISE, "Epoch 1/2", "3/3 - 0s - loss: 0.5", "fake: 36 examples -> build/fake"} <= set(log)


def test_result_lines_are_labelled_lines_tables_and_warnings():
    results = logged.Results()
    for line in [
        "Requirement already satisfied: numpy",
        "   not under a result line",
        "XLA check: compiles",
        "== t: x ==",
        "   row",
        "",
        "   after a gap",
    ]:
        results.stdout(line)
    for line in ["WARNING: All log messages before absl::InitializeLog()", "warning: few samples", "error: not a result"]:
        results.stderr(line)
    assert results.lines == ["XLA check: compiles", "== t: x ==", "   row", "warning: few samples"]


def test_a_stage_is_named_after_the_module_it_runs():
    assert logged.label(["python", "-m", "edge_build.stages.runtime_check", "--profile", "x.toml"]) == "runtime_check"
    assert logged.label(["/usr/bin/python3", "-c", "pass"]) == "python3"


def test_a_stage_that_fails_prints_the_end_of_its_log_and_exits_with_its_status(tmp_path: Path):
    # The pause: stdout and stderr are two pipes, and the log takes lines as they come from either.
    script = (
        f"import sys, time\nprint({NOISE!r}, file=sys.stderr)\nfor i in range(40):\n    print(f'line {{i}}')\n"
        "sys.stdout.flush()\ntime.sleep(0.2)\nprint('error: broken', file=sys.stderr)\nsys.exit(3)"
    )
    done = wrapped(tmp_path, script, "--name", "fake")
    assert done.returncode == 3 and done.stdout == ""
    header, *tail = done.stderr.splitlines()
    assert re.fullmatch(rf"fake failed after \d+\.\d s \(exit 3\); the end of its log, {re.escape(str(tmp_path / 'logs' / 'fake.log'))}:", header)
    # The log's last lines before its footer: what stdout had when the error came on stderr comes before it.
    log = (tmp_path / "logs" / "fake.log").read_text().splitlines()
    assert log[-1].startswith("[exit 3 after ") and {f"line {i}" for i in range(40)} | {NOISE} <= set(log)
    assert tail == log[-1 - logged.TAIL_LINES : -1] and tail[-1] == "error: broken" and "line 39" in tail


def test_a_stage_killed_by_a_signal_exits_as_a_shell_says(tmp_path: Path):
    done = wrapped(tmp_path, "import os, signal\nprint('started', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)")
    assert done.returncode == 128 + signal.SIGKILL
    assert "(killed by SIGKILL)" in done.stderr.splitlines()[0] and done.stderr.splitlines()[1:] == ["started"]


def test_verbose_streams_everything_and_adds_no_line(tmp_path: Path):
    done = wrapped(tmp_path, STAGE, "--verbose")
    assert done.returncode == 0
    assert done.stdout.splitlines() == [
        "Epoch 1/2",
        "3/3 - 0s - loss: 0.5",
        "  val_loss 0.4  val_accuracy 1.0000",
        "fake: 36 examples -> build/fake",
        "== tiny: test split ==",
        "   tflite_int8   accuracy 1.0000",
        "fake check: int8 on tflite-runtime: top-1 agreement 1.0000",
    ]
    assert done.stderr.splitlines() == [NOISE, "warning: only 12 calibration samples"]
    assert NOISE in (tmp_path / "logs" / "fake.log").read_text()


def test_verbose_names_the_log_of_a_failure_without_repeating_it(tmp_path: Path):
    done = wrapped(tmp_path, "import sys\nprint('error: broken', file=sys.stderr)\nsys.exit(2)", "--verbose", "--name", "fake")
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == "error: broken"
    assert re.fullmatch(r"fake failed after \d+\.\d s \(exit 2\); its full output: .*fake\.log", done.stderr.splitlines()[1])


def start_wrapped_sleep(log: Path, sigint) -> subprocess.Popen:
    """The wrapper around a stage that prints a line and sleeps, started with SIGINT set to ``sigint``
    (whatever this run of pytest inherited, e.g. ignored in a script's background job); once that line is logged."""
    command = [sys.executable, "-m", "edge_build.logged", "--log", str(log), "--name", "fake", "--"]
    # No controlling terminal: nothing but the wrapper can pass the signal on.
    child = subprocess.Popen(
        [*command, sys.executable, "-c", "import time\nprint('started')\ntime.sleep(60)"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, sigint),
    )
    deadline = time.monotonic() + 30
    while not (log.is_file() and "started" in log.read_text().splitlines()[1:]):
        assert time.monotonic() < deadline and child.poll() is None, "the log never showed the stage's first line"
        time.sleep(0.05)
    return child


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_the_log_is_written_as_the_stage_runs_and_a_signal_is_passed_on(tmp_path: Path, signum: int):
    log = tmp_path / "logs" / "fake.log"
    child = start_wrapped_sleep(log, signal.SIG_DFL)
    child.send_signal(signum)
    stdout, stderr = child.communicate(timeout=30)
    assert child.returncode == 128 + signum and stdout == ""
    assert re.fullmatch(rf"fake interrupted after \d+\.\d s \(killed by {signal.Signals(signum).name}\); its output so far: .*fake\.log\n", stderr)
    assert log.read_text().splitlines()[-1].startswith(f"[killed by {signal.Signals(signum).name} after ")


def test_a_sigint_ignored_when_the_build_started_stays_ignored(tmp_path: Path):
    child = start_wrapped_sleep(tmp_path / "fake.log", signal.SIG_IGN)
    child.send_signal(signal.SIGINT)
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(timeout=1.5)
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=30) == 128 + signal.SIGTERM


def test_a_ctrl_c_the_stage_ignores_is_passed_on_after_a_grace(tmp_path: Path, monkeypatch):
    """The terminal signals the stage itself on Ctrl-C: the wrapper passes SIGINT on only if the stage is still running later."""
    monkeypatch.setattr(logged, "terminal_reaches", lambda pid: True)
    monkeypatch.setattr(logged, "SIGINT_GRACE_S", 0.5)
    # As in a terminal, whatever this pytest inherited: a background job of a script ignores SIGINT.
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(0.5, signal.raise_signal, [signal.SIGINT]).start()
        started = time.monotonic()
        status = logged.run([sys.executable, "-c", "import time\ntime.sleep(60)"], tmp_path / "fake.log", name="fake")
        assert status == 128 + signal.SIGINT and 1.0 <= time.monotonic() - started < 30
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, handler)


def test_a_command_that_cannot_start_is_named(tmp_path: Path):
    done = subprocess.run(
        [sys.executable, "-m", "edge_build.logged", "--log", str(tmp_path / "x.log"), "--", str(tmp_path / "nowhere")],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 127 and done.stderr.startswith(f"error: nowhere: cannot run {tmp_path / 'nowhere'}: No such file or directory")


def test_each_stage_logs_beside_its_first_output(tmp_path: Path):
    layout = Layout(tmp_path / "build")
    assert layout.log("train", layout.weights) == tmp_path / "build" / "logs" / "model" / "train.log"
    int8 = layout.target("host").artifact("tflite_int8")
    assert layout.log("tflite_int8", int8) == tmp_path / "build" / "logs" / "host" / "tflite_int8.log"
    shared = tmp_path / "envs" / "aarch64" / "env.json"
    assert (
        layout.log("runtime_env", shared) == tmp_path / "build" / "logs" / "elsewhere" / str(shared.parent.resolve()).lstrip("/") / "runtime_env.log"
    )
    assert tmp_path / "build" / "logs" in layout.shared_dirs


def test_logs_are_left_out_of_the_reproducibility_comparison(tmp_path: Path):
    for build, seconds in (("first", "1.00"), ("second", "2.00")):
        (tmp_path / build / "logs" / "model").mkdir(parents=True)
        (tmp_path / build / "logs" / "model" / "train.log").write_text(f"[exit 0 after {seconds} s]\n")
        (tmp_path / build / "vocab.txt").write_text("[PAD]\n")
    assert reproducible.compare_trees(tmp_path / "first", tmp_path / "second") == {"vocab.txt": {"status": "identical"}}


def test_a_recommendation_the_timings_moved_is_measured_but_a_changed_model_is_not(tmp_path: Path):
    # Two clean builds on a shared machine can time a close call either way: the recommended model may differ, nothing else.
    for build, artifact in (("first", "tflite_fp32"), ("second", "tflite_int8")):
        (tmp_path / build / "host").mkdir(parents=True)
        recommended = {"tflite-runtime": {"artifact": artifact, "model": f"model_{artifact[7:]}.tflite", "decided_by": "timing"}}
        (tmp_path / build / "host" / "recommended.json").write_text(json.dumps(recommended))
        (tmp_path / build / "host" / "tflite_int8.json").write_text(json.dumps({"artifact": artifact, "latency_us": len(build)}))
    compared = reproducible.compare_trees(tmp_path / "first", tmp_path / "second")
    assert compared["host/recommended.json"]["status"] == "measured"
    assert compared["host/tflite_int8.json"] == {"status": "differs", "where": "artifact"}
    assert reproducible.not_reproduced(compared) == ["host/tflite_int8.json"]
