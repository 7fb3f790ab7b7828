import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, TINY_HPARAMS

from edge_build import training
from edge_build.config.hparams import load_hyperparameters
from edge_build.errors import ConfigError
from edge_build.layout import Data


def test_training_writes_weights_and_a_log_per_epoch(tiny_build):
    log = json.loads(tiny_build["train_log"].read_text())
    assert tiny_build["weights"].stat().st_size > 0
    assert [e["epoch"] for e in log["epochs"]] == [1, 2, 3]
    for epoch in log["epochs"]:
        assert set(epoch) == {"epoch", "loss", "accuracy", "val_loss", "val_accuracy", "seconds", "examples_per_second"}
        assert epoch["examples_per_second"] > 0
    assert log["train_examples"] == 24
    assert (log["strategy"], log["replicas"]) == ("default", 1)
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
    inputs = train_inputs(Data(tiny_build["data"]), tiny_build["vocab"], hparams_path, tiny_build["layout"].token_ids("train"))
    return training.train(inputs, hparams, out / "model.weights.h5", out / "train_log.json")


def train_inputs(data: Data, vocab: Path, hparams_path: Path, train_ids: Path) -> training.TrainInputs:
    return training.TrainInputs(data.split("train"), data.split("val"), data.labels, vocab, hparams_path, REPO / "model_src" / "model.py", train_ids)


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
        f"{hparams_path}: unknown key 'model.layers' (build_model() in {REPO / 'model_src' / 'model.py'} accepts: "
        "kind, embedding_dim, ngram_order, ngram_buckets, ngram_window, character_order, max_model_mb, regularization_c, dropout)"
    )
    assert not (tmp_path / "bad").exists()


# Logical devices and collective ops must be set before TensorFlow starts, which this
# session's fixtures have done already: each run under a strategy gets a new process.
TRAIN_STAGE = """
import sys
from edge_build import cli
from edge_build.stages import train
sys.exit(cli.run(train.build_parser, train.drive))
"""
TWO_LOGICAL_CPUS = """
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
"""


