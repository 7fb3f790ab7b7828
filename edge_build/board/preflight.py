"""Can this runtime load and run this model? ``python -m edge_build.board.preflight RUNTIME MODEL``.

Loads the model, allocates its tensors and invokes it once on an all-padding
input, then prints one JSON object: the runtime and its version, the input and
output tensors, and ``ok`` or the runtime's own error message (an unsupported
operator version, a missing kernel, a Flex op without the delegate). A raw-text
model gets a short sentence instead of padding; on a Tasks library (MediaPipe),
its classifier is created from the model and classifies that sentence. A crash
kills this process with a signal; the caller reports that.
"""

from __future__ import annotations

import json
import sys

import numpy as np

from . import EXIT_OUTSIDE_TOLERANCES, EXIT_USAGE
from .runtime import RuntimeMissing, load_interpreter, runner_of, runtime_version
from .tasks import TextClassifierModel


def describe(details: list[dict]) -> list[dict]:
    return [
        {
            "name": d["name"],
            "dtype": np.dtype(d["dtype"]).name,
            "shape": [int(n) for n in d["shape"]],
            "quantization": [float(q) for q in d["quantization"]],
        }
        for d in details
    ]


def sample_input(tensor: dict) -> np.ndarray:
    if tensor["dtype"] in (np.bytes_, np.object_):  # a string tensor: text in
        return np.full(tensor["shape"], b"Preflight: does the model run?", dtype=object)
    return np.zeros(tensor["shape"], dtype=tensor["dtype"])


def preflight(runtime: str, model_path: str) -> dict:
    result = {"runtime": runtime, "version": runtime_version(runtime), "model": model_path, "ok": False, "error": None}
    if runner_of(runtime) == "text_classifier":
        return {**result, **tasks_preflight(runtime, model_path)}
    try:
        interpreter = load_interpreter(runtime, model_path)
        inputs = interpreter.get_input_details()
        result["inputs"], result["outputs"] = describe(inputs), describe(interpreter.get_output_details())
        for tensor in inputs:
            interpreter.set_tensor(tensor["index"], sample_input(tensor))
        interpreter.invoke()
        result["ok"] = True
    except RuntimeMissing as exc:
        result["error"] = f"not installed: {exc}"
    except (RuntimeError, ValueError) as exc:
        result["error"] = " ".join(str(exc).split())
    return result


def tasks_preflight(runtime: str, model_path: str) -> dict:
    """A Tasks library's preflight: create its classifier from the model and classify one sentence."""
    try:
        model = TextClassifierModel(runtime, model_path, None, 1)
        try:
            scores = model.run(np.array([b"Preflight: does the model run?"], dtype=object))
        finally:
            model.close()
    except RuntimeMissing as exc:
        return {"error": f"not installed: {exc}"}
    except (RuntimeError, ValueError) as exc:
        return {"error": " ".join(str(exc).split())}
    return {
        "ok": True,
        "inputs": [{"name": "text", "dtype": "str", "shape": [1]}],
        "outputs": [{"name": "scores", "dtype": "float32", "shape": list(scores.shape)}],
    }


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m edge_build.board.preflight RUNTIME MODEL.tflite", file=sys.stderr)
        return EXIT_USAGE
    result = preflight(*argv)
    print(json.dumps(result))
    return 0 if result["ok"] else EXIT_OUTSIDE_TOLERANCES


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
