"""Loads the user's model code (``model_src/model.py``) and builds the Keras model from it."""

from __future__ import annotations

import importlib.util
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from edge_build import window
from edge_build.config.hparams import Hyperparameters, load_hyperparameters
from edge_build.errors import ConfigError, StageError

BUILDER = "build_model"
#: Arguments edge-build supplies itself; the rest come from ``[model]`` in the hyperparameters.
SUPPLIED = ("vocab_size", "num_classes", "sequence_length")
#: Supplied too when ``build_model`` takes them: the train split's token ids, for tables learned from data (IDF,
#: table sizes), and the vocabulary's tokens (``vocab.txt``'s lines), for what the ids spell.
TRAIN_IDS, VOCABULARY = "train_ids", "vocabulary"


def load_builder(model_path: Path) -> Callable[..., Any]:
    if not model_path.is_file():
        raise ConfigError(f"{model_path}: model source not found")
    spec = importlib.util.spec_from_file_location("edge_build_model_src", model_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    builder = getattr(module, BUILDER, None)
    if not callable(builder):
        raise ConfigError(f"{model_path}: defines no function {BUILDER}(vocab_size, num_classes, sequence_length, ...)")
    return builder


def read_train_ids(path: Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise StageError(f"{path}: cannot read the train split's token ids ({exc.__class__.__name__}: {exc}); run scons again") from None


def build_model(
    model_path: Path,
    hparams: Hyperparameters,
    hparams_path: Path,
    vocab_size: int,
    num_classes: int,
    train_ids: Path,
    vocabulary: list[str] | None = None,
):
    """Call ``build_model`` with the supplied sizes (``train_ids``' ids and the ``vocabulary`` if it takes them) and the ``[model]`` table as keyword arguments."""
    builder = load_builder(model_path)
    parameters = inspect.signature(builder).parameters
    missing = [name for name in SUPPLIED if name not in parameters]
    if missing:
        raise ConfigError(f"{model_path}: {BUILDER}() must accept {', '.join(missing)}")
    supplied = (*SUPPLIED, TRAIN_IDS, VOCABULARY)
    accepted = [name for name in parameters if name not in supplied]
    for key in hparams.model:
        if key in supplied or key not in parameters:
            raise ConfigError(
                f"{hparams_path}: unknown key 'model.{key}' ({BUILDER}() in {model_path} accepts: {', '.join(accepted) or 'nothing else'})"
            )
    data = {TRAIN_IDS: read_train_ids(train_ids)} if TRAIN_IDS in parameters else {}
    if VOCABULARY in parameters and vocabulary is not None:
        data[VOCABULARY] = vocabulary
    try:
        model = builder(vocab_size=vocab_size, num_classes=num_classes, sequence_length=hparams.tokenizer.sequence_length, **data, **hparams.model)
    except ValueError as exc:
        # The model source's own word on a [model] value it cannot take (e.g. kind = "lstm").
        raise ConfigError(f"{hparams_path}: [model] in {model_path}: {exc}") from exc
    if tuple(model.inputs[0].shape) != (None, hparams.tokenizer.sequence_length):
        raise ConfigError(
            f"{model_path}: the model's input shape is {tuple(model.inputs[0].shape)}, expected (None, {hparams.tokenizer.sequence_length})"
        )
    return model


def trained_hyperparameters(hparams_path: Path, train_log: Path) -> Hyperparameters:
    """The hyperparameters with the window the model was trained at, as the train stage recorded it."""
    try:
        sequence_length = json.loads(train_log.read_text(encoding="utf-8"))["hyperparameters"]["tokenizer"]["sequence_length"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StageError(f"{train_log}: no trained sequence length ({exc.__class__.__name__}: {exc}); run scons again") from None
    return load_hyperparameters(hparams_path).with_window(window.checked_length(sequence_length, train_log))


def load_trained_model(model_path: Path, hparams: Hyperparameters, hparams_path: Path, vocab: Path, num_classes: int, weights: Path, train_ids: Path):
    """The model built from its source (and the train split's ids), with the train stage's weights loaded."""
    vocabulary = vocab.read_text(encoding="utf-8").splitlines()
    model = build_model(model_path, hparams, hparams_path, len(vocabulary), num_classes, train_ids, vocabulary)
    try:
        model.load_weights(str(weights))
    except (ValueError, OSError) as exc:
        raise StageError(f"{weights}: cannot load into the model built from {model_path}: {exc}") from exc
    return model


def check_weights_loaded(val_logits, val_labels, train_log: Path, weights: Path) -> None:
    """The loaded model must score exactly what training recorded for the kept epoch.

    Keras skips parts of a weights file it cannot match with a warning, not an
    error; a model with freshly initialized layers would still export and reload.
    """
    recorded = json.loads(train_log.read_text(encoding="utf-8"))["best_val_accuracy"]
    accuracy = float(np.mean(np.argmax(val_logits, axis=-1) == val_labels))
    if abs(accuracy - recorded) > 1e-6:
        raise StageError(f"{weights}: the loaded model scores {accuracy:.6f} on the validation split, training recorded {recorded:.6f}")
