"""What a conversion reads (``ConversionJob``) and what a converter returns (``Converted``).

Every converter of the wing takes the same job: the trained Keras model, its logits on
the validation split (the reference every gate compares with), the token ids of both
splits, the representative set of a calibrated artifact, the profile, the runtime
environment its checks run in, and the stage's input files, which an interface's
converter reads beyond these (``Interface.extra_inputs``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from edge_build.artifacts import ARTIFACTS, Artifact
from edge_build.config.hparams import Hyperparameters
from edge_build.config.profile import TargetProfile
from edge_build.errors import StageError
from edge_build.model_source import load_trained_model, trained_hyperparameters
from edge_build.records import read_labels, read_rows
from edge_build.tfrecord import read_split


@dataclasses.dataclass(frozen=True)
class ConversionInputs:
    """The files a conversion reads, by their names in the tflite stage's ``stage_files`` declaration."""

    labels: Path
    val: Path
    val_ids: Path
    test_ids: Path
    vocab: Path
    weights: Path
    train_log: Path
    hparams: Path
    model_source: Path
    train_ids: Path
    representative: Path | None = None
    test: Path | None = None
    train: Path | None = None


@dataclasses.dataclass(frozen=True)
class ConversionJob:
    """One artifact's conversion: what every converter reads."""

    artifact: str
    profile: TargetProfile
    files: ConversionInputs
    hparams: Hyperparameters
    labels: list[str]
    model: object  # the trained Keras model
    reference: np.ndarray  # the Keras model's validation logits
    val_ids: np.ndarray
    val_labels: np.ndarray
    test_ids: np.ndarray
    representative: np.ndarray | None
    environment: dict  # the profile's runtime environment (env.json), held for the whole conversion
    where: str  # names the model and the profile in every refusal

    @property
    def row(self) -> Artifact:
        return ARTIFACTS[self.artifact]

    @property
    def sequence_length(self) -> int:
        return self.hparams.tokenizer.sequence_length

    def file(self, name: str) -> Path:
        """The stage's optional input ``name`` (``Interface.extra_inputs``), or a refusal naming its flag."""
        path = getattr(self.files, name)
        if path is None:
            raise StageError(f"{self.where}: {self.artifact} needs --{name.replace('_', '-')}")
        return path


@dataclasses.dataclass
class Converted:
    """A converted model with what its record says about the conversion, and its logits on both splits where the converter
    ran them (a model that TensorFlow's interpreter cannot run; others run on the bytes that ship, after the metadata)."""

    content: bytes
    converter: dict
    record: dict
    val_logits: np.ndarray | None = None
    test_logits: np.ndarray | None = None
    #: The vocabulary its metadata packs, where it is not the build's (a Tasks-ready model's has aliases).
    vocab_text: str | None = None


def load_job(artifact: str, files: ConversionInputs, profile: TargetProfile, environment: dict, where: str) -> ConversionJob:
    """The trained model and the splits' ids, checked against the trained window."""
    hparams = trained_hyperparameters(files.hparams, files.train_log)
    labels = read_labels(files.labels)
    model = load_trained_model(files.model_source, hparams, files.hparams, files.vocab, len(labels), files.weights, files.train_ids)
    _, val_labels = read_split(files.val)
    val_ids = read_rows(files.val_ids, len(val_labels))
    length = hparams.tokenizer.sequence_length
    test_ids = np.load(files.test_ids, allow_pickle=False)
    if test_ids.ndim != 2 or test_ids.shape[1] != length:
        raise StageError(f"{files.test_ids}: expected int32 ids [N, {length}], found {test_ids.shape} (run scons again)")
    representative = None
    if ARTIFACTS[artifact].calibrated:
        if files.representative is None:
            raise StageError(f"{artifact} needs the calibration stage's representative.npy (--representative)")
        representative = np.load(files.representative)
        if representative.ndim != 2 or representative.shape[1] != length or not len(representative):
            raise StageError(f"{files.representative}: expected int32 ids [N, {length}], found {representative.shape}")
    reference = model(val_ids, training=False).numpy()
    return ConversionJob(
        artifact, profile, files, hparams, labels, model, reference, val_ids, val_labels, test_ids, representative, environment, where
    )
