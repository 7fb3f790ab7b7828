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

@dataclasses.dataclass(frozen=True)
class Artifact:
    """A row of the artifact table: what a profile may ask the build to produce."""

    path: str  # relative to ``<build_dir>/<target>/``
    description: str
    tflite: bool = False


#: Every artifact a profile may list.
ARTIFACTS: Mapping[str, Artifact] = types.MappingProxyType(
    {
        "saved_model_cpu": Artifact("saved_model_cpu/1", "CPU SavedModel (TF Serving layout), tokenizer and vocabulary inside"),
        "saved_model_xla": Artifact("saved_model_xla/1", "SavedModel whose ids -> logits part is XLA-compiled (jit_compile), for GPUs"),
        "tflite_fp32": Artifact("model_fp32.tflite", "TF Lite, float32 weights and activations, int32 ids in", tflite=True),
        "tflite_int8": Artifact("model_int8.tflite", "TF Lite, full-integer INT8 calibrated on real text, int32 ids in", tflite=True),
    }
)


@dataclasses.dataclass(frozen=True)
class RuntimeFacts:
    """What a device runtime is and can do, as installed from its wheel."""

    package: str  # the pip package that provides it (its interpreter module: device.runtime.INTERPRETER_MODULES)
    has_flex_delegate: bool
    # tflite-runtime 2.14 cannot load TF 2.21's per-channel dense layers
    # (FULLY_CONNECTED v12) and its aarch64 build crashes on them.
    per_channel_dense: bool


RUNTIMES: Mapping[str, RuntimeFacts] = types.MappingProxyType(
    {
        "tflite-runtime": RuntimeFacts("tflite-runtime", has_flex_delegate=False, per_channel_dense=False),
        "ai-edge-litert": RuntimeFacts("ai-edge-litert", has_flex_delegate=False, per_channel_dense=True),
    }
)

Architecture = Literal["x86_64", "aarch64"]
RuntimeName = Literal["tflite-runtime", "ai-edge-litert"]
Strategy = Literal["default", "mirrored", "multi_worker_mirrored"]
LabelConflictRule = Literal["drop", "train"]
NearDuplicateRule = Literal["report", "group"]


@dataclasses.dataclass(frozen=True)
class Quantization:
    """How ``tflite_int8`` is quantized: full-integer post-training quantization.

    Attributes:
      output_type: the logits tensor's type, ``float32`` or ``int8``. The input stays
        int32 token ids either way (the converter ignores an int8 input type for ids).
      select_tf_ops: allow the SELECT_TF_OPS (Flex) fallback for ops without a TF Lite
        builtin; a model that then needs Flex ops is refused for runtimes without the delegate.
    """

    output_type: Literal["float32", "int8"] = "float32"
    select_tf_ops: bool = False


@dataclasses.dataclass(frozen=True)
class Runtime:
    """A device runtime the profile's TF Lite artifacts are checked on.

    Attributes:
      name: ``tflite-runtime`` or ``ai-edge-litert``.
      flex_delegate: whether the runtime as deployed has the Flex delegate (the pip wheels of both do not).
      required: whether its device checks gate the build; an optional runtime is checked and
        reported where it can run, and only a parity or latency breach on it fails the build.
    """

    name: RuntimeName
    flex_delegate: bool = False
    required: bool = True

    def __post_init__(self) -> None:
        if self.flex_delegate and not RUNTIMES[self.name].has_flex_delegate:
            raise ValueError(f"key 'flex_delegate': {self.name}'s wheels have no Flex delegate (allowed: false)")


