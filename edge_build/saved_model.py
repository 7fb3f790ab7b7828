"""Loading the exported SavedModel, and the fresh-process check that it reproduces the trained model.

Its file list reaches ``SConstruct`` through the layout: numpy and TensorFlow load inside the functions.

``python -m edge_build.saved_model check SAVED_MODEL_DIR EXPECTED_NPZ`` loads the
SavedModel exactly as a user would (after ``import tensorflow_text``, without
which the tokenizer ops are unknown), runs ``serving_default`` on the texts stored
in the npz and compares its logits with the stored ones.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from edge_build import cli
from edge_build.errors import StageError

#: Every file an export writes under ``<version>/``; SCons declares exactly these as targets.
FILES = (
    "saved_model.pb",
    "fingerprint.pb",
    "variables/variables.index",
    "variables/variables.data-00000-of-00001",
    "assets/vocab.txt",
    "assets.extra/metadata.json",
)
#: TF Serving replays this file's requests after loading a model, before serving it; the XLA flavour has one.
WARMUP_FILE = "assets.extra/tf_serving_warmup_requests"


def files(jit_compile: bool) -> tuple[str, ...]:
    """The files of one flavour's export, relative to its version directory."""
    return (*FILES, WARMUP_FILE) if jit_compile else FILES


#: Each signature and the name of its one input.
SIGNATURE_INPUTS = {"serving_default": "text", "classify_ids": "input_ids"}
SIGNATURES = tuple(SIGNATURE_INPUTS)


# The fresh process runs the same kernels on the same CPU; anything beyond
# float round-off means the saved graph is not the trained model.
RELOAD_TOLERANCE = 1e-5
_BATCH = 64


def load(path: Path | str):
    """``tf.saved_model.load`` with tensorflow-text's ops registered first."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers CaseFoldUTF8, WordpieceTokenizeWithOffsets, ...)

    if not (Path(path) / "saved_model.pb").is_file():
        raise StageError(f"{path}: no saved_model.pb (run the export stage first)")
    return tf.saved_model.load(str(path))


def serve_in_batches(serve, texts: list[bytes]) -> dict:
    """Call ``serve`` (a string tensor -> dict of tensors) over ``texts`` in batches; numpy outputs, concatenated."""
    import numpy as np
    import tensorflow as tf

    batches = [serve(tf.constant(texts[i : i + _BATCH])) for i in range(0, len(texts), _BATCH)]
    return {key: np.concatenate([b[key].numpy() for b in batches]) for key in batches[0]}


def classify_texts(loaded, texts: list[bytes]) -> dict:
    """Run a loaded SavedModel's ``serving_default`` over ``texts``."""
    serve = loaded.signatures["serving_default"]
    return serve_in_batches(lambda batch: serve(text=batch), texts)


def checked_logits(path: Path, texts: list[bytes], labels: list[str]):
    """``serving_default``'s logits for ``texts``, after checking its label output names their argmax."""
    import numpy as np

    outputs = classify_texts(load(path), texts)
    named = [label.decode("utf-8") for label in outputs["label"]]
    if named != [labels[i] for i in np.argmax(outputs["logits"], axis=-1)]:
        raise StageError(f"{path}: serving_default's label output disagrees with the argmax of its logits")
    return outputs["logits"]


def token_ids(path: Path | str, texts: list[bytes]):
    """Token ids exactly as the SavedModel makes them: its vocabulary asset, lower-casing and sequence length."""
    from edge_build.tokenizer import token_ids as encode_texts

    meta = json.loads((Path(path) / "assets.extra" / "metadata.json").read_text(encoding="utf-8"))
    return encode_texts(Path(path) / "assets" / "vocab.txt", meta["lower_case"], texts, meta["sequence_length"])


def xla_compiled_functions(path: Path | str) -> list[str]:
    """Names of the functions in the SavedModel's graph that XLA must compile (``jit_compile=True``)."""
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((Path(path) / "saved_model.pb").read_bytes())
    return sorted(
        function.signature.name
        for graph in proto.meta_graphs
        for function in graph.graph_def.library.function
        if "_XlaMustCompile" in function.attr and function.attr["_XlaMustCompile"].b
    )


def check_reload(saved_model_dir: Path, expected_npz: Path) -> float:
    """Compare the SavedModel's logits with the expected ones; return the max abs difference."""
    import numpy as np

    expected = np.load(expected_npz, allow_pickle=False)
    loaded = load(saved_model_dir)
    missing = [name for name in SIGNATURES if name not in loaded.signatures]
    if missing:
        raise StageError(f"{saved_model_dir}: missing signature(s) {', '.join(missing)}")
    outputs = classify_texts(loaded, [t.encode("utf-8") for t in expected["texts"].tolist()])
    difference = float(np.max(np.abs(outputs["logits"] - expected["logits"])))
    if not difference <= RELOAD_TOLERANCE:
        raise StageError(f"{saved_model_dir}: reloaded logits differ from the trained model's by {difference:.3g} (allowed {RELOAD_TOLERANCE:g})")
    return difference


def check_in_fresh_process(saved_model_dir: Path, expected_npz: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "edge_build.saved_model", "check", str(saved_model_dir), str(expected_npz)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        lines = [line for line in result.stderr.splitlines() if line.startswith("error:")] or result.stderr.splitlines()[-1:]
        raise StageError(f"{saved_model_dir}: reload check failed in a fresh process: {' '.join(lines) or 'exit ' + str(result.returncode)}")
    print(result.stdout.strip())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.saved_model", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="compare a SavedModel's logits with expected ones")
    check.add_argument("saved_model_dir", type=Path)
    check.add_argument("expected_npz", type=Path, help="npz with 'texts' (str) and 'logits' (float32)")
    return parser


def drive(args: argparse.Namespace) -> None:
    difference = check_reload(args.saved_model_dir, args.expected_npz)
    print(f"reload check: serving_default in a fresh process matches the trained model (max |Δlogit| {difference:.2g})")


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
