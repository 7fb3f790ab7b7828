"""Configuration as data: TOML files read into frozen, validated dataclasses.

Imports only the standard library, so ``SConstruct`` can validate a profile or
the hyperparameters before it schedules anything.  Every error names the file,
the key and what is allowed.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

from edge_build.errors import ConfigError

#: What a target profile may ask the build to produce, with what each one is.
ARTIFACTS: Mapping[str, str] = types.MappingProxyType(
    {
        "saved_model_cpu": "CPU SavedModel (TF Serving layout), tokenizer and vocabulary inside",
    }
)

Architecture = Literal["x86_64", "aarch64"]


@dataclasses.dataclass(frozen=True)
class TargetProfile:
    """One deployment target, read from ``targets/<name>.toml``.

    Attributes:
      name: the profile's name, taken from its file name.
      description: one line shown by ``scons target=list``.
      arch: the CPU architecture the artifacts are for.
      artifacts: what the build produces for this target (keys of ``ARTIFACTS``).
    """

    name: str
    description: str
    arch: Architecture
    artifacts: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.artifacts:
            raise ValueError(f"key 'artifacts': must name at least one of {_choices(ARTIFACTS)}")
        for artifact in self.artifacts:
            if artifact not in ARTIFACTS:
                raise ValueError(f"key 'artifacts': unknown artifact '{artifact}' (allowed: {_choices(ARTIFACTS)})")
        if len(set(self.artifacts)) != len(self.artifacts):
            raise ValueError("key 'artifacts': lists an artifact twice")


@dataclasses.dataclass(frozen=True)
class TokenizerOptions:
    """How text becomes token ids; read by the vocab, train and export stages.

    Attributes:
      vocab_size: the most WordPiece tokens the vocabulary may hold, reserved tokens included.
      lower_case: case-fold and strip accents before splitting (BERT's uncased normalization).
      sequence_length: token ids per example; longer texts are truncated, shorter ones padded with 0.
    """

    vocab_size: int = 8000
    lower_case: bool = True
    sequence_length: int = 512

    def __post_init__(self) -> None:
        _require_positive(self, "vocab_size", "sequence_length")
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
      seed: seeds Python, NumPy and TensorFlow; training is deterministic for a given seed.
      shuffle_buffer: examples held by the shuffle buffer.
    """

    epochs: int = 15
    batch_size: int = 32
    learning_rate: float = 0.005
    clip_norm: float = 1.0
    seed: int = 42
    shuffle_buffer: int = 4096

    def __post_init__(self) -> None:
        _require_positive(self, "epochs", "batch_size", "learning_rate", "clip_norm", "shuffle_buffer")


@dataclasses.dataclass(frozen=True)
class Hyperparameters:
    """``model_src/hparams.toml``.

    Attributes:
      tokenizer: see ``TokenizerOptions``.
      model: keyword arguments of ``build_model`` in the model source; checked against
        its signature when the model is built.
      training: see ``TrainingOptions``.
    """

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
            "tokenizer": dataclasses.asdict(self.tokenizer),
            "model": dict(self.model),
            "training": dataclasses.asdict(self.training),
        }

    def with_training(self, **changes: Any) -> "Hyperparameters":
        """A copy with some training options replaced (command-line overrides), validated again."""
        changes = {k: v for k, v in changes.items() if v is not None}
        try:
            training = dataclasses.replace(self.training, **changes)
        except ValueError as exc:
            raise ConfigError(f"training override: {exc}") from exc
        return dataclasses.replace(self, training=training)


def load_toml(path: Path) -> dict[str, Any]:
    """Read a TOML file; a missing or malformed file is a ``ConfigError``."""
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: not UTF-8 text") from exc


def load_hyperparameters(path: Path | str) -> Hyperparameters:
    path = Path(path)
    return from_mapping(Hyperparameters, load_toml(path), where=str(path))


def profile_names(targets_dir: Path | str) -> list[str]:
    return sorted(p.stem for p in Path(targets_dir).glob("*.toml"))


def load_profile(targets_dir: Path | str, name: str) -> TargetProfile:
    """Read ``targets_dir/<name>.toml``; an unknown name lists the profiles there."""
    path = Path(targets_dir) / f"{name}.toml"
    if not path.is_file():
        available = ", ".join(profile_names(targets_dir)) or "none"
        raise ConfigError(f"unknown target '{name}': no {path} (available: {available})")
    return from_mapping(TargetProfile, load_toml(path), where=str(path), supplied={"name": name})


def from_mapping(
    cls: type,
    table: Mapping[str, Any],
    *,
    where: str,
    prefix: str = "",
    supplied: Mapping[str, Any] | None = None,
) -> Any:
    """Build the frozen dataclass ``cls`` from a TOML table, checking keys and types.

    ``where`` names the file in messages; ``prefix`` is the dotted path of a nested
    table; ``supplied`` holds fields that come from elsewhere (a profile's name is
    its file name) and may not appear in the table.
    """
    supplied = dict(supplied or {})
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in supplied}
    hints = typing.get_type_hints(cls)
    for key in table:
        if key in supplied:
            raise ConfigError(f"{where}: key '{prefix}{key}' is not allowed here (it is set to {supplied[key]!r} by edge-build)")
        if key not in fields:
            raise ConfigError(f"{where}: unknown key '{prefix}{key}' (allowed: {_choices(fields)})")
    values = dict(supplied)
    for name, field in fields.items():
        key = f"{prefix}{name}"
        if name not in table:
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                raise ConfigError(f"{where}: missing key '{key}'")
            continue
        values[name] = _convert(hints[name], table[name], where=where, key=key)
    try:
        return cls(**values)
    except ValueError as exc:
        message = str(exc)
        if prefix:
            message = message.replace("key '", f"key '{prefix}", 1)
        raise ConfigError(f"{where}: {message}") from exc


def _convert(hint: Any, value: Any, *, where: str, key: str) -> Any:
    origin = typing.get_origin(hint)
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: key '{key}' must be a table")
        return from_mapping(hint, value, where=where, prefix=f"{key}.")
    if origin is Literal:
        allowed = typing.get_args(hint)
        if value not in allowed:
            raise ConfigError(f"{where}: key '{key}' is {value!r} (allowed: {', '.join(map(str, allowed))})")
        return value
    if origin is tuple:
        (item,) = {a for a in typing.get_args(hint) if a is not Ellipsis}
        if not isinstance(value, list):
            raise ConfigError(f"{where}: key '{key}' must be a list of {item.__name__}")
        return tuple(_convert(item, v, where=where, key=key) for v in value)
    if origin in (collections.abc.Mapping, dict):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: key '{key}' must be a table")
        return value
    # bool is an int in Python: a TOML ``true`` must not pass as a count.
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
        raise ConfigError(f"{where}: key '{key}' must be {_type_name(hint)}, not {type(value).__name__} {value!r}")
    return value


def _type_name(hint: Any) -> str:
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(hint, str(hint))


def _require_positive(options: Any, *names: str) -> None:
    for name in names:
        if getattr(options, name) <= 0:
            raise ValueError(f"key '{name}': must be greater than 0, not {getattr(options, name)}")


def _choices(names: Mapping[str, Any] | typing.Iterable[str]) -> str:
    return ", ".join(names)
