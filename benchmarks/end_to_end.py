"""Raw text -> label on the device path, article by article, against the SavedModel's text signature; and on the gateway, the tokenizer in the model against the pure-Python one.

    python benchmarks/end_to_end.py [--quick] [--build-dir build] [--out-dir benchmarks/results]

On every article of the test split: the device path (``device_text_to_label.py``:
the bundle's pure-Python WordPiece tokenizer, ``board/wordpiece.py``, then the
bundle's INT8 model, in a process of its own per runtime, one thread, started as
on a board: the build's runtime environment for the ``host`` profile, with the
bundle and not this checkout on its path) and the reference CPU SavedModel's
``serving_default`` called in-process with one text (TensorFlow on one thread). Figures are per article: the median over the warm
passes, then their p50/p90 across articles; the tokenizer's first pass, from an
empty cache, is reported beside them. The goal line takes the median-length
article (by characters) on the faster runtime.

In the same run, the ``gateway`` bundle's two ways from raw text to a label, each
in a process of its own in the gateway profile's runtime environment: its
raw-text model (``tflite_text_int8``: tensorflow-text's tokenizer inside, custom
and Flex ops) on tensorflow-cpu, and the pure-Python tokenizer + ``tflite_int8``
on tflite-runtime. Per stage and in total for the median-length article, with
each process's load times and peak RSS, and each runtime's installed size where
the environment records it: what the Flex path costs.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import REPO, argument_parser, environment_record, markdown_table, missing_outputs, runtime_environment, write_results

from edge_build.board.launch import MANIFEST
from edge_build.isolated import run_isolated
from edge_build.layout import Layout
from edge_build.runtime_envs import launcher, unavailable
from edge_build.tfrecord import read_split

RUNTIMES = ("tflite-runtime", "ai-edge-litert")
GATEWAY_PROFILE = REPO / "targets" / "gateway.toml"
#: The gateway's two ways from raw text to a label: (the bundle's artifact, the runtime it runs on).
GATEWAY_PATHS = {
    "in-model tokenizer": ("tflite_text_int8", "tensorflow-cpu"),
    "pure-Python tokenizer": ("tflite_int8", "tflite-runtime"),
}
#: What each stage of a path is, by the device script's keys.
STAGES = {
    "tokenizer_us": "tokenizer",
    "invoke_us": "INT8 invoke + argmax",
    "total_us": "text -> label",
}
GOAL_MEDIAN_ARTICLE_MS = 1.0
FULL_WARM_PASSES = 20
QUICK_WARM_PASSES = 2
DEVICE_TIMEOUT_S = 600


def distribution(values) -> dict:
    values = np.asarray(values, dtype=float)
    return {"min": float(values.min()), "median": float(np.median(values)), "p90": float(np.percentile(values, 90)), "max": float(values.max())}


def spread_over_articles(values) -> dict:
    return {"p50_us": float(np.percentile(values, 50)), "p90_us": float(np.percentile(values, 90))}


def saved_model_per_article(saved_model: Path, texts: list[bytes], warm_passes: int) -> dict:
    """``serving_default`` on one text at a time, tensors made beforehand: label and median microseconds per article."""
    import tensorflow as tf

    from edge_build.saved_model import load

    serve = load(saved_model).signatures["serving_default"]
    inputs = [tf.constant([text]) for text in texts]
    labels = [int(np.argmax(serve(text=batch)["logits"].numpy()[0])) for batch in inputs]  # also the first pass: traces and warms up
    timings = np.empty((warm_passes, len(texts)))
    for p in range(warm_passes):
        for i, batch in enumerate(inputs):
            started = time.perf_counter_ns()
            serve(text=batch)
            timings[p, i] = (time.perf_counter_ns() - started) / 1e3
    return {"labels": labels, "total_us": np.median(timings, axis=0).tolist()}


def board_launcher(environment: dict) -> tuple[list[str], dict[str, str]]:
    """The runtime environment's Python as a board has it: its ``pythonpath`` without any checkout of edge-build.

    The device script puts the bundle on its path itself, and imports the bundle's ``board/`` code.
    """
    python, variables = launcher(environment)
    board_path = [p for p in environment["pythonpath"] if not (Path(p) / "edge_build").is_dir()]
    if board_path:
        variables["PYTHONPATH"] = os.pathsep.join(board_path)
    else:
        variables.pop("PYTHONPATH", None)
    return python, variables


def device_per_article(
    environment: dict, bundle: Path, runtime: str, texts_file: Path, warm_passes: int, scratch: Path, artifact: str = "tflite_int8"
) -> dict:
    reason = unavailable(environment, runtime)
    if reason:
        return {"status": f"not run: {reason}"}
    out = scratch / f"{bundle.parent.name}-{artifact}-{runtime}.json"
    python, variables = board_launcher(environment)
    command = [
        *python,
        str(REPO / "benchmarks" / "device_text_to_label.py"),
        str(bundle),
        "--runtime",
        runtime,
        "--artifact",
        artifact,
        "--texts",
        str(texts_file),
        "--warm-passes",
        str(warm_passes),
        "--out",
        str(out),
    ]
    done, abnormal = run_isolated(command, DEVICE_TIMEOUT_S, variables)
    if abnormal or done.returncode != 0:
        return {"status": abnormal or "failed: " + (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1].removeprefix("error: ")}
    return {"status": "ok", **json.loads(out.read_text(encoding="utf-8"))}


def summarize(device: dict, labels: np.ndarray, reference_labels: list[int], median_article: int) -> dict:
    """Per stage the spread over articles and the median-length article's figures; load times, peak RSS, accuracy.

    A raw-text model's one stage is its invoke: no tokenizer stage, no tokenizer to load.
    """
    warm, first = device["warm"], device["first_pass"]
    kept = ("runtime_version", "tensorflow_imported", "tokenizer_load_ms", "model_load_ms", "peak_rss_mb")
    return {
        **{k: device[k] for k in kept if k in device},
        "warm": {k: spread_over_articles(v) for k, v in warm.items()},
        "first_pass": {k: spread_over_articles(v) for k, v in first.items()},
        "median_article": {"warm": {k: warm[k][median_article] for k in warm}, "first_pass": {k: first[k][median_article] for k in first}},
        "accuracy": float(np.mean(np.asarray(device["labels"]) == labels)),
        "agreement_with_saved_model": float(np.mean(np.asarray(device["labels"]) == np.asarray(reference_labels))),
    }


def summarize_all(devices: dict, labels: np.ndarray, reference_labels: list[int], median_article: int) -> dict:
    """``summarize`` per device run; a run that did not finish keeps only its ``status``."""
    return {
        name: summarize(d, labels, reference_labels, median_article) if d["status"] == "ok" else {"status": d["status"]}
        for name, d in devices.items()
    }


def report(lengths: dict, summaries: dict, saved_model: dict, median_article: int, chars: list[int]) -> tuple[str, dict]:
    lines = [
        "Article lengths on the test split:",
        "",
        markdown_table(["", "min", "median", "p90", "max"], [[name, d["min"], d["median"], d["p90"], d["max"]] for name, d in lengths.items()]),
    ]
    headers = ["path", "what", "p50 us", "p90 us", "median-length article us", "accuracy", "agrees with SavedModel"]
    rows = []
    for runtime, s in summaries.items():
        if "status" in s:
            rows.append([f"device, {runtime}", s["status"], None, None, None, None, None])
            continue
        for phase, label in (("warm", "warm cache"), ("first_pass", "first pass, empty cache")):
            for key, what in STAGES.items():
                rows.append(
                    [
                        f"device, {runtime} {s['runtime_version']}",
                        f"{what} ({label})",
                        s[phase][key]["p50_us"],
                        s[phase][key]["p90_us"],
                        s["median_article"][phase][key],
                        s["accuracy"] if key == "total_us" else None,
                        s["agreement_with_saved_model"] if key == "total_us" else None,
                    ]
                )
    rows.append(
        [
            "TensorFlow, CPU SavedModel",
            "serving_default, one text per call",
            saved_model["p50_us"],
            saved_model["p90_us"],
            saved_model["median_article_us"],
            saved_model["accuracy"],
            1.0,
        ]
    )
    lines += ["", markdown_table(headers, rows)]
    ran = {runtime: s for runtime, s in summaries.items() if "status" not in s}
    if not ran:
        goal = {"met": False, "line": "the device path ran on no runtime: goal not checked"}
    else:
        fastest = min(ran, key=lambda r: ran[r]["median_article"]["warm"]["total_us"])
        figure = ran[fastest]["median_article"]
        total_ms = figure["warm"]["total_us"] / 1e3
        met = total_ms <= GOAL_MEDIAN_ARTICLE_MS
        goal = {
            "met": met,
            "runtime": fastest,
            "median_article_total_ms": total_ms,
            "line": (
                f"{'met' if met else 'NOT met'}: the median-length article ({chars[median_article]} characters) text -> label on {fastest}: "
                f"p50 {total_ms:.3f} ms (tokenizer {figure['warm']['tokenizer_us']:.0f} us + invoke {figure['warm']['invoke_us']:.0f} us; "
                f"{figure['first_pass']['total_us'] / 1e3:.3f} ms on the first pass, cache empty; goal <= {GOAL_MEDIAN_ARTICLE_MS:g} ms), "
                f"{saved_model['median_article_us'] / figure['warm']['total_us']:.1f}x faster than the SavedModel's serving_default ({saved_model['median_article_us'] / 1e3:.3f} ms)"
            ),
        }
    imported = [runtime for runtime, s in ran.items() if s["tensorflow_imported"]]
    lines += [
        "",
        f"- {goal['line']}",
        "- tokens: WordPieces before truncation to the model's sequence length; every figure is per article, one text per call, one thread.",
        f"- TensorFlow imported in the device processes: {', '.join(imported) or 'none'}.",
    ]
    return "\n".join(lines) + "\n", goal


def path_stages(summary: dict) -> list[tuple[str, str]]:
    """(key, what) per stage of a path; a raw-text model's whole path is its one invoke."""
    if "tokenizer_us" not in summary["warm"]:
        return [("total_us", "text -> label: one invoke, tokenizer and INT8 classifier inside, + argmax")]
    return list(STAGES.items())


