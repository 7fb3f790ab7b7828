"""Which interpreter module each device runtime provides, and loading a model with it."""

from __future__ import annotations

import importlib
import struct
import sys

#: Runtime name (as in target profiles) -> module holding its ``Interpreter``.
INTERPRETER_MODULES = {
    "tflite-runtime": "tflite_runtime.interpreter",
    "ai-edge-litert": "ai_edge_litert.interpreter",
    # TensorFlow's own tf.lite.Interpreter: the host's reference in benchmarks, never a profile's runtime.
    "tensorflow": "tensorflow.lite.python.interpreter",
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


#: Offset fields of the root ``Model`` table, by field index in TF Lite's schema -> (name, bytes per vector element).
_MODEL_VECTORS = {1: ("operator_codes", 4), 2: ("subgraphs", 4), 3: ("description", 1), 4: ("buffers", 4), 5: ("metadata_buffer", 4), 6: ("metadata", 4), 7: ("signature_defs", 4)}


def check_model_file(path: str) -> None:
    """Raise ``ValueError`` unless ``path`` starts like a whole TF Lite flatbuffer.

    The runtimes do not verify a file before reading it: tflite-runtime 2.14 dies of
    SIGSEGV on a truncated model and answers random bytes with a UTF-8 decoding
    error. The converter writes the model's top-level vectors near its end, so a
    file cut short anywhere but in its last few hundred bytes (operator-code
    tables, which the runtimes' own checks catch) loses one of them.
    """
    with open(path, "rb") as handle:
        content = handle.read()
    if len(content) < 8 or content[4:8] != b"TFL3":
        raise ValueError("not a TF Lite model (no TFL3 flatbuffer identifier at byte 4)")

    def inside(offset: int, size: int, what: str) -> None:
        if not 0 <= offset <= len(content) - size:
            raise ValueError(f"not a whole TF Lite model: its {what} (bytes {offset} to {offset + size}) lie outside the file's {len(content)} bytes; truncated or damaged")

    def read(fmt: str, offset: int, what: str) -> int:
        inside(offset, struct.calcsize(fmt), what)
        return struct.unpack_from(fmt, content, offset)[0]

    root = read("<I", 0, "root table")
    vtable = root - read("<i", root, "root table")
    fields = (read("<H", vtable, "field table") - 4) // 2
    for index, (name, item_bytes) in _MODEL_VECTORS.items():
        field = read("<H", vtable + 4 + 2 * index, "field table") if index < fields else 0
        if field:
            vector = root + field + read("<I", root + field, name)
            inside(vector + 4, item_bytes * read("<I", vector, name), name)


def load_interpreter(runtime: str, model_path: str, threads: int | None = None):
    """An allocated ``Interpreter`` for ``model_path`` from ``runtime``'s module."""
    check_model_file(model_path)
    module = interpreter_module(runtime)
    interpreter = module.Interpreter(model_path=model_path, num_threads=threads)
    interpreter.allocate_tensors()
    return interpreter