@dataclasses.dataclass(frozen=True)
class Tolerances:
    """How far an artifact may stray from the reference CPU SavedModel; breaches fail the build.

    Attributes:
      xla_max_abs_logit: saved_model_xla against saved_model_cpu, largest absolute logit difference,
        when XLA runs on its CPU backend (the same float32 arithmetic, in another order).
      xla_gpu_max_abs_logit: the same when XLA runs on a GPU, which may multiply in TF32 (on by
        default in TensorFlow on Ampere and later: operands rounded to 10 mantissa bits).
      fp32_max_abs_logit: tflite_fp32 against the reference, largest absolute logit difference.
      int8_min_top1_agreement: tflite_int8, share of examples whose top class matches the reference.
      int8_max_accuracy_drop: tflite_int8, accuracy below the reference's, as a fraction (0.01 = 1 point).
    """

    xla_max_abs_logit: float = 1e-4
    xla_gpu_max_abs_logit: float = 1e-2
    fp32_max_abs_logit: float = 1e-4
    int8_min_top1_agreement: float = 0.99
    int8_max_accuracy_drop: float = 0.01

    def __post_init__(self) -> None:
        _require_positive(self, "xla_max_abs_logit", "xla_gpu_max_abs_logit", "fp32_max_abs_logit")
        for name in ("int8_min_top1_agreement", "int8_max_accuracy_drop"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"key '{name}': must be between 0 and 1, not {getattr(self, name)}")

    def xla_limit(self, on_gpu: bool) -> tuple[str, float]:
        """The key and value that bound saved_model_xla's logit error on the device XLA ran on."""
        key = "xla_gpu_max_abs_logit" if on_gpu else "xla_max_abs_logit"
        return key, getattr(self, key)


@dataclasses.dataclass(frozen=True)
class LatencyBudgets:
    """Per-invoke p50 budgets at batch 1 on the device runtimes, in milliseconds (enforced by the device checks)."""

    fp32_p50_ms: float = 1.0
    int8_p50_ms: float = 1.0

    def __post_init__(self) -> None:
        _require_positive(self, "fp32_p50_ms", "int8_p50_ms")


@dataclasses.dataclass(frozen=True)
class DeviceChecks:
    """How the device runtimes are exercised.

    Attributes:
      golden_examples: test-split examples in the golden set (all of them if the split is smaller).
      threads: interpreter threads.
      batch: examples per invoke.
      warmup: untimed invokes before timing.
      runs: timed invokes.
      timeout_s: a runtime still running after this long is stopped and reported.
    """

    golden_examples: int = 300
    threads: int = 1
    batch: int = 1
    warmup: int = 20
    runs: int = 200
    timeout_s: int = 300

    def __post_init__(self) -> None:
        _require_positive(self, "golden_examples", "threads", "batch", "runs", "timeout_s")
        if self.warmup < 0:
            raise ValueError(f"key 'warmup': must be 0 or more, not {self.warmup}")


@dataclasses.dataclass(frozen=True)
class XlaChecks:
    """How saved_model_xla is warmed up and checked.

    Attributes:
      warmup_batch_sizes: the batch sizes of TF Serving's warm-up file
        (``assets.extra/tf_serving_warmup_requests``). XLA compiles once per input
        shape, so these are the sizes a server should expect; the check stage
        times the first (compiling) and the steady-state call at each.
      steady_runs: timed calls per signature and batch size after the first.
    """

    warmup_batch_sizes: tuple[int, ...] = (1, 8, 32)
    steady_runs: int = 20

    def __post_init__(self) -> None:
        _require_positive(self, "steady_runs")
        sizes = self.warmup_batch_sizes
        if not sizes or any(size < 1 for size in sizes) or len(set(sizes)) != len(sizes):
            raise ValueError(f"key 'warmup_batch_sizes': must list distinct batch sizes of 1 or more, not {list(sizes)}")