def gateway_comparison(paths: dict, environment: dict, median_article: int, chars: list[int]) -> dict:
    """Both paths on the median-length article, side by side, with their memory and the runtimes' installed size."""
    if any("status" in s for s in paths.values()):
        return {"line": "the two gateway paths did not both run: not compared"}
    (text_name, text), (ids_name, ids) = paths.items()
    text_ms, ids_ms = (s["median_article"]["warm"]["total_us"] / 1e3 for s in (text, ids))
    disk = {runtime: environment["runtimes"][runtime].get("disk_mb") for _, runtime in GATEWAY_PATHS.values()}
    installed = "; installed size " + " vs ".join(f"{runtime} {mb:.0f} MB" for runtime, mb in disk.items()) if all(disk.values()) else ""
    return {
        "median_article_total_ms": {text_name: text_ms, ids_name: ids_ms},
        "peak_rss_mb": {text_name: text["peak_rss_mb"], ids_name: ids["peak_rss_mb"]},
        "installed_mb": disk,
        "line": (
            f"the median-length article ({chars[median_article]} characters), warm: {text_name} ({GATEWAY_PATHS[text_name][0]} on "
            f"{GATEWAY_PATHS[text_name][1]} {text['runtime_version']}) {text_ms:.3f} ms, {ids_name} + {GATEWAY_PATHS[ids_name][0]} on "
            f"{GATEWAY_PATHS[ids_name][1]} {ids['runtime_version']} {ids_ms:.3f} ms (the in-model tokenizer takes {text_ms / ids_ms:.2f}x the time); "
            f"peak RSS {text['peak_rss_mb']:.0f} MB vs {ids['peak_rss_mb']:.0f} MB{installed}"
        ),
    }


