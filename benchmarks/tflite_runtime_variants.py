"""What runs fastest on tflite-runtime 2.14 without losing accuracy: the trained model converted several ways.

    python benchmarks/tflite_runtime_variants.py [--quick] [--build-dir build] [--out-dir benchmarks/results]

tflite-runtime 2.14's INT8 kernels are several times slower here than LiteRT's
(the build's INT8 model spends most of its time in the int8 broadcast MUL that
masks the padding). This converts the trained model of the build (its weights,
``model_src/``, the calibration set) in a few ways, runs each on tflite-runtime
with 1 and 2 threads (ai-edge-litert, 1 thread, for comparison) in the device
runner, in the build's runtime environment for the ``host`` profile, and checks the golden set against the reference SavedModel. A variant
runs correctly when it loads, runs and stays within ``targets/host.toml``'s
tolerances: the float32 gate for float32, the INT8 gate (top-1 agreement,
accuracy drop) for every other variant.
"""

from __future__ import annotations

import dataclasses
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

from edge_build.artifacts import ARTIFACTS
from edge_build.board.decision import breaches
from edge_build.config.profile import load_profile
from edge_build.errors import EdgeBuildError
from edge_build.layout import Layout
from edge_build.recipes import RECIPES

THREADS = (1, 2)
COMPARISON_RUNTIME = "ai-edge-litert"
# Variants this close to the fastest are as fast within run-to-run noise here; the summary names them too.
AS_FAST = 1.10
CURRENT = "int8"
FULL_RUNS = (50, 1000)
QUICK_RUNS = (3, 20)


@dataclasses.dataclass(frozen=True)
class Variant:
    name: str
    description: str
    gate: str  # the profile tolerances it must meet: those of tflite_fp32 or tflite_int8


#: The quantization ladder's recipes (``edge_build.recipes``), converted as the tflite stage converts them, then other choices.
VARIANTS = (
    *(Variant(name, recipe.description, "tflite_int8") for name, recipe in RECIPES.items()),
    Variant("int8_int8_logits", "full-integer INT8, per-tensor dense, int8 logits", "tflite_int8"),
    Variant("fp16_weights", "float16 weights, float32 compute", "tflite_int8"),
    Variant("fp32", "float32 (the build's)", "tflite_fp32"),
)


def convert_all(layout: Layout, profile, out_dir: Path) -> dict[str, Path]:
    """Every variant: the recipes as the ladder converts them, the others with the build's converter (``make_converter``) changed."""
    import numpy as np
    import tensorflow as tf

    from edge_build.convert.converter import make_converter, quiet_tensorflow_lite

    model = trained_model(layout)
    representative = np.load(layout.representative)
    paths = recipe_models(model, layout, profile, RECIPES, out_dir)
    for variant in VARIANTS[len(RECIPES) :]:
        converter = make_converter(model, {"fp32": "fp32", "fp16_weights": "fp16"}.get(variant.name, "int8"), profile, representative)
        if variant.name == "int8_int8_logits":
            converter.inference_output_type = tf.int8
        paths[variant.name] = out_dir / f"{variant.name}.tflite"
        with quiet_tensorflow_lite():
            paths[variant.name].write_bytes(converter.convert())
        print(f"converted {variant.name}: {paths[variant.name].stat().st_size} bytes", flush=True)
    return paths


def measure(environment: dict, variant: Variant, path: Path, golden: Path, profile, runs: tuple[int, int], scratch: Path) -> dict:
    row = {"variant": variant.name, "description": variant.description, "size_bytes": path.stat().st_size, "tflite_runtime": {}}
    for threads in THREADS:
        row["tflite_runtime"][threads] = run_device_bench(environment, path, "tflite-runtime", threads, 1, golden, *runs, scratch)
    row[COMPARISON_RUNTIME] = run_device_bench(environment, path, COMPARISON_RUNTIME, 1, 1, golden, *runs, scratch)
    first = row["tflite_runtime"][THREADS[0]]
    if first["status"] != "ok":
        row["problems"] = [first["status"]]
    else:
        row["parity"] = first["parity"]
        row["problems"] = breaches(ARTIFACTS[variant.gate].parity, first["parity"], profile.tolerances.limits())
    row["runs_correctly"] = not row["problems"] and all(r["status"] == "ok" for r in row["tflite_runtime"].values())
    timed = {t: r["latency"]["p50_us"] for t, r in row["tflite_runtime"].items() if r["status"] == "ok"}
    if timed:
        row["best_threads"] = min(timed, key=timed.get)
        row["best_p50_us"] = timed[row["best_threads"]]
    status = "ok" if row["runs_correctly"] else "; ".join(row["problems"]) or "a thread count failed"
    print(f"{variant.name}: {status}, tflite-runtime p50 " + ", ".join(f"{t} thread(s) {p:.1f} us" for t, p in timed.items()), flush=True)
    return row


