"""Climb the quantization ladder (``edge_build.recipes``): the first recipe whose model passes every gate, and every attempt.

A ``Quantizable`` is what climbs: the ids model as it is (``tflite_int8``), or a
wrapper around it with its own calibration feeds and runner (the Tasks-ready model,
``edge_build.convert.tasks``). ``ladder_judge`` is the gates (the artifact's parity on
TensorFlow's interpreter and on the profile's required runtimes that take token ids,
no Flex op a runtime lacks); ``climb`` converts each recipe, skips those the runtime
table already rules out, and ``attempt_table`` renders the attempts as the one table
a failed ladder prints. TensorFlow is imported inside the functions.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from edge_build.artifacts import ARTIFACTS
from edge_build.board.decision import DERIVED, breaches
from edge_build.board.parity import compare
from edge_build.config.profile import TargetProfile
from edge_build.convert.converter import converter_settings, make_converter, quiet_tensorflow_lite, recipe_converter, run_tflite
from edge_build.convert.gates import flex_refusal, validation_on_runtime
from edge_build.convert.job import ConversionJob, Converted
from edge_build.convert.operators import inspect_model
from edge_build.errors import StageError
from edge_build.recipes import FLOAT_WORST_STEPS, RECIPES
from edge_build.stacks import not_installable

#: The per-layer debugger runs the model op by op; this many calibration samples give stable figures.
DEBUG_SAMPLES = 64


@dataclasses.dataclass(frozen=True)
class Quantizable:
    """What the ladder converts, and how its candidates are fed and run.

    Attributes:
      model: the Keras model to convert.
      calibration: the converter's ``representative_dataset`` (the representative set, as the model takes it).
      run: its outputs for token ids on TensorFlow's interpreter (``run_tflite``, or the wrapper's own runner).
      float_output: its output stays float32 whatever the recipe (MediaPipe refuses an int8 output).
      one_input: TF Lite's per-layer debugger can feed it, so ``int8_float_worst`` can pick its worst layers.
    """

    model: object
    calibration: Callable[[], Iterator]
    run: Callable[[bytes, np.ndarray], np.ndarray]
    float_output: bool = False
    one_input: bool = True


def ids_model(model, representative: np.ndarray) -> Quantizable:
    """The trained model as it is: token ids in, logits out, calibrated on the representative set's rows."""
    return Quantizable(model, lambda: ([row[None]] for row in representative), run_tflite)


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What the judge found for one candidate model: figures per place checked (``tf.lite``, ``<runtime> <version>``), and each broken gate."""

    figures: dict[str, dict]
    problems: list[str]
    float_ops: dict[str, int]
    val_logits: np.ndarray | None = None


@dataclasses.dataclass
class Attempt:
    recipe: str
    outcome: str  # chosen, failed, skipped or not tried
    reason: str = ""
    size_bytes: int | None = None
    seconds: float | None = None
    kept_float: list[str] = dataclasses.field(default_factory=list)
    float_ops: dict[str, int] = dataclasses.field(default_factory=dict)
    figures: dict[str, dict] = dataclasses.field(default_factory=dict)

    def record(self) -> dict:
        return {"description": RECIPES[self.recipe].description, **dataclasses.asdict(self)}


@dataclasses.dataclass(frozen=True)
class Climbed:
    """The chosen recipe's model, its converter settings and validation logits, and every attempt (``None`` chosen: none passed)."""

    recipe: str | None
    content: bytes | None
    converter: dict
    attempts: list[Attempt]
    val_logits: np.ndarray | None = None


def debugger_for(converter, representative: np.ndarray, denylisted: Sequence[str] = ()):
    """TF Lite's ``QuantizationDebugger`` on the first ``DEBUG_SAMPLES`` representative rows, ``denylisted`` layers kept float."""
    import tensorflow as tf

    samples = representative[:DEBUG_SAMPLES]
    return tf.lite.experimental.QuantizationDebugger(
        converter=converter,
        debug_dataset=lambda: ([row[None]] for row in samples),
        debug_options=tf.lite.experimental.QuantizationDebugOptions(denylisted_nodes=list(denylisted)) if denylisted else None,
    )


