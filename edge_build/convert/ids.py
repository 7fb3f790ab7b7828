"""The ids interface: int32 token ids in, logits out, converted from the Keras model as it is.

A float model (``fp32``, ``fp16`` weights) converts in one step; a calibrated one
climbs the quantization ladder (``edge_build.convert.ladder``). TensorFlow's own
interpreter runs it here, fed the tokenize stage's ids (``converter.run_tflite``).
"""

from __future__ import annotations

from edge_build.convert.converter import make_converter, timed_conversion
from edge_build.convert.job import ConversionJob, Converted
from edge_build.convert.ladder import quantize_by_ladder


def convert(job: ConversionJob) -> Converted:
    return quantize_by_ladder(job) if job.row.calibrated else convert_float_model(job)


def convert_float_model(job: ConversionJob) -> Converted:
    converter = make_converter(job.model, job.row.precision, job.profile, None)
    content, settings = timed_conversion(converter)
    if converter.target_spec.supported_types:
        settings["supported_types"] = [t.name for t in converter.target_spec.supported_types]
    return Converted(content, settings, {})
