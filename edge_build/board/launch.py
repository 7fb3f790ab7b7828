"""What the board runs from an unpacked bundle: the ``bench.py`` / ``classify.py`` entry points,
and a command line for the bundle checks (``agent.py``: manifest verification, safe extraction).

A bundle is a folder: the TF Lite models, ``vocab.txt``, ``labels.txt``,
``golden.npz``, ``manifest.json`` (SHA-256 and size of every other file, the
build's versions, metrics, tolerances and each model's parity checks), this ``board/`` package and two
launchers. Both launchers refuse to run when a file does not match the manifest.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tarfile
import tempfile
import zipfile

import numpy as np

from . import EXIT_OUTSIDE_TOLERANCES, EXIT_USAGE, fail
from .agent import MANIFEST, BundleError, safe_extract, verify
from .decision import messages, verdicts

__all__ = ["MANIFEST", "BundleError", "bench_main", "classify_main", "safe_extract", "verify"]


def _folder() -> str:
    return os.path.dirname(os.path.abspath(sys.argv[0]))


def artifact_of(manifest: dict, folder: str, model: str) -> str | None:
    """The artifact name of the bundle's model at path ``model``, or ``None`` for a file from elsewhere."""
    path = os.path.normpath(os.path.join(folder, model))
    return next((artifact for artifact, file in manifest["models"].items() if os.path.join(folder, file) == path), None)


def model_path(manifest: dict, folder: str, model: str) -> str:
    """Where ``model`` is: a model of the bundle by artifact name (``tflite_int8``) or file name, or the path of another .tflite file."""
    path = os.path.join(folder, manifest["models"].get(model, model))  # an absolute path stays as it is
    if not os.path.isfile(path):
        listed = ", ".join(f"{artifact} ({file})" for artifact, file in manifest["models"].items())
        raise BundleError(f"{model}: no such model (this bundle's: {listed}; or the path of a .tflite file)")
    return path


def with_defaults(manifest: dict, model: str | None, runtime: str | None) -> tuple[str, str | None]:
    """``model`` and ``runtime`` as asked; without a model, the runtime asked or the bundle's default, and the model the
    build chose for that runtime (``default_models``)."""
    if model is not None:
        return model, runtime
    runtime = runtime or manifest["default_runtime"]
    return manifest.get("default_models", {}).get(runtime, manifest["default_model"]), runtime


def choose_runtime(manifest: dict, artifact: str | None, requested: str | None, model: str) -> str:
    """``requested``, or the runtime the board scripts run ``artifact`` on: the first the manifest names for it.

    A bundle with a raw-text model names each model's runtimes (``model_runtimes``), and a runtime not
    named for a model is refused here, in one line, rather than failing inside the interpreter.
    """
    able = manifest.get("model_runtimes", {}).get(artifact)
    if able is None:
        return requested or manifest["default_runtime"]
    if requested is not None and requested not in able:
        raise BundleError(f"{model}: runs on {' or '.join(able)} only, not {requested} ({MANIFEST})")
    return requested or able[0]


def bench_main(argv: list[str]) -> int:
    """``python3 bench.py [MODEL] [bench options]``: defaults to the bundle's model, runtime and golden set.

    With ``--parity``, the model's figures must pass the checks the build applied to it; ``--text`` tokenizes with the
    bundle's tokenizer, as ``classify.py`` does.
    """
    from .bench import build_parser, execute

    folder = _folder()
    try:
        manifest = verify(folder)
    except BundleError as exc:
        return fail(exc, EXIT_USAGE)
    # No runtime default here: it depends on the model (the first runtime the manifest names for it).
    parser = build_parser(in_bundle=True, runtime=None, golden=os.path.join(folder, "golden.npz"))
    parser.add_argument("--model", dest="model_option", metavar="MODEL", help="the same as MODEL, as classify.py takes it")
    args = parser.parse_args(argv)
    if args.model and args.model_option:
        return fail("give the model once: MODEL or --model MODEL", EXIT_USAGE)
    args.model, args.runtime = with_defaults(manifest, args.model or args.model_option, args.runtime)
    try:
        args.model = model_path(manifest, folder, args.model)
        artifact = artifact_of(manifest, folder, args.model)
        if args.parity and artifact is None:
            raise BundleError(f"{args.model} is not a model of this bundle: the build's parity checks for it are unknown")
        args.runtime = choose_runtime(manifest, artifact, args.runtime, args.model)
    except BundleError as exc:
        return fail(exc, EXIT_USAGE)

    def make_encoder(model):
        return text_encoder(model, folder, manifest)

    if not args.parity:
        return execute(args, make_encoder)
    # The figures come back through a file; not one in the bundle, which holds exactly its manifest's files.
    with tempfile.TemporaryDirectory() as scratch:
        args.out = args.out or os.path.join(scratch, "bench-result.json")
        code = execute(args, make_encoder)
        if code:
            return code
        with open(args.out, encoding="utf-8") as handle:
            figures = json.load(handle)["parity"]
    judged = verdicts(manifest["parity_checks"][artifact], figures, manifest["tolerances"])
    broken = messages(judged, "fail")
    print("parity: " + ("within the build's tolerances" if not broken else "OUTSIDE the build's tolerances: " + "; ".join(broken)))
    # The same rule as the build's: a pass its examples cannot decide is said so, not hidden.
    for message in messages(judged, "undecided"):
        print(f"parity: undecided: {message}")
    return EXIT_OUTSIDE_TOLERANCES if broken else 0


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def text_encoder(model, folder: str, manifest: dict):
    """What ``model`` takes for one text: the UTF-8 bytes for a raw-text model (its tokenizer is inside), else the pure-Python tokenizer's ids."""
    if model.takes_text:
        return lambda text: np.array([text.encode("utf-8")], dtype=object)
    from .wordpiece import WordPiece

    tokenizer = WordPiece.from_file(os.path.join(folder, "vocab.txt"), manifest["tokenizer"]["lower_case"])
    return lambda text: tokenizer.encode([text], manifest["tokenizer"]["sequence_length"])