def quantization_errors(converter, representative: np.ndarray) -> list[dict]:
    """Per quantized layer: error of its INT8 output against float, worst first (TF Lite's QuantizationDebugger)."""
    with quiet_tensorflow_lite():
        debugger = debugger_for(converter, representative)
        debugger.run()
    dump = io.StringIO()
    debugger.layer_statistics_dump(dump)
    rows = []
    for row in csv.DictReader(io.StringIO(dump.getvalue())):
        scale = float(row["scale"])
        rmse = float(row["mean_squared_error"]) ** 0.5
        rows.append(
            {
                "op": row["op_name"],
                "tensor": row["tensor_name"],
                "scale": scale,
                "zero_point": int(float(row["zero_point"])),
                "rmse": rmse,
                "max_abs_error": float(row["max_abs_error"]),
                # Error in quantization steps: ~0.29 (uniform rounding) is the floor; much more means the range is poorly set.
                "rmse_in_steps": rmse / scale if scale else 0.0,
            }
        )
    return sorted(rows, key=lambda r: -r["rmse_in_steps"])


def skip_reason(name: str, profile: TargetProfile, subject: Quantizable) -> str | None:
    """Why the runtime table (or the model's inputs) rules recipe ``name`` out before converting, or None."""
    if RECIPES[name].per_channel_dense:
        if profile.per_channel_dense:
            return "the same model as int8: every runtime here loads per-channel dense layers, so int8 has them"
        lacking = [f"{r.name} {r.version}" for r in profile.runtimes if not_installable(r, profile.stack) is None and not r.row.per_channel_dense]
        return f"{', '.join(lacking)} cannot load TF 2.21's per-channel dense layers (the runtime table)"
    if RECIPES[name].float_worst and not subject.one_input:
        return "TF Lite's per-layer debugger feeds one input, and this model takes three: no per-layer error table to pick from"
    return None


def worst_layers(errors: Sequence[dict]) -> list[str]:
    """The layers ``int8_float_worst`` keeps in float: over ``FLOAT_WORST_STEPS`` steps of error, and at least the worst."""
    over = [row["tensor"] for row in errors if row["rmse_in_steps"] > FLOAT_WORST_STEPS]
    return over or [row["tensor"] for row in errors[:1]]


def convert_recipe(
    subject: Quantizable, name: str, profile: TargetProfile, representative: np.ndarray, errors: Sequence[dict]
) -> tuple[bytes, dict, list[str]]:
    """Recipe ``name``'s model, its converter settings and the layers it kept in float on purpose."""
    import tensorflow as tf

    converter = recipe_converter(subject.model, name, profile, representative)
    if RECIPES[name].calibrated:
        converter.representative_dataset = subject.calibration
    if subject.float_output:
        converter.inference_output_type = tf.float32
    kept_float = worst_layers(errors) if RECIPES[name].float_worst else []
    with quiet_tensorflow_lite():
        if kept_float:
            content = debugger_for(converter, representative, kept_float).get_nondebug_quantized_model()
        else:
            content = converter.convert()
    settings = {
        "recipe": name,
        **converter_settings(converter),
        "per_channel_dense": not converter._experimental_disable_per_channel_quantization_for_dense_layers,
        "calibration_samples": int(len(representative)) if RECIPES[name].calibrated else 0,
        "inference_output_type": converter.inference_output_type.name if RECIPES[name].calibrated else "float32",
    }
    return content, settings, kept_float


def climb(
    subject: Quantizable, profile: TargetProfile, representative: np.ndarray, errors: Sequence[dict], judge: Callable[[bytes], Verdict]
) -> Climbed:
    """Try the profile's recipes in order; the first whose model ``judge`` passes, with every attempt recorded."""
    from tensorflow.lite.python.convert import ConverterError

    attempts: list[Attempt] = []
    for position, name in enumerate(profile.quantization.recipes):
        reason = skip_reason(name, profile, subject)
        if reason:
            attempts.append(Attempt(name, "skipped", reason))
            continue
        started = time.perf_counter()
        try:
            content, settings, kept_float = convert_recipe(subject, name, profile, representative, errors)
        except (ConverterError, RuntimeError, ValueError) as exc:
            attempts.append(Attempt(name, "failed", f"the converter refused it: {' '.join(str(exc).split())[:300]}"))
            continue
        seconds = round(time.perf_counter() - started, 3)
        verdict = judge(content)
        attempt = Attempt(name, "failed", "; ".join(verdict.problems), len(content), seconds, kept_float, verdict.float_ops, verdict.figures)
        attempts.append(attempt)
        if not verdict.problems:
            attempt.outcome, attempt.reason = "chosen", "passes every gate"
            attempts += [Attempt(later, "not tried", "an earlier recipe passed") for later in profile.quantization.recipes[position + 1 :]]
            return Climbed(name, content, {**settings, "seconds": seconds}, attempts, verdict.val_logits)
    return Climbed(None, None, {}, attempts)