@dataclasses.dataclass(frozen=True)
class TargetProfile:
    """One deployment target, read from ``targets/<name>.toml``.

    Attributes:
      name: the profile's name, taken from its file name.
      description: one line shown by ``scons target=list``.
      arch: the CPU architecture the artifacts are for.
      artifacts: what the build produces for this target (keys of ``ARTIFACTS``).
      quantization: settings of ``tflite_int8``.
      runtimes: device runtimes the TF Lite artifacts must load and run on.
      tolerances: parity limits against the reference CPU SavedModel.
      latency: budgets for the device checks.
      device: how the device checks run (golden set size, threads, batch, runs, timeout).
      xla: warm-up batch sizes and timed calls of saved_model_xla.
    """

    name: str
    description: str
    arch: Architecture
    artifacts: tuple[str, ...]
    quantization: Quantization = dataclasses.field(default_factory=Quantization)
    runtimes: tuple[Runtime, ...] = ()
    tolerances: Tolerances = dataclasses.field(default_factory=Tolerances)
    latency: LatencyBudgets = dataclasses.field(default_factory=LatencyBudgets)
    device: DeviceChecks = dataclasses.field(default_factory=DeviceChecks)
    xla: XlaChecks = dataclasses.field(default_factory=XlaChecks)

    def __post_init__(self) -> None:
        if not self.artifacts:
            raise ValueError(f"key 'artifacts': must name at least one of {_choices(ARTIFACTS)}")
        for artifact in self.artifacts:
            if artifact not in ARTIFACTS:
                raise ValueError(f"key 'artifacts': unknown artifact '{artifact}' (allowed: {_choices(ARTIFACTS)})")
        if len(set(self.artifacts)) != len(self.artifacts):
            raise ValueError("key 'artifacts': lists an artifact twice")
        names = [runtime.name for runtime in self.runtimes]
        if len(set(names)) != len(names):
            raise ValueError("key 'runtimes': lists a runtime twice")
        if self.tflite_artifacts and not self.runtimes:
            raise ValueError(f"key 'runtimes': {', '.join(self.tflite_artifacts)} must be checked on at least one runtime (allowed: {_choices(RUNTIMES)})")
        if self.runtimes and not self.tflite_artifacts:
            raise ValueError("key 'runtimes': the profile lists no TF Lite artifact to run on them")
        if "saved_model_xla" in self.artifacts and "saved_model_cpu" not in self.artifacts:
            raise ValueError("key 'artifacts': saved_model_xla is checked against saved_model_cpu, which must be listed too")

    @property
    def tflite_artifacts(self) -> tuple[str, ...]:
        return tuple(a for a in self.artifacts if ARTIFACTS[a].tflite)

    @property
    def per_channel_dense(self) -> bool:
        """Per-channel dense quantization only when every runtime of the profile runs it."""
        return all(RUNTIMES[runtime.name].per_channel_dense for runtime in self.runtimes)

    @property
    def flex_runtimes(self) -> tuple[str, ...]:
        return tuple(runtime.name for runtime in self.runtimes if runtime.flex_delegate)


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
        _require_positive(self, "epochs", "batch_size", "learning_rate", "clip_norm", "shuffle_buffer")
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

    def with_training(self, **changes: Any) -> "Hyperparameters":
        """A copy with some training options replaced (command-line overrides), validated again."""
        changes = {k: v for k, v in changes.items() if v is not None}
        try:
            training = dataclasses.replace(self.training, **changes)
        except ValueError as exc:
            raise ConfigError(f"training override: {exc}") from exc
        return dataclasses.replace(self, training=training)


@dataclasses.dataclass(frozen=True)
class CalibrationConfig:
    """``calibration/calibration.toml``: what the INT8 representative dataset is made of.

    Attributes:
      samples: examples drawn from ``split``, stratified per class (0 with ``field_samples_mode = "only"``).
      split: ``train`` or ``val``; never ``test``, which must stay unseen.
      seed: seeds the draw.
      field_samples: optional text file of the user's own examples, one per line,
        relative to the TOML file; tokenized the same way as the drawn ones.
      field_samples_mode: ``mix`` adds them to the drawn examples, ``only`` uses them instead.
    """

    samples: int = 300
    split: Literal["train", "val"] = "train"
    seed: int = 0
    field_samples: str = ""
    field_samples_mode: Literal["mix", "only"] = "mix"

    def __post_init__(self) -> None:
        if self.samples < 0:
            raise ValueError(f"key 'samples': must be 0 or more, not {self.samples}")
        if self.field_samples_mode == "only" and not self.field_samples:
            raise ValueError("key 'field_samples_mode': 'only' needs a 'field_samples' file")
        if self.field_samples_mode == "only" and self.samples:
            raise ValueError("key 'samples': must be 0 when field_samples_mode is 'only' (the split is not drawn from)")
        if not self.samples and not self.field_samples:
            raise ValueError("key 'samples': the representative set would be empty (set samples > 0 or a field_samples file)")


def load_calibration(path: Path | str) -> CalibrationConfig:
    path = Path(path)
    return from_mapping(CalibrationConfig, load_toml(path), where=str(path))


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