def p50_cell(result: dict):
    return result["latency"]["p50_us"] if result["status"] == "ok" else result["status"]


def summary_lines(rows: list[dict], converted: Path, current_build: Path) -> list[str]:
    current = next(r for r in rows if r["variant"] == CURRENT)
    correct = [r for r in rows if r["runs_correctly"]]
    if not correct or "best_p50_us" not in current:
        return ["no variant runs correctly on tflite-runtime here" if not correct else f"the current build ({CURRENT}) did not run on tflite-runtime"]
    fastest = min(correct, key=lambda r: r["best_p50_us"])
    lines = [
        f"fastest on tflite-runtime among the variants it runs correctly: {fastest['variant']}, "
        f"p50 {fastest['best_p50_us']:.1f} us with {fastest['best_threads']} thread(s), {fastest['size_bytes'] / 1e3:.0f} kB, "
        f"{ratio(current['best_p50_us'], fastest['best_p50_us']):.1f}x faster than the current INT8 build ({current['best_p50_us']:.1f} us, {current['size_bytes'] / 1e3:.0f} kB)",
    ]
    close = [r for r in correct if r is not fastest and r["best_p50_us"] <= fastest["best_p50_us"] * AS_FAST]
    if close:
        lines.append(
            f"as fast within {AS_FAST - 1:.0%}: "
            + ", ".join(f"{r['variant']} ({r['best_p50_us']:.1f} us, {r['size_bytes'] / 1e3:.0f} kB)" for r in close)
        )
    no_bigger = [r for r in correct if r["size_bytes"] <= current["size_bytes"] * 1.01 and r is not current]
    if no_bigger:
        best_small = min(no_bigger, key=lambda r: r["best_p50_us"])
        lines.append(
            f"at the current build's size (within 1%): {best_small['variant']}, p50 {best_small['best_p50_us']:.1f} us, "
            f"{ratio(current['best_p50_us'], best_small['best_p50_us']):.1f}x faster than the current INT8 build"
        )
    same_bytes = current_build.is_file() and current_build.read_bytes() == converted.read_bytes()
    lines.append(f"the {CURRENT} variant is {'byte for byte' if same_bytes else 'NOT byte for byte'} {current_build}")
    return lines


def table(rows: list[dict]) -> str:
    headers = [
        "variant",
        "what",
        "size kB",
        *(f"tflite-runtime p50 us, {t} thread(s)" for t in THREADS),
        "tflite-runtime p90 us, 1 thread",
        f"{COMPARISON_RUNTIME} p50 us, 1 thread",
        "top-1 agreement",
        "accuracy (reference)",
        "max abs logit error",
        "runs correctly",
    ]
    body = []
    for r in rows:
        figures = r.get("parity")
        first = r["tflite_runtime"][THREADS[0]]
        body.append(
            [
                r["variant"],
                r["description"],
                r["size_bytes"] / 1e3,
                *(p50_cell(r["tflite_runtime"][t]) for t in THREADS),
                first["latency"]["p90_us"] if first["status"] == "ok" else None,
                p50_cell(r[COMPARISON_RUNTIME]),
                figures and figures["top1_agreement"],
                figures and f"{figures['accuracy']:.4f} ({figures['reference_accuracy']:.4f})",
                figures and figures["max_abs_logit_error"],
                "yes" if r["runs_correctly"] else "no: " + ("; ".join(r["problems"]) or "a thread count failed"),
            ]
        )
    return markdown_table(headers, body)


def main(argv: list[str] | None = None) -> int:
    args = argument_parser(
        __doc__.splitlines()[0], build_dir="a finished host build (weights, calibration set, golden set)", runtimes=True
    ).parse_args(argv)
    build = args.build_dir.resolve()
    layout = Layout(build)
    host = layout.target("host")
    if missing_outputs([layout.weights, layout.vocab, layout.data.labels, layout.representative, host.golden], "build the host target first: scons"):
        return 2
    environment = runtime_environment(build, args.runtime_envs)
    if environment is None:
        return 2
    profile = load_profile(REPO / "targets", "host")
    runs = QUICK_RUNS if args.quick else FULL_RUNS
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        try:
            paths = convert_all(layout, profile, scratch)
        except EdgeBuildError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        rows = [measure(environment, v, paths[v.name], host.golden, profile, runs, scratch) for v in VARIANTS]
        lines = summary_lines(rows, paths[CURRENT], host.artifact("tflite_int8"))
    markdown = table(rows) + "\n" + "\n".join(f"- {line}" for line in lines) + "\n"
    results = {
        "build_dir": str(build),
        "runs": {"warmup": runs[0], "runs": runs[1]},
        "tolerances": dataclasses.asdict(profile.tolerances),
        "variants": rows,
        "summary": lines,
    }
    write_results(args.out_dir, "tflite_runtime_variants", results, markdown, args.quick, environment)
    return 0


if __name__ == "__main__":
    sys.exit(main())
