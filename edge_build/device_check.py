"""Stage *device_check*: parity and latency of every TF Lite artifact on the profile's device runtimes.

Reads the reference CPU SavedModel, the target's ``.tflite`` files, the profile and
``test.tfrecord``; writes ``golden.npz`` (the golden set: token ids, labels and the
reference's logits for N test examples), ``device_checks.json`` and
``latency.png`` into the target directory.

For each artifact and runtime, ``python -m edge_build.device.bench`` runs in its
own process, exactly as on a board (tflite_runtime cannot share a process with
TensorFlow): it runs the golden set and times invokes. Here its logits are
compared with the reference (top-1 agreement, logit errors, accuracy) and with
TensorFlow's own ``tf.lite.Interpreter`` on the same file, which tells a
runtime-version difference from a quantization one. A missing runtime, a model
that fails to load, a crash (a signal), a timeout, a tolerance or a latency
budget broken: each fails the stage with a table of what broke.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from edge_build import cli, parity, saved_model
from edge_build.atomic import atomic_outputs
from edge_build.config import ARTIFACTS, TargetProfile, load_profile
from edge_build.errors import StageError
from edge_build.isolated import run_isolated
from edge_build.records import read_labels, read_split

OUTPUT_FILES = ("golden.npz", "device_checks.json", "latency.png")
EXIT_RUNTIME_MISSING = 3


def build_golden(reference: Path, data_dir: Path, examples: int) -> dict:
    """``examples`` test-split examples, evenly spread over the (class-ordered) split, with the reference's logits."""
    labels = read_labels(data_dir / "labels.txt")
    texts, y_true = read_split(data_dir / "test.tfrecord")
    chosen = np.unique(np.linspace(0, len(texts) - 1, min(examples, len(texts))).round().astype(int))
    texts = [texts[i] for i in chosen]
    return {
        "ids": saved_model.token_ids(reference, texts).astype(np.int32),
        "labels": y_true[chosen].astype(np.int32),
        "reference_logits": saved_model.checked_logits(reference, texts, labels).astype(np.float32),
        "label_names": np.array(labels),
        "test_indices": chosen.astype(np.int32),
    }


def runner(device_env: dict | None) -> tuple[list[str], dict]:
    """The command prefix and environment that start the device's Python.

    Without a provisioned environment, this machine's interpreter (the target's
    architecture is this machine's); with one, its native venv or its emulated
    aarch64 CPython, whose timings the runner then flags as emulated.
    """
    if device_env is None:
        return [sys.executable], dict(os.environ)
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(device_env["pythonpath"])}
    if device_env["emulated"]:
        environment["EDGE_BUILD_EMULATED"] = "1"
    return list(device_env["python"]), environment


def run_on_device(model: Path, runtime: str, golden: Path, profile: TargetProfile, scratch: Path, device_env: dict | None = None) -> dict:
    """The device runner in its own process; failures come back as a ``status``, not an exception."""
    settings = profile.device
    if device_env is not None and not device_env["runtimes"][runtime]["checkable"]:
        return {"status": f"not checkable here: {device_env['runtimes'][runtime]['reason']}"}
    out, outputs = scratch / f"{model.stem}-{runtime}.json", scratch / f"{model.stem}-{runtime}.npy"
    python, environment = runner(device_env)
    command = [
        *python, "-m", "edge_build.device.bench", str(model), "--runtime", runtime, "--golden", str(golden),
        "--threads", str(settings.threads), "--batch", str(settings.batch), "--warmup", str(settings.warmup),
        "--runs", str(settings.runs), "--out", str(out), "--outputs", str(outputs),
    ]
    done, abnormal = run_isolated(command, settings.timeout_s, environment)
    if abnormal:
        return {"status": abnormal}
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1].removeprefix("error: ")
        return {"status": ("missing: " if done.returncode == EXIT_RUNTIME_MISSING else "failed: ") + reason}
    return {"status": "ok", **json.loads(out.read_text(encoding="utf-8")), "logits": np.load(outputs)}


def integrity_problem(model: Path, record: dict) -> str | None:
    """Whether the file is still what the conversion stage wrote (runtimes may crash on a damaged flatbuffer)."""
    content = model.read_bytes()
    if len(content) != record["size_bytes"]:
        return f"corrupted: {model} has {len(content)} bytes, the conversion wrote {record['size_bytes']} (truncated or replaced; delete it and run scons to rebuild it)"
    if hashlib.sha256(content).hexdigest() != record["sha256"]:
        return f"corrupted: {model}'s SHA-256 differs from the one recorded at conversion (delete it and run scons to rebuild it)"
    return None