def gateway_report(paths: dict, labels_agree: float | None, comparison: dict, environment: dict) -> str:
    from edge_build.runtime_envs import describe

    headers = ["path", "runtime", "what", "p50 us", "p90 us", "median-length article us", "median-length article, first pass us"]
    rows, footprint = [], []
    for name, s in paths.items():
        artifact, runtime = GATEWAY_PATHS[name]
        if "status" in s:
            rows.append([name, runtime, s["status"], None, None, None, None])
            continue
        for key, what in path_stages(s):
            figure = s["median_article"]
            rows.append(
                [
                    name,
                    f"{runtime} {s['runtime_version']}",
                    what,
                    s["warm"][key]["p50_us"],
                    s["warm"][key]["p90_us"],
                    figure["warm"][key],
                    figure["first_pass"][key],
                ]
            )
        footprint.append(
            [
                name,
                artifact,
                s["model_load_ms"],
                s.get("tokenizer_load_ms"),
                s["peak_rss_mb"],
                environment["runtimes"][runtime].get("disk_mb"),
                s["accuracy"],
                s["agreement_with_saved_model"],
                "yes" if s["tensorflow_imported"] else "no",
            ]
        )
    lines = [
        "",
        f"Raw text -> label on the gateway, both paths in its runtime environment ({describe(environment)}), one thread, one text per call:",
        "",
        markdown_table(headers, rows),
        "",
        markdown_table(
            [
                "path",
                "model",
                "model load ms",
                "tokenizer load ms",
                "peak RSS MB",
                "runtime installed MB",
                "accuracy",
                "agrees with SavedModel",
                "TensorFlow imported",
            ],
            footprint,
        ),
        f"- {comparison['line']}",
        "- model load includes importing the runtime (TensorFlow and tensorflow-text for tensorflow-cpu); peak RSS is the whole device process's.",
    ]
    if labels_agree is not None:
        lines.append(f"- the two paths give the same label on {labels_agree:.4f} of the articles.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = argument_parser(
        __doc__.splitlines()[0],
        build_dir="a finished build of the host and gateway targets (their bundles, the reference SavedModel, the test split)",
        runtimes=True,
    ).parse_args(argv)
    build = args.build_dir.resolve()
    layout = Layout(build)
    bundle, saved_model, split = layout.target("host").bundle_dir, layout.reference, layout.data.split("test")
    gateway_bundle = layout.target("gateway").bundle_dir
    if missing_outputs([bundle / MANIFEST, *layout.reference_files, split], "build the host target first: scons"):
        return 2
    if missing_outputs([gateway_bundle / MANIFEST], "build the gateway target first: scons target=gateway"):
        return 2
    environment = runtime_environment(build, args.runtime_envs)
    gateway_environment = runtime_environment(build, args.runtime_envs, GATEWAY_PROFILE)
    if environment is None or gateway_environment is None:
        return 2
    warm_passes = QUICK_WARM_PASSES if args.quick else FULL_WARM_PASSES
    import tensorflow as tf

    # Before TensorFlow runs anything: its pools are fixed then.
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    texts, labels = read_split(split)
    strings = [text.decode("utf-8") for text in texts]
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        texts_file = scratch / "texts.json"
        texts_file.write_text(json.dumps(strings), encoding="utf-8")
        devices = {runtime: device_per_article(environment, bundle, runtime, texts_file, warm_passes, scratch) for runtime in RUNTIMES}
        gateway = {
            name: device_per_article(gateway_environment, gateway_bundle, runtime, texts_file, warm_passes, scratch, artifact)
            for name, (artifact, runtime) in GATEWAY_PATHS.items()
        }
    reference = saved_model_per_article(saved_model, texts, warm_passes)

    chars = [len(s) for s in strings]
    median_article = int(np.argsort(chars)[len(chars) // 2])
    ran = [d for d in devices.values() if d["status"] == "ok"]
    lengths = {"characters": distribution(chars), "words": distribution([len(s.split()) for s in strings])}
    if ran:
        lengths["tokens"] = distribution(ran[0]["tokens"])
    summaries = summarize_all(devices, labels, reference["labels"], median_article)
    saved_model_figures = {
        **spread_over_articles(reference["total_us"]),
        "median_article_us": reference["total_us"][median_article],
        "accuracy": float(np.mean(np.asarray(reference["labels"]) == labels)),
    }
    markdown, goal = report(lengths, summaries, saved_model_figures, median_article, chars)
    gateway_paths = summarize_all(gateway, labels, reference["labels"], median_article)
    both = [d["labels"] for d in gateway.values() if d["status"] == "ok"]
    labels_agree = float(np.mean(np.asarray(both[0]) == np.asarray(both[1]))) if len(both) == 2 else None
    comparison = gateway_comparison(gateway_paths, gateway_environment, median_article, chars)
    markdown += gateway_report(gateway_paths, labels_agree, comparison, gateway_environment)
    results = {
        "build_dir": str(build),
        "articles": len(strings),
        "warm_passes": warm_passes,
        "median_article_index": median_article,
        "lengths": lengths,
        "device": summaries,
        "saved_model_serving_default": saved_model_figures,
        "goal": goal,
        "gateway": {
            "runtime_environment": environment_record(gateway_environment),
            "paths": {name: {"artifact": artifact, "runtime": runtime, **gateway_paths[name]} for name, (artifact, runtime) in GATEWAY_PATHS.items()},
            "labels_agree": labels_agree,
            "comparison": comparison,
        },
    }
    write_results(args.out_dir, "end_to_end", results, markdown, args.quick, environment)
    return 0


if __name__ == "__main__":
    sys.exit(main())
