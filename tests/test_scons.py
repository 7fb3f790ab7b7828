"""The build graph end to end: a real ``scons`` run on the tiny dataset and hyperparameters.

The rebuilds that retrain run with ``-j2`` (CI has a time budget); the clean build stays ``-j1``: it is
the build that the ``-j2`` ones, the killed and resumed one included, must reproduce byte for byte.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, TINY_HPARAMS, TINY_PROFILE, with_litert, write_profile, write_tiny_dataset

from edge_build import reproducible
from edge_build.artifacts import ARTIFACTS
from edge_build.board.runtime import RUNTIMES
from edge_build.config.loading import tomllib
from edge_build.layout import Layout
from edge_build.saved_model import files as saved_model_files

#: The tiny profile's artifacts in its order, and the conversion stages they take (each TF Lite model is a stage of its own).
TINY_ARTIFACTS = tomllib.loads(TINY_PROFILE)["artifacts"]
TINY_CONVERSIONS = [name for name in TINY_ARTIFACTS if ARTIFACTS[name].format == "tflite"]

pytestmark = pytest.mark.slow
SCONS = [sys.executable, "-m", "SCons"]
STAGE_COMMAND = re.compile(r"-m edge_build\.stages\.(\w+)(?: --artifact (\w+))?")


def stage_logs(build: Path) -> dict[Path, int]:
    """Every stage's log under ``build`` (``Layout.log``: each run of a stage rewrites its own), with its modification time."""
    logs = Layout(build).root / "logs"
    return {path: path.stat().st_mtime_ns for path in logs.rglob("*.log")} if logs.is_dir() else {}


