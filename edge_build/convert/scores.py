"""The scores interface: int32 token ids in, softmax scores out, for an app that shows each class's score.

The trained Keras model with a softmax after its logits, converted in float32: the
scores an app reads straight from the output tensor, with the labels in its
metadata. TensorFlow's own interpreter runs it here, fed the tokenize stage's ids.
"""

from __future__ import annotations

import time

from edge_build.convert.converter import converter_settings, make_converter, quiet_tensorflow_lite
from edge_build.convert.job import ConversionJob, Converted


def scores_model(model, sequence_length: int):
    """``model`` with softmax scores out, on the same int32 ids input."""
    import keras

    ids = keras.Input(shape=(sequence_length,), dtype="int32", name="input_ids")
    return keras.Model(ids, keras.ops.softmax(model(ids), axis=-1), name="scores_classifier")


def convert(job: ConversionJob) -> Converted:
    converter = make_converter(scores_model(job.model, job.sequence_length), job.row.precision, job.profile, None)
    started = time.perf_counter()
    with quiet_tensorflow_lite():
        content = converter.convert()
    return Converted(
        content, {"seconds": round(time.perf_counter() - started, 3), **converter_settings(converter)}, {"outputs": "softmax scores (float32)"}
    )
