"""Time what runs inside TensorFlow: a SavedModel's signatures, or TF Lite models on ``tf.lite.Interpreter``.

    python benchmarks/tensorflow_timing.py saved-model SAVED_MODEL --threads N --golden GOLDEN
        --split SPLIT --batches 1 32 --warmup 50 10 --runs 1000 200 --out result.json
    python benchmarks/tensorflow_timing.py tflite MODEL [MODEL ...] --threads 1 2 --golden GOLDEN
        --batches 1 32 --warmup 50 10 --runs 1000 200 --out result.json

``saved-model``: one process per SavedModel and thread count, since TensorFlow
fixes its thread pools when it starts, and the peak resident memory is then that
model's. Each signature is called on a fixed batch (the first golden rows, or
their texts read from the split) made into tensors beforehand, as a TF server
receives them. ``tflite``: TensorFlow's own interpreter, timed by the device
runner's code (``edge_build.board.bench``) in this one process, whose threads
are the interpreter's own. Rows carry the device runner's figures, so every row
of the inference table reads the same.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from edge_build.board.bench import Model, benchmark, peak_rss_mb, percentile_summary  # noqa: E402
from edge_build.board.parity import load_golden  # noqa: E402


def time_calls(call, warmup: int, runs: int) -> dict:
    started = time.perf_counter()
    call()
    first_ms = (time.perf_counter() - started) * 1e3
    for _ in range(warmup):
        call()
    invoke_us = []
    for _ in range(runs):
        started = time.perf_counter_ns()
        call()
        invoke_us.append((time.perf_counter_ns() - started) / 1e3)
    return {"first_invoke_ms": first_ms, "invoke_us": invoke_us}


def time_saved_model(args: argparse.Namespace, golden: dict) -> list[dict]:
    import tensorflow as tf

    (threads,) = args.threads
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    from edge_build.saved_model import SIGNATURE_INPUTS, load
    from edge_build.tfrecord import read_split

    split_texts, _ = read_split(args.split)
    texts = [split_texts[i] for i in golden["test_indices"]]
    started = time.perf_counter()
    loaded = load(args.saved_model)
    load_ms = (time.perf_counter() - started) * 1e3
    rows = []
    for signature, input_name in SIGNATURE_INPUTS.items():
        function = loaded.signatures[signature]
        for batch, warmup, runs in zip(args.batches, args.warmup, args.runs):
            chosen = [i % len(texts) for i in range(batch)]
            inputs = tf.constant(golden["ids"][chosen]) if input_name == "input_ids" else tf.constant([texts[i] for i in chosen])
            call = {input_name: inputs}
            timing = time_calls(lambda function=function, call=call: function(**call), warmup, runs)
            latency = {"load_ms": load_ms, "first_invoke_ms": timing["first_invoke_ms"], **percentile_summary(timing["invoke_us"], batch)}
            rows.append({"model": str(args.saved_model), "signature": signature, "batch": batch, "threads": threads, "latency": latency})
    return rows


def time_tflite(args: argparse.Namespace, golden: dict) -> list[dict]:
    from edge_build.convert.converter import quiet_tensorflow_lite

    rows = []
    for model_path in args.models:
        for batch, warmup, runs in zip(args.batches, args.warmup, args.runs):
            for threads in args.threads:
                with quiet_tensorflow_lite():
                    model = Model("tensorflow", str(model_path), threads, batch)
                latency = benchmark(model, golden, warmup, runs)
                latency.pop("invoke_us")
                rows.append({"model": str(model_path), "batch": batch, "threads": threads, "latency": latency})
    return rows


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tensorflow_timing.py", description=__doc__.splitlines()[0])
    jobs = parser.add_subparsers(dest="job", required=True)
    saved_model = jobs.add_parser("saved-model", help="a SavedModel's classify_ids and serving_default signatures")
    saved_model.add_argument("saved_model", type=Path)
    saved_model.add_argument("--split", type=Path, required=True, help="the split the golden set was drawn from (its test_indices)")
    tflite = jobs.add_parser("tflite", help="TF Lite models on tf.lite.Interpreter")
    tflite.add_argument("models", type=Path, nargs="+")
    for job, threads in ((saved_model, "the one thread count of TensorFlow's pools"), (tflite, "the interpreter's thread counts")):
        job.add_argument("--threads", type=int, nargs="+", required=True, help=threads)
        job.add_argument("--golden", type=Path, required=True)
        job.add_argument("--batches", type=int, nargs="+", required=True)
        job.add_argument("--warmup", type=int, nargs="+", required=True, help="one per batch size")
        job.add_argument("--runs", type=int, nargs="+", required=True, help="one per batch size")
        job.add_argument("--out", type=Path, required=True)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not len(args.batches) == len(args.warmup) == len(args.runs):
        parser.error("--batches, --warmup and --runs need one value per batch size each")
    if args.job == "saved-model" and len(args.threads) != 1:
        parser.error("saved-model takes one --threads value: TensorFlow's thread pools are fixed per process")
    golden = load_golden(str(args.golden))
    rows = time_saved_model(args, golden) if args.job == "saved-model" else time_tflite(args, golden)
    import tensorflow as tf

    result = {"tensorflow": tf.__version__, "rows": rows, "peak_rss_mb": peak_rss_mb()}
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
