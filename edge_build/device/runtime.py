"""Which interpreter module each device runtime provides, and loading a model with it."""

from __future__ import annotations

import importlib
import sys

#: Runtime name (as in target profiles) -> module holding its ``Interpreter``.
INTERPRETER_MODULES = {
    "tflite-runtime": "tflite_runtime.interpreter",
    "ai-edge-litert": "ai_edge_litert.interpreter",
}


class RuntimeMissing(Exception):
    """The runtime's package is not installed in this Python."""


def interpreter_module(runtime: str):
    try:
        return importlib.import_module(INTERPRETER_MODULES[runtime])
    except ImportError as exc:
        raise RuntimeMissing(f"{runtime} is not installed for {sys.executable} (pip install {runtime})") from exc


def runtime_version(runtime: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(runtime)
    except metadata.PackageNotFoundError:
        return None


def load_interpreter(runtime: str, model_path: str, threads: int | None = None):
    """An allocated ``Interpreter`` for ``model_path`` from ``runtime``'s module."""
    module = interpreter_module(runtime)
    interpreter = module.Interpreter(model_path=model_path, num_threads=threads)
    interpreter.allocate_tensors()
    return interpreter
