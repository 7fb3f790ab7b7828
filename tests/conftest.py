"""Tiny datasets and a tiny trained model shared by the stage tests (seconds, not minutes)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Each class has its own words, so even a two-epoch model separates them.
CLASS_WORDS = {
    "astronomy": "planet comet orbit telescope galaxy nebula star moon",
    "cooking": "recipe flour oven butter simmer garlic pepper onion",
    "football": "goal striker referee penalty league match keeper pitch",
}
SHARED_WORDS = "the a of and in with today new report said"

TINY_HPARAMS = """
[tokenizer]
vocab_size = 200
lower_case = true
sequence_length = 24

[model]
embedding_dim = 8
dropout = 0.0

[training]
epochs = 3
batch_size = 8
learning_rate = 0.05
clip_norm = 1.0
seed = 7
shuffle_buffer = 64
"""


def make_text(label: str, rng: random.Random) -> str:
    words = CLASS_WORDS[label].split() * 2 + SHARED_WORDS.split()
    return " ".join(rng.choice(words) for _ in range(rng.randint(8, 30))).capitalize() + "."


def write_tiny_dataset(root: Path, per_class: int = 12, seed: int = 0) -> Path:
    rng = random.Random(seed)
    for label in CLASS_WORDS:
        (root / label).mkdir(parents=True)
        for i in range(per_class):
            (root / label / f"{i:03d}.txt").write_text(make_text(label, rng), encoding="utf-8")
    return root


@pytest.fixture
def tiny_dataset(tmp_path: Path) -> Path:
    return write_tiny_dataset(tmp_path / "dataset")


@pytest.fixture
def tiny_hparams(tmp_path: Path) -> Path:
    path = tmp_path / "hparams.toml"
    path.write_text(TINY_HPARAMS, encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def tiny_build(tmp_path_factory) -> dict[str, Path]:
    """data -> vocab -> data report -> train -> export -> baseline -> quality on the tiny dataset, run once for the whole session."""
    from edge_build import baseline, data, data_report, export, quality, train, vocab
    from edge_build.config import load_hyperparameters

    root = tmp_path_factory.mktemp("tiny_build")
    dataset = write_tiny_dataset(root / "dataset")
    hparams_path = root / "hparams.toml"
    hparams_path.write_text(TINY_HPARAMS, encoding="utf-8")
    hparams = load_hyperparameters(hparams_path)
    paths = {"root": root, "dataset": dataset, "hparams": hparams_path, "data": root / "data", "vocab": root / "vocab.txt", "model": root / "model"}
    data.build_data(str(dataset), paths["data"], (0.6, 0.2, 0.2), seed=3)
    vocab.build_vocab(paths["data"] / "train.tfrecord", paths["vocab"], hparams.tokenizer.vocab_size, lower_case=True)
    data_report.build_data_report(paths["data"], paths["vocab"], True, hparams.tokenizer.sequence_length, paths["data"])
    inputs = train.TrainInputs.from_data_dir(paths["data"], paths["vocab"], hparams_path, REPO / "model_src" / "model.py")
    paths["weights"], paths["train_log"] = paths["model"] / "model.weights.h5", paths["model"] / "train_log.json"
    train.train(inputs, hparams, paths["weights"], paths["train_log"])
    paths["saved_model"] = export.export(
        paths["data"], paths["vocab"], paths["weights"], paths["train_log"], hparams_path, REPO / "model_src" / "model.py", root / "saved_model_cpu"
    )
    paths["baseline"], paths["quality"] = root / "baseline.json", root / "quality.json"
    baseline.build_baseline(paths["data"], paths["baseline"])
    quality.gate_quality(paths["saved_model"], paths["data"], paths["baseline"], 3.0, paths["quality"])
    return paths


TINY_PROFILE = """
description = "tests: every artifact, checked on tflite-runtime"
arch = "x86_64"
artifacts = ["saved_model_cpu", "saved_model_xla", "tflite_fp32", "tflite_int8"]

