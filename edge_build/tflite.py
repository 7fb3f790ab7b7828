"""Stage *tflite*: convert the trained model's ids -> logits function to TF Lite, float32 or INT8.

Reads the weights, the training log, ``vocab.txt``, ``labels.txt``, ``val.tfrecord``,
the hyperparameters, the model source, the target profile and, for INT8, the
calibration stage's ``representative.npy``. Writes ``model_<precision>.tflite`` and
``tflite_<precision>.json``: converter settings, every operator with its version and
count (builtin, Flex or custom), which tensors stayed float, the validation-split
parity against the Keras model, the per-layer quantization error (INT8), and the
result of loading and invoking the model on each runtime the profile lists.

The build stops, and no ``.tflite`` is written, when the model needs Flex ops a
runtime cannot run, when a runtime cannot load or run it (an operator version it
lacks, a missing kernel, a crash), or when it strays from the Keras model beyond
the profile's tolerances: a converter can produce a weightless model without an
error, and only these checks keep such a model from shipping.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import hashlib
import io
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from edge_build import cli, parity
from edge_build.atomic import atomic_outputs
from edge_build.config import TargetProfile, load_hyperparameters, load_profile
from edge_build.errors import StageError
from edge_build.isolated import run_isolated
from edge_build.model_source import check_weights_loaded, load_trained_model
from edge_build.provenance import package_versions
from edge_build.records import read_labels, read_split

PRECISIONS = ("fp32", "int8")
PREFLIGHT_TIMEOUT_S = 120
# The per-layer debugger runs the model op by op; this many calibration samples give stable figures.
DEBUG_SAMPLES = 64


@dataclasses.dataclass(frozen=True)
class ConversionInputs:
    model_source: Path
    hparams: Path
    vocab: Path
    weights: Path
    train_log: Path
    data_dir: Path
    representative: Path | None = None


@contextlib.contextmanager
def quiet_tensorflow_lite():
    """Silence what TF Lite's Python side says on every call and nobody here can act on.

    Keras prints the endpoints of the temporary SavedModel each conversion makes;
    ``tf.lite.Interpreter`` warns it is deprecated in favour of ai-edge-litert
    (the device checks use the device runtimes; this one is the host reference);
    the converter warns about the int32 ids input, which is not quantized by design.
    """
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\s*Warning: tf.lite.Interpreter is deprecated", category=UserWarning)
        # The int32 ids input is not quantized by design; the converter warns that it has no statistics for it.
        warnings.filterwarnings("ignore", message="Statistics for quantized inputs were expected", category=UserWarning)
        yield


def make_converter(model, precision: str, profile: TargetProfile, representative: np.ndarray | None):
    """A ``TFLiteConverter`` for the Keras model, set up as the profile asks.

    ``from_keras_model``, not a ``tf.Module`` wrapper: a Keras 3 model saved inside a
    module converts to a weightless model of VAR_HANDLE ops without any error.
    """
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    builtins = tf.lite.OpsSet.TFLITE_BUILTINS_INT8 if precision == "int8" else tf.lite.OpsSet.TFLITE_BUILTINS
    converter.target_spec.supported_ops = [builtins] + ([tf.lite.OpsSet.SELECT_TF_OPS] if profile.quantization.select_tf_ops else [])
    if precision == "int8":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: ([row[None]] for row in representative)
        if profile.quantization.output_type == "int8":
            converter.inference_output_type = tf.int8
        # tflite-runtime 2.14 cannot load TF 2.21's per-channel dense layers, and its aarch64 build crashes on them.
        converter._experimental_disable_per_channel_quantization_for_dense_layers = not profile.per_channel_dense
    return converter


def inspect_model(content: bytes) -> dict:
    """Operators (with versions and counts), Flex and custom ops, and tensor types, read from the flatbuffer."""
    from tensorflow.lite.python import schema_py_generated as schema

    model = schema.ModelT.InitFromPackedBuf(bytearray(content), 0)
    op_names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    type_names = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
    operators: dict[tuple, int] = {}
    for subgraph in model.subgraphs:
        for op in subgraph.operators:
            code = model.operatorCodes[op.opcodeIndex]
            builtin = max(code.builtinCode, code.deprecatedBuiltinCode)
            name = code.customCode.decode() if code.customCode else op_names[builtin]
            kind = "builtin" if not code.customCode else ("flex" if name.startswith("Flex") else "custom")
            operators[(name, code.version, kind)] = operators.get((name, code.version, kind), 0) + 1
    tensors = [t for subgraph in model.subgraphs for t in subgraph.tensors]
    def is_constant(tensor) -> bool:
        buffer = model.buffers[tensor.buffer]
        return buffer.data is not None and len(buffer.data) > 0
    tensor_types: dict[str, int] = {}
    for tensor in tensors:
        tensor_types[type_names[tensor.type]] = tensor_types.get(type_names[tensor.type], 0) + 1
    return {
        "operators": [{"op": name, "version": version, "kind": kind, "count": count} for (name, version, kind), count in sorted(operators.items())],
        "flex_ops": sorted({name for name, _, kind in operators if kind == "flex"}),
        "custom_ops": sorted({name for name, _, kind in operators if kind == "custom"}),
        "tensor_types": dict(sorted(tensor_types.items())),
        "float_activations": sorted(t.name.decode() for t in tensors if type_names[t.type] == "FLOAT32" and not is_constant(t)),
        "float_constants": sorted(t.name.decode() for t in tensors if type_names[t.type] == "FLOAT32" and is_constant(t)),
    }


def run_tflite(content: bytes, ids: np.ndarray) -> np.ndarray:
    """Float logits of the model for ``ids`` on TensorFlow's own interpreter (int8 outputs dequantized)."""
    import tensorflow as tf

    with quiet_tensorflow_lite():
        interpreter = tf.lite.Interpreter(model_content=content)
    (inp,), (out,) = interpreter.get_input_details(), interpreter.get_output_details()
    interpreter.resize_tensor_input(inp["index"], list(ids.shape))
    interpreter.allocate_tensors()
    interpreter.set_tensor(inp["index"], ids.astype(inp["dtype"]))
    interpreter.invoke()
    logits = interpreter.get_tensor(out["index"])
    if out["dtype"] == np.int8:
        scale, zero_point = out["quantization"]
        logits = (logits.astype(np.float32) - zero_point) * scale
    return logits


