"""What every benchmark script shares: its command line, the machine it ran on, and how results are written.

Each script writes ``results/<name>.json`` (every figure, the machine and the
package versions) and ``results/<name>.md`` (the table quoted in README.md).
Timings are medians and ratios taken in one run: the machines are shared and noisy.

No TF Lite runtime is installed in this project's own Python: tflite-runtime and
ai-edge-litert run only in the runtime environment a build provisions for a
profile's board stack (``runtime_env`` stage, ``build/runtime-envs/<key>/env.json``).
The benchmarks start every runtime there, the ``host`` profile's environment of the
build they read (``runtime_environment``), and record its versions with the results.
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

#: Packages of this process, recorded with every result.
PACKAGES = ("tensorflow", "tensorflow-text", "numpy", "scons")
#: Packages that live only in the runtime environment: their versions come from its env.json.
RUNTIME_PACKAGES = ("tflite-runtime", "ai-edge-litert")
#: The profile whose runtime environment the benchmarks run the TF Lite runtimes in.
HOST_PROFILE = REPO / "targets" / "host.toml"


def argument_parser(description: str, build_dir: str | None = None, runtimes: bool = False) -> argparse.ArgumentParser:
    """The options every benchmark takes, and ``--build-dir`` (``build_dir`` says what it must hold) for those that read a build.

    ``runtimes``: the benchmark runs TF Lite runtimes, in the build's runtime environment (``--runtime-envs``).
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="few iterations: checks the script runs, figures mean little")
    parser.add_argument("--out-dir", type=Path, default=HERE / "results", help="where <name>.json and <name>.md go")
    if build_dir is not None:
        parser.add_argument("--build-dir", type=Path, default=REPO / "build", help=build_dir)
    if runtimes:
        parser.add_argument(
            "--runtime-envs",
            type=Path,
            default=None,
            help="where the build provisioned its runtime environments, if it was given runtime_envs= (default: BUILD_DIR/runtime-envs)",
        )
    return parser


def missing_outputs(paths: list[Path], how: str) -> bool:
    """Name, in one line, the build outputs a benchmark needs that are not there, and ``how`` to make them."""
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"error: {', '.join(missing)}: not found ({how})", file=sys.stderr)
    return bool(missing)


def runtime_environment(build_dir: Path, runtime_envs: Path | None = None, profile_path: Path = HOST_PROFILE) -> dict | None:
    """A profile's runtime environment in the build (its ``env.json``, and where that lies as ``env_json``); the ``host`` profile's by default.

    ``None``, after one line saying how to provision it, when the build has none for the profile as it now reads.
    """
    from edge_build.config.profile import read_profile
    from edge_build.layout import Layout
    from edge_build.runtime_envs import describe, read_environment

    profile = read_profile(profile_path)
    key = profile.runtime_environment().key()
    path = Layout(Path(build_dir), Path(runtime_envs) if runtime_envs else None).runtime_env(key)
    where = "" if profile_path == HOST_PROFILE else f" target={profile.name}"  # host is the default target
    where += "" if Path(build_dir).resolve() == (REPO / "build").resolve() else f" build_dir={build_dir}"
    where += f" runtime_envs={runtime_envs}" if runtime_envs else ""
    how = f"the {profile.name} profile's runtime environment, where the TF Lite runtimes run: provision it with `scons{where} runtime-env` or a full `scons{where}`"
    if missing_outputs([path], how):
        return None
    environment = {**read_environment(path), "env_json": str(path)}
    print(f"TF Lite runtimes run in {path.parent}: {describe(environment)}", flush=True)
    return environment


def machine(environment: dict | None = None) -> dict:
    """The machine and software a figure belongs to (read without importing TensorFlow).

    The TF Lite runtimes' versions are the runtime ``environment``'s (``None`` where there is none): they are not in this process.
    """
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
        "packages": {**package_versions(*PACKAGES), **runtime_versions(environment)},
        "runtime_environment": environment_record(environment),
        "git_revision": git_revision(REPO),
        "measured_at": build_timestamp(),
    }


def runtime_versions(environment: dict | None) -> dict[str, str | None]:
    """Each runtime package's version in ``environment`` (``None`` where it is not provisioned, or there is no environment)."""
    runtimes = environment["runtimes"] if environment else {}
    return {name: runtimes.get(name, {}).get("version") for name in RUNTIME_PACKAGES}


