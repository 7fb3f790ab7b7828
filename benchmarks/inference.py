"""Inference side by side: SavedModels in TensorFlow, TF Lite models on every interpreter, and the interpreter's floor.

    python benchmarks/inference.py [--quick] [--build-dir build] [--out-dir benchmarks/results]

Rows: artifact x runtime x batch (1, 32) x threads (1, 2), on the golden set of
the ``host`` build; the artifacts are the build's and the quantization ladder's
later recipes, converted here from the build's weights as the ladder converts them. The CPU and XLA SavedModels' ``classify_ids`` (ids) and
``serving_default`` (text) signatures are timed in a TensorFlow process per
model and thread count, TensorFlow's ``tf.lite.Interpreter`` in one more
(``tensorflow_timing.py``), all in this project's Python; tflite-runtime and
ai-edge-litert run each model in the device runner, a process of its own per
runtime, in the build's runtime environment for the ``host`` profile (its board
stack's CPython and numpy), as the build's runtime checks do. The floor is a
one-op model (an ADD on the int32 ids, converted here) on the same interpreters:
what a call costs before the model does any work. Ratios: the SavedModel
``classify_ids`` call at the same batch and threads over the row (x faster), and
the row over the floor on the same runtime, batch and threads (x floor).
``--quick`` times the SavedModels with one thread only: each TensorFlow
process costs seconds to start.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from common import (
    REPO,
    argument_parser,
    markdown_table,
    missing_outputs,
    ratio,
    recipe_models,
    run_device_bench,
    runtime_environment,
    trained_model,
    write_results,
)

from edge_build.board.parity import load_golden
from edge_build.config.profile import load_profile
from edge_build.isolated import run_isolated
from edge_build.layout import Layout
from edge_build.recipes import RECIPES

BATCHES = (1, 32)
THREADS = (1, 2)
RUNTIMES = ("tensorflow", "tflite-runtime", "ai-edge-litert")
DEVICE_RUNTIMES = ("tflite-runtime", "ai-edge-litert")
# The reference CPU SavedModel, the gpu target's XLA SavedModel and the host target's TF Lite models.
SAVED_MODELS = ("saved_model_cpu", "saved_model_xla")
TFLITE_MODELS = ("tflite_fp32", "tflite_int8")
#: The quantization ladder's later recipes (``edge_build.recipes``; tflite_int8 is its first, ``int8``), converted here as the ladder would.
RECIPE_MODELS = tuple(name for name in RECIPES if name != "int8")
FLOOR = "floor_add"
SIGNATURE_RUNTIME = {"classify_ids": "tensorflow: classify_ids (ids)", "serving_default": "tensorflow: serving_default (text)"}
# Goals of the performance issue, for INT8 at batch 1 on the fastest device runtime.
GOAL_FLOOR_MULTIPLE = 3.0
GOAL_SPEEDUP = 50.0
# (warmup, runs) per batch size; --quick only checks that everything runs.
FULL_RUNS = {1: (50, 1000), 32: (10, 200)}
QUICK_RUNS = {1: (3, 20), 32: (1, 5)}
TENSORFLOW_TIMEOUT_S = 900


def convert_floor(path: Path, sequence_length: int) -> None:
    """The one-op model: int32 ids ``[batch, sequence_length]`` -> ids + 1 (one ADD), TF Lite's default float conversion."""
    import tensorflow as tf

    from edge_build.convert.converter import quiet_tensorflow_lite

    function = tf.function(lambda ids: ids + 1, input_signature=[tf.TensorSpec([None, sequence_length], tf.int32, name="input_ids")])
    converter = tf.lite.TFLiteConverter.from_concrete_functions([function.get_concrete_function()], function)
    with quiet_tensorflow_lite():
        path.write_bytes(converter.convert())


