"""Raw text -> label as a board does it, timed per article: the pure-Python tokenizer then one INT8 invoke, or one invoke of a raw-text model.

    python benchmarks/device_text_to_label.py BUNDLE --runtime ai-edge-litert --texts texts.json
        [--artifact tflite_int8] --warm-passes 20 --out result.json

Imports only the standard library, numpy, a TF Lite runtime and the bundle's
own ``board/`` package (its tokenizer and runner, checked against its manifest),
with the bundle folder on the path as on a board: it needs no edge-build
checkout. ``end_to_end.py`` starts it in the build's runtime environment (the
board stack's CPython and numpy). ``--artifact`` names the bundle's model: an
ids model (``tflite_int8``) gets the bundle's pure-Python WordPiece tokenizer in
front of it, timed as its own stage; a raw-text model (``tflite_text_int8``) is
handed the UTF-8 text and tokenizes inside its one invoke. The first pass starts
with empty caches, as a freshly started ``classify.py`` does; the warm passes
that follow are what a long-running process sees. Per article and pass: each
stage and the total, in microseconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np


def microseconds_since(started_ns: int) -> float:
    return (time.perf_counter_ns() - started_ns) / 1e3


def pure_python_tokenizer_path(tokenizer, model, sequence_length: int):
    """Text -> (label, {stage: microseconds}) through the bundle's WordPiece tokenizer, then the ids model."""

    def classify(text: str) -> tuple[int, dict[str, float]]:
        started = time.perf_counter_ns()
        ids = tokenizer.encode([text], sequence_length)
        tokenizer_us = microseconds_since(started)
        started = time.perf_counter_ns()
        label = int(np.argmax(model.run(ids)[0]))
        return label, {"tokenizer_us": tokenizer_us, "invoke_us": microseconds_since(started)}

    return classify


def in_model_tokenizer_path(model):
    """Text -> (label, {stage: microseconds}) through a raw-text model: encoding to UTF-8, then one invoke that tokenizes and classifies."""

    def classify(text: str) -> tuple[int, dict[str, float]]:
        started = time.perf_counter_ns()
        label = int(np.argmax(model.run(np.array([text.encode("utf-8")], dtype=object))[0]))
        return label, {"invoke_us": microseconds_since(started)}

    return classify


def timed_passes(classify, texts: list[str], warm_passes: int) -> tuple[list[int], dict, dict]:
    """Labels, and per stage (and ``total_us``) the first pass's microseconds and each article's median over the warm passes."""
    passes = [[classify(text) for text in texts] for _ in range(1 + warm_passes)]
    labels = np.array([[label for label, _ in p] for p in passes])
    if (labels != labels[0]).any():
        raise RuntimeError("the same article got different labels in different passes")
    stages = {key: np.array([[times[key] for _, times in p] for p in passes]) for key in passes[0][0][1]}
    stages["total_us"] = sum(stages.values())
    first = {key: values[0].tolist() for key, values in stages.items()}
    warm = {key: np.median(values[1:], axis=0).tolist() for key, values in stages.items()}
    return labels[0].tolist(), first, warm


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path, help="an unpacked bundle: manifest.json, vocab.txt, the models")
    parser.add_argument(
        "--runtime", required=True, help="a runtime the bundle's board/runtime.py knows: tflite-runtime, ai-edge-litert, tensorflow-cpu"
    )
    parser.add_argument("--artifact", default="tflite_int8", help="the bundle's model, by artifact name (manifest 'models')")
    parser.add_argument("--texts", type=Path, required=True, help="JSON list of the articles")
    parser.add_argument("--warm-passes", type=int, default=20)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.warm_passes < 1:
        parser.error(f"--warm-passes {args.warm_passes}: at least 1")
    # The bundle's board code, as its bench.py and classify.py import it on a board.
    sys.path.insert(0, str(args.bundle.resolve()))
    try:
        from board.bench import Model, peak_rss_mb
        from board.launch import BundleError, verify
        from board.runtime import INTERPRETER_MODULES, RuntimeMissing, runtime_version
        from board.wordpiece import WordPiece
    except ImportError as exc:
        print(f"error: {args.bundle}: cannot import the bundle's board code ({exc})", file=sys.stderr)
        return 2
    if args.runtime not in INTERPRETER_MODULES:
        parser.error(f"--runtime {args.runtime}: one of {', '.join(sorted(INTERPRETER_MODULES))}")
    result = {"runtime": args.runtime, "artifact": args.artifact}
    try:
        manifest = verify(str(args.bundle))
        if args.artifact not in manifest["models"]:
            raise ValueError(f"{args.bundle}: no {args.artifact} in this bundle (it holds {', '.join(manifest['models'])})")
        texts = json.loads(args.texts.read_text(encoding="utf-8"))
        model = Model(args.runtime, str(args.bundle / manifest["models"][args.artifact]), 1, 1)
        tokenizer = None
        if model.takes_text:
            classify = in_model_tokenizer_path(model)
        else:
            started = time.perf_counter()
            tokenizer = WordPiece.from_file(str(args.bundle / "vocab.txt"), manifest["tokenizer"]["lower_case"])
            result["tokenizer_load_ms"] = (time.perf_counter() - started) * 1e3
            classify = pure_python_tokenizer_path(tokenizer, model, manifest["tokenizer"]["sequence_length"])
        labels, first, warm = timed_passes(classify, texts, args.warm_passes)
        if tokenizer is not None:  # counted after the timed passes, whose first one starts from an empty cache
            result["tokens"] = [len(tokenizer.tokenize(text)) for text in texts]
    except (BundleError, RuntimeMissing, OSError, ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result.update(
        runtime_version=runtime_version(args.runtime),
        takes_text=model.takes_text,
        tensorflow_imported="tensorflow" in sys.modules,
        model_load_ms=model.load_ms,
        labels=labels,
        first_pass=first,
        warm=warm,  # per article, the median over the warm passes
        peak_rss_mb=peak_rss_mb(),
    )
    args.out.write_text(json.dumps(result) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