def environment_record(environment: dict | None) -> dict | None:
    """What results record of the runtime environment: where, which stack, its CPython, numpy and runtimes."""
    if environment is None:
        return None
    from edge_build.runtime_envs import describe

    return {
        "env_json": environment["env_json"],
        "description": describe(environment),
        "arch": environment["arch"],
        "stack": environment["stack"],
        "emulated": environment["emulated"],
        "python_version": environment["python_version"],
        "numpy_version": environment["numpy_version"],
        "runtimes": {name: {k: entry[k] for k in ("version", "checkable", "reason")} for name, entry in environment["runtimes"].items()},
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


def write_results(out_dir: Path, name: str, results: dict, markdown: str, quick: bool, environment: dict | None = None) -> None:
    """``<name>.json`` and ``<name>.md``, each complete or absent; ``environment``: the runtime environment the runtimes ran in."""
    payload = {"benchmark": name, "quick": quick, "machine": machine(environment), **results}
    header = f"<!-- written by benchmarks/{name}.py{' --quick' if quick else ''}: {payload['machine']['cpu']}, "
    header += f"{payload['machine']['logical_cpus']} logical CPUs, {payload['machine']['measured_at']} -->\n"
    for path, text in ((out_dir / f"{name}.json", json.dumps(payload, indent=2) + "\n"), (out_dir / f"{name}.md", header + markdown)):
        with atomic_output(path) as temporary:
            temporary.write_text(text, encoding="utf-8")
    print(markdown)
    print(f"wrote {out_dir / name}.json and .md")


def run_device_bench(
    environment: dict,
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
    """``edge_build.board.bench`` in its own process, in the runtime ``environment``, as the build runs it; a failure comes back as ``status``.

    Timed inputs are golden-set rows; with ``parity`` the whole golden set is run too, and its top-1 agreement,
    logit error and accuracy against the reference SavedModel come with the timings.
    """
    from edge_build.isolated import failure_line, run_isolated
    from edge_build.runtime_envs import launcher, unavailable

    reason = unavailable(environment, runtime)
    if reason:
        return {"status": f"not run: {reason}"}
    python, variables = launcher(environment)
    out, logits = scratch / f"{model.stem}-{runtime}-{threads}t-b{batch}.json", scratch / f"{model.stem}-{runtime}-{threads}t-b{batch}.npy"
    command = [
        *python,
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
    done, abnormal = run_isolated(command, timeout_s, variables)
    if abnormal:
        return {"status": abnormal}
    if done.returncode != 0:
        return {"status": "failed: " + failure_line(done).replace(f"{model}: ", "")}
    result = json.loads(out.read_text(encoding="utf-8"))
    result["latency"].pop("invoke_us")
    return {"status": "ok", **result}


def trained_model(layout):
    """The build's trained Keras model (``model_src/`` with its weights), as the tflite stage loads it."""
    from edge_build.model_source import load_trained_model, trained_hyperparameters
    from edge_build.records import read_labels

    hparams_path = REPO / "model_src" / "hparams.toml"
    hparams = trained_hyperparameters(hparams_path, layout.train_log)
    return load_trained_model(
        REPO / "model_src" / "model.py",
        hparams,
        hparams_path,
        layout.vocab,
        len(read_labels(layout.data.labels)),
        layout.weights,
        layout.token_ids("train"),
    )


def recipe_models(model, layout, profile, names, folder: Path) -> dict[str, Path]:
    """Each quantization recipe in ``names`` converted as the tflite stage's ladder converts it, written to ``folder``."""
    import numpy as np

    from edge_build.convert.converter import make_converter
    from edge_build.convert.ladder import convert_recipe, ids_model, quantization_errors

    representative = np.load(layout.representative)
    errors = quantization_errors(make_converter(model, "int8", profile, representative), representative)
    paths = {}
    for name in names:
        paths[name] = folder / f"{name}.tflite"
        paths[name].write_bytes(convert_recipe(ids_model(model, representative), name, profile, representative, errors)[0])
        print(f"converted recipe {name}: {paths[name].stat().st_size} bytes", flush=True)
    return paths


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    return numerator / denominator if numerator and denominator else None
