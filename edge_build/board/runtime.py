"""The runtime table, and loading a model with a runtime.

One row per version of a TF Lite runtime a profile may check on, holding what
that version can do: the host side (profiles, runtime environments,
conversion) imports this table, and the board uses it to find the
interpreter. Standard library only until a model is loaded.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import struct
import sys
from typing import Literal


@dataclasses.dataclass(frozen=True)
class Runtime:
    """What one version of a TF Lite runtime is and can do, as installed from its wheel.

    Attributes:
      name: the runtime's distribution name, as pip installs it.
      version: the wheel version these facts were checked on.
      interpreter_module: the module holding its ``Interpreter``.
      pythons: the CPython minor versions its wheels are built for (Linux x86_64 and aarch64).
      numpy_below: the numpy major version its C extension cannot load, if any.
      has_flex_delegate: whether its wheels carry the Flex (SELECT_TF_OPS) delegate.
      per_channel_dense: whether it loads TF 2.21's per-channel dense layers
        (FULLY_CONNECTED v12; tflite-runtime 2.14 refuses them, and its aarch64 build crashes).
      quantized_xnnpack: whether its default XNNPACK delegate takes quantized (int8) ops. Where it does not,
        INT8 runs on TF Lite's own int8 kernels, and reductions on reference ones: slower than float32.
        Checked by which nodes of an INT8 model the delegate takes (tests/test_runtime_env.py).
      min_qemu: the oldest qemu-user its aarch64 build runs under, where that matters.
      companions: pip requirements installed beside it without their dependencies
        (tensorflow-text's wheel asks for the full ``tensorflow``; ``tensorflow-cpu`` is the same code).
      dependencies: where set, the wheel installs without its declared dependencies, after these: the ones that
        importing it and its Tasks API need (mediapipe 0.10.21 also declares jax and jaxlib, 550 MB with scipy, which
        neither imports). ``None``: pip resolves the wheel's own.
      text_ops: where its wheels keep tensorflow-text's TF Lite kernels (the in-model tokenizer's
        custom ops), as ``module:attribute`` naming the registerers its interpreter takes; ``None`` if they have none.
      runner: how the board runs a model with it (``bench.open_model``, ``preflight.preflight``): ``interpreter`` (its
        ``Interpreter``) or ``text_classifier`` (a MediaPipe Tasks library: it takes raw text and tokenizes it with the
        tokenizer the model's metadata describes).
      debian_packages: Debian packages of system libraries its wheels load that a minimal board OS lacks (``apt-get install``
        them on the board); an environment with the release's own CPython gets them in its sysroot.
      interfaces: the model interfaces it runs (rows of ``edge_build.interfaces``, an artifact row's ``interface``).
    """

    name: str
    version: str
    interpreter_module: str
    pythons: tuple[str, ...]
    numpy_below: int | None
    has_flex_delegate: bool
    per_channel_dense: bool
    quantized_xnnpack: bool
    min_qemu: tuple[int, int] | None = None
    companions: tuple[str, ...] = ()
    text_ops: str | None = None
    runner: Literal["interpreter", "text_classifier"] = "interpreter"
    debian_packages: tuple[str, ...] = ()
    interfaces: frozenset[str] = frozenset({"ids", "scores"})
    dependencies: tuple[str, ...] | None = None

    @property
    def wheel(self) -> str:
        """Its own pip requirement, pinned: ``name==version``."""
        return f"{self.name}=={self.version}"

    @property
    def requirements(self) -> tuple[str, ...]:
        """pip requirements installed with their dependencies (beside the stack's numpy): its wheel, or its chosen ``dependencies``."""
        return (self.wheel,) if self.dependencies is None else self.dependencies

    @property
    def no_deps_requirements(self) -> tuple[str, ...]:
        """pip requirements installed after ``requirements`` without their dependencies: its wheel where its dependencies
        are chosen, then its companions."""
        return (() if self.dependencies is None else (self.wheel,)) + self.companions


#: What MediaPipe's wheels load on import, even for text: libGL and GLib (its opencv-contrib-python), EGL and GLES
#: (libmediapipe.so). Measured on 1.2.2's aarch64 build under qemu; 0.10.21 is run on x86_64 only, where the machine has them.
MEDIAPIPE_LIBRARIES = ("libgl1", "libglib2.0-0", "libegl1", "libgles2")

#: One row per runtime version whose facts were checked; a profile names a runtime and one of these versions.
RUNTIME_VERSIONS = (
    # Its last release (2023): built against numpy 1, with no wheels past CPython 3.11.
    Runtime(
        "tflite-runtime",
        "2.14.0",
        "tflite_runtime.interpreter",
        ("3.8", "3.9", "3.10", "3.11"),
        numpy_below=2,
        has_flex_delegate=False,
        per_channel_dense=False,
        quantized_xnnpack=False,  # TfLiteXNNPackDelegateOptionsDefault gives flags 0 in its x86_64 and aarch64 wheels
    ),
    # Its successor: numpy 1.23 or later (numpy 2 included). Its aarch64 build crashes on every model under qemu 7.2 and runs under qemu 10.
    Runtime(
        "ai-edge-litert",
        "2.3.0",
        "ai_edge_litert.interpreter",
        ("3.10", "3.11", "3.12", "3.13", "3.14"),
        numpy_below=None,
        has_flex_delegate=False,
        per_channel_dense=True,
        quantized_xnnpack=True,  # QS8|QU8
        min_qemu=(8, 0),
    ),
    # Full TensorFlow's interpreter: its last release whose tf.lite.Interpreter carries the Flex delegate
    # (2.19 and 2.21 have none), with tensorflow-text's TF Lite kernels for the in-model tokenizer. It runs
    # models converted by TF 2.21. It needs numpy 1 and has wheels up to CPython 3.11.
    Runtime(
        "tensorflow-cpu",
        "2.15.1",
        "tensorflow.lite.python.interpreter",
        ("3.9", "3.10", "3.11"),
        numpy_below=2,
        has_flex_delegate=True,
        per_channel_dense=False,
        quantized_xnnpack=True,
        companions=("tensorflow-text==2.15.0", "tensorflow-hub==0.15.0"),
        text_ops="tensorflow_text:tflite_registrar.SELECT_TFTEXT_OPS",
        # The raw-text model needs both: tensorflow-text's kernels and the Flex delegate.
        interfaces=frozenset({"ids", "scores", "text"}),
    ),
    # MediaPipe Tasks' TextClassifier over a BERT-style model with BertTokenizer and labels metadata: its C++ graph
    # tokenizes the raw text. 0.10.21 is the last release whose Python metadata writer imports (1.2.x lacks
    # mediapipe.tasks.cc): the build writes every model's metadata with it, in an environment of its own.
    Runtime(
        "mediapipe",
        "0.10.21",
        "mediapipe.tasks.python.text",
        ("3.9", "3.10", "3.11", "3.12"),
        numpy_below=2,
        has_flex_delegate=False,
        per_channel_dense=True,
        quantized_xnnpack=True,
        debian_packages=MEDIAPIPE_LIBRARIES,
        runner="text_classifier",
        interfaces=frozenset({"tasks"}),
        # What `import mediapipe` and its metadata writer and TextClassifier import: the declared dependencies less jax,
        # jaxlib (which brings scipy), sentencepiece and sounddevice. 905 MB on disk -> 359 MB (env.json's disk_mb).
        dependencies=("absl-py", "attrs>=19.1.0", "flatbuffers>=2.0", "matplotlib", "opencv-contrib-python", "protobuf>=4.25.3,<5"),
    ),
    # One py3-none wheel per platform (a ctypes library), manylinux_2_28 for x86_64 and aarch64; numpy unpinned.
    Runtime(
        "mediapipe",
        "1.2.2",
        "mediapipe.tasks.python.text",
        ("3.9", "3.10", "3.11", "3.12", "3.13", "3.14"),
        numpy_below=None,
        has_flex_delegate=False,
        per_channel_dense=True,
        quantized_xnnpack=True,
        debian_packages=MEDIAPIPE_LIBRARIES,
        runner="text_classifier",
        interfaces=frozenset({"tasks"}),
    ),
)


def _by_name(rows: tuple[Runtime, ...]) -> dict[str, dict[str, Runtime]]:
    table: dict[str, dict[str, Runtime]] = {}
    for row in rows:
        table.setdefault(row.name, {})[row.version] = row
    return table


#: Runtime name -> version -> its row, versions in table order.
RUNTIMES = _by_name(RUNTIME_VERSIONS)
#: The version a profile gets unless its ``[[runtimes]]`` row names another: each runtime's last row.
DEFAULT_VERSIONS = {name: list(versions)[-1] for name, versions in RUNTIMES.items()}
#: Runtime name -> module holding its ``Interpreter`` (every version of a runtime keeps it in one place); ``tensorflow``
#: is TF's own tf.lite.Interpreter, the host's reference in benchmarks, never a profile's runtime.
INTERPRETER_MODULES = {
    **{row.name: row.interpreter_module for row in RUNTIME_VERSIONS},
    "tensorflow": "tensorflow.lite.python.interpreter",
}


class RuntimeMissing(Exception):
    """The runtime's package is not installed in this Python."""


def interpreter_module(runtime: str):
    row = installed_row(runtime)
    if row is not None and row.numpy_below is not None:
        import numpy

        # tflite-runtime 2.14 imports under numpy 2 with only a warning, then fails inside Interpreter().
        if int(numpy.__version__.split(".")[0]) >= row.numpy_below:
            raise RuntimeMissing(f"{runtime} needs numpy<{row.numpy_below}, and {sys.executable} has numpy {numpy.__version__}")
    try:
        return importlib.import_module(INTERPRETER_MODULES[runtime])
    except ModuleNotFoundError as exc:
        if exc.name and INTERPRETER_MODULES[runtime].startswith(exc.name):
            raise RuntimeMissing(f"{runtime} is not installed for {sys.executable} (pip install {runtime})") from exc
        raise RuntimeMissing(f"{runtime} is installed for {sys.executable} but does not import: {exc}") from exc
    except (ImportError, OSError) as exc:  # a shared library its extension needs (libstdc++, libEGL) is missing
        raise RuntimeMissing(f"{runtime} is installed for {sys.executable} but does not import: {exc}") from exc


def installed_row(runtime: str) -> Runtime | None:
    """The table's row for the version of ``runtime`` installed here; a board may hold a version the build did not
    check, and then the row of the version the build checks by default is the best knowledge there is."""
    versions = RUNTIMES.get(runtime)
    if versions is None:
        return None
    return versions.get(runtime_version(runtime) or "", versions[DEFAULT_VERSIONS[runtime]])


def runner_of(runtime: str) -> str:
    """How the board runs a model with the installed ``runtime`` (its row's ``runner``)."""
    row = installed_row(runtime)
    return "interpreter" if row is None else row.runner


def runtime_version(runtime: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(runtime)
    except metadata.PackageNotFoundError:
        return None


#: Offset fields of the root ``Model`` table, by field index in TF Lite's schema -> (name, bytes per vector element).
_MODEL_VECTORS = {
    1: ("operator_codes", 4),
    2: ("subgraphs", 4),
    3: ("description", 1),
    4: ("buffers", 4),
    5: ("metadata_buffer", 4),
    6: ("metadata", 4),
    7: ("signature_defs", 4),
}


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
            raise ValueError(
                f"not a whole TF Lite model: its {what} (bytes {offset} to {offset + size}) lie outside the file's {len(content)} bytes; truncated or damaged"
            )

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


def make_interpreter(runtime: str, model_path: str, threads: int | None = None):
    """``runtime``'s ``Interpreter`` for ``model_path`` (not yet allocated), with tensorflow-text's kernels where the runtime has them."""
    check_model_file(model_path)
    module = interpreter_module(runtime)
    row = installed_row(runtime)
    if row is not None and row.text_ops:
        module_name, attributes = row.text_ops.split(":")
        try:
            registerers = functools.reduce(getattr, attributes.split("."), importlib.import_module(module_name))
        except ImportError as exc:
            companions = " ".join(row.companions)
            raise RuntimeMissing(
                f"{runtime} needs tensorflow-text's TF Lite kernels, which do not import: {exc} (pip install --no-deps {companions})"
            ) from exc
        return module.InterpreterWithCustomOps(model_path=model_path, num_threads=threads, custom_op_registerers=registerers)
    return module.Interpreter(model_path=model_path, num_threads=threads)


def load_interpreter(runtime: str, model_path: str, threads: int | None = None):
    """An allocated ``Interpreter`` for ``model_path`` from ``runtime``'s module."""
    interpreter = make_interpreter(runtime, model_path, threads)
    interpreter.allocate_tensors()
    return interpreter
