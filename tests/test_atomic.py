import subprocess
import sys
from pathlib import Path

import pytest

from edge_build.atomic import atomic_output, atomic_outputs


def test_outputs_appear_only_when_the_block_completes(tmp_path: Path):
    first, second = tmp_path / "a.txt", tmp_path / "sub" / "b.txt"
    with atomic_outputs(first, second) as (tmp_first, tmp_second):
        tmp_first.write_text("1")
        tmp_second.write_text("2")
        assert not first.exists() and not second.exists()
    assert first.read_text() == "1" and second.read_text() == "2"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a.txt", "b.txt", "sub"]


def test_a_failure_keeps_the_old_outputs_and_removes_temporaries(tmp_path: Path):
    target = tmp_path / "model"
    target.mkdir()
    (target / "old").write_text("previous build")
    with pytest.raises(RuntimeError, match="crash"):
        with atomic_output(target) as staging:
            staging.mkdir()
            (staging / "half").write_text("half-written")
            raise RuntimeError("crash")
    assert [p.name for p in tmp_path.iterdir()] == ["model"]
    assert (target / "old").read_text() == "previous build"


def test_a_directory_output_replaces_the_old_one(tmp_path: Path):
    target = tmp_path / "1"
    target.mkdir()
    (target / "stale").write_text("x")
    with atomic_output(target) as staging:
        staging.mkdir()
        (staging / "fresh").write_text("y")
    assert [p.name for p in target.iterdir()] == ["fresh"]


def test_an_output_the_block_never_wrote_is_an_error(tmp_path: Path):
    with pytest.raises(RuntimeError, match="did not write"):
        with atomic_output(tmp_path / "never.txt"):
            pass


def test_the_temporary_keeps_the_suffix(tmp_path: Path):
    with atomic_output(tmp_path / "model.weights.h5") as staging:
        assert staging.name.endswith(".weights.h5")
        staging.write_bytes(b"")


def test_what_a_killed_run_left_behind_is_removed_by_the_next(tmp_path: Path):
    leftover = tmp_path / ".tmp-99999-model.weights.h5"
    leftover.write_bytes(b"half a model")
    other = tmp_path / ".tmp-99999-train_log.json"
    other.write_text("{")
    with atomic_output(tmp_path / "model.weights.h5") as staging:
        staging.write_bytes(b"whole")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".tmp-99999-train_log.json", "model.weights.h5"]


def test_a_live_process_temporary_is_never_removed(tmp_path: Path):
    # Another build sharing the folder (runtime_envs=) writes beside this one: its staging stays until its process is gone.
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = tmp_path / f".tmp-{alive.pid}-env"
        live.mkdir()
        with atomic_output(tmp_path / "env") as staging:
            staging.mkdir()
        assert live.is_dir()
    finally:
        alive.kill()
        alive.wait()
    with atomic_output(tmp_path / "env") as staging:
        staging.mkdir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["env"]
