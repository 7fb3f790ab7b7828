"""The raw-text TF Lite model: tensorflow-text's tokenizer in front of the trained classifier, converted op path by op path.

The tokenizer is ``FastBertTokenizer`` over the training vocabulary, set to
normalize as training's ``BertTokenizer`` does (lower case, NFD, accents
stripped when ``lower_case``); its ops become tensorflow-text's TF Lite custom
ops. The conversion tries TF Lite builtins alone, then builtins plus custom ops
(kept only if the runtime's tensorflow-text kernels cover every custom op), then
adds SELECT_TF_OPS (Flex) for the rest, and records each attempt.

INT8 calibration cannot run this model here: TF 2.21's calibrator runs the float
model in an interpreter without the Flex delegate. The classifier part is the
ids model's graph, and the tokenizer part has no float tensors, so the
activation ranges are carried over from the ids model calibrated on the same
representative set (``calibrated_ranges``), matched by tensor name; every float
activation of the raw-text model must get one, or the conversion stops.
TensorFlow is imported inside the functions.
"""

from __future__ import annotations

import re
import tempfile
import time
import types
from pathlib import Path

import numpy as np

from edge_build.board.parity import pack_texts
from edge_build.config.profile import TargetProfile
from edge_build.convert.converter import quiet_tensorflow_lite
from edge_build.convert.gates import preflight
from edge_build.convert.job import ConversionJob, Converted
from edge_build.convert.operators import inspect_model
from edge_build.errors import StageError
from edge_build.isolated import run_isolated
from edge_build.runtime_envs import launcher
from edge_build.special_tokens import UNK
from edge_build.tfrecord import read_split

TEXTS_TIMEOUT_S = 600

#: The raw-text model's outputs, in the order the converter numbers them (sorted keys).
LOGITS, TOKEN_IDS = "logits", "token_ids"
STEPS = ("TF Lite builtins", "+ tensorflow-text custom ops", "+ SELECT_TF_OPS (Flex)")


def text_functions(model, vocab: Path, lower_case: bool, sequence_length: int):
    """``(text_fn, ids_fn)``: frozen concrete functions, raw text -> {logits, token_ids} and ids -> {logits}, over the same classifier."""
    import tensorflow as tf
    import tensorflow_text as tf_text
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    tokenizer = tf_text.FastBertTokenizer(
        vocab.read_text(encoding="utf-8").splitlines(),
        token_out_type=tf.int32,
        unknown_token=UNK,
        lower_case_nfd_strip_accents=lower_case,
    )

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def text_fn(text):
        # As tokenizer.encode does in training: the first wordpieces, zero-padded.
        ids = tokenizer.tokenize(text)[:, :sequence_length].to_tensor(default_value=0, shape=[None, sequence_length])
        return {LOGITS: model(ids, training=False), TOKEN_IDS: ids}

    @tf.function(input_signature=[tf.TensorSpec([None, sequence_length], tf.int32, name="ids")])
    def ids_fn(ids):
        return {LOGITS: model(ids, training=False)}

    # Frozen: a converter given the live function keeps the weights as variables the runtime cannot find.
    return (convert_variables_to_constants_v2(text_fn.get_concrete_function()), convert_variables_to_constants_v2(ids_fn.get_concrete_function()))


def converter_for(function, model, step: int):
    """A float converter for the function with the first ``step + 1`` op paths of ``STEPS`` allowed."""
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_concrete_functions([function], model)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS, *([tf.lite.OpsSet.SELECT_TF_OPS] if step >= 2 else [])]
    converter.allow_custom_ops = step >= 1
    return converter


def ops_named_in(error: str) -> list[str]:
    """The TensorFlow ops a converter error lists as unsupported (``tf.Op(...)`` lines)."""
    return sorted(set(re.findall(r"\btf\.(\w+)\(", error)))


def calibrated_ranges(ids_function, model, representative: np.ndarray, per_channel_dense: bool) -> dict[str, tuple[list, list]]:
    """Activation ranges of the ids model calibrated on ``representative``, by tensor name (TF's calibrator, calibration only)."""
    import tensorflow as tf
    from tensorflow.lite.python import schema_py_generated as schema

    converter = tf.lite.TFLiteConverter.from_concrete_functions([ids_function], model)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([row[None]] for row in representative)
    converter._experimental_disable_per_channel_quantization_for_dense_layers = not per_channel_dense
    converter._experimental_calibrate_only = True
    calibrated = schema.ModelT.InitFromPackedBuf(bytearray(converter.convert()), 0)
    return {
        tensor.name.decode(): (list(tensor.quantization.min), list(tensor.quantization.max))
        for tensor in calibrated.subgraphs[0].tensors
        if tensor.quantization is not None and tensor.quantization.min is not None and len(tensor.quantization.min)
    }