def model_labels(path: str, manifest: dict) -> list[str]:
    """The class names the model's own metadata packs (``labels.txt`` in the zip after its graph), else the manifest's."""
    try:
        with zipfile.ZipFile(path) as packed:
            return packed.read("labels.txt").decode("utf-8").splitlines()
    except (zipfile.BadZipFile, KeyError, UnicodeDecodeError):
        return manifest["labels"]


def classify_main(argv: list[str]) -> int:
    """``python3 classify.py "some text" [...]``: label and probabilities, from the raw-text model or the ids model after the pure-Python tokenizer."""
    from .bench import open_model
    from .runtime import RuntimeMissing

    parser = argparse.ArgumentParser(prog="classify.py", description="Classify raw text on the board.")
    parser.add_argument("texts", nargs="+", help="one or more texts (use - to read one per line from standard input)")
    parser.add_argument("--model", help="a model of the bundle, by artifact or file name (default: the one the manifest names for the runtime)")
    parser.add_argument("--runtime", help="a runtime that runs the model (default: the first the manifest names for it)")
    parser.add_argument("--json", action="store_true", help="print one JSON object per text")
    args = parser.parse_args(argv)
    folder = _folder()
    try:
        manifest = verify(folder)
        texts = [line.rstrip("\n") for line in sys.stdin if line.strip()] if args.texts == ["-"] else args.texts
        model, runtime = with_defaults(manifest, args.model, args.runtime)
        path = model_path(manifest, folder, model)
        model = open_model(choose_runtime(manifest, artifact_of(manifest, folder, path), runtime, path), path, 1, 1)
        encode = text_encoder(model, folder, manifest)
    except (BundleError, RuntimeMissing, RuntimeError, ValueError) as exc:
        return fail(exc, EXIT_USAGE)
    labels = model_labels(path, manifest)
    for text in texts:
        outputs = model.run(encode(text))
        probabilities = (outputs if model.outputs_scores else softmax(outputs))[0]
        best = int(np.argmax(probabilities))
        if args.json:
            print(json.dumps({"text": text, "label": labels[best], "probabilities": dict(zip(labels, map(float, probabilities)))}))
        else:
            ranked = ", ".join(f"{labels[i]} {probabilities[i]:.3f}" for i in np.argsort(-probabilities))
            print(f"{labels[best]}\t({ranked})")
    model.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python3 -m edge_build.board.launch verify FOLDER`` or ``... extract ARCHIVE DESTINATION``."""
    parser = argparse.ArgumentParser(prog="python3 -m edge_build.board.launch", description="Check or safely unpack a bundle.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("verify", help="check every file against manifest.json").add_argument("folder")
    extract = commands.add_parser("extract", help="unpack, refusing members that would land outside DESTINATION")
    extract.add_argument("archive")
    extract.add_argument("destination")
    args = parser.parse_args(argv)
    try:
        if args.command == "verify":
            manifest = verify(args.folder)
            print(f"{args.folder}: {len(manifest['files'])} files match manifest.json")
        else:
            names = safe_extract(args.archive, args.destination)
            print(f"{args.archive}: {len(names)} entries unpacked into {args.destination}")
    except (BundleError, OSError, tarfile.TarError) as exc:
        return fail(exc, EXIT_USAGE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
