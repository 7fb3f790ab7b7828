"""The quantization ladder: how ``tflite_int8`` and ``tflite_tasks_int8`` may be quantized, in the order the tflite stage tries them.

The first recipe is the full-integer INT8 the build has always made. When a
recipe's model misses a gate (its parity with the Keras model on the validation
split, on TensorFlow's interpreter and on every required runtime of the profile,
or a runtime that cannot load or run it), the stage tries the next, keeps the
first that passes everything, and records every attempt. A profile narrows or
reorders the ladder with ``[quantization] recipes``. Each recipe trades some of
INT8's size or speed for accuracy, so the order goes from the most integer to
the least:

- ``int8``: int8 weights and activations, calibrated on the representative set;
  dense layers per-channel only where every runtime of the profile loads them.
- ``int8_per_channel``: the same with per-channel dense layers (one scale per
  output unit): skipped where a runtime cannot load them, or where ``int8``
  already has them.
- ``int8_float_worst``: INT8 with the layers that the per-layer quantization
  error table marks worst kept in float (selective quantization, TF Lite's
  ``QuantizationDebugger`` with ``denylisted_nodes``): every layer whose output
  error exceeds ``FLOAT_WORST_STEPS`` quantization steps, and at least the worst.
  It helps where one op's int8 kernel or clipped range is the problem, not where
  one tensor's range is too wide for 256 levels: the per-layer error is measured
  in that tensor's own steps, so a wide range shows there as an ordinary error.
- ``int16x8``: int16 activations and int8 weights (twice the activation
  memory, 256x finer activation steps), ops without a 16x8 kernel left float.
- ``dynamic_range``: int8 weights, float activations (no calibration): the
  smallest float model, with the accuracy of float arithmetic.

Standard library only: the profile validates names against this table.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping

#: The uniform rounding floor is ~0.29 steps; the TF Lite debugging guide keeps layers over 0.7 in float.
FLOAT_WORST_STEPS = 0.7


@dataclasses.dataclass(frozen=True)
class Recipe:
    """A row of the ladder.

    Attributes:
      description: one line for people.
      activations: what the activations are: ``int8``, ``int16`` or ``float``.
      calibrated: converted with the representative set.
      per_channel_dense: dense layers quantized per output unit.
      float_worst: the layers the per-layer error table marks worst stay in float.
    """

    description: str
    activations: str
    calibrated: bool = True
    per_channel_dense: bool = False
    float_worst: bool = False


RECIPES: Mapping[str, Recipe] = types.MappingProxyType(
    {
        "int8": Recipe("full-integer INT8, calibrated", "int8"),
        "int8_per_channel": Recipe("full-integer INT8 with per-channel dense layers", "int8", per_channel_dense=True),
        "int8_float_worst": Recipe(
            f"INT8 with the layers over {FLOAT_WORST_STEPS} steps of error (at least the worst) kept in float", "int8", float_worst=True
        ),
        "int16x8": Recipe("int16 activations, int8 weights (16x8)", "int16"),
        "dynamic_range": Recipe("int8 weights, float activations (dynamic range)", "float", calibrated=False),
    }
)

LADDER = tuple(RECIPES)