def scons(*arguments: str, check: bool = True) -> subprocess.CompletedProcess:
    """``scons -Q ARGUMENTS``; the result also holds ``logs``: the log of each stage this run ran, in the order they ended.

    The console shows one line per stage (``edge_build.logged``); what a stage did, its command line and
    its full output, is read from its log, which names the command on its first line.
    """
    build = Path(next((a.partition("=")[2] for a in arguments if a.startswith("build_dir=")), REPO / "build"))
    before = stage_logs(build)
    result = subprocess.run([*SCONS, "-Q", *arguments], cwd=REPO, capture_output=True, text=True)
    after = stage_logs(build)
    written = sorted((mtime, path) for path, mtime in after.items() if before.get(path) != mtime)
    result.logs = {path: path.read_text(encoding="utf-8", errors="replace") for _, path in written}
    if check and result.returncode != 0:
        pytest.fail(f"scons {' '.join(arguments)} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def ran(log: str) -> str:
    """The stage a log is of, from its first line (the command); a TF Lite conversion is named by its artifact."""
    stage, artifact = STAGE_COMMAND.search(log.partition("\n")[0]).groups()
    return artifact or stage


def stages_run(result: subprocess.CompletedProcess) -> list[str]:
    """The stages SCons ran, in the order they ended; a TF Lite conversion is named by its artifact."""
    return [ran(log) for log in result.logs.values()]


def output_of(result: subprocess.CompletedProcess, stage: str) -> str:
    """The full output (command line first) of every run of ``stage`` in ``result``'s build, one after another."""
    texts = [log for log in result.logs.values() if ran(log) == stage]
    assert texts, f"{stage} did not run: {stages_run(result)}"
    return "\n".join(texts)


def with_variables(args: list[str], **values) -> list[str]:
    """``args`` with each ``NAME=VALUE`` of ``values`` in place of the one it had for that variable."""
    return [a for a in args if a.partition("=")[0] not in values] + [f"{name}={value}" for name, value in values.items()]


def mtimes(paths) -> dict:
    return {str(p): p.stat().st_mtime_ns for p in paths}


@pytest.fixture(scope="module")
def project(tmp_path_factory, runtime_envs: Path) -> dict:
    root = tmp_path_factory.mktemp("scons")
    hparams = root / "hparams.toml"
    hparams.write_text(TINY_HPARAMS, encoding="utf-8")
    write_profile(root / "targets", "tiny", TINY_PROFILE)
    calibration = root / "calibration"
    calibration.mkdir()
    (calibration / "calibration.toml").write_text("samples = 12\nseed = 0\n", encoding="utf-8")
    return {
        "root": root,
        "build": root / "build",
        "hparams": hparams,
        "calibration": calibration,
        "targets": root / "targets",
        "args": [
            f"dataset={write_tiny_dataset(root / 'dataset')}",
            f"hparams={hparams}",
            f"build_dir={root / 'build'}",
            "split=60/20/20",
            f"targets_dir={root / 'targets'}",
            "target=tiny",
            f"calibration={calibration}",
            # Shared with the stage tests and every build below: each stack's environment is provisioned once.
            f"runtime_envs={runtime_envs}",
        ],
        "runtime_envs": runtime_envs,
    }


def test_a_clean_build_runs_every_stage_and_reports(project):
    result = scons(*project["args"])
    assert sorted(stages_run(result)) == sorted(
        [
            "data",
            "vocab",
            "data_report",
            "train",
            "export",
            "export",
            "baseline",
            "quality",
            "calibrate",
            *TINY_CONVERSIONS,
            "tokenize",
            "reference_logits",
            "runtime_env",
            "runtime_env",  # the metadata writer's environment (MediaPipe 0.10.21)
            "runtime_check",
            "xla_check",
            "evaluate",
            "report",
            "manifest",
            "bundle",
        ]
    )
    build = project["build"]
    for path in Layout(build).data.outputs.values():
        assert path.is_file()
    for flavour in ("reference/saved_model_cpu", "tiny/saved_model_cpu", "tiny/saved_model_xla"):
        for name in saved_model_files(jit_compile=flavour.endswith("xla")):
            assert (build / flavour / "1" / name).is_file()
    for name in (
        "model_fp32.tflite",
        "model_int8.tflite",
        "tflite_fp32.json",
        "tflite_int8.json",
        "golden.npz",
        "runtime_checks.json",
        "xla_checks.json",
        "latency.png",
        "eval.json",
        "report.md",
        "manifest.json",
        "bundle-tiny.tar.gz",
        "bundle/manifest.json",
        "bundle/bench.py",
    ):
        assert (build / "tiny" / name).is_file()
    assert (build / "calibration" / "representative.npy").is_file()
    evaluation = json.loads((build / "tiny" / "eval.json").read_text())
    assert list(evaluation["artifacts"]) == TINY_ARTIFACTS
    # What each stage did is in its log; the console has TensorFlow's start-up lines nowhere.
    assert "== tiny: test split, 6 examples, 3 classes ==" in output_of(result, "report")
    assert "quality: passed; reference test accuracy" in output_of(result, "quality")
    for name in ("report.md", "report.json", "window.json"):
        assert (build / "data" / name).is_file()
    checks = output_of(result, "runtime_check")
    assert "runtime check: tflite_int8 on tflite-runtime 2.14.0: top-1 agreement" in checks
    assert "runtime check: on Debian 12 bookworm: CPython 3.11." in checks
    report = (build / "tiny" / "report.md").read_text()
    assert "## Runtime checks" in report and "Board software stack: Debian 12 bookworm: CPython 3.11." in report
    assert "## XLA SavedModel: both signatures, compiled and warmed up" in report
    exports = output_of(result, "export")  # the reference's and the XLA flavour's
    assert "XLA check: serving_default and classify_ids each compile XLA in a fresh process" in exports
    assert "reload check: serving_default in a fresh process matches the trained model" in exports
    assert "xla: warm-up file replayed" in output_of(result, "xla_check")
    for noise in ("cpu_feature_guard", "cuInit", "oneDNN custom operations"):
        assert noise not in result.stdout + result.stderr, noise
    # One line per stage on the console, with its result lines under it: the runtime checks' figures, the report's table.
    assert len(re.findall(r"^\w+ +\d+\.\d s", result.stdout, re.MULTILINE)) == len(stages_run(result)) and result.stderr == ""
    assert re.search(r"^runtime_check +\d+\.\d s  runtime check: ", result.stdout, re.MULTILINE)
    assert re.search(r"^ +runtime check: tflite_int8 on tflite-runtime 2\.14\.0: top-1 agreement", result.stdout, re.MULTILINE)
    assert re.search(r"^report +\d+\.\d s  == tiny: test split, 6 examples, 3 classes ==$", result.stdout, re.MULTILINE)
    # The stack's environment lies where runtime_envs= says, shared; the runtime checks and the manifest name it.
    runtime_envs = project["runtime_envs"]
    command = output_of(result, "runtime_check").partition("\n")[0]
    env_json = Path(command.split(" --runtime-env=")[1].split()[0])
    assert env_json.parent.parent == runtime_envs and env_json.is_file() and not (build / "runtime-envs").exists()
    assert json.loads((build / "tiny" / "runtime_checks.json").read_text())["environment"]["stack"]["release"] == "bookworm"
    manifest = json.loads((build / "tiny" / "bundle" / "manifest.json").read_text())
    assert manifest["stack"]["install"] == ["numpy==1.26.4", "tflite-runtime==2.14.0"] and manifest["versions"]["tflite-runtime"] == "2.14.0"


def test_a_second_build_does_nothing(project):
    result = scons(*project["args"])
    assert stages_run(result) == []
    assert "is up to date" in result.stdout


def test_boards_are_checked_over_ssh_in_parallel_and_a_second_run_uploads_nothing(project, ssh_server, board_python, tmp_path: Path):
    """``board=`` with two boards (both behind the test's sshd, each with its own cache) and ``-j2``: one node per board, never cached."""
    names = ("board", "board2")
    boards = ",".join(f"ssh://{name}?python={board_python}&cache={tmp_path / name}" for name in names)
    arguments = [*project["args"], f"board={boards}", f"ssh_config={ssh_server.ssh_config}", "-j2"]
    target = project["build"] / "tiny"
    try:
        for uploaded in (True, False):
            result = scons(*arguments)
            assert sorted(stages_run(result)) == ["board_check", "board_check", "board_report"]
            for name in names:
                record = json.loads((target / "boards" / name / "result.json").read_text())
                assert record["bundle"]["uploaded"] is uploaded and record["checks"]["tflite_int8"]["tflite-runtime"]["status"] == "ok"
                assert (target / "boards" / name / "latency.png").is_file()
            page = (target / "boards" / "report.md").read_text()
            assert all(f"## ssh://{name} (" in page for name in names) and "95% CI" in page
        assert stages_run(scons(*project["args"])) == []  # without board=, the boards are not part of the build
    finally:
        # Measurements of devices outside the build: the tests below compare this build directory with clean builds.
        shutil.rmtree(target / "boards", ignore_errors=True)


def stage_pids(stage: str) -> list[int]:
    """Processes running ``python -m edge_build.stages.<stage>`` (read from /proc: no psutil needed)."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if entry.name.isdigit() and f"edge_build.stages.{stage}".encode() in command:
            pids.append(int(entry.name))
    return pids


def kill_build_during(stage: str, args: list[str]) -> None:
    """Start a build and SIGKILL it and all its processes once ``stage`` has run for a moment."""
    build = subprocess.Popen([*SCONS, "-Q", *args], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while not stage_pids(stage):
            assert build.poll() is None, f"the build ended before {stage} started"
            assert time.monotonic() < deadline, f"{stage} never started"
            time.sleep(0.05)
        time.sleep(2.0)  # into the stage's work: TensorFlow is loaded, outputs are being made
    finally:
        os.killpg(build.pid, signal.SIGKILL)
        build.wait()


@pytest.fixture(scope="module")
def resumed_build(project, tmp_path_factory) -> dict:
    """A build of the project's at a place of its own, killed twice and resumed, with ``-j2`` and a build cache.

    Every target SCons finished, before or after a kill, was pushed to the cache as it was built: the
    warm-cache test next fetches a clean build from it instead of building a third time. It comes right
    after: the tests below it edit the hyperparameters, profile and calibration the cache was built from.
    """
    root = tmp_path_factory.mktemp("resumed")
    build, cache = root / "build", root / "cache"
    args = [*with_variables(project["args"], build_dir=build, cache=cache), "-j2"]
    kill_build_during("train", args)
    killed_in_training = not (build / "model" / "model.weights.h5").exists() and not (build / "model" / "train_log.json").exists()
    kill_build_during("tflite", args)
    # A model and its report appear together, or neither.
    killed_in_conversion = {
        precision: ((build / "tiny" / f"model_{precision}.tflite").exists(), (build / "tiny" / f"tflite_{precision}.json").exists())
        for precision in ("fp32", "fp16", "int8")
    }
    scons(*args)
    return {"build": build, "args": args, "killed_in_training": killed_in_training, "killed_in_conversion": killed_in_conversion}


def test_a_build_killed_during_training_and_conversion_resumes_to_the_same_result(project, resumed_build):
    build = resumed_build["build"]
    assert resumed_build["killed_in_training"], "a killed training left a model behind"
    for precision, (model, report) in resumed_build["killed_in_conversion"].items():
        assert model == report, f"a killed conversion left model_{precision}.tflite without its report, or the report without it"
    assert not list(build.rglob(".tmp-*")), "a killed stage's temporaries outlived the next build"
    compared = reproducible.compare_trees(project["build"], build)
    assert not reproducible.not_reproduced(compared), compared
    assert stages_run(scons(*resumed_build["args"])) == []


def test_a_warm_cache_is_fetched_from_instead_of_training(resumed_build, tmp_path: Path):
    build, args = resumed_build["build"], resumed_build["args"]
    first = tmp_path / "first"
    shutil.copytree(build, first, ignore=shutil.ignore_patterns(".sconsign*"))
    shutil.rmtree(build)
    second = scons(*args)
    ran = stages_run(second)
    assert "train" not in ran and "vocab" not in ran and "tflite" not in " ".join(ran)
    assert re.search(r"Retrieved `[^']*model\.weights\.h5' from cache", second.stdout)
    assert "runtime_check" in ran and "xla_check" in ran, "runtime and XLA timings are measured on the machine, never fetched"
    for name in ("model/model.weights.h5", "tiny/model_int8.tflite", "tiny/model_fp32.tflite"):
        assert (build / name).read_bytes() == (first / name).read_bytes(), name
    # The manifest and the bundle name the recommended model, which the checks' fresh timings decide: the same bytes
    # unless those timings moved it, and then different only there.
    moved = (build / "tiny" / "recommended.json").read_bytes() != (first / "tiny" / "recommended.json").read_bytes()
    for name in ("tiny/manifest.json", "tiny/bundle-tiny.tar.gz"):
        compared = reproducible.compare_file(first / name, build / name, (first, build))
        assert compared["status"] == ("measured" if moved else "identical"), (name, compared)


def test_a_changed_or_linked_cache_entry_is_refused_and_gates_are_never_fetched(resumed_build, tmp_path: Path):
    build, args = resumed_build["build"], resumed_build["args"]
    cache = Path(next(a.partition("=")[2] for a in args if a.startswith("cache=")))
    entries = [p for p in cache.glob("*/*") if p.is_file() and not p.name.endswith(".sha256")]  # beside them, SCons's own config
    assert entries and all(p.with_name(p.name + ".sha256").is_file() for p in entries)  # each entry's digest, written on push
    # The gates and what ships are never cache entries: a poisoned quality.json or bundle cannot be fetched.
    cached = {p.read_bytes() for p in entries}
    for name in ("quality/quality.json", "tiny/eval.json", "tiny/report.md", "tiny/manifest.json", "tiny/bundle-tiny.tar.gz"):
        assert (build / name).read_bytes() not in cached, name
    int8, fp32 = ((build / "tiny" / f"model_{p}.tflite").read_bytes() for p in ("int8", "fp32"))
    for how in ("changed", "linked"):
        poisoned = tmp_path / how / "cache"
        shutil.copytree(cache, poisoned, symlinks=True)
        for entry in poisoned.rglob("*"):
            if entry.is_file() and not entry.is_symlink() and entry.read_bytes() == int8:
                if how == "changed":
                    entry.write_bytes(int8[:-1] + bytes([int8[-1] ^ 1]))
                else:
                    entry.unlink()
                    entry.symlink_to(next(e for e in poisoned.rglob("*") if e.is_file() and e.read_bytes() == fp32))
                refused = entry
        shutil.rmtree(build)  # the same build_dir: the command lines, paths included, are part of an entry's signature
        result = scons(*with_variables(args, cache=poisoned), "tflite", check=False)
        expected = "changed after it was written to the build cache" if how == "changed" else "a link in the build cache, refused"
        assert result.returncode == 2 and f"{refused}: {expected}" in result.stderr, result.stderr[-2000:]
        assert not (build / "tiny" / "model_int8.tflite").exists()


def test_a_readonly_cache_is_fetched_from_and_never_written(project, tmp_path: Path):
    cache = tmp_path / "cache"
    cache.mkdir()
    scons(*with_variables(project["args"], build_dir=tmp_path / "build", cache=cache, cache_mode="readonly"), "data")
    assert not list(cache.glob("*/*"))  # a teammate's build adds no entry (SCons writes only its config); CI's, readwrite by default, does
    bad = scons(*with_variables(project["args"], cache=cache, cache_mode="append"), "data", check=False)
    assert bad.returncode == 2 and "cache_mode=append: expected readwrite or readonly" in bad.stderr


def test_verify_reproducible_builds_twice_with_j2_and_both_match_the_j1_build(project):
    report_path = project["build"] / "reproducibility.json"
    result = scons("-j2", *project["args"], "verify-reproducible")
    report = json.loads(report_path.read_text())
    assert report["jobs"] == 2 and report["counts"]["differs"] == 0 and report["counts"]["only in one build"] == 0
    assert report["files"]["tiny/model_int8.tflite"]["status"] == "identical"
    assert report["files"]["model/model.weights.h5"]["status"] == "identical"
    assert report["files"]["tiny/saved_model_cpu/1/fingerprint.pb"]["status"] == "identical"
    assert report["files"]["tiny/runtime_checks.json"]["status"] == "measured"
    assert "files identical" in result.stdout
    j2_build = project["build"] / "reproducibility" / "first"
    assert (j2_build / "logs" / "model" / "train.log").is_file() and not [name for name in report["files"] if name.startswith("logs/")]
    compared = reproducible.compare_trees(project["build"], j2_build)
    assert not reproducible.not_reproduced(compared), compared


RETRAINED = [
    "train",
    "export",
    "export",
    "reference_logits",
    "quality",
    *TINY_CONVERSIONS,
    "runtime_check",
    "xla_check",
    "evaluate",
    "report",
    "manifest",
    "bundle",
]


def test_a_hyperparameter_change_retrains_but_does_not_resplit(project):
    weights = project["build"] / "model" / "model.weights.h5"
    data_files = list(Layout(project["build"]).data.outputs.values())
    before = mtimes(data_files)
    old_weights = weights.read_bytes()
    project["hparams"].write_text(TINY_HPARAMS.replace("learning_rate = 0.05", "learning_rate = 0.02"), encoding="utf-8")
    result = scons(*project["args"], "-j2")
    assert sorted(stages_run(result)) == sorted(RETRAINED)
    assert weights.read_bytes() != old_weights
    assert mtimes(data_files) == before


def test_a_command_line_override_retrains(project):
    result = scons(*project["args"], "epochs=1", "-j2")
    assert sorted(stages_run(result)) == sorted(RETRAINED)
    log = json.loads((project["build"] / "model" / "train_log.json").read_text())
    assert len(log["epochs"]) == 1


def test_a_calibration_edit_rebuilds_only_the_int8_model_and_what_follows(project):
    scons(*project["args"], "-j2")  # back to the hyperparameters' epochs after the override above
    build = project["build"]
    upstream = [build / "model" / "model.weights.h5", build / "tiny" / "model_fp32.tflite"]
    upstream += [
        build / flavour / "1" / name
        for flavour in ("reference/saved_model_cpu", "tiny/saved_model_cpu", "tiny/saved_model_xla")
        for name in saved_model_files(jit_compile=flavour.endswith("xla"))
    ]
    before = mtimes(upstream)
    int8 = (build / "tiny" / "model_int8.tflite").read_bytes()
    (project["calibration"] / "calibration.toml").write_text("samples = 9\nseed = 3\n", encoding="utf-8")
    result = scons(*project["args"], "--debug=explain")
    assert sorted(stages_run(result)) == sorted(["calibrate", "tflite_int8", "evaluate", "runtime_check", "report", "manifest", "bundle"])
    assert "because" in result.stdout and "calibration.toml" in result.stdout
    assert mtimes(upstream) == before
    assert (build / "tiny" / "model_int8.tflite").read_bytes() != int8
    assert json.loads((build / "calibration" / "summary.json").read_text())["samples"] == 9


def test_new_warm_up_batch_sizes_re_export_only_the_xla_flavour(project):
    build = project["build"]
    others = [
        build / flavour / "1" / name
        for flavour in ("reference/saved_model_cpu", "tiny/saved_model_cpu")
        for name in saved_model_files(jit_compile=False)
    ]
    before = mtimes([*others, build / "model" / "model.weights.h5"])
    profile = project["targets"] / "tiny.toml"
    # The profile keeps the new sizes: the tests after this one build on it, and a rebuild to undo it costs a minute.
    profile.write_text(profile.read_text().replace("warmup_batch_sizes = [1, 8]", "warmup_batch_sizes = [1, 4]"), encoding="utf-8")
    result = scons(*project["args"])
    ran = stages_run(result)
    assert ran.count("export") == 1 and "--warmup-batch-sizes 1 4" in output_of(result, "export") and "train" not in ran and "xla_check" in ran
    assert mtimes([*others, build / "model" / "model.weights.h5"]) == before
    assert json.loads((build / "tiny" / "saved_model_xla" / "1" / "assets.extra" / "metadata.json").read_text())["warmup_batch_sizes"] == [1, 4]
    assert [c["batch"] for c in json.loads((build / "tiny" / "xla_checks.json").read_text())["compilation"]["classify_ids"]] == [1, 4]


def test_editing_only_latency_budgets_reruns_only_the_checks_and_the_report(project):
    profile = project["targets"] / "tiny.toml"
    original = profile.read_text()
    recommended = project["build"] / "tiny" / "recommended.json"
    profile.write_text(original.replace("fp32_p50_ms = 1000.0", "fp32_p50_ms = 900.0"), encoding="utf-8")
    try:
        before = recommended.read_bytes()
        result = scons(*project["args"])
        assert sorted(stages_run(result)) == rechecked(before, recommended)
        checks = json.loads((project["build"] / "tiny" / "runtime_checks.json").read_text())
        assert checks["checks"]["tflite_fp32"]["tflite-runtime"]["latency_budget_ms"] == 900.0
    finally:
        # Rebuilt even when an assertion failed: the tests after this one start from the project as it was.
        profile.write_text(original, encoding="utf-8")
        before = recommended.read_bytes()
        restored = scons(*project["args"])
    assert sorted(stages_run(restored)) == rechecked(before, recommended)


def rechecked(recommended_before: bytes, recommended: Path) -> list[str]:
    """The stages a rerun of the runtime checks reruns: the report, and the manifest and the bundle only where
    the checks' timings moved the recommended model (a close call on a shared machine can go either way)."""
    moved = recommended.read_bytes() != recommended_before
    return sorted(["report", "runtime_check", *(["bundle", "manifest"] if moved else [])])


def test_editing_the_boards_tokenizer_reruns_only_the_bundle(project):
    wordpiece = REPO / "edge_build" / "board" / "wordpiece.py"
    original = wordpiece.read_text()
    wordpiece.write_text(original + "\n# an edit\n", encoding="utf-8")
    # SCons's content-timestamp decider compares whole-second timestamps: an edit undone within the second it was made
    # would look unchanged. Dating the edit 10 s back keeps the undo below in another second however fast the build runs.
    edited = wordpiece.stat().st_mtime - 10
    os.utime(wordpiece, (edited, edited))
    try:
        result = scons(*project["args"])
        assert stages_run(result) == ["bundle"]
        assert (project["build"] / "tiny" / "bundle" / "board" / "wordpiece.py").read_text().endswith("# an edit\n")
    finally:
        wordpiece.write_text(original, encoding="utf-8")
        restored = scons(*project["args"])
    assert stages_run(restored) == ["bundle"]


def test_a_quality_margin_change_reruns_only_the_gate_and_the_report(project):
    try:
        result = scons(*project["args"], "quality_margin=2.5")
        assert stages_run(result) == ["quality", "report"]
        assert json.loads((project["build"] / "quality" / "quality.json").read_text())["margin_points"] == 2.5
    finally:
        scons(*project["args"])


def test_verbose_shows_each_stage_command_and_its_full_output(project):
    try:
        result = scons(*project["args"], "quality_margin=2.5", "verbose=1", "quality")
        assert stages_run(result) == ["quality"]
        command = output_of(result, "quality").splitlines()[0].removeprefix("$ ")
        assert f"{command}\n" in result.stdout and "\nquality: passed; reference test accuracy" in result.stdout
        assert not re.search(r"^quality +\d+\.\d s", result.stdout, re.MULTILINE)
    finally:
        scons(*project["args"], "quality")


def test_a_crippled_model_fails_the_quality_gate_in_one_line(project, tmp_path: Path):
    hparams = tmp_path / "hparams.toml"
    hparams.write_text(TINY_HPARAMS.replace("epochs = 3", "epochs = 1").replace("learning_rate = 0.05", "learning_rate = 0.00001"), encoding="utf-8")
    args = with_variables(project["args"], build_dir=tmp_path / "build", hparams=hparams)
    result = scons(*args, "quality", check=False)
    assert result.returncode != 0
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert re.match(
        r"error: quality gate: the reference model's test accuracy 0\.\d{4} \(macro F1 0\.\d{4}\) is [\d.]+ points below the classical baseline's 1\.0000 ",
        line,
    ), line
    # The end of the failed stage's log, after where the whole of it is.
    log = Layout(tmp_path / "build").log("quality", tmp_path / "build" / "quality" / "quality.json")
    assert "quality failed after " in result.stderr and f"; the end of its log, {log}:\n" in result.stderr and log.is_file()
    assert not (tmp_path / "build" / "quality" / "quality.json").exists()


def test_the_calibrate_alias_regenerates_only_calibrated_models(project):
    (project["calibration"] / "field.txt").write_text("A striker and a keeper at the match\n", encoding="utf-8")
    (project["calibration"] / "calibration.toml").write_text('samples = 9\nseed = 3\nfield_samples = "field.txt"\n', encoding="utf-8")
    result = scons(*project["args"], "calibrate")
    assert stages_run(result) == ["calibrate", "tflite_int8"]


def test_a_stage_alias_builds_only_up_to_that_stage(project, tmp_path: Path):
    args = with_variables(project["args"], build_dir=tmp_path)
    result = scons(*args, "vocab")
    assert stages_run(result) == ["data", "vocab"]
    assert not (tmp_path / "model").exists()


def test_a_bad_dataset_fails_in_one_line_and_leaves_no_outputs(tmp_path: Path):
    dataset = write_tiny_dataset(tmp_path / "dataset")
    (dataset / "cooking" / "005.txt").write_bytes(b"")
    result = scons(f"dataset={dataset}", f"build_dir={tmp_path / 'build'}", check=False)
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {dataset}/cooking/005.txt: empty file"]
    assert not (tmp_path / "build" / "data").exists() or not any((tmp_path / "build" / "data").iterdir())


def test_a_missing_dataset_is_named(tmp_path: Path):
    result = scons(f"dataset={tmp_path / 'nowhere'}", f"build_dir={tmp_path / 'build'}", check=False)
    assert result.returncode != 0
    assert f"error: {tmp_path / 'nowhere'}: no such file or directory (a dataset is a folder of <label>/<file> texts" in result.stderr
    assert not (tmp_path / "build" / "data").exists() or not any((tmp_path / "build" / "data").iterdir())


def write_delimited(path: Path, delimiter: str) -> Path:
    """Two classes of two texts each, ``delimiter``-separated: the columns are found, and the split then needs more."""
    rows = ["text", "label"], ["a match report", "sport"], ["a goal", "sport"], ["a new chip", "tech"], ["a phone", "tech"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(delimiter.join(row) + "\n" for row in rows), encoding="utf-8")
    return path


TOO_FEW = "a 80/10/10 split needs at least 3 per class"


@pytest.mark.parametrize("typed, character", [("\\t", "\t"), ("tab", "\t"), (";", ";"), ("|", "|"), ("pipe", "|")])
def test_a_delimiter_reaches_the_data_stage_as_typed(tmp_path: Path, typed: str, character: str):
    # Before, SCons's shell line turned \t into t and split the command at ; and |.
    dataset = write_delimited(tmp_path / "data.csv", character)
    result = scons("data", f"dataset={dataset}", f"delimiter={typed}", f"build_dir={tmp_path / 'build'}", check=False)
    assert result.returncode == 2 and TOO_FEW in result.stderr and "missing column" not in result.stderr, result.stderr


def test_a_hostile_value_is_data_and_runs_nothing(tmp_path: Path):
    marker = tmp_path / "ran"
    dataset = write_delimited(tmp_path / "data.csv", ",")
    hostile = (f"`touch {marker}`x", f"$(touch {marker})", f"x; touch {marker}", f"${{__import__('os').system('touch {marker}')}}", "-h", "--text")
    for value in hostile:  # the last two: a value starting with "-" is a value, not the stage's option
        result = scons("data", f"dataset={dataset}", f"label_column={value}", f"build_dir={tmp_path / 'build'}", check=False)
        assert result.returncode == 2 and f"missing column(s) {value} (found: text, label)" in result.stderr, result.stderr
    # A dataset path with a dollar, a quote, a backtick and a space reads as it is.
    odd = write_delimited(tmp_path / 'we$ird "na`me` here' / "data.csv", ",")
    result = scons("data", f"dataset={odd}", f"build_dir={tmp_path / 'build'}", check=False)
    assert result.returncode == 2 and f"{odd}:" in result.stderr and TOO_FEW in result.stderr, result.stderr
    lines = scons("data", f"dataset={dataset}", "label_column=a\nb", check=False)
    assert lines.returncode == 2 and "label_column=: holds LF, which no build variable may hold" in lines.stderr
    assert not marker.exists()


def test_target_list_and_unknown_targets():
    profiles = sorted(path.stem for path in (REPO / "targets").glob("*.toml"))
    listed = scons("target=list")
    assert [line.split()[0] for line in listed.stdout.splitlines()] == profiles
    unknown = scons("target=nope", check=False)
    assert unknown.returncode == 2
    assert f"unknown target 'nope': no targets/nope.toml (available: {', '.join(profiles)})" in unknown.stderr


@pytest.mark.parametrize(
    "old, new, message",
    [
        (
            'name = "tflite-runtime"',
            'name = "tflite-runtime"\nflex_delegate = true',
            "unknown key 'runtimes.flex_delegate' (allowed: name, version, required)",
        ),
        ('description = "tests', "description = tests", "not valid TOML: Invalid value (at line 2, column 15)"),
        ("[checks]", "[checks]\ntimeout = 5", "unknown key 'checks.timeout' (allowed: golden_examples, threads, batch, warmup, runs, timeout_s)"),
        ("runs = 20", 'runs = "20"', "key 'checks.runs' must be an integer, not str '20'"),
        (
            '"tflite_int8"]',
            '"tflite_int16"]',
            f"key 'artifacts': unknown artifact 'tflite_int16' (allowed: {', '.join(ARTIFACTS)})",
        ),
        (
            'name = "tflite-runtime"',
            'name = "tensorrt"',
            f"key 'runtimes.name': unknown runtime 'tensorrt' (allowed: {', '.join(RUNTIMES)})",
        ),
        (
            "[tolerances]",
            '[stack]\nrelease = "trixie"\npython = "3.13"\nnumpy = "2.2.6"\n\n[tolerances]',
            "key 'runtimes': required runtime tflite-runtime cannot be installed on the stack Debian 13 trixie (CPython 3.13, numpy 2.2.6): "
            "tflite-runtime has wheels for CPython 3.8-3.11 only, and the trixie stack has CPython 3.13 "
            "(allowed: another stack, or required = false to report it)",
        ),
        (
            "[tolerances]",
            '[stack]\nrelease = "stretch"\n\n[tolerances]',
            "key 'stack.release': unknown OS release 'stretch' (allowed: bookworm, trixie)",
        ),
    ],
    ids=[
        "flex-delegate",
        "malformed-toml",
        "unknown-key",
        "wrong-type",
        "unknown-artifact",
        "unknown-runtime",
        "runtime-not-on-stack",
        "unknown-release",
    ],
)
def test_a_bad_profile_fails_in_one_line_before_anything_runs(tmp_path: Path, old: str, new: str, message: str):
    write_profile(tmp_path, "board", TINY_PROFILE.replace(old, new))
    result = scons(f"targets_dir={tmp_path}", "target=board", f"build_dir={tmp_path / 'build'}", check=False)
    assert result.returncode == 2
    assert result.stderr == f"scons: *** {tmp_path / 'board.toml'}: {message}\n"
    assert not (tmp_path / "build").exists()


def test_unknown_variables_and_bad_values_are_refused():
    typo = scons("epoch=3", check=False)
    assert typo.returncode == 2 and "unknown variable(s) epoch" in typo.stderr
    bad = scons("epochs=three", check=False)
    assert bad.returncode == 2 and "epochs=three: expected a whole number" in bad.stderr
    split = scons("split=90/10", check=False)
    assert split.returncode == 2 and "expected three positive train/val/test shares" in split.stderr
    board = scons("board=pi@rpi", check=False)
    assert board.returncode == 2 and "board=pi@rpi: expected an ssh:// address (allowed: ssh://[USER@]HOST[:PORT]" in board.stderr
    config = scons("board=ssh://rpi", "ssh_config=/nonexistent/ssh_config", check=False)
    assert config.returncode == 2 and "ssh_config=/nonexistent/ssh_config: no such file" in config.stderr


HELP_ALIASES = ["data", "vocab", "data-report", "tokenize", "train", "quality", "export", "tflite", "calibrate", "runtime-env", "check"]
HELP_ALIASES += ["report", "manifest", "bundle", "boards", "verify-reproducible"]


def test_help_lists_the_variables_and_aliases():
    text = scons("--help").stdout
    for word in ("target:", "dataset:", "build_dir:", "epochs:", "seed:", "verbose:"):
        assert word in text
    # SConstruct's ALIASES table, the one the graph defines its aliases from, in its order.
    aliases = text.partition("\nAliases ")[2].partition("\nVariables:")[0]
    assert re.findall(r"^  ([\w-]+)  ", aliases, flags=re.M) == HELP_ALIASES


def test_an_optional_runtime_that_cannot_be_provisioned_is_reported_and_the_build_completes(project, tmp_path: Path, monkeypatch):
    profile = project["targets"] / "tiny.toml"
    original = profile.read_text()
    # pip cannot install the optional runtime (a constraint no wheel meets), in an environment provisioned afresh:
    # the stack's environment is provisioned without it, and every stage after says so.
    (tmp_path / "constraints.txt").write_text("ai-edge-litert==0.0.1\n", encoding="utf-8")
    monkeypatch.setenv("PIP_CONSTRAINT", str(tmp_path / "constraints.txt"))
    profile.write_text(with_litert(original), encoding="utf-8")
    try:
        result = scons(*with_variables(project["args"], runtime_envs=tmp_path / "runtime-envs"), "-j2")
    finally:
        profile.write_text(original, encoding="utf-8")
    # Both environments are provisioned in the fresh folder: the stack's and the metadata writer's.
    expected = ["runtime_env", "runtime_env", *TINY_CONVERSIONS, "evaluate", "runtime_check", "report", "manifest", "bundle"]
    assert sorted(stages_run(result)) == sorted(expected)
    assert "ai-edge-litert (not provisioned: pip install failed: " in output_of(result, "runtime_env")
    target = project["build"] / "tiny"
    conversion = json.loads((target / "tflite_int8.json").read_text())["runtimes"]
    assert conversion["tflite-runtime"]["ok"] and not conversion["ai-edge-litert"]["checked"]
    checks = json.loads((target / "runtime_checks.json").read_text())["checks"]
    for artifact, per in checks.items():
        assert per["tflite-runtime"]["status"] == "ok", artifact
        assert per["ai-edge-litert"]["status"].startswith("not checked: not provisioned: pip install failed: "), artifact
        assert per["ai-edge-litert"]["problems"] == []
    assert "(optional runtime: reported, not gated)" in (target / "report.md").read_text()
    assert "runtime check: tflite_int8 on ai-edge-litert: not checked: not provisioned: " in output_of(result, "runtime_check")


def test_clean_removes_the_build(project, tmp_path: Path):
    # Cleaning would remove the env.json of the session's runtime environments too: the stage tests after this one use them.
    args = with_variables(project["args"], runtime_envs=tmp_path)
    scons(*args, "-c")
    assert not (project["build"] / "tiny").exists()
    assert not (project["build"] / "model").exists()
    assert not (project["build"] / "logs").exists()