def quantization_errors(converter, representative: np.ndarray) -> list[dict]:
    """Per quantized layer: error of its INT8 output against float, worst first (TF Lite's QuantizationDebugger)."""
    import tensorflow as tf

    samples = representative[:DEBUG_SAMPLES]
    with quiet_tensorflow_lite():
        debugger = tf.lite.experimental.QuantizationDebugger(converter=converter, debug_dataset=lambda: ([row[None]] for row in samples))
        debugger.run()
    dump = io.StringIO()
    debugger.layer_statistics_dump(dump)
    rows = []
    for row in csv.DictReader(io.StringIO(dump.getvalue())):
        scale = float(row["scale"])
        rmse = float(row["mean_squared_error"]) ** 0.5
        rows.append({
            "op": row["op_name"],
            "tensor": row["tensor_name"],
            "scale": scale,
            "zero_point": int(float(row["zero_point"])),
            "rmse": rmse,
            "max_abs_error": float(row["max_abs_error"]),
            # Error in quantization steps: ~0.29 (uniform rounding) is the floor; much more means the range is poorly set.
            "rmse_in_steps": rmse / scale if scale else 0.0,
        })
    return sorted(rows, key=lambda r: -r["rmse_in_steps"])


def preflight(model_path: Path, runtime: str) -> dict:
    """Load and invoke the model with ``runtime`` in a separate process (it cannot share one with TensorFlow)."""
    command = [sys.executable, "-m", "edge_build.device.preflight", runtime, str(model_path)]
    result, abnormal = run_isolated(command, PREFLIGHT_TIMEOUT_S)
    if abnormal:
        return {"runtime": runtime, "ok": False, "error": abnormal}
    lines = result.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        return {"runtime": runtime, "ok": False, "error": f"exit {result.returncode}: {(result.stderr.strip().splitlines() or [''])[-1]}"}