def _pack(model) -> bytes:
    import flatbuffers

    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def with_ranges(content: bytes, ranges: dict[str, tuple[list, list]]) -> tuple[bytes, int]:
    """The float model with ``ranges`` on its activations, as the calibrator leaves them; and how many it set.

    Stops on any float activation without a range: the quantizer would leave it float without a word.
    """
    from tensorflow.lite.python import schema_py_generated as schema

    model = schema.ModelT.InitFromPackedBuf(bytearray(content), 0)
    missing, count = [], 0
    for subgraph in model.subgraphs:
        for tensor in subgraph.tensors:
            name = tensor.name.decode()
            constant = model.buffers[tensor.buffer].data is not None and len(model.buffers[tensor.buffer].data) > 0
            if tensor.type != schema.TensorType.FLOAT32 or constant:
                continue
            if name not in ranges:
                missing.append(name)
                continue
            tensor.quantization = tensor.quantization or schema.QuantizationParametersT()
            tensor.quantization.min, tensor.quantization.max = ranges[name]
            count += 1
    if missing:
        raise StageError(f"the ids model's calibration has no range for the raw-text model's float activations {', '.join(missing)}")
    return _pack(model), count


def quantize_with_ranges(converter, ranges: dict[str, tuple[list, list]], per_channel_dense: bool) -> tuple[bytes, int]:
    """INT8 conversion whose calibration step is replaced by ``ranges``: the converter's own quantizer does the rest."""
    import tensorflow as tf
    from tensorflow.lite.python.convert import mlir_quantize
    from tensorflow.lite.python.optimize import calibrator

    applied = {}

    # Mirrors TFLiteConverterBase._quantize (TF 2.21) with calibrate() replaced: same intermediate tensors, same quantizer call.
    def quantize(self, result, input_type, output_type, activations_type, bias_type, allow_float, enable_variable_quantization, debug_options):
        calibrated, applied["count"] = with_ranges(calibrator.add_intermediate_tensors(result), ranges)
        return mlir_quantize(
            calibrated,
            self._experimental_disable_per_channel,
            input_data_type=input_type,
            output_data_type=output_type,
            enable_variable_quantization=enable_variable_quantization,
            disable_per_channel_for_dense_layers=not per_channel_dense,
            debug_options_str=debug_options.SerializeToString(),
        )

    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: iter(())  # never read: quantize() above stands in for calibration
    converter._quantize = types.MethodType(quantize, converter)
    content = converter.convert()
    return finished(content), applied["count"]


def deterministic_flex_options(options: bytes) -> bytes:
    """A Flex op's options with its NodeDef's attributes in a fixed order.

    The converter serializes the NodeDef's attribute map in hash order, which changes
    from process to process: the same model would get different bytes on every build.
    The options are a FlexBuffer vector ``[op name, NodeDef bytes]``; the sorted NodeDef
    has the same length, so it replaces the old bytes in place.
    """
    from flatbuffers import flexbuffers
    from tensorflow.core.framework import node_def_pb2

    serialized = flexbuffers.GetRoot(bytearray(options)).AsVector[1].AsStringBytes
    start = options.find(serialized)
    canonical = node_def_pb2.NodeDef.FromString(serialized).SerializeToString(deterministic=True)
    if start < 0 or len(canonical) != len(serialized):
        raise StageError("a Flex op's options do not hold its NodeDef where TF Lite puts it")
    return options[:start] + canonical + options[start + len(serialized) :]


