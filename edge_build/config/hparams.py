"""``model_src/hparams.toml``: how the data is split, text tokenized and the classifier trained.

Read by the data, vocab, tokenize, train and export stages, and by nothing that
only converts or checks: a change here retrains, a change elsewhere does not.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from edge_build.config.loading import from_mapping, load_toml, require_positive
from edge_build.errors import ConfigError
from edge_build.window import AUTO

Strategy = Literal["default", "mirrored", "multi_worker_mirrored"]
LabelConflictRule = Literal["drop", "train"]
NearDuplicateRule = Literal["report", "group"]


@dataclasses.dataclass(frozen=True)
class TokenizerOptions:
    """How text becomes token ids; read by the vocab, data_report, tokenize, calibrate, train and export stages.

    Attributes:
      vocab_size: the most WordPiece tokens the vocabulary may hold, reserved tokens included.
      lower_case: case-fold and strip accents before splitting (BERT's uncased normalization).
      sequence_length: token ids per example; longer texts are truncated, shorter ones padded with 0.
        ``"auto"``: sized from the training texts by the data_report stage (``edge_build.window``).
    """

    vocab_size: int = 8000
    lower_case: bool = True
    sequence_length: int | str = AUTO

    def __post_init__(self) -> None:
        if isinstance(self.sequence_length, bool) or (isinstance(self.sequence_length, str) and self.sequence_length != AUTO):
            raise ValueError(f"key 'sequence_length': must be {AUTO!r} or a whole number, not {self.sequence_length!r}")
        require_positive(self, "vocab_size", *(["sequence_length"] if isinstance(self.sequence_length, int) else []))
        if self.vocab_size < 16:
            raise ValueError("key 'vocab_size': must be at least 16")


@dataclasses.dataclass(frozen=True)
class TrainingOptions:
    """How the classifier is trained.

    Attributes:
      epochs: passes over the training split; the weights of the best validation epoch are kept.
      batch_size: examples per gradient step.
      learning_rate: Adam's step size.
      clip_norm: gradients are clipped to this global norm.
      patience: stop after this many epochs without a better validation epoch (0: run every epoch);
        the best epoch's weights are kept either way.
      seed: seeds Python, NumPy and TensorFlow; training is deterministic for a given seed.
      shuffle_buffer: examples held by the shuffle buffer. The data stage writes each split in a
        seeded, class-mixed order, so even a buffer much smaller than the split mixes the classes.
      strategy: the ``tf.distribute`` strategy: ``default`` (one device), ``mirrored`` (every GPU of
        the machine), ``multi_worker_mirrored`` (the machines of ``TF_CONFIG``); ``batch_size`` is the
        global batch, split across the replicas.
    """

    epochs: int = 15
    batch_size: int = 32
    learning_rate: float = 0.005
    clip_norm: float = 1.0
    patience: int = 3
    seed: int = 42
    shuffle_buffer: int = 4096
    strategy: Strategy = "default"

    def __post_init__(self) -> None:
        require_positive(self, "epochs", "batch_size", "learning_rate", "clip_norm", "shuffle_buffer")
        if self.patience < 0:
            raise ValueError(f"key 'patience': must be 0 (never stop early) or more, not {self.patience}")


@dataclasses.dataclass(frozen=True)
class DataRules:
    """How the data stage treats repeated texts; only these reach its command line.

    Attributes:
      label_conflicts: texts that occur with different labels: ``drop`` them from every split,
        or keep them in ``train`` only.
      near_duplicates: near-duplicate texts in different splits: ``report`` them, or ``group``
        them into one split.
    """

    label_conflicts: LabelConflictRule = "drop"
    near_duplicates: NearDuplicateRule = "report"


@dataclasses.dataclass(frozen=True)
class Hyperparameters:
    """``model_src/hparams.toml``.

    Attributes:
      data: see ``DataRules``.
      tokenizer: see ``TokenizerOptions``.
      model: keyword arguments of ``build_model`` in the model source; checked against
        its signature when the model is built.
      training: see ``TrainingOptions``.
    """

    data: DataRules = dataclasses.field(default_factory=DataRules)
    tokenizer: TokenizerOptions = dataclasses.field(default_factory=TokenizerOptions)
    model: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    training: TrainingOptions = dataclasses.field(default_factory=TrainingOptions)

    def __post_init__(self) -> None:
        for key, value in self.model.items():
            if not isinstance(value, (bool, int, float, str)):
                raise ValueError(f"key 'model.{key}': must be a number, a boolean or a string")
        object.__setattr__(self, "model", types.MappingProxyType(dict(self.model)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "data": dataclasses.asdict(self.data),
            "tokenizer": dataclasses.asdict(self.tokenizer),
            "model": dict(self.model),
            "training": dataclasses.asdict(self.training),
        }

    def with_window(self, sequence_length: int) -> Hyperparameters:
        """A copy whose ``sequence_length`` is the one the data report chose (``edge_build.window``)."""
        return dataclasses.replace(self, tokenizer=dataclasses.replace(self.tokenizer, sequence_length=sequence_length))

    def with_training(self, **changes: Any) -> Hyperparameters:
        """A copy with some training options replaced (command-line overrides), validated again."""
        changes = {k: v for k, v in changes.items() if v is not None}
        try:
            training = dataclasses.replace(self.training, **changes)
        except ValueError as exc:
            raise ConfigError(f"training override: {exc}") from exc
        return dataclasses.replace(self, training=training)


def load_hyperparameters(path: Path | str) -> Hyperparameters:
    path = Path(path)
    return from_mapping(Hyperparameters, load_toml(path), where=str(path))
