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
import types
from pathlib import Path

import numpy as np

from edge_build.errors import StageError
from edge_build.special_tokens import UNK

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