[quantization]
output_type = "float32"
select_tf_ops = false

[[runtimes]]
name = "tflite-runtime"

[tolerances]
xla_max_abs_logit = 1e-4
fp32_max_abs_logit = 1e-4
int8_min_top1_agreement = 0.8
int8_max_accuracy_drop = 0.2

[latency]
fp32_p50_ms = 1000.0
int8_p50_ms = 1000.0

[xla]
warmup_batch_sizes = [1, 8]
steady_runs = 3

[device]
warmup = 2
runs = 20
"""


def write_profile(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def reported_copy(tiny_artifacts: dict, destination: Path) -> dict:
    """A copy of the tiny target after the report and manifest stages, as the bundle stage finds it."""
    from edge_build import manifest, report
    from edge_build.config import load_profile

    shutil.copytree(tiny_artifacts["target"], destination)
    profile = load_profile(tiny_artifacts["profile"].parent, "tiny")
    report.build_report(profile, tiny_artifacts["saved_model"], destination, tiny_artifacts["data"], tiny_artifacts["quality"], tiny_artifacts["train_log"], None,
                        destination / "xla_checks.json")
    args = (profile, destination, tiny_artifacts["data"], tiny_artifacts["model"], tiny_artifacts["vocab"], tiny_artifacts["calibration"] / "summary.json")
    return {"target": destination, "profile": profile, "manifest_args": args, "record": manifest.build_manifest(*args)}


@pytest.fixture(scope="session")
def tiny_artifacts(tiny_build) -> dict[str, Path]:
    """The tiny model compiled for ``TINY_PROFILE``: calibration set, both TF Lite models, XLA SavedModel, device and XLA checks."""
    from edge_build import calibrate, device_check, export, tflite, xla_check
    from edge_build.config import load_profile

    root = tiny_build["root"]
    calibration_dir = root / "calibration_src"
    calibration_dir.mkdir()
    (calibration_dir / "calibration.toml").write_text("samples = 20\nsplit = \"train\"\nseed = 0\n", encoding="utf-8")
    paths = dict(tiny_build)
    paths["profile"] = write_profile(root / "targets", "tiny", TINY_PROFILE)
    profile = load_profile(root / "targets", "tiny")
    paths["calibration"] = root / "calibration"
    calibrate.build_calibration(calibration_dir / "calibration.toml", tiny_build["data"], tiny_build["vocab"], True, 24, paths["calibration"])
    inputs = tflite.ConversionInputs(
        REPO / "model_src" / "model.py", tiny_build["hparams"], tiny_build["vocab"], tiny_build["weights"],
        tiny_build["train_log"], tiny_build["data"], paths["calibration"] / "representative.npy",
    )
    target = root / "tiny"
    for precision in tflite.PRECISIONS:
        paths[f"tflite_{precision}"] = target / f"model_{precision}.tflite"
        tflite.convert(precision, inputs, profile, paths["profile"], paths[f"tflite_{precision}"], target / f"tflite_{precision}.json")
    paths["saved_model_xla"] = export.export(
        tiny_build["data"], tiny_build["vocab"], tiny_build["weights"], tiny_build["train_log"], tiny_build["hparams"],
        REPO / "model_src" / "model.py", target / "saved_model_xla", warmup_batch_sizes=profile.xla.warmup_batch_sizes,
    )
    # As SCons does: the target's saved_model_cpu is a copy of the reference export.
    shutil.copytree(tiny_build["saved_model"], target / "saved_model_cpu" / "1")
    paths["target"] = target
    device_check.device_checks(profile, tiny_build["saved_model"], target, tiny_build["data"])
    paths["xla_checks"] = target / "xla_checks.json"
    xla_check.xla_checks(profile, tiny_build["saved_model"], paths["saved_model_xla"], tiny_build["data"], paths["xla_checks"])
    return paths