def run_tensorflow(job: list[str], runs: dict, out: Path) -> dict | str:
    """``tensorflow_timing.py`` in its own process: its result, or why there is none."""
    command = [
        sys.executable,
        str(REPO / "benchmarks" / "tensorflow_timing.py"),
        *job,
        "--batches",
        *map(str, BATCHES),
        "--warmup",
        *(str(runs[b][0]) for b in BATCHES),
        "--runs",
        *(str(runs[b][1]) for b in BATCHES),
        "--out",
        str(out),
    ]
    done, abnormal = run_isolated(command, TENSORFLOW_TIMEOUT_S)
    if abnormal or done.returncode != 0:
        return abnormal or "failed: " + (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    return json.loads(out.read_text(encoding="utf-8"))


def time_saved_model(name: str, path: Path, threads: int, golden: Path, split: Path, runs: dict, scratch: Path) -> list[dict]:
    job = ["saved-model", str(path), "--threads", str(threads), "--golden", str(golden), "--split", str(split)]
    result = run_tensorflow(job, runs, scratch / f"{name}-{threads}t.json")
    if isinstance(result, str):
        return [
            {"artifact": name, "runtime": SIGNATURE_RUNTIME[s], "batch": b, "threads": threads, "status": result}
            for s in SIGNATURE_RUNTIME
            for b in BATCHES
        ]
    return [
        {
            "artifact": name,
            "runtime": SIGNATURE_RUNTIME[row["signature"]],
            "batch": row["batch"],
            "threads": threads,
            "status": "ok",
            "runtime_version": result["tensorflow"],
            "latency": row["latency"],
            "peak_rss_mb": result["peak_rss_mb"],
        }
        for row in result["rows"]
    ]


def time_tf_lite_interpreter(models: dict, golden: Path, runs: dict, scratch: Path) -> list[dict]:
    job = ["tflite", *map(str, models.values()), "--threads", *map(str, THREADS), "--golden", str(golden)]
    result = run_tensorflow(job, runs, scratch / "tf-lite-interpreter.json")
    if isinstance(result, str):
        return [
            {"artifact": n, "runtime": "tensorflow", "batch": b, "threads": t, "status": result} for n in models for b in BATCHES for t in THREADS
        ]
    names = {str(path): name for name, path in models.items()}
    return [
        {
            "artifact": names[row["model"]],
            "runtime": "tensorflow",
            "batch": row["batch"],
            "threads": row["threads"],
            "status": "ok",
            "runtime_version": result["tensorflow"],
            "latency": row["latency"],
            "peak_rss_mb": result["peak_rss_mb"],
        }
        for row in result["rows"]
    ]


def time_on_device(environment: dict, name: str, path: Path, golden: Path, runs: dict, scratch: Path) -> list[dict]:
    rows = []
    for runtime in DEVICE_RUNTIMES:
        for batch in BATCHES:
            for threads in THREADS:
                warmup, count = runs[batch]
                # The floor's output is not logits: it is timed only.
                result = run_device_bench(environment, path, runtime, threads, batch, golden, warmup, count, scratch, parity=name != FLOOR)
                rows.append({"artifact": name, "runtime": runtime, "batch": batch, "threads": threads, **result})
                print(
                    f"{name} on {runtime}, batch {batch}, {threads} thread(s): "
                    + (f"p50 {result['latency']['p50_us']:.1f} us" if result["status"] == "ok" else result["status"]),
                    flush=True,
                )
    return rows


def p50(rows: list[dict], **where) -> float | None:
    """The lowest p50 among the rows that ran and match ``where``."""
    found = [r["latency"]["p50_us"] for r in rows if r["status"] == "ok" and all(r[k] == v for k, v in where.items())]
    return min(found, default=None)


def add_ratios(rows: list[dict]) -> None:
    for row in rows:
        if row["status"] != "ok":
            continue
        same = {"batch": row["batch"], "threads": row["threads"]}
        row["x_faster_than_saved_model"] = ratio(
            p50(rows, artifact="saved_model_cpu", runtime=SIGNATURE_RUNTIME["classify_ids"], **same), row["latency"]["p50_us"]
        )
        if row["runtime"] in RUNTIMES:
            row["x_floor"] = ratio(row["latency"]["p50_us"], p50(rows, artifact=FLOOR, runtime=row["runtime"], **same))


def goal_checks(rows: list[dict]) -> dict:
    """INT8 at batch 1 on the fastest device runtime (its best thread count) against its floor and the SavedModel calls (theirs)."""
    candidates = [r for r in rows if r["status"] == "ok" and r["artifact"] == "tflite_int8" and r["runtime"] in DEVICE_RUNTIMES and r["batch"] == 1]
    if not candidates:
        return {"lines": ["INT8 ran on no device runtime: goals not checked"]}
    best = min(candidates, key=lambda r: r["latency"]["p50_us"])
    int8_us = best["latency"]["p50_us"]
    floor_us = p50(rows, artifact=FLOOR, runtime=best["runtime"], batch=1, threads=best["threads"])
    ids_us = p50(rows, artifact="saved_model_cpu", runtime=SIGNATURE_RUNTIME["classify_ids"], batch=1)
    text_us = p50(rows, artifact="saved_model_cpu", runtime=SIGNATURE_RUNTIME["serving_default"], batch=1)
    where = f"INT8 on {best['runtime']} ({best['threads']} thread(s), batch 1): p50 {int8_us:.1f} us"
    floor_multiple, ids_speedup, text_speedup = ratio(int8_us, floor_us), ratio(ids_us, int8_us), ratio(text_us, int8_us)
    floor_met = floor_multiple is not None and floor_multiple <= GOAL_FLOOR_MULTIPLE
    ids_met = ids_speedup is not None and ids_speedup >= GOAL_SPEEDUP
    text_met = text_speedup is not None and text_speedup >= GOAL_SPEEDUP
    nan = float("nan")
    lines = [
        f"{'met' if floor_met else 'NOT met'}: {where} is {floor_multiple or nan:.2f}x the floor ({floor_us or nan:.1f} us; goal <= {GOAL_FLOOR_MULTIPLE:g}x)",
        f"{'met' if ids_met else 'NOT met'}: {where} is {ids_speedup or nan:.1f}x faster than the CPU SavedModel's classify_ids call at its best thread count, "
        f"ids in as here ({ids_us or nan:.0f} us; goal >= {GOAL_SPEEDUP:g}x)",
        f"{'met' if text_met else 'NOT met'}: {where} is {text_speedup or nan:.1f}x faster than its serving_default call at its best thread count, "
        f"text in, tokenization included ({text_us or nan:.0f} us; goal >= {GOAL_SPEEDUP:g}x)",
    ]
    return {
        "floor_met": floor_met,
        "classify_ids_met": ids_met,
        "serving_default_met": text_met,
        "fastest_device_runtime": best["runtime"],
        "threads": best["threads"],
        "int8_p50_us": int8_us,
        "floor_p50_us": floor_us,
        "x_floor": floor_multiple,
        "x_faster_than_classify_ids": ids_speedup,
        "x_faster_than_serving_default": text_speedup,
        "lines": lines,
    }


def table(rows: list[dict]) -> str:
    headers = [
        "artifact",
        "runtime",
        "batch",
        "threads",
        "p50 us",
        "p90 us",
        "p99 us",
        "examples/s",
        "load ms",
        "first call ms",
        "peak RSS MB",
        "x faster than SavedModel call",
        "x floor",
    ]
    body = []
    for r in rows:
        if r["status"] != "ok":
            body.append([r["artifact"], r["runtime"], r["batch"], r["threads"], r["status"], *[None] * 8])
            continue
        latency = r["latency"]
        body.append(
            [
                r["artifact"],
                r["runtime"],
                r["batch"],
                r["threads"],
                latency["p50_us"],
                latency["p90_us"],
                latency["p99_us"],
                latency["examples_per_second"],
                latency["load_ms"],
                latency["first_invoke_ms"],
                r["peak_rss_mb"],
                r.get("x_faster_than_saved_model"),
                r.get("x_floor"),
            ]
        )
    return markdown_table(headers, body)


def main(argv: list[str] | None = None) -> int:
    args = argument_parser(__doc__.splitlines()[0], build_dir="a finished build with the host and gpu targets", runtimes=True).parse_args(argv)
    build = args.build_dir.resolve()
    layout = Layout(build)
    host, gpu = layout.target("host"), layout.target("gpu")
    saved_models = {"saved_model_cpu": layout.reference, "saved_model_xla": gpu.artifact("saved_model_xla")}
    golden, split = host.golden, layout.data.split("test")
    needed = [*layout.reference_files, *gpu.artifact_files("saved_model_xla"), *(host.artifact(name) for name in TFLITE_MODELS), golden, split]
    needed += [layout.weights, layout.representative]
    if missing_outputs(needed, "build the host and gpu targets first: scons target=all"):
        return 2
    environment = runtime_environment(build, args.runtime_envs)
    if environment is None:
        return 2
    runs = QUICK_RUNS if args.quick else FULL_RUNS
    sequence_length = load_golden(str(golden))["ids"].shape[1]
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        models = {name: host.artifact(name) for name in TFLITE_MODELS}
        models |= recipe_models(trained_model(layout), layout, load_profile(REPO / "targets", "host"), RECIPE_MODELS, scratch)
        models[FLOOR] = scratch / f"{FLOOR}.tflite"
        convert_floor(models[FLOOR], sequence_length)
        for name, path in saved_models.items():
            for threads in THREADS[:1] if args.quick else THREADS:
                rows += time_saved_model(name, path, threads, golden, split, runs, scratch)
                print(f"{name} in TensorFlow, {threads} thread(s): done", flush=True)
        rows += time_tf_lite_interpreter(models, golden, runs, scratch)
        for name, path in models.items():
            rows += time_on_device(environment, name, path, golden, runs, scratch)
    order = [*SAVED_MODELS, *TFLITE_MODELS, *RECIPE_MODELS, FLOOR], [*SIGNATURE_RUNTIME.values(), *RUNTIMES]
    rows.sort(key=lambda r: (order[0].index(r["artifact"]), order[1].index(r["runtime"]), r["batch"], r["threads"]))
    add_ratios(rows)
    goals = goal_checks(rows)
    markdown = table(rows) + "\n" + "\n".join(f"- {line}" for line in goals["lines"]) + "\n"
    markdown += (
        "\nPeak RSS of the TensorFlow rows is that of their whole process: one per SavedModel and thread count "
        "(both signatures and batches), one for every tf.lite.Interpreter row.\n"
    )
    write_results(
        args.out_dir,
        "inference",
        {"build_dir": str(build), "runs": {str(b): list(r) for b, r in runs.items()}, "rows": rows, "goals": goals},
        markdown,
        args.quick,
        environment,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