def finished(content: bytes) -> bytes:
    """The converted model with its signature's outputs named ``logits`` and ``token_ids`` (a frozen function's come out as
    output_0, output_1) and its Flex ops' options in a fixed order (byte-identical rebuilds)."""
    from tensorflow.lite.python import schema_py_generated as schema

    model = schema.ModelT.InitFromPackedBuf(bytearray(content), 0)
    (signature,) = model.signatureDefs
    tensors = model.subgraphs[signature.subgraphIndex].tensors
    for output in signature.outputs:
        output.name = {schema.TensorType.FLOAT32: LOGITS, schema.TensorType.INT32: TOKEN_IDS}[tensors[output.tensorIndex].type].encode()
    for subgraph in model.subgraphs:
        for op in subgraph.operators:
            code = model.operatorCodes[op.opcodeIndex].customCode
            if code and code.startswith(b"Flex"):
                op.customOptions = list(deterministic_flex_options(bytes(op.customOptions)))
    return _pack(model)


def run_texts(model_path: Path, runtime: str, environment: dict, texts: list[bytes], scratch: Path) -> tuple[np.ndarray, np.ndarray]:
    """A raw-text model's logits and token ids for ``texts``, run by ``runtime`` in its runtime environment."""
    texts_file, out_file = scratch / "texts.npz", scratch / "outputs.npz"
    with open(texts_file, "wb") as handle:
        np.savez(handle, **pack_texts(texts))
    python, variables = launcher(environment)
    command = [*python, "-m", "edge_build.board.texts", runtime, str(model_path), str(texts_file), str(out_file)]
    result, abnormal = run_isolated(command, TEXTS_TIMEOUT_S, variables)
    if abnormal or result.returncode != 0:
        raise StageError(
            f"{runtime} could not run the raw-text model on {len(texts)} texts: {abnormal or (result.stderr.strip().splitlines() or [''])[-1]}"
        )
    with np.load(out_file, allow_pickle=False) as outputs:
        return outputs["logits"], outputs["token_ids"]


def first_id_mismatch(split: str, got: np.ndarray, expected: np.ndarray, vocab: list[str]) -> str | None:
    """The first example whose in-model token ids differ from the tokenize stage's, described; None when all match."""
    differing = np.nonzero((got != expected).any(axis=1))[0]
    if not len(differing):
        return None
    example = int(differing[0])
    position = int(np.nonzero(got[example] != expected[example])[0][0])

    def token(i: int) -> str:
        return f"{i} ({vocab[i]!r})" if 0 <= i < len(vocab) else str(i)

    return (
        f"{len(differing)} of {len(got)} {split} texts tokenize differently in the model; the first is {split} example {example}: "
        f"token {position} is {token(int(got[example, position]))}, the training tokenizer gives {token(int(expected[example, position]))}"
    )


def op_path_ladder(text_fn, model, profile: TargetProfile, runtime: str, environment: dict, scratch: Path, where: str) -> tuple[int, list[dict]]:
    """Try builtins, then custom ops, then Flex; the first step whose float model ``runtime`` loads and runs, and every attempt."""
    from tensorflow.lite.python.convert import ConverterError

    attempts: list[dict] = []
    for step, title in enumerate(STEPS):
        if step == len(STEPS) - 1 and not profile.quantization.select_tf_ops:
            raise StageError(
                f"{where}: {attempts[-1]['reason']}, and the SELECT_TF_OPS fallback is off (allowed: select_tf_ops = true in [quantization])"
            )
        try:
            with quiet_tensorflow_lite():
                content = converter_for(text_fn, model, step).convert()
        except ConverterError as exc:
            reason = f"the converter found no TF Lite builtin for {', '.join(ops_named_in(str(exc)))}"
            attempts.append({"step": title, "ok": False, "reason": reason, "custom_ops": [], "flex_ops": []})
            continue
        ops = inspect_model(content)
        probe_model = scratch / f"step{step}.tflite"
        probe_model.write_bytes(content)
        probe = preflight(probe_model, runtime, environment)
        reason = "loads and runs" if probe["ok"] else probe["error"]
        attempts.append(
            {
                "step": title,
                "ok": probe["ok"],
                "reason": f"{runtime} {probe.get('version') or ''}: {reason}",
                "custom_ops": ops["custom_ops"],
                "flex_ops": ops["flex_ops"],
            }
        )
        if probe["ok"]:
            return step, attempts
    raise StageError(f"{where}: no op path gives a model {runtime} runs: {'; '.join(a['step'] + ': ' + a['reason'] for a in attempts)}")


