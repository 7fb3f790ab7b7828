"""Raw text -> label as a board does it, timed per article: the pure-Python tokenizer, then one INT8 invoke.

    python benchmarks/device_text_to_label.py BUNDLE --runtime ai-edge-litert --texts texts.json
        --warm-passes 20 --out result.json

Imports only the standard library, numpy, a TF Lite runtime and the bundle's
own ``board/`` package (its tokenizer and runner, checked against its manifest),
with the bundle folder on the path as on a board: it needs no edge-build
checkout and runs where TensorFlow cannot be. ``end_to_end.py`` starts it in the
build's runtime environment (the board stack's CPython and numpy). The first pass starts with an empty tokenizer cache, as a freshly started
``classify.py`` does; the warm passes that follow are what a long-running
process sees. Per article and pass: tokenizer, invoke (with the argmax) and
total, in microseconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np


def classify_timed(tokenizer, model, text: str, sequence_length: int) -> tuple[int, float, float]:
    """The label index, and the tokenizer's and the invoke's microseconds."""
    started = time.perf_counter_ns()
    ids = tokenizer.encode([text], sequence_length)
    tokenized = time.perf_counter_ns()
    label = int(np.argmax(model.run(ids)[0]))
    done = time.perf_counter_ns()
    return label, (tokenized - started) / 1e3, (done - tokenized) / 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path, help="an unpacked bundle: manifest.json, vocab.txt, the INT8 model")
    parser.add_argument("--runtime", required=True, help="tflite-runtime or ai-edge-litert (the names the bundle's board/runtime.py knows)")
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
    try:
        manifest = verify(str(args.bundle))
        texts = json.loads(args.texts.read_text(encoding="utf-8"))
        started = time.perf_counter()
        tokenizer = WordPiece.from_file(str(args.bundle / "vocab.txt"), manifest["tokenizer"]["lower_case"])
        tokenizer_load_ms = (time.perf_counter() - started) * 1e3
        model = Model(args.runtime, str(args.bundle / manifest["models"]["tflite_int8"]), 1, 1)
    except (BundleError, RuntimeMissing, OSError, ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sequence_length = manifest["tokenizer"]["sequence_length"]
    passes = []
    for _ in range(1 + args.warm_passes):
        passes.append([classify_timed(tokenizer, model, text, sequence_length) for text in texts])
    labels = np.array([[label for label, _, _ in p] for p in passes])
    if (labels != labels[0]).any():
        print("error: the same article got different labels in different passes", file=sys.stderr)
        return 1
    tokenizer_us, invoke_us = (np.array([[row[k] for row in p] for p in passes]) for k in (1, 2))
    result = {
        "runtime": args.runtime,
        "runtime_version": runtime_version(args.runtime),
        "tensorflow_imported": "tensorflow" in sys.modules,
        "tokenizer_load_ms": tokenizer_load_ms,
        "model_load_ms": model.load_ms,
        "labels": labels[0].tolist(),
        "tokens": [len(tokenizer.tokenize(text)) for text in texts],
        "first_pass": {
            "tokenizer_us": tokenizer_us[0].tolist(),
            "invoke_us": invoke_us[0].tolist(),
            "total_us": (tokenizer_us + invoke_us)[0].tolist(),
        },
        # Per article, the median over the warm passes.
        "warm": {
            "tokenizer_us": np.median(tokenizer_us[1:], axis=0).tolist(),
            "invoke_us": np.median(invoke_us[1:], axis=0).tolist(),
            "total_us": np.median((tokenizer_us + invoke_us)[1:], axis=0).tolist(),
        },
        "peak_rss_mb": peak_rss_mb(),
    }
    args.out.write_text(json.dumps(result) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