def check_artifact(name: str, model: Path, golden: dict, golden_path: Path, profile: TargetProfile, scratch: Path, device_env: dict | None) -> dict:
    from edge_build.tflite import run_tflite

    problem = integrity_problem(model, json.loads((model.parent / f"{name}.json").read_text(encoding="utf-8")))
    if problem:
        return {runtime.name: {"status": problem, "problems": [problem]} for runtime in profile.runtimes}
    host_logits = run_tflite(model.read_bytes(), golden["ids"])
    results = {}
    for runtime in profile.runtimes:
        outcome = run_on_device(model, runtime.name, golden_path, profile, scratch, device_env)
        # A runtime the profile does not require is reported when it cannot run here; it gates only on what it ran.
        problems = [] if outcome["status"] == "ok" or not runtime.required else [outcome["status"]]
        if outcome["status"] == "ok":
            device_logits = outcome.pop("logits")
            host = parity.compare(host_logits, device_logits, golden["labels"])
            outcome["runtime_vs_tf_lite"] = {k: host[k] for k in ("max_abs_logit_error", "top1_agreement", "disagreeing_examples")}
            problems += parity.breaches(name, outcome["parity"], profile.tolerances)
            budget_ms = profile.latency.int8_p50_ms if name == "tflite_int8" else profile.latency.fp32_p50_ms
            p50_ms = outcome["latency"]["p50_us"] / 1e3
            outcome["latency_budget_ms"] = budget_ms
            if p50_ms > budget_ms:
                if outcome["emulated"]:
                    outcome["latency_note"] = f"p50 {p50_ms:.3f} ms over the {budget_ms:g} ms budget, not enforced: emulated timings"
                else:
                    problems.append(f"p50 {p50_ms:.3f} ms (budget <= {budget_ms:g} ms)")
            if problems and outcome["parity"]["disagreeing_examples"]:
                problems.append(f"top-1 differs on golden examples {outcome['parity']['disagreeing_examples'][:10]}")
        outcome["problems"] = problems
        results[runtime.name] = outcome
    return results


def plot_latency(checks: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = [(f"{a}\n{rt}", r["latency"]["invoke_us"]) for a, per in checks.items() for rt, r in per.items() if r["status"] == "ok"]
    figure, axes = plt.subplots(figsize=(max(4, 2.2 * len(series)), 4))
    if series:
        axes.boxplot([values for _, values in series], showfliers=True)
        axes.set_xticks(range(1, len(series) + 1), [label for label, _ in series])
        axes.set_yscale("log")
    axes.set_ylabel("per-invoke latency (µs, log scale)")
    axes.set_title("Device runtime latency per invoke")
    figure.tight_layout()
    figure.savefig(path, format="png", dpi=100, metadata={"Software": None})
    plt.close(figure)


def device_checks(profile: TargetProfile, reference: Path, target_dir: Path, data_dir: Path, device_env: Path | None = None) -> dict:
    environment = json.loads(device_env.read_text(encoding="utf-8")) if device_env else None
    golden = build_golden(reference, data_dir, profile.device.golden_examples)
    outputs = [target_dir / name for name in OUTPUT_FILES]
    with atomic_outputs(*outputs) as (golden_tmp, checks_tmp, plot_tmp), tempfile.TemporaryDirectory() as scratch:
        with open(golden_tmp, "wb") as handle:
            np.savez(handle, **golden)
        checks = {
            name: check_artifact(name, target_dir / ARTIFACTS[name].path, golden, golden_tmp, profile, Path(scratch), environment)
            for name in profile.tflite_artifacts
        }
        if any(r["problems"] for per in checks.values() for r in per.values()):
            rows = [(artifact, runtime, problem) for artifact, per in checks.items() for runtime, r in per.items() for problem in r["problems"]]
            print(parity.failure_table(rows), file=sys.stderr)
            raise StageError(f"{target_dir}: device checks failed for targets/{profile.name}.toml (table above)")
        summary = {"target": profile.name, "device_env": environment, "golden_examples": int(len(golden["labels"])), "settings": dataclasses.asdict(profile.device), "checks": checks}
        checks_tmp.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        plot_latency(checks, plot_tmp)
    return summary


def summary_lines(summary: dict) -> list[str]:
    lines = []
    for artifact, per in summary["checks"].items():
        for runtime, r in per.items():
            if r["status"] != "ok":
                lines.append(f"device: {artifact} on {runtime}: {r['status']}")
                continue
            p, latency = r["parity"], r["latency"]
            lines.append(
                f"device: {artifact} on {runtime} {r['runtime_version']}: top-1 agreement {p['top1_agreement']:.4f}, "
                f"max |Δlogit| {p['max_abs_logit_error']:.3g}, vs tf.lite {r['runtime_vs_tf_lite']['max_abs_logit_error']:.3g}; "
                f"p50 {latency['p50_us']:.1f} µs, p99 {latency['p99_us']:.1f} µs, peak RSS {r['peak_rss_mb']:.0f} MB"
                + (f" on {r['machine']} (emulated: timings not representative)" if r["emulated"] else "")
            )
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.device_check", description=__doc__.splitlines()[0])
    cli.add_target_arguments(parser)
    parser.add_argument("--device-env", type=Path, help="env.json from the device_env stage (another architecture, or a native venv)")
    return parser


def drive(args: argparse.Namespace) -> None:
    profile = load_profile(args.profile.parent, args.profile.stem)
    summary = device_checks(profile, args.reference, args.target_dir, args.data_dir, args.device_env)
    print("\n".join(summary_lines(summary)))


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
