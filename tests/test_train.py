import json
from pathlib import Path

import pytest

from edge_build import train
from edge_build.config import load_hyperparameters
from edge_build.errors import ConfigError

from conftest import REPO


def test_training_writes_weights_and_a_log_per_epoch(tiny_build):
    log = json.loads(tiny_build["train_log"].read_text())
    assert tiny_build["weights"].stat().st_size > 0
    assert [e["epoch"] for e in log["epochs"]] == [1, 2, 3]
    for epoch in log["epochs"]:
        assert set(epoch) == {"epoch", "loss", "accuracy", "val_loss", "val_accuracy", "seconds", "examples_per_second"}
        assert epoch["examples_per_second"] > 0
    assert log["train_examples"] == 24
    assert log["steps"] == 3 * 3  # 24 examples, batch 8, 3 epochs
    best = max(log["epochs"], key=lambda e: (e["val_accuracy"], -e["val_loss"]))
    assert log["best_epoch"] == best["epoch"]
    assert log["epochs"][-1]["loss"] < log["epochs"][0]["loss"]


def test_the_train_step_is_traced_once(tiny_build):
    # A fixed input_signature: the last, smaller batch must not retrace.
    assert json.loads(tiny_build["train_log"].read_text())["train_step_traces"] == 1


def test_the_tiny_model_learns_the_tiny_task(tiny_build):
    assert json.loads(tiny_build["train_log"].read_text())["best_val_accuracy"] >= 0.8


def retrain(tiny_build, out: Path, hparams_path: Path | None = None, **overrides) -> dict:
    hparams_path = hparams_path or tiny_build["hparams"]
    hparams = load_hyperparameters(hparams_path).with_training(**overrides)
    inputs = train.TrainInputs.from_data_dir(tiny_build["data"], tiny_build["vocab"], hparams_path, REPO / "model_src" / "model.py")
    return train.train(inputs, hparams, out / "model.weights.h5", out / "train_log.json")


def test_training_is_deterministic_for_a_seed(tiny_build, tmp_path: Path):
    retrain(tiny_build, tmp_path / "again")
    assert (tmp_path / "again" / "model.weights.h5").read_bytes() == tiny_build["weights"].read_bytes()
    retrain(tiny_build, tmp_path / "other_seed", seed=8)
    assert (tmp_path / "other_seed" / "model.weights.h5").read_bytes() != tiny_build["weights"].read_bytes()


def test_overrides_change_the_number_of_epochs(tiny_build, tmp_path: Path):
    log = retrain(tiny_build, tmp_path / "one", epochs=1)
    assert len(log["epochs"]) == 1 and log["hyperparameters"]["training"]["epochs"] == 1


def test_an_unknown_model_hyperparameter_names_what_build_model_accepts(tiny_build, tmp_path: Path):
    hparams_path = tmp_path / "hparams.toml"
    hparams_path.write_text(tiny_build["hparams"].read_text().replace("[model]", "[model]\nlayers = 3"), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        retrain(tiny_build, tmp_path / "bad", hparams_path)
    assert str(caught.value) == (
        f"{hparams_path}: unknown key 'model.layers' (build_model() in {REPO / 'model_src' / 'model.py'} accepts: embedding_dim, dropout)"
    )
    assert not (tmp_path / "bad").exists()
