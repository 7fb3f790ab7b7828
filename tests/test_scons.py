"""The build graph end to end: a real ``scons`` run on the tiny dataset and hyperparameters."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from edge_build.data import OUTPUT_FILES as DATA_FILES
from edge_build.saved_model import FILES as SAVED_MODEL_FILES

from conftest import REPO, TINY_HPARAMS, TINY_PROFILE, write_profile, write_tiny_dataset

pytestmark = pytest.mark.slow
SCONS = [sys.executable, "-m", "SCons"]
STAGE_COMMAND = re.compile(r"-m edge_build\.(\w+) (?:--precision (\w+))?")


def scons(*arguments: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([*SCONS, "-Q", *arguments], cwd=REPO, capture_output=True, text=True)
    if check and result.returncode != 0:
        pytest.fail(f"scons {' '.join(arguments)} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def stages_run(result: subprocess.CompletedProcess) -> list[str]:
    """The stages SCons ran, in order; a TF Lite conversion is named with its precision."""
    return [f"{stage}-{precision}" if precision else stage for stage, precision in STAGE_COMMAND.findall(result.stdout)]


def mtimes(paths) -> dict:
    return {str(p): p.stat().st_mtime_ns for p in paths}


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> dict:
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
        "args": [
            f"dataset={write_tiny_dataset(root / 'dataset')}", f"hparams={hparams}", f"build_dir={root / 'build'}", "split=60/20/20",
            f"targets_dir={root / 'targets'}", "target=tiny", f"calibration={calibration}",
        ],
    }


def test_a_clean_build_runs_every_stage_and_reports(project):
    result = scons(*project["args"])
    assert sorted(stages_run(result)) == sorted(["data", "vocab", "train", "export", "export", "calibrate", "tflite-fp32", "tflite-int8", "device_check", "report", "bundle"])
    build = project["build"]
    for name in DATA_FILES:
        assert (build / "data" / name).is_file()
    for flavour in ("reference/saved_model_cpu", "tiny/saved_model_cpu", "tiny/saved_model_xla"):
        for name in SAVED_MODEL_FILES:
            assert (build / flavour / "1" / name).is_file()
    for name in ("model_fp32.tflite", "model_int8.tflite", "tflite_fp32.json", "tflite_int8.json", "golden.npz", "device_checks.json",
                 "latency.png", "eval.json", "report.md", "bundle-tiny.tar.gz", "bundle/manifest.json", "bundle/bench.py"):
        assert (build / "tiny" / name).is_file()
    assert (build / "calibration" / "representative.npy").is_file()
    evaluation = json.loads((build / "tiny" / "eval.json").read_text())
    assert list(evaluation["artifacts"]) == ["saved_model_cpu", "saved_model_xla", "tflite_fp32", "tflite_int8"]
    assert "== tiny: test split, 6 examples, 3 classes ==" in result.stdout
    assert "device: tflite_int8 on tflite-runtime 2.14.0: top-1 agreement" in result.stdout
    assert "## Device runtimes" in (build / "tiny" / "report.md").read_text()
    assert "reload check: serving_default in a fresh process matches the trained model" in result.stdout


def test_a_second_build_does_nothing(project):
    result = scons(*project["args"])
    assert stages_run(result) == []
    assert "is up to date" in result.stdout


def test_a_hyperparameter_change_retrains_but_does_not_resplit(project):
    weights = project["build"] / "model" / "model.weights.h5"
    before = {name: (project["build"] / "data" / name).stat().st_mtime_ns for name in DATA_FILES}
    old_weights = weights.read_bytes()
    project["hparams"].write_text(TINY_HPARAMS.replace("learning_rate = 0.05", "learning_rate = 0.02"), encoding="utf-8")
    result = scons(*project["args"])
    assert sorted(stages_run(result)) == sorted(["train", "export", "export", "tflite-fp32", "tflite-int8", "device_check", "report", "bundle"])
    assert weights.read_bytes() != old_weights
    assert {name: (project["build"] / "data" / name).stat().st_mtime_ns for name in DATA_FILES} == before


def test_a_command_line_override_retrains(project):
    result = scons(*project["args"], "epochs=1")
    assert sorted(stages_run(result)) == sorted(["train", "export", "export", "tflite-fp32", "tflite-int8", "device_check", "report", "bundle"])
    log = json.loads((project["build"] / "model" / "train_log.json").read_text())
    assert len(log["epochs"]) == 1


def test_a_calibration_edit_rebuilds_only_the_int8_model_and_what_follows(project):
    scons(*project["args"])  # back to the hyperparameters' epochs after the override above
    build = project["build"]
    upstream = [build / "model" / "model.weights.h5", build / "tiny" / "model_fp32.tflite"]
    upstream += [build / flavour / "1" / name for flavour in ("reference/saved_model_cpu", "tiny/saved_model_cpu", "tiny/saved_model_xla") for name in SAVED_MODEL_FILES]
    before = mtimes(upstream)
    int8 = (build / "tiny" / "model_int8.tflite").read_bytes()
    (project["calibration"] / "calibration.toml").write_text("samples = 9\nseed = 3\n", encoding="utf-8")
    result = scons(*project["args"], "--debug=explain")
    assert stages_run(result) == ["calibrate", "tflite-int8", "device_check", "report", "bundle"]
    assert "because" in result.stdout and "calibration.toml" in result.stdout
    assert mtimes(upstream) == before
    assert (build / "tiny" / "model_int8.tflite").read_bytes() != int8
    assert json.loads((build / "calibration" / "summary.json").read_text())["samples"] == 9


def test_the_calibrate_alias_regenerates_only_calibrated_models(project):
    (project["calibration"] / "field.txt").write_text("A striker and a keeper at the match\n", encoding="utf-8")
    (project["calibration"] / "calibration.toml").write_text('samples = 9\nseed = 3\nfield_samples = "field.txt"\n', encoding="utf-8")
    result = scons(*project["args"], "calibrate")
    assert stages_run(result) == ["calibrate", "tflite-int8"]


def test_a_stage_alias_builds_only_up_to_that_stage(project, tmp_path: Path):
    args = [a for a in project["args"] if not a.startswith("build_dir=")] + [f"build_dir={tmp_path}"]
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
    assert f"error: {tmp_path / 'nowhere'}: no such file or directory" in result.stderr


def test_target_list_and_unknown_targets():
    listed = scons("target=list")
    assert [line.split()[0] for line in listed.stdout.splitlines()] == ["arm64", "gpu", "host"]
    unknown = scons("target=nope", check=False)
    assert unknown.returncode == 2
    assert "unknown target 'nope': no targets/nope.toml (available: arm64, gpu, host)" in unknown.stderr


def test_a_bad_profile_fails_before_anything_runs(tmp_path: Path):
    write_profile(tmp_path, "board", TINY_PROFILE.replace('name = "tflite-runtime"', 'name = "tflite-runtime"\nflex_delegate = true'))
    result = scons(f"targets_dir={tmp_path}", "target=board", f"build_dir={tmp_path / 'build'}", check=False)
    assert result.returncode == 2
    assert f"{tmp_path / 'board.toml'}: key 'runtimes.flex_delegate': tflite-runtime's wheels have no Flex delegate" in result.stderr
    assert not (tmp_path / "build" / "data").exists()


def test_unknown_variables_and_bad_values_are_refused():
    typo = scons("epoch=3", check=False)
    assert typo.returncode == 2 and "unknown variable(s) epoch" in typo.stderr
    bad = scons("epochs=three", check=False)
    assert bad.returncode == 2 and "epochs=three: expected a whole number" in bad.stderr
    split = scons("split=90/10", check=False)
    assert split.returncode == 2 and "expected three positive train/val/test shares" in split.stderr


def test_help_lists_the_variables_and_aliases():
    text = scons("--help").stdout
    for word in ("target:", "dataset:", "build_dir:", "epochs:", "seed:", "data ", "train ", "export ", "report "):
        assert word in text


def test_clean_removes_the_build(project):
    scons(*project["args"], "-c")
    assert not (project["build"] / "tiny").exists()
    assert not (project["build"] / "model").exists()