def op_paths(ops: dict, attempts: list[dict]) -> dict:
    """Which path each op of the final model took, and why (read from the attempts that failed before it)."""
    custom_step = next((a for a in attempts if a["step"] == STEPS[1]), None)
    unresolved = set(re.findall(r"unresolved custom op: (\w+)", custom_step["reason"])) if custom_step else set()
    tried_as_custom = set(custom_step["custom_ops"]) if custom_step else set()

    def why_flex(op: str) -> str:
        name = op.removeprefix("Flex")
        if name in unresolved:
            return "no TF Lite builtin and no tensorflow-text kernel: the runtime refused it as a custom op"
        if name in tried_as_custom:
            return "no TF Lite builtin; with SELECT_TF_OPS on, the converter takes Flex for every op on the Flex allow-list"
        return "no TF Lite builtin"

    return {
        "builtin": sorted({o["op"] for o in ops["operators"] if o["kind"] == "builtin"}),
        "custom": {op: "tensorflow-text's TF Lite kernel (not on the Flex allow-list)" for op in ops["custom_ops"]},
        "flex": {op: why_flex(op) for op in ops["flex_ops"]},
    }


def convert(job: ConversionJob) -> Converted:
    """The raw-text model: op-path ladder, INT8 with the ids model's ranges, then its own token ids checked on every validation and test text."""
    model, hparams, profile, representative, environment = job.model, job.hparams, job.profile, job.representative, job.environment
    val_ids, test_ids, where = job.val_ids, job.test_ids, job.where
    test_records = job.file("test")
    artifact_runtimes = profile.runtimes_for(job.artifact)
    runtime = artifact_runtimes[0].name
    text_fn, ids_fn = text_functions(model, job.files.vocab, hparams.tokenizer.lower_case, hparams.tokenizer.sequence_length)
    with tempfile.TemporaryDirectory() as scratch:
        started = time.perf_counter()
        step, attempts = op_path_ladder(text_fn, model, profile, runtime, environment, Path(scratch), where)
        with quiet_tensorflow_lite():
            ranges = calibrated_ranges(ids_fn, model, representative, profile.per_channel_dense)
            content, ranged = quantize_with_ranges(converter_for(text_fn, model, step), ranges, profile.per_channel_dense)
        seconds = time.perf_counter() - started
        model_file = Path(scratch) / "model.tflite"
        model_file.write_bytes(content)
        val_texts, _ = read_split(job.files.val)
        test_texts, _ = read_split(test_records)
        # One run for both splits: the runtime's start (importing TensorFlow) is most of it.
        logits, model_ids = run_texts(model_file, runtime, environment, val_texts + test_texts, Path(scratch))
        val_logits, test_logits = logits[: len(val_texts)], logits[len(val_texts) :]
        val_model_ids, test_model_ids = model_ids[: len(val_texts)], model_ids[len(val_texts) :]
    vocab = job.files.vocab.read_text(encoding="utf-8").splitlines()
    for split, got, expected in (("validation", val_model_ids, val_ids), ("test", test_model_ids, test_ids)):
        mismatch = first_id_mismatch(split, got, expected, vocab)
        if mismatch:
            raise StageError(f"{where}: the in-model tokenizer does not give the training tokenizer's ids: {mismatch}")
    ops = inspect_model(content)
    version = next(a["reason"].split(":")[0] for a in attempts if a["ok"])
    record = {
        "conversion_path": attempts,
        "op_paths": op_paths(ops, attempts),
        "calibration": {
            "route": "activation ranges carried over from the ids model calibrated on representative.npy",
            "why": (
                "TF 2.21's calibrator runs the float model in an interpreter without the Flex delegate, so it cannot run this model; "
                "the classifier part is the ids model's graph and the tokenizer part has no float tensors, so every float activation "
                "takes the range the ids model's calibration measured on the same representative set, matched by tensor name"
            ),
            "samples": int(len(representative)),
            "float_activations": ranged,
        },
        "token_ids_check": {"runtime": version, "examples": int(len(val_ids) + len(test_ids)), "splits": ["validation", "test"], "mismatches": 0},
        "test_logits_runtime": version,
    }
    settings = {
        "seconds": round(seconds, 3),
        "optimizations": ["DEFAULT"],
        "supported_ops": ["TFLITE_BUILTINS", *(["SELECT_TF_OPS"] if step >= 2 else [])],
        "allow_custom_ops": step >= 1,
    }
    return Converted(content, settings, record, val_logits, test_logits)