def start_training(tiny_build, out: Path, strategy: str, prelude: str = "", env: dict | None = None) -> subprocess.Popen:
    """The train stage in a process of its own, writing into ``out``."""
    hparams_path = out / "hparams.toml"
    out.mkdir(parents=True)
    hparams_path.write_text(tiny_build["hparams"].read_text().replace("[training]", f'[training]\nstrategy = "{strategy}"'), encoding="utf-8")
    data = Data(tiny_build["data"])
    arguments = [
        "--train",
        data.split("train"),
        "--val",
        data.split("val"),
        "--labels",
        data.labels,
        "--vocab",
        tiny_build["vocab"],
        "--hparams",
        hparams_path,
        "--window",
        data.window,
        "--model-source",
        REPO / "model_src" / "model.py",
        "--train-ids",
        tiny_build["layout"].token_ids("train"),
        "--weights",
        out / "model.weights.h5",
        "--log",
        out / "train_log.json",
    ]
    return subprocess.Popen(
        [sys.executable, "-c", prelude + TRAIN_STAGE, *map(str, arguments)],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(process: subprocess.Popen) -> str:
    """Its stdout, once it has exited 0."""
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr[-3000:]
    return stdout


def train_in_a_new_process(tiny_build, out: Path, strategy: str, prelude: str = "", env: dict | None = None) -> dict:
    finished(start_training(tiny_build, out, strategy, prelude, env))
    return json.loads((out / "train_log.json").read_text())


def free_ports(count: int) -> list[int]:
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("localhost", 0))
        return [probe.getsockname()[1] for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def saved_weights(path: Path) -> list:
    import h5py

    with h5py.File(path, "r") as weights:
        arrays = []
        weights.visititems(lambda name, item: arrays.append((name, item[()])) if isinstance(item, h5py.Dataset) else None)
    return arrays


def test_mirrored_training_on_two_devices_follows_the_one_device_run(tiny_build, tmp_path: Path):
    log = train_in_a_new_process(tiny_build, tmp_path / "mirrored", "mirrored", prelude=TWO_LOGICAL_CPUS)
    one_device = json.loads(tiny_build["train_log"].read_text())
    assert (log["strategy"], log["replicas"]) == ("mirrored", 2)
    assert log["best_val_accuracy"] >= 0.8
    # Each global batch is split in two and its loss scaled by the whole batch: only rounding differs.
    for key in ("loss", "val_loss", "val_accuracy"):
        assert [e[key] for e in log["epochs"]] == pytest.approx([e[key] for e in one_device["epochs"]], abs=1e-4)
    assert (log["steps"], log["train_step_traces"]) == (one_device["steps"], 1)


def test_a_one_worker_cluster_from_tf_config_trains_as_one_device(tiny_build, tmp_path: Path):
    tf_config = {"cluster": {"worker": [f"localhost:{port}" for port in free_ports(1)]}, "task": {"type": "worker", "index": 0}}
    log = train_in_a_new_process(tiny_build, tmp_path / "cluster", "multi_worker_mirrored", env={"TF_CONFIG": json.dumps(tf_config)})
    assert (log["strategy"], log["replicas"]) == ("multi_worker_mirrored", 1)
    assert (tmp_path / "cluster" / "model.weights.h5").read_bytes() == tiny_build["weights"].read_bytes()


def test_two_workers_on_localhost_train_in_lockstep_and_the_chief_ends_where_one_device_does(tiny_build, tmp_path: Path):
    """Each worker takes half of every global batch and the gradients are summed across them:
    the same steps as one device, with only float rounding between them (the order of the sums)."""
    cluster = {"worker": [f"localhost:{port}" for port in free_ports(2)]}
    workers = [
        start_training(
            tiny_build,
            tmp_path / f"worker{index}",
            "multi_worker_mirrored",
            env={"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})},
        )
        for index in (0, 1)
    ]
    outputs = [finished(worker) for worker in workers]
    assert "worker 1 is not the chief" in outputs[1]
    assert not (tmp_path / "worker1" / "model.weights.h5").exists() and not (tmp_path / "worker1" / "train_log.json").exists()
    log = json.loads((tmp_path / "worker0" / "train_log.json").read_text())
    one_device = json.loads(tiny_build["train_log"].read_text())
    assert (log["strategy"], log["replicas"], log["steps"]) == ("multi_worker_mirrored", 2, one_device["steps"])
    for key in ("loss", "val_loss", "val_accuracy"):
        assert [e[key] for e in log["epochs"]] == pytest.approx([e[key] for e in one_device["epochs"]], abs=1e-4)
    chief, reference = saved_weights(tmp_path / "worker0" / "model.weights.h5"), saved_weights(tiny_build["weights"])
    assert [name for name, _ in chief] == [name for name, _ in reference]
    for (name, ours), (_, theirs) in zip(chief, reference):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-4, err_msg=name)


def test_a_malformed_tf_config_is_named(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", "workers: a, b")
    with pytest.raises(ConfigError, match=r"^TF_CONFIG: .* \(expected JSON like \{\"cluster\""):
        training.make_strategy("multi_worker_mirrored")


def write_split(path: Path, texts: list[bytes], labels) -> None:
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path)) as writer:
        for text, label in zip(texts, labels):
            features = {
                "text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[text])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
            }
            writer.write(tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString(deterministic=True))


