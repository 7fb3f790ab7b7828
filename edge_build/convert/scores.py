"""The scores interface: int32 token ids in, softmax scores out, for an app that shows each class's score.

The trained Keras model with a softmax after its logits, converted in float32: the
scores an app reads straight from the output tensor, with the labels in its
metadata. TensorFlow's own interpreter runs it here, fed the tokenize stage's ids.
"""

from __future__ import annotations

from edge_build.convert.converter import make_converter, timed_conversion
from edge_build.convert.job import ConversionJob, Converted


def scores_model(model, sequence_length: int):
    """``model`` with softmax scores out, on the same int32 ids input."""
    import keras

    ids = keras.Input(shape=(sequence_length,), dtype="int32", name="input_ids")
    return keras.Model(ids, keras.ops.softmax(model(ids), axis=-1), name="scores_classifier")


def convert(job: ConversionJob) -> Converted:
    content, settings = timed_conversion(make_converter(scores_model(job.model, job.sequence_length), job.row.precision, job.profile, None))
    return Converted(content, settings, {"outputs": "softmax scores (float32)"})