def convert(precision: str, inputs: ConversionInputs, profile: TargetProfile, profile_path: Path, model_out: Path, report_out: Path) -> dict:
    """Convert, check and write ``model_out`` and ``report_out``; return the report."""
    from edge_build.tokenizer import token_ids

    hparams = load_hyperparameters(inputs.hparams)
    labels = read_labels(inputs.data_dir / "labels.txt")
    model = load_trained_model(inputs.model_source, hparams, inputs.hparams, inputs.vocab, len(labels), inputs.weights)
    val_texts, val_labels = read_split(inputs.data_dir / "val.tfrecord")
    val_ids = token_ids(inputs.vocab, hparams.tokenizer.lower_case, val_texts, hparams.tokenizer.sequence_length)
    reference = model(val_ids, training=False).numpy()

    representative = None
    if precision == "int8":
        if inputs.representative is None:
            raise StageError("INT8 conversion needs the calibration stage's representative.npy (--representative)")
        representative = np.load(inputs.representative)
        if representative.ndim != 2 or representative.shape[1] != hparams.tokenizer.sequence_length or not len(representative):
            raise StageError(f"{inputs.representative}: expected int32 ids [N, {hparams.tokenizer.sequence_length}], found {representative.shape}")
    converter = make_converter(model, precision, profile, representative)
    started = time.perf_counter()
    with quiet_tensorflow_lite():
        content = converter.convert()
    seconds = time.perf_counter() - started
    where = f"{model_out.name} for {profile_path}"

    ops = inspect_model(content)
    flexless = [r.name for r in profile.runtimes if not r.flex_delegate]
    if ops["flex_ops"] and flexless:
        raise StageError(f"{where}: needs Flex ops {', '.join(ops['flex_ops'])}, which {', '.join(flexless)} cannot run (no Flex delegate)")
    # After the Flex check, which is about the graph alone: a partly loaded model would convert fine and be wrong.
    check_weights_loaded(reference, val_labels, inputs.train_log, inputs.weights)
    figures = parity.compare(reference, run_tflite(content, val_ids), val_labels)
    broken = parity.breaches(f"tflite_{precision}", figures, profile.tolerances)
    if broken:
        print(parity.failure_table([(f"tflite_{precision}", "tf.lite, validation split", problem) for problem in broken]), file=sys.stderr)
        raise StageError(f"{where}: on the validation split against the Keras model, {'; '.join(broken)}")

    report = {
        "artifact": f"tflite_{precision}",
        "target": profile.name,
        "size_bytes": len(content),
        "sha256": hashlib.sha256(content).hexdigest(),
        "converter": {
            "tensorflow": package_versions("tensorflow")["tensorflow"],
            "seconds": round(seconds, 3),
            "optimizations": ["DEFAULT"] if precision == "int8" else [],
            "supported_ops": [str(op).split(".")[-1] for op in converter.target_spec.supported_ops],
            "inference_output_type": profile.quantization.output_type if precision == "int8" else "float32",
            "per_channel_dense": profile.per_channel_dense if precision == "int8" else None,
            "calibration_samples": int(len(representative)) if representative is not None else 0,
        },
        **ops,
        "validation_parity": figures,
    }
    if precision == "int8":
        report["quantization_errors"] = quantization_errors(converter, representative)

    with atomic_outputs(model_out, report_out) as (model_tmp, report_tmp):
        model_tmp.write_bytes(content)
        results = {runtime.name: {**preflight(model_tmp, runtime.name), "model": str(model_out)} for runtime in profile.runtimes}
        failed = {name: r["error"] for name, r in results.items() if not r["ok"]}
        if failed:
            raise StageError(f"{where}: " + "; ".join(f"{name} {results[name].get('version') or ''} cannot run it: {error}" for name, error in failed.items()))
        report["runtimes"] = results
        report_tmp.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.tflite", description=__doc__.splitlines()[0])
    parser.add_argument("--precision", choices=PRECISIONS, required=True)
    parser.add_argument("--profile", type=Path, required=True, help="targets/<name>.toml")
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--vocab", type=Path, required=True)
    parser.add_argument("--weights", type=Path, required=True)
    parser.add_argument("--train-log", type=Path, required=True)
    parser.add_argument("--hparams", type=Path, required=True)
    parser.add_argument("--model-source", type=Path, required=True)
    parser.add_argument("--representative", type=Path, help="representative.npy from the calibration stage (int8)")
    parser.add_argument("--out", type=Path, required=True, help="the .tflite to write")
    parser.add_argument("--report", type=Path, required=True, help="the JSON report to write")
    return parser


def drive(args: argparse.Namespace) -> None:
    profile = load_profile(args.profile.parent, args.profile.stem)
    inputs = ConversionInputs(args.model_source, args.hparams, args.vocab, args.weights, args.train_log, args.data_dir, args.representative)
    report = convert(args.precision, inputs, profile, args.profile, args.out, args.report)
    figures = report["validation_parity"]
    flex = ", ".join(report["flex_ops"]) or "none"
    runtimes = ", ".join(f"{name} {r['version']} ok" for name, r in report["runtimes"].items())
    print(
        f"tflite: {args.out} {report['size_bytes'] / 1e6:.2f} MB; val top-1 agreement {figures['top1_agreement']:.4f}, "
        f"max |Δlogit| {figures['max_abs_logit_error']:.3g}; Flex ops: {flex}; {runtimes}"
    )


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
