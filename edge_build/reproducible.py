"""Build twice from clean, compare every output: ``scons verify-reproducible`` runs this.

    python -m edge_build.reproducible --work-dir build/reproducibility --out report.json [--jobs N] [variable=value ...]

Runs ``scons build_dir=<work-dir>/first`` and ``.../second`` with the given
variables (each from an empty build directory), then compares the two trees file
by file. Artifacts, weights, data splits, bundles and manifests must be
byte-identical. JSON records that name files by path are compared with their
build directory written as ``$build_dir``. Files that record what this machine
measured (latencies, stage times, peak memory) cannot be identical: their JSON
is compared with those figures left out, and ``report.md`` and ``latency.png``,
rendered from them, and ``recommended.json``, decided by them, are listed as measured. Anything else that differs fails the check, with the JSON keys or
the file named.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from edge_build import cli
from edge_build.atomic import write_json
from edge_build.errors import StageError

#: JSON keys holding a measurement of this run (time, rate, memory), not a result of the inputs.
MEASURED_KEY = re.compile(r"(_us|_ms|_mb|seconds|_per_second)$")
#: JSON sections decided by this run's timings (edge_build.recommend): the model recommended for each runtime, and the
#: bundle's default model per runtime that follows it.
MEASURED_SECTIONS = ("recommended", "default_models")
#: identical: the same bytes; located: JSON that differs only where it names its build directory;
#: measured: differs only in measured figures; the other two fail the check.
STATUSES = ("identical", "located", "measured", "differs", "only in one build")
REPRODUCED = STATUSES[:3]
#: Rendered from this run's measurements, or (recommended.json: a model per runtime, edge_build.recommend) decided by them.
MEASURED_FILES = ("report.md", "latency.png", "recommended.json")
#: Not outputs of the inputs: SCons's own database and the dataset digest's memo, provisioned runtime environments (downloaded),
#: the stages' logs (wall times, TensorFlow's timestamps) and this check's own work.
SKIPPED = re.compile(r"(^|/)\.sconsign[^/]*$|^\.dataset-digest\.json$|^runtime-envs/|^logs/|^reproducibility(/|\.json$)")


def json_differences(first, second, path: str = "") -> list[str]:
    """Key paths where two JSON values differ, ``*`` marking list positions."""
    if isinstance(first, dict) and isinstance(second, dict):
        keys = sorted(set(first) | set(second))
        return [d for k in keys for d in json_differences(first.get(k), second.get(k), f"{path}.{k}" if path else k)]
    if isinstance(first, list) and isinstance(second, list) and len(first) == len(second):
        return sorted({d for a, b in zip(first, second) for d in json_differences(a, b, f"{path}[*]")})
    return [] if first == second else [path]


def last_key(key_path: str) -> str:
    return [part for part in re.split(r"[.\[\]*]+", key_path) if part][-1]


def is_measured(key_path: str) -> bool:
    return bool(MEASURED_KEY.search(last_key(key_path))) or key_path.split(".")[0] in MEASURED_SECTIONS


def first_difference(first: bytes, second: bytes) -> str:
    if len(first) != len(second):
        return f"{len(first)} vs {len(second)} bytes"
    return f"from byte {next(i for i, (a, b) in enumerate(zip(first, second)) if a != b)}"


def relocated(value, root: Path):
    """``value`` with the build directory in its strings written as ``$build_dir``."""
    if isinstance(value, dict):
        return {key: relocated(item, root) for key, item in value.items()}
    if isinstance(value, list):
        return [relocated(item, root) for item in value]
    if isinstance(value, str):
        return value.replace(str(root.resolve()), "$build_dir").replace(str(root), "$build_dir")
    return value


def compare_file(first: Path, second: Path, roots: tuple[Path, Path]) -> dict:
    first_bytes, second_bytes = first.read_bytes(), second.read_bytes()
    if first_bytes == second_bytes:
        return {"status": "identical"}
    if first.name in MEASURED_FILES:
        return {"status": "measured", "where": "rendered from, or decided by, this run's timings"}
    if first.suffix == ".json":
        return compare_json(first_bytes, second_bytes, roots)
    if first.name.endswith(".tar.gz"):
        return compare_archive(first, second, roots)
    return {"status": "differs", "where": first_difference(first_bytes, second_bytes)}


def compare_json(first_bytes: bytes, second_bytes: bytes, roots: tuple[Path, Path]) -> dict:
    try:
        records = [json.loads(content.decode("utf-8")) for content in (first_bytes, second_bytes)]
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {"status": "differs", "where": "not JSON"}
    located = [relocated(record, root) for record, root in zip(records, roots)]
    differences = json_differences(*located)
    unexplained = [d for d in differences if not is_measured(d)]
    if unexplained:
        return {"status": "differs", "where": ", ".join(unexplained)}
    if differences:
        return {"status": "measured", "where": ", ".join(sorted({last_key(d) for d in differences}))}
    return {"status": "located", "where": "paths that name the build directory"}


def compare_archive(first: Path, second: Path, roots: tuple[Path, Path]) -> dict:
    """Two tarballs member by member: a bundle whose manifest differs only in measured figures is measured too."""
    members = []
    for path in (first, second):
        with tarfile.open(path) as archive:
            members.append({m.name: archive.extractfile(m).read() for m in archive.getmembers() if m.isfile()})
    if set(members[0]) != set(members[1]):
        return {"status": "differs", "where": "members " + ", ".join(sorted(set(members[0]) ^ set(members[1])))}
    statuses = {}
    for name in sorted(members[0]):
        a, b = members[0][name], members[1][name]
        if a != b:
            statuses[name] = compare_json(a, b, roots) if name.endswith(".json") else {"status": "differs"}
    failing = [name for name, r in statuses.items() if r["status"] not in REPRODUCED]
    if failing or not statuses:
        return {"status": "differs", "where": "members " + ", ".join(failing) if failing else "archive headers"}
    return {"status": "measured", "where": "; ".join(f"{name}: {r.get('where', '')}" for name, r in statuses.items())}


def compare_trees(first: Path, second: Path) -> dict[str, dict]:
    def outputs(root: Path) -> set[str]:
        return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and not SKIPPED.search(p.relative_to(root).as_posix())}

    names_first, names_second = outputs(first), outputs(second)
    results = {name: {"status": "only in one build"} for name in sorted(names_first ^ names_second)}
    for name in sorted(names_first & names_second):
        results[name] = compare_file(first / name, second / name, (first, second))
    return dict(sorted(results.items()))


def not_reproduced(files: dict[str, dict]) -> list[str]:
    """The files of a comparison that differ in more than paths and measured figures."""
    return [name for name, result in files.items() if result["status"] not in REPRODUCED]


def build(build_dir: Path, variables: list[str], jobs: int) -> None:
    if build_dir.exists():
        shutil.rmtree(build_dir)
    command = [sys.executable, "-m", "SCons", "-Q", f"-j{jobs}", f"build_dir={build_dir}", *variables]
    print(f"reproducible: {' '.join(command[2:])}", flush=True)
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise StageError(f"the build in {build_dir} failed ({done.returncode}): {last}")


def verify(work_dir: Path, variables: list[str], out: Path, jobs: int = 1) -> dict:
    for variable in variables:
        if variable.split("=", 1)[0] in ("build_dir", "cache"):
            raise StageError(f"{variable}: verify-reproducible picks its own build directories and never uses a cache")
    first, second = work_dir / "first", work_dir / "second"
    build(first, variables, jobs)
    build(second, variables, jobs)
    files = compare_trees(first, second)
    counts = {status: sum(r["status"] == status for r in files.values()) for status in STATUSES}
    report = {"variables": variables, "jobs": jobs, "builds": [str(first), str(second)], "counts": counts, "files": files}
    write_json(out, report)
    return report


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.reproducible", description=__doc__.splitlines()[0])
    parser.add_argument("--work-dir", type=Path, required=True, help="the two builds go in first/ and second/ here")
    parser.add_argument("--out", type=Path, required=True, help="the per-file report (JSON)")
    parser.add_argument("--jobs", type=int, default=1, help="scons -j for both builds")
    parser.add_argument("variables", nargs="*", help="SCons variables for both builds (target=..., dataset=...)")
    return parser


def drive(args: argparse.Namespace) -> None:
    report = verify(args.work_dir, args.variables, args.out, args.jobs)
    for name, result in report["files"].items():
        if result["status"] != "identical":
            print(f"  {result['status']:<17} {name}" + (f": {result['where']}" if "where" in result else ""))
    counts = report["counts"]
    print(
        f"reproducible: {counts['identical']} files identical, {counts['located']} identical but for paths naming the build directory, "
        f"{counts['measured']} differ only in measured timings, "
        f"{counts['differs'] + counts['only in one build']} differ otherwise -> {args.out}"
    )
    if not_reproduced(report["files"]):
        raise StageError("two builds of the same inputs differ (see above)")


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
