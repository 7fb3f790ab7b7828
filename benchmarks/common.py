"""What every benchmark script shares: its command line, the machine it ran on, and how results are written.

Each script writes ``results/<name>.json`` (every figure, the machine and the
package versions) and ``results/<name>.md`` (the table quoted in README.md).
Timings are medians and ratios taken in one run: the machines are shared and noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from edge_build.atomic import atomic_output  # noqa: E402
from edge_build.provenance import build_timestamp, cpu_model, git_revision, package_versions  # noqa: E402

PACKAGES = ("tensorflow", "tensorflow-text", "numpy", "tflite-runtime", "ai-edge-litert", "scons")


def argument_parser(description: str, build_dir: str | None = None) -> argparse.ArgumentParser:
    """The options every benchmark takes, and ``--build-dir`` (``build_dir`` says what it must hold) for those that read a build."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="few iterations: checks the script runs, figures mean little")
    parser.add_argument("--out-dir", type=Path, default=HERE / "results", help="where <name>.json and <name>.md go")
    if build_dir is not None:
        parser.add_argument("--build-dir", type=Path, default=REPO / "build", help=build_dir)
    return parser


def missing_outputs(paths: list[Path], how: str) -> bool:
    """Name, in one line, the build outputs a benchmark needs that are not there, and ``how`` to make them."""
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"error: {', '.join(missing)}: not found ({how})", file=sys.stderr)
    return bool(missing)


def machine() -> dict:
    """The machine and software a figure belongs to (read without importing TensorFlow)."""
    memory_kb = None
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            memory_kb = int(meminfo.readline().split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return {
        "cpu": cpu_model(),
        "logical_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gb": round(memory_kb / 2**20, 1) if memory_kb else None,
        "arch": platform.machine(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "packages": package_versions(*PACKAGES),
        "git_revision": git_revision(REPO),
        "measured_at": build_timestamp(),
    }


def spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": len(values)}


def markdown_table(headers: list[str], rows: list[list]) -> str:
    def cell(value) -> str:
        if isinstance(value, float):
            return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
        return "" if value is None else str(value)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def write_results(out_dir: Path, name: str, results: dict, markdown: str, quick: bool) -> None:
    """``<name>.json`` and ``<name>.md``, each complete or absent."""
    payload = {"benchmark": name, "quick": quick, "machine": machine(), **results}
    header = f"<!-- written by benchmarks/{name}.py{' --quick' if quick else ''}: {payload['machine']['cpu']}, "
    header += f"{payload['machine']['logical_cpus']} logical CPUs, {payload['machine']['measured_at']} -->\n"
    for path, text in ((out_dir / f"{name}.json", json.dumps(payload, indent=2) + "\n"), (out_dir / f"{name}.md", header + markdown)):
        with atomic_output(path) as temporary:
            temporary.write_text(text, encoding="utf-8")
    print(markdown)
    print(f"wrote {out_dir / name}.json and .md")


def run_device_bench(
    model: Path,
    runtime: str,
    threads: int,
    batch: int,
    golden: Path,
    warmup: int,
    runs: int,
    scratch: Path,
    parity: bool = True,
    timeout_s: float = 600,
) -> dict:
    """``edge_build.board.bench`` in its own process, as the build runs it; a failure comes back as ``status``.

    Timed inputs are golden-set rows; with ``parity`` the whole golden set is run too, and its top-1 agreement,
    logit error and accuracy against the reference SavedModel come with the timings.
    """
    from edge_build.isolated import run_isolated

    out, logits = scratch / f"{model.stem}-{runtime}-{threads}t-b{batch}.json", scratch / f"{model.stem}-{runtime}-{threads}t-b{batch}.npy"
    command = [
        sys.executable,
        "-m",
        "edge_build.board.bench",
        str(model),
        "--runtime",
        runtime,
        "--threads",
        str(threads),
        "--batch",
        str(batch),
        "--golden",
        str(golden),
        "--warmup",
        str(warmup),
        "--runs",
        str(runs),
        "--out",
        str(out),
        *(["--outputs", str(logits)] if parity else []),
    ]
    done, abnormal = run_isolated(command, timeout_s, {**os.environ, "PYTHONPATH": str(REPO)})
    if abnormal:
        return {"status": abnormal}
    if done.returncode != 0:
        return {"status": "failed: " + (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1].removeprefix("error: ")}
    result = json.loads(out.read_text(encoding="utf-8"))
    result["latency"].pop("invoke_us")
    return {"status": "ok", **result}


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    return numerator / denominator if numerator and denominator else None