def test_a_class_sorted_corpus_larger_than_the_shuffle_buffer_still_trains(tmp_path: Path):
    """The data stage writes each split in a class-mixed order, so a 256-example buffer over
    2,400 training texts of a class-sorted CSV still gives mixed batches; the same split file
    sorted by class, as the data stage used to write it, trains on one class per stretch and ends
    far worse (the IDF-normalized model keeps more of it than the old one, which fell to chance)."""
    import random

    from conftest import CLASS_WORDS

    from edge_build.stages import data, vocab
    from edge_build.tfrecord import read_split
    from edge_build.tokenizer import token_ids

    # Every word occurs in every class, each class's own words more often: a model that last saw one class
    # pushes every word towards it, so the order of the examples decides what is learned.
    rng = random.Random(0)
    every_word = " ".join(CLASS_WORDS.values()).split()

    def text(label: str) -> str:
        return " ".join(rng.choice(CLASS_WORDS[label].split()) if rng.random() < 0.3 else rng.choice(every_word) for _ in range(rng.randint(8, 20)))

    rows = [f"{text(label)} {i},{label}" for label in CLASS_WORDS for i in range(1000)]  # sorted by class, as exported
    corpus = tmp_path / "sorted.csv"
    corpus.write_text("text,label\n" + "\n".join(rows) + "\n", encoding="utf-8")
    data_dir = tmp_path / "data"
    data.build_data(str(corpus), Data(data_dir).outputs, (0.8, 0.1, 0.1), seed=1)
    hparams_path = tmp_path / "hparams.toml"
    hparams_path.write_text(TINY_HPARAMS_SMALL_BUFFER, encoding="utf-8")
    vocab.build_vocab(data_dir / "train.tfrecord", tmp_path / "vocab.txt", 200, lower_case=True)
    train_ids = tmp_path / "train.npy"
    length = load_hyperparameters(hparams_path).tokenizer.sequence_length
    np.save(train_ids, token_ids(tmp_path / "vocab.txt", True, read_split(data_dir / "train.tfrecord")[0], length))
    inputs = train_inputs(Data(data_dir), tmp_path / "vocab.txt", hparams_path, train_ids)
    hparams = load_hyperparameters(hparams_path)
    mixed = training.train(inputs, hparams, tmp_path / "mixed" / "model.weights.h5", tmp_path / "mixed" / "train_log.json")

    texts, labels = read_split(data_dir / "train.tfrecord")
    order = sorted(range(len(labels)), key=lambda i: (labels[i], i))
    write_split(data_dir / "train.tfrecord", [texts[i] for i in order], labels[order])
    by_class = training.train(inputs, hparams, tmp_path / "by_class" / "model.weights.h5", tmp_path / "by_class" / "train_log.json")

    assert mixed["train_examples"] == 2400 and hparams.training.shuffle_buffer == 256
    assert mixed["best_val_accuracy"] >= 0.75
    assert by_class["best_val_accuracy"] <= mixed["best_val_accuracy"] - 0.1


def test_training_stops_once_validation_stops_improving(tiny_build, tmp_path: Path):
    hparams_path = tmp_path / "hparams.toml"
    # A learning rate so small that nothing improves after the first epoch's figures.
    hparams_path.write_text(
        tiny_build["hparams"]
        .read_text()
        .replace("epochs = 3", "epochs = 20\npatience = 2")
        .replace("learning_rate = 0.05", "learning_rate = 0.000000001"),
        encoding="utf-8",
    )
    log = retrain(tiny_build, tmp_path / "patient", hparams_path)
    assert log["stopped_early"] and log["best_epoch"] + 2 == len(log["epochs"]) < 20


# The tiny hyperparameters with a buffer ~10x smaller than the training split, and batches of 32.
TINY_HPARAMS_SMALL_BUFFER = (
    TINY_HPARAMS.replace("epochs = 3", "epochs = 2")
    .replace("batch_size = 8", "batch_size = 32")
    .replace("learning_rate = 0.05", "learning_rate = 0.02")
    .replace("shuffle_buffer = 64", "shuffle_buffer = 256")
)


def test_the_stage_takes_every_file_on_its_command_line_and_overrides_epochs_and_seed(tiny_build, tmp_path: Path, capsys):
    from edge_build import cli
    from edge_build.stages import train

    data, out = Data(tiny_build["data"]), tmp_path / "cli"
    argv = [
        "--train",
        data.split("train"),
        "--val",
        data.split("val"),
        "--labels",
        data.labels,
        "--vocab",
        tiny_build["vocab"],
        "--hparams",
        tiny_build["hparams"],
        "--window",
        data.window,
        "--model-source",
        REPO / "model_src" / "model.py",
        "--train-ids",
        tiny_build["layout"].token_ids("train"),
        "--weights",
        out / "w" / "model.weights.h5",
        "--log",
        out / "l" / "train_log.json",
        "--epochs",
        "1",
        "--seed",
        "8",
    ]
    assert cli.run(train.build_parser, train.drive, list(map(str, argv))) == 0
    log = json.loads((out / "l" / "train_log.json").read_text())
    assert len(log["epochs"]) == 1 and log["hyperparameters"]["training"]["epochs"] == 1 and log["hyperparameters"]["training"]["seed"] == 8
    assert (out / "w" / "model.weights.h5").stat().st_size > 0
    assert f"-> {out / 'w' / 'model.weights.h5'}" in capsys.readouterr().out
