"""Code that runs where the model is deployed.

Everything in this package imports only the standard library, numpy and a TF
Lite interpreter (``tflite_runtime`` or ``ai_edge_litert``), runs in its own
process (tflite_runtime and TensorFlow cannot share one), and is meant to be
copied onto a board as it is.
"""

import sys

#: Exit codes of every board-side command, in one place: the build reads them back
#: (runtime_check tells a runtime that is not installed from a model that fails on it).
EXIT_OUTSIDE_TOLERANCES = 1  # parity outside the build's tolerances, or a preflight that did not load and run the model
EXIT_USAGE = 2  # bad arguments, or a bundle, archive or request that fails its checks
EXIT_RUNTIME_MISSING = 3  # the TF Lite runtime asked for is not installed
EXIT_MODEL_FAILED = 4  # the runtime could not load or run the model


def fail(message: object, code: int) -> int:
    """``error: <message>`` as one line on stderr; returns ``code`` to exit with."""
    print(f"error: {' '.join(str(message).split())}", file=sys.stderr)
    return code
