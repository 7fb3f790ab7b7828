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

from conftest import REPO, TINY_HPARAMS, write_tiny_dataset

pytestmark = pytest.mark.slow
SCONS = [sys.executable, "-m", "SCons"]
STAGE_COMMAND = re.compile(r"-m edge_build\.(\w+) ")


def scons(*arguments: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([*SCONS, "-Q", *arguments], cwd=REPO, capture_output=True, text=True)
    if check and result.returncode != 0:
        pytest.fail(f"scons {' '.join(arguments)} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def stages_run(result: subprocess.CompletedProcess) -> list[str]:
    return STAGE_COMMAND.findall(result.stdout)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("scons")
    hparams = root / "hparams.toml"
    hparams.write_text(TINY_HPARAMS, encoding="utf-8")
    return {
        "root": root,
        "build": root / "build",
        "hparams": hparams,
        "args": [f"dataset={write_tiny_dataset(root / 'dataset')}", f"hparams={hparams}", f"build_dir={root / 'build'}", "split=60/20/20"],
    }


def test_a_clean_build_runs_every_stage_and_reports(project):
    result = scons(*project["args"])
    assert stages_run(result) == ["data", "vocab", "train", "export", "report"]
    build = project["build"]
    for name in DATA_FILES:
        assert (build / "data" / name).is_file()
    for name in SAVED_MODEL_FILES:
        assert (build / "host" / "saved_model_cpu" / "1" / name).is_file()
    evaluation = json.loads((build / "host" / "eval.json").read_text())
    assert evaluation["artifacts"]["saved_model_cpu"]["examples"] == 6
    assert "== host: test split, 3 classes ==" in result.stdout
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
    assert stages_run(result) == ["train", "export", "report"]
    assert weights.read_bytes() != old_weights
    assert {name: (project["build"] / "data" / name).stat().st_mtime_ns for name in DATA_FILES} == before


def test_a_command_line_override_retrains(project):
    result = scons(*project["args"], "epochs=1")
    assert stages_run(result) == ["train", "export", "report"]
    log = json.loads((project["build"] / "model" / "train_log.json").read_text())
    assert len(log["epochs"]) == 1


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
    assert listed.stdout.startswith("host ")
    unknown = scons("target=nope", check=False)
    assert unknown.returncode == 2
    assert "unknown target 'nope': no targets/nope.toml (available: host" in unknown.stderr


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
    assert not (project["build"] / "host").exists()
    assert not (project["build"] / "model").exists()