def attempt_table(attempts: Sequence[Attempt]) -> str:
    """Every attempt, one line each: the table a ladder that found nothing prints."""
    lines = [f"  {'recipe':<18} {'outcome':<9} {'size':>9}  why"]
    for attempt in attempts:
        size = f"{attempt.size_bytes / 1e6:.2f} MB" if attempt.size_bytes else "-"
        lines.append(f"  {attempt.recipe:<18} {attempt.outcome:<9} {size:>9}  {attempt.reason}")
    return "\n".join(lines)


def gate_figures(figures: dict) -> dict:
    return {
        "examples": figures["examples"],
        "top1_agreement": figures["top1_agreement"],
        "accuracy_drop": DERIVED["accuracy_drop"](figures),
    }


def ladder_judge(job: ConversionJob, subject: Quantizable) -> Callable[[bytes], Verdict]:
    """The gates a recipe's model must pass: no Flex op a runtime lacks, and the artifact's parity on the validation split,
    on TensorFlow's interpreter and on every required runtime that takes token ids (which must load and run it). A
    runtime given raw text (MediaPipe's TextClassifier) is checked by the runtime checks, on the golden set's texts."""
    artifact, reference, val_ids, val_labels, profile = job.artifact, job.reference, job.val_ids, job.val_labels, job.profile

    def judge(content: bytes) -> Verdict:
        ops = inspect_model(content)
        refusal = flex_refusal(ops, profile.runtimes_for(artifact))
        if refusal:
            return Verdict({}, [refusal], ops["float_ops"])
        val_logits = subject.run(content, val_ids)
        figures, problems = {"tf.lite": compare(reference, val_logits, val_labels)}, []
        by_ids = [] if job.row.interface_row.given_text else [r for r in profile.runtimes_for(artifact) if r.required]
        with tempfile.TemporaryDirectory() as scratch:
            model_file, golden = Path(scratch) / "candidate.tflite", Path(scratch) / "validation.npz"
            model_file.write_bytes(content)
            with open(golden, "wb") as handle:
                np.savez(handle, ids=val_ids, labels=val_labels, reference_logits=reference.astype(np.float32))
            for runtime in by_ids:
                result, error = validation_on_runtime(model_file, runtime.name, job.environment, golden, Path(scratch))
                if error:
                    problems.append(f"{runtime.name} cannot run it: {error}")
                else:
                    figures[f"{runtime.name} {result['runtime_version']}"] = result["parity"]
        problems += [
            f"{place}: {breach}"
            for place, found in figures.items()
            for breach in breaches(ARTIFACTS[artifact].parity, found, profile.tolerances.limits())
        ]
        return Verdict({place: gate_figures(found) for place, found in figures.items()}, problems, ops["float_ops"], val_logits)

    return judge


def quantize_by_ladder(job: ConversionJob, subject: Quantizable | None = None) -> Converted:
    """The first recipe of the profile's ladder whose model (``subject``: the ids model by default) passes every gate,
    with the attempts and, where the debugger can feed it, full INT8's per-layer errors."""
    subject = subject or ids_model(job.model, job.representative)
    profile, representative = job.profile, job.representative
    errors = quantization_errors(make_converter(subject.model, "int8", profile, representative), representative) if subject.one_input else []
    climbed = climb(subject, profile, representative, errors, ladder_judge(job, subject))
    attempts = [attempt.record() for attempt in climbed.attempts]
    if climbed.recipe is None:
        print(attempt_table(climbed.attempts), file=sys.stderr)
        raise StageError(
            f"{job.where}: no recipe of the quantization ladder passes every gate ({len(attempts)} in [quantization] recipes: the table above; "
            "allowed: more recipes there, or looser int8 tolerances)"
        )
    record = {"quantization_ladder": {"recipe": climbed.recipe, "attempts": attempts}}
    if subject.one_input:
        record["quantization_errors"] = errors
    return Converted(climbed.content, climbed.converter, record, climbed.val_logits)
