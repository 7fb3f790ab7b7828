"""TF Lite on the build machine: the converter set up for each precision, and TensorFlow's own interpreter.

The tflite stage converts with ``make_converter``; the benchmarks reuse it. ``run_tflite``
is the host's reference interpreter. TensorFlow is imported inside the functions:
importing this module costs nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import time
import warnings
from pathlib import Path

import numpy as np

from edge_build.config.profile import TargetProfile
from edge_build.recipes import RECIPES


@contextlib.contextmanager
def quiet_tensorflow_lite():
    """Silence what TF Lite's Python side says on every call and nobody here can act on.

    Keras prints the endpoints of the temporary SavedModel each conversion makes;
    ``tf.lite.Interpreter`` warns it is deprecated in favour of ai-edge-litert
    (the runtime checks use the profile's runtimes; this one is the host reference);
    the converter warns about the int32 ids input, which is not quantized by design.
    """
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\s*Warning: tf.lite.Interpreter is deprecated", category=UserWarning)
        # The int32 ids input is not quantized by design; the converter warns that it has no statistics for it.
        warnings.filterwarnings("ignore", message="Statistics for quantized inputs were expected", category=UserWarning)
        yield


def float16_weights(converter, tf, profile: TargetProfile, representative: np.ndarray | None) -> None:
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.target_spec.supported_types = [tf.float16]


def full_integer(converter, tf, profile: TargetProfile, representative: np.ndarray | None) -> None:
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([row[None]] for row in representative)
    if profile.quantization.output_type == "int8":
        converter.inference_output_type = tf.int8
    # tflite-runtime 2.14 cannot load TF 2.21's per-channel dense layers, and its aarch64 build crashes on them.
    converter._experimental_disable_per_channel_quantization_for_dense_layers = not profile.per_channel_dense


#: Each precision's converter option (float32 takes the converter as it comes): with the artifact's row, all an artifact needs.
CONVERTER_OPTIONS = {"fp32": lambda *_: None, "fp16": float16_weights, "int8": full_integer}


def make_converter(model, precision: str, profile: TargetProfile, representative: np.ndarray | None):
    """A ``TFLiteConverter`` for the Keras model, set up as the precision and the profile ask.

    ``from_keras_model``, not a ``tf.Module`` wrapper: a Keras 3 model saved inside a
    module converts to a weightless model of VAR_HANDLE ops without any error.
    """
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    CONVERTER_OPTIONS[precision](converter, tf, profile, representative)
    if profile.quantization.select_tf_ops:
        converter.target_spec.supported_ops = [*converter.target_spec.supported_ops, tf.lite.OpsSet.SELECT_TF_OPS]
    return converter


def recipe_converter(model, name: str, profile: TargetProfile, representative: np.ndarray):
    """A ``TFLiteConverter`` for quantization recipe ``name`` (``edge_build.recipes``); ``int8`` is ``make_converter``'s INT8.

    A recipe that leaves some ops float or int16 lists TFLITE_BUILTINS after its own op set: the
    converter then keeps an op it cannot quantize that way in float instead of failing.
    """
    import tensorflow as tf

    recipe = RECIPES[name]
    converter = make_converter(model, "int8" if recipe.calibrated else "fp32", profile, representative)
    if not recipe.calibrated:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter._experimental_disable_per_channel_quantization_for_dense_layers = not (recipe.per_channel_dense or profile.per_channel_dense)
    ops = {
        "int8": [tf.lite.OpsSet.TFLITE_BUILTINS_INT8],
        "int16": [tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8, tf.lite.OpsSet.TFLITE_BUILTINS],
        "float": [tf.lite.OpsSet.TFLITE_BUILTINS],
    }[recipe.activations]
    if recipe.float_worst:
        ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if recipe.activations != "int8":
        converter.inference_output_type = tf.float32  # an int8 output is full INT8's alone
    converter.target_spec.supported_ops = [*ops, *([tf.lite.OpsSet.SELECT_TF_OPS] if profile.quantization.select_tf_ops else [])]
    return converter


def converter_settings(converter) -> dict:
    """What a conversion record says of a converter: its optimizations and op sets, by name."""
    return {
        "optimizations": [str(o).split(".")[-1] for o in converter.optimizations],
        "supported_ops": [str(op).split(".")[-1] for op in converter.target_spec.supported_ops],
    }


def timed_conversion(converter) -> tuple[bytes, dict]:
    """The converter's model, and its settings after the seconds the conversion took (a conversion record's ``converter``)."""
    started = time.perf_counter()
    with quiet_tensorflow_lite():
        content = converter.convert()
    return content, {"seconds": round(time.perf_counter() - started, 3), **converter_settings(converter)}


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


def conversion_mismatch(model: Path, record: dict) -> str | None:
    """What differs between the model file and what its conversion record says was written, or None.

    The runtime checks and the report both trust a ``.tflite`` only as converted: runtimes may
    crash on a damaged flatbuffer, and the report scores the model by the logits recorded at conversion.
    """
    content = model.read_bytes()
    if len(content) != record["size_bytes"]:
        return f"corrupted: {model} has {len(content)} bytes, the conversion wrote {record['size_bytes']} (truncated or replaced; delete it and run scons to rebuild it)"
    if hashlib.sha256(content).hexdigest() != record["sha256"]:
        return f"corrupted: {model}'s SHA-256 differs from the one recorded at conversion (delete it and run scons to rebuild it)"
    return None
