"""A target profile, ``targets/<name>.toml``: what to build for one kind of device and how to check it.

Read by the conversion, the checks, the report, the manifest and the bundle,
never by training. ``SConstruct`` hands each stage's sources only the sections
that stage reads (``TargetProfile.sections``), so an edit to latency budgets
reruns the checks and the report, not the conversion.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Literal

from edge_build.artifacts import ARTIFACTS, settings_taken, takers
from edge_build.board.decision import examples_to_decide
from edge_build.board.runtime import RUNTIME_VERSIONS, RUNTIMES
from edge_build.config.loading import choices, from_mapping, load_toml, require_positive, require_rows
from edge_build.errors import ConfigError
from edge_build.interfaces import INTERFACES
from edge_build.recipes import LADDER, RECIPES
from edge_build.stacks import OS_RELEASES, EnvironmentSpec, RuntimeSpec, Stack, not_installable

Architecture = Literal["x86_64", "aarch64"]


@dataclasses.dataclass(frozen=True)
class Quantization:
    """How ``tflite_int8`` is quantized: full-integer post-training quantization.

    Attributes:
      output_type: the logits tensor's type, ``float32`` or ``int8``. The input stays
        int32 token ids either way (the converter ignores an int8 input type for ids).
      select_tf_ops: allow the SELECT_TF_OPS (Flex) fallback for ops without a TF Lite
        builtin; a model that then needs Flex ops is refused for runtimes without the delegate.
      recipes: the quantization ladder ``tflite_int8`` and ``tflite_tasks_int8`` climb until a model passes every gate
        (``edge_build.recipes``): all of them by default; a profile may narrow or reorder it.
    """

    output_type: Literal["float32", "int8"] = "float32"
    select_tf_ops: bool = False
    recipes: tuple[str, ...] = LADDER

    def __post_init__(self) -> None:
        if not self.recipes:
            raise ValueError(f"key 'recipes': must list at least one recipe (allowed: {choices(RECIPES)})")
        require_rows("recipes", self.recipes, RECIPES, "recipe", "a recipe")


@dataclasses.dataclass(frozen=True)
class BoardStack(Stack):
    """The board's software stack, ``[stack]``: every runtime of the profile runs on exactly this, here and on the board.

    Attributes:
      release: the Debian release the board's OS follows (its own packages give the CPython).
      python: that release's CPython minor version.
      numpy: the exact numpy version installed beside the runtimes.
    """

    release: str = "bookworm"
    python: str = "3.11"
    numpy: str = "1.26.4"

    def __post_init__(self) -> None:
        if self.release not in OS_RELEASES:
            raise ValueError(f"key 'release': unknown OS release '{self.release}' (allowed: {choices(OS_RELEASES)})")
        shipped = OS_RELEASES[self.release].python
        if self.python != shipped:
            raise ValueError(f"key 'python': {OS_RELEASES[self.release].title} ships CPython {shipped}, not {self.python} (allowed: {shipped})")
        if not re.fullmatch(r"[12]\.\d+\.\d+", self.numpy):
            raise ValueError(f"key 'numpy': expected an exact numpy version such as 1.26.4 or 2.2.6, not '{self.numpy}'")


#: Float16's unit roundoff: half the gap between 1 and the next float16. TF32 keeps the same 10 mantissa bits.
FLOAT16_ROUNDOFF = 2.0**-11
#: Float32's unit roundoff.
FLOAT32_ROUNDOFF = 2.0**-24
#: The float artifacts' logit-error checks, by tolerance prefix: ``<prefix>_logit_rtol`` scales, ``<prefix>_max_abs_logit`` overrides.
FLOAT_LOGIT_CHECKS = ("xla", "xla_gpu", "fp32", "fp16")


@dataclasses.dataclass(frozen=True)
class Tolerances:
    """How far an artifact may stray from the reference CPU SavedModel; breaches fail the build.

    A float model's largest logit error must be at most ``rtol * scale + logit_atol``, where
    ``scale`` is the reference's largest |logit| over the examples checked (``board.parity``):
    rounding errors are relative to the numbers rounded, so the bound follows the model. Each
    ``*_max_abs_logit`` key, when set, replaces its scaled bound with an absolute one.

    Attributes:
      xla_logit_rtol: saved_model_xla against saved_model_cpu on XLA's CPU backend: the same float32
        arithmetic in another order. 2^-17, 128 float32 unit roundoffs: a logit sums up to 512
        token embeddings and 64 products, and reassociation moves each partial sum by a roundoff.
      xla_gpu_logit_rtol: the same when XLA runs on a GPU, which may multiply in TF32 (on by default
        in TensorFlow on Ampere and later: operands rounded to float16's 10 mantissa bits).
        2^-9: four float16 roundoffs, two per product (both operands rounded), doubled.
      fp32_logit_rtol: tflite_fp32 against the reference: float32 in another order, as on XLA's CPU.
      fp16_logit_rtol: tflite_fp16 (float16 weights, float32 arithmetic) against the reference: each
        weight moves by up to one float16 roundoff (2^-11), relative, and a logit passes through two
        rounded layers (embeddings, dense): 2^-10. The worst errors measured are 0.2 to 0.31 roundoffs
        of the scale (docs/architecture.md), so the bound holds them 6x or more.
      logit_atol: added to every scaled bound: a floor for models whose logits are all near zero.
      xla_max_abs_logit, xla_gpu_max_abs_logit, fp32_max_abs_logit, fp16_max_abs_logit: when set,
        an absolute bound on that artifact's largest logit error instead of the scaled one.
      int8_min_top1_agreement: tflite_int8, share of examples whose top class matches the reference.
      int8_max_accuracy_drop: tflite_int8, accuracy below the reference's, as a fraction (0.01 = 1 point).
    """

    xla_logit_rtol: float = 128 * FLOAT32_ROUNDOFF
    xla_gpu_logit_rtol: float = 4 * FLOAT16_ROUNDOFF
    fp32_logit_rtol: float = 128 * FLOAT32_ROUNDOFF
    fp16_logit_rtol: float = 2 * FLOAT16_ROUNDOFF
    logit_atol: float = 1e-6
    xla_max_abs_logit: float | None = None
    xla_gpu_max_abs_logit: float | None = None
    fp32_max_abs_logit: float | None = None
    fp16_max_abs_logit: float | None = None
    int8_min_top1_agreement: float = 0.99
    int8_max_accuracy_drop: float = 0.01

    def __post_init__(self) -> None:
        require_positive(self, "logit_atol", *(f"{prefix}_logit_rtol" for prefix in FLOAT_LOGIT_CHECKS))
        require_positive(self, *(f"{prefix}_max_abs_logit" for prefix in FLOAT_LOGIT_CHECKS if getattr(self, f"{prefix}_max_abs_logit") is not None))
        for name in ("int8_min_top1_agreement", "int8_max_accuracy_drop"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"key '{name}': must be between 0 and 1, not {getattr(self, name)}")

    def logit_limit(self, prefix: str) -> float | dict[str, float]:
        """An absolute bound where the profile sets one, else the scaled bound's ``rtol`` and ``atol`` (``board.parity.limit_of``)."""
        absolute = getattr(self, f"{prefix}_max_abs_logit")
        return absolute if absolute is not None else {"rtol": getattr(self, f"{prefix}_logit_rtol"), "atol": self.logit_atol}

    def xla_limit(self, on_gpu: bool) -> tuple[str, float | dict[str, float]]:
        """The key and bound of saved_model_xla's logit error on the device XLA ran on."""
        prefix = "xla_gpu" if on_gpu else "xla"
        return f"{prefix}_max_abs_logit", self.logit_limit(prefix)

    def limits(self, on_gpu: bool = False) -> dict[str, float | dict[str, float]]:
        """Each check's tolerance key and its bound, as ``board.parity`` takes them; on a GPU, ``xla_max_abs_logit`` holds the GPU's."""
        logits = {f"{prefix}_max_abs_logit": self.logit_limit(prefix) for prefix in FLOAT_LOGIT_CHECKS}
        return {
            **logits,
            "xla_max_abs_logit": self.xla_limit(on_gpu)[1],
            "int8_min_top1_agreement": self.int8_min_top1_agreement,
            "int8_max_accuracy_drop": self.int8_max_accuracy_drop,
        }


@dataclasses.dataclass(frozen=True)
class LatencyBudgets:
    """Per-invoke p50 budgets at batch 1 in the runtime environments, in milliseconds (enforced by the runtime checks, reported under emulation)."""

    fp32_p50_ms: float = 1.0
    fp16_p50_ms: float = 1.0
    int8_p50_ms: float = 1.0
    text_int8_p50_ms: float = 10.0  # raw text in: tokenizing an article is most of it
    tasks_int8_p50_ms: float = 10.0  # raw text in, through MediaPipe's task graph and tokenizer (about 0.5 ms for a BBC article)

    def __post_init__(self) -> None:
        require_positive(self, "fp32_p50_ms", "fp16_p50_ms", "int8_p50_ms", "text_int8_p50_ms", "tasks_int8_p50_ms")


@dataclasses.dataclass(frozen=True)
class Deploy:
    """What may be deployed: the model recommended for each runtime is chosen within this (``edge_build.recommend``).

    Attributes:
      max_model_mb: the largest model file, in MB (10^6 bytes), that may be recommended; none when unset.
    """

    max_model_mb: float | None = None

    def __post_init__(self) -> None:
        if self.max_model_mb is not None and not self.max_model_mb > 0:
            raise ValueError(f"key 'max_model_mb': must be greater than 0, not {self.max_model_mb}")

    @property
    def max_bytes(self) -> int | None:
        return None if self.max_model_mb is None else int(self.max_model_mb * 1e6)


@dataclasses.dataclass(frozen=True)
class RuntimeChecks:
    """How the runtime checks exercise each TF Lite artifact in its runtime environments.

    Attributes:
      golden_examples: test-split examples in the golden set (all of them if the split is smaller); ``"auto"``:
        the fewest at which a perfect result decides every gate at the profile's limits (``board.parity``;
        299 for a top-1 agreement of 0.99), so that the board and the build can both show a pass.
      threads: interpreter threads.
      batch: examples per invoke.
      warmup: untimed invokes before timing.
      runs: timed invokes.
      timeout_s: a runtime still running after this long is stopped and reported.
    """

    golden_examples: int | str = "auto"
    threads: int = 1
    batch: int = 1
    warmup: int = 20
    runs: int = 200
    timeout_s: int = 300

    def __post_init__(self) -> None:
        require_positive(self, "threads", "batch", "runs", "timeout_s")
        if self.golden_examples != "auto" and not (isinstance(self.golden_examples, int) and self.golden_examples > 0):
            raise ValueError(f"key 'golden_examples': must be \"auto\" or a whole number greater than 0, not {self.golden_examples!r}")
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
        require_positive(self, "steady_runs")
        sizes = self.warmup_batch_sizes
        if not sizes or any(size < 1 for size in sizes) or len(set(sizes)) != len(sizes):
            raise ValueError(f"key 'warmup_batch_sizes': must list distinct batch sizes of 1 or more, not {list(sizes)}")


@dataclasses.dataclass(frozen=True)
class TargetProfile:
    """One deployment target, read from ``<targets_dir>/<name>.toml``.

    Attributes:
      name: the profile's name, taken from its file name.
      description: one line shown by ``scons target=list``.
      arch: the CPU architecture the artifacts are for.
      artifacts: what the build produces for this target (keys of ``ARTIFACTS``).
      quantization: settings of ``tflite_int8``.
      stack: the board's software stack the runtimes run on.
      runtimes: TF Lite runtimes the TF Lite artifacts must load and run on.
      tolerances: parity limits against the reference CPU SavedModel.
      latency: p50 budgets the runtime checks enforce.
      checks: how the runtime checks run (golden set size, threads, batch, runs, timeout).
      deploy: the budget a recommended model must fit (``[deploy] max_model_mb``).
      source: the file the profile was read from (set by edge-build).
      xla: warm-up batch sizes and timed calls of saved_model_xla.
    """

    name: str
    description: str
    arch: Architecture
    artifacts: tuple[str, ...]
    quantization: Quantization = dataclasses.field(default_factory=Quantization)
    stack: BoardStack = dataclasses.field(default_factory=BoardStack)
    runtimes: tuple[RuntimeSpec, ...] = ()
    tolerances: Tolerances = dataclasses.field(default_factory=Tolerances)
    latency: LatencyBudgets = dataclasses.field(default_factory=LatencyBudgets)
    checks: RuntimeChecks = dataclasses.field(default_factory=RuntimeChecks)
    deploy: Deploy = dataclasses.field(default_factory=Deploy)
    xla: XlaChecks = dataclasses.field(default_factory=XlaChecks)
    source: Path = Path()

    def __post_init__(self) -> None:
        if not self.artifacts:
            raise ValueError(f"key 'artifacts': must name at least one of {choices(ARTIFACTS)}")
        require_rows("artifacts", self.artifacts, ARTIFACTS, "artifact", "an artifact")
        names = [runtime.name for runtime in self.runtimes]
        if len(set(names)) != len(names):
            raise ValueError("key 'runtimes': lists a runtime twice")
        if self.runtime_artifacts and not self.runtimes:
            raise ValueError(
                f"key 'runtimes': {', '.join(self.runtime_artifacts)} must be checked on at least one runtime (allowed: {choices(RUNTIMES)})"
            )
        if self.runtimes and not self.runtime_artifacts:
            raise ValueError("key 'runtimes': the profile lists no TF Lite artifact to run on them")
        for runtime in self.runtimes:
            reason = not_installable(runtime, self.stack)
            if runtime.required and reason:
                raise ValueError(
                    f"key 'runtimes': required runtime {runtime.name} cannot be installed on the stack {self.stack.describe()}: {reason} (allowed: another stack, or required = false to report it)"
                )
        for artifact in self.runtime_artifacts:
            if not self.runtimes_for(artifact):
                interface = ARTIFACTS[artifact].interface
                able = [f"{row.name} {row.version}" for row in RUNTIME_VERSIONS if interface in row.interfaces]
                raise ValueError(
                    f"key 'runtimes': {artifact} {INTERFACES[interface].words}, which none of {', '.join(names)} can run (allowed: add a runtime that can: {', '.join(able)})"
                )
        for runtime in self.runtimes:
            if not any(ARTIFACTS[a].interface in runtime.row.interfaces for a in self.runtime_artifacts):
                runnable = [a for a, row in ARTIFACTS.items() if row.on_runtimes and row.interface in runtime.row.interfaces]
                raise ValueError(f"key 'runtimes': {runtime.name} runs none of the profile's artifacts (allowed: list one of {', '.join(runnable)})")
        if "saved_model_xla" in self.artifacts and "saved_model_cpu" not in self.artifacts:
            raise ValueError("key 'artifacts': saved_model_xla is checked against saved_model_cpu, which must be listed too")

    @property
    def runtime_artifacts(self) -> tuple[str, ...]:
        """The artifacts checked on the profile's runtimes and shipped in its bundle."""
        return tuple(a for a in self.artifacts if ARTIFACTS[a].on_runtimes)

    def runtimes_for(self, artifact: str) -> tuple[RuntimeSpec, ...]:
        """The profile's runtimes that check ``artifact``: those that run its interface (``Runtime.interfaces``)."""
        return tuple(r for r in self.runtimes if ARTIFACTS[artifact].interface in r.row.interfaces)

    @property
    def per_channel_dense(self) -> bool:
        """Per-channel dense quantization only when every runtime the profile's stack can install runs it."""
        return all(r.row.per_channel_dense for r in self.runtimes if not_installable(r, self.stack) is None)

    def runtime_environment(self) -> EnvironmentSpec:
        """What the environment this profile's runtimes run in holds."""
        stack = Stack(self.stack.release, self.stack.python, self.stack.numpy)
        return EnvironmentSpec(self.arch, stack, self.runtimes)

    @property
    def golden_examples_to_decide(self) -> int | None:
        """The fewest golden examples at which a perfect result decides every parity gate of the runtime artifacts; ``None``: no number does."""
        limits = self.tolerances.limits()
        needed = [examples_to_decide(figure, limits[key]) for a in self.runtime_artifacts for _, figure, _, key in ARTIFACTS[a].parity]
        return None if None in needed else max(needed, default=1)

    def golden_examples(self, available: int) -> int:
        """The golden set's size for a test split of ``available`` examples: ``[checks] golden_examples``, capped by the split."""
        wanted = self.checks.golden_examples
        if wanted == "auto":
            wanted = self.golden_examples_to_decide or available
        return min(wanted, available)

    def latency_budget_ms(self, artifact: str) -> float:
        return getattr(self.latency, ARTIFACTS[artifact].latency_key)

    def sections(self, *names: str, artifact: str | None = None) -> str:
        """The named sections as canonical JSON: what SCons compares to decide whether a stage reruns.

        With ``artifact``, of a table the artifact does not read whole only the keys it reads
        (``settings_taken``): an INT8 tolerance or recipe edit reruns INT8's conversion, not float32's.
        """
        plain = {name: _plain(getattr(self, name)) for name in names}
        if artifact is not None:
            taken = settings_taken(artifact)
            plain = {
                name: {key: v for key, v in value.items() if f"{name}.{key}" in taken} if isinstance(value, dict) and name not in taken else value
                for name, value in plain.items()
            }
        return json.dumps(plain, sort_keys=True)


def _plain(value):
    return dataclasses.asdict(value) if dataclasses.is_dataclass(value) else [_plain(v) for v in value] if isinstance(value, tuple) else value


def profile_names(targets_dir: Path | str) -> list[str]:
    return sorted(p.stem for p in Path(targets_dir).glob("*.toml"))


def tokenizer_refusal(profile: TargetProfile, lower_case: bool, hparams_path: Path) -> str | None:
    """Why the profile cannot be built with this tokenizer setting, or ``None``: MediaPipe's ``BertTokenizer`` metadata has
    no casing switch (it always lowercases), so a Tasks-ready model of a cased vocabulary would tokenize unlike training."""
    tasks = [a for a in profile.artifacts if ARTIFACTS[a].interface_row.needs_lower_case]
    if lower_case or not tasks:
        return None
    return (
        f"{hparams_path}: key 'tokenizer.lower_case': false, which MediaPipe's BertTokenizer cannot follow (it always lowercases), "
        f"and {profile.source} lists {', '.join(tasks)} (allowed: lower_case = true, or drop {', '.join(tasks)} from 'artifacts')"
    )


def load_profile(targets_dir: Path | str, name: str) -> TargetProfile:
    """Read ``targets_dir/<name>.toml``; an unknown name lists the profiles there."""
    path = Path(targets_dir) / f"{name}.toml"
    if not path.is_file():
        available = ", ".join(profile_names(targets_dir)) or "none"
        raise ConfigError(f"unknown target '{name}': no {path} (available: {available})")
    return read_profile(path)


#: Tables whose keys only some artifacts read: a key that none of the profile's artifacts reads is refused.
ARTIFACT_SETTINGS = ("quantization", "tolerances", "latency", "xla", "stack", "runtimes", "checks", "deploy")


def read_profile(path: Path | str) -> TargetProfile:
    """The profile in ``path``, named after the file."""
    path = Path(path)
    table = load_toml(path)
    profile = from_mapping(TargetProfile, table, where=str(path), supplied={"name": path.stem, "source": path})
    refuse_settings_no_artifact_reads(profile, table)
    return profile


def refuse_settings_no_artifact_reads(profile: TargetProfile, table: dict) -> None:
    """A key no listed artifact reads would be silently ignored (``output_type = "int8"`` without tflite_int8, ``[xla]``
    without saved_model_xla): name it and the artifacts that read it."""
    for section in ARTIFACT_SETTINGS:
        value = table.get(section)
        for key in value if isinstance(value, dict) else [None] if value else []:
            setting = f"{section}.{key}" if key else section
            readers = takers(setting)
            if not set(readers) & set(profile.artifacts):
                raise ConfigError(
                    f"{profile.source}: key '{setting}': read only by {', '.join(readers)}, which artifacts does not list "
                    f"(allowed: remove the key, or list {readers[0] if len(readers) == 1 else 'one of them'})"
                )
