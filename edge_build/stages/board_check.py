"""Stage *board_check*: the bundle's parity and latency checks on a real board, over ssh, gated like the runtime checks.

Reads the target's bundle (``bundle-<target>.tar.gz`` and its ``manifest.json``),
``golden.npz`` and the profile; writes ``boards/<board>/result.json`` (what the
board is, every figure with its 95% confidence interval, every timed invoke) and
``boards/<board>/latency.png``. Nothing here imports TensorFlow.

The board needs Python, numpy and the runtime (what the bundle's README says),
not edge-build: ``board/agent.py`` is streamed to its Python on each call. It
first describes the board; a board of another architecture than the profile's,
or without numpy or a required runtime, is refused before anything is uploaded.
The bundle goes into a cache on the board named by its manifest's SHA-256, once;
then ``bench.py --parity`` runs each model on each runtime the board has, in a
folder that is removed whatever happens. The logits come back and are held to
the artifact's parity checks and the profile's latency budgets, which are
enforced: this is the hardware. A fault (unreachable, refused, host key, no
Python or runtime, a crash, a timeout) or a broken gate fails the stage with a
table of what broke, and leaves no result.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import dataclasses
import hashlib
import io
import json
import math
import sys
import tarfile
from pathlib import Path

import numpy as np

from edge_build import cli
from edge_build.artifacts import ARTIFACTS
from edge_build.atomic import atomic_outputs
from edge_build.board.agent import MANIFEST
from edge_build.board.bench import percentile_summary
from edge_build.board.decision import bounds, failure_table, gate, latency_undecided, p50_interval
from edge_build.board.parity import compare, load_golden
from edge_build.board.runtime import INTERPRETER_MODULES
from edge_build.config.boards import Board, parse_board
from edge_build.config.profile import TargetProfile, read_profile
from edge_build.errors import StageError
from edge_build.layout import Target
from edge_build.plots import latency_series, plot_latency
from edge_build.provenance import sha256_file
from edge_build.records import read_json
from edge_build.ssh import CONNECT_TIMEOUT_S, BoardFault, Connection
from edge_build.stage_files import add_files
from edge_build.stats import wilson_interval
from edge_build.typed_records import CheckTable

CONFIDENCE = 0.95
#: Seconds an upload may take per megabyte (a slow Wi-Fi board), on top of the connection.
UPLOAD_S_PER_MB = 10


def board_system(connection: Connection, profile: TargetProfile, common: list[str]) -> dict:
    """What the board reports about itself; a board that cannot run the bundle is refused here, before any upload."""
    runtimes = [f"{r.name}={INTERPRETER_MODULES[r.name]}" for r in profile.runtimes]
    # Importing a runtime may take a while on a small board (TensorFlow's does): a minute each, beyond the connection.
    system = connection.agent(["probe", *common, *(a for r in runtimes for a in ("--runtime", r))], CONNECT_TIMEOUT_S + 60 * (1 + len(runtimes)))
    where = connection.board.address
    if system["machine"] != profile.arch:
        raise BoardFault(where, "architecture", f"an {system['machine']} board, and {profile.source} builds for {profile.arch}; nothing was uploaded")
    if system["numpy"] is None:
        raise BoardFault(
            where, "no numpy", f"not installed for {system['python_executable']} (pip install numpy=={profile.stack.numpy}); nothing was uploaded"
        )
    for runtime in profile.runtimes:
        problem = system["runtimes"][runtime.name]["problem"]
        if runtime.required and problem:
            raise BoardFault(where, "no runtime", f"{problem} (pip install {runtime.name}=={runtime.version}); nothing was uploaded")
    return system


def deliver(connection: Connection, archive: Path, system: dict, common: list[str]) -> bool:
    """Send and unpack the bundle unless the board's cache holds it; whether it was sent.

    The archive goes down the agent's own ssh session, after its code: the board needs no scp or SFTP server, and its
    shell never sees a path. The agent checks the size and SHA-256 of what arrived, and removes it whatever happens.
    """
    if system["cached"]:
        return False
    size = archive.stat().st_size
    connection.agent(
        ["receive", *common, f"--size={size}", f"--archive-sha256={sha256_file(archive)}"],
        CONNECT_TIMEOUT_S + 120 + UPLOAD_S_PER_MB * (1 + size / 1e6),
        payload=archive,
    )
    return True


def intervals(outcome: dict, golden: dict) -> dict:
    """95% two-sided intervals: p50 by bootstrap over the timed invokes (``board.decision``: a budget inside it is
    undecided), accuracy (Wilson)."""
    n = len(golden["labels"])
    correct = np.argmax(outcome["logits"], -1) == golden["labels"]
    return {
        "p50_us": p50_interval(outcome["latency"]["invoke_us"], CONFIDENCE),
        "accuracy": wilson_interval(int(correct.sum()), n, CONFIDENCE),
    }


def timings_of(answer: dict, runs: int) -> dict:
    """The board's timing figures recomputed from its timed invokes, which must be ``runs`` finite, positive numbers
    whose median is the p50 the board reported."""
    latency = answer.get("latency")
    invoke_us = latency.get("invoke_us") if isinstance(latency, dict) else None
    if not isinstance(invoke_us, list) or len(invoke_us) != runs:
        raise ValueError(f"{runs} timed invokes asked for, {len(invoke_us) if isinstance(invoke_us, list) else 'no list of'} returned")
    values = np.asarray([v if isinstance(v, (int, float)) and not isinstance(v, bool) else np.nan for v in invoke_us], dtype=np.float64)
    if not np.all(np.isfinite(values) & (values > 0)):
        raise ValueError("a timed invoke that is not a finite, positive number of microseconds")
    figures = {key: latency.get(key) for key in ("load_ms", "first_invoke_ms")}
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in figures.values()):
        raise ValueError("a load or first-invoke time that is not a finite number")
    recomputed = percentile_summary(values.tolist(), answer["batch"])
    if not math.isclose(latency.get("p50_us", math.nan), recomputed["p50_us"], rel_tol=1e-9):
        raise ValueError(f"p50 {latency.get('p50_us')!r} µs does not match its own timed invokes' {recomputed['p50_us']:.6g}")
    return {**figures, **recomputed, "invoke_us": values.tolist()}


def logits_of(answer: dict, reference: np.ndarray) -> np.ndarray:
    """The board's logits for the golden set: a float32 .npy of the reference's shape, checked before its data is read."""
    encoded = answer.get("logits_npy")
    if not isinstance(encoded, str) or len(encoded) > 4 * (reference.nbytes + 4096) // 3 + 4:
        raise ValueError(
            f"logits: not a float32 array of shape {reference.shape} (an answer of {len(encoded) if isinstance(encoded, str) else 'no'} characters)"
        )
    stream = io.BytesIO(base64.b64decode(encoded, validate=True))
    header = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}.get(np.lib.format.read_magic(stream))
    if header is None:
        raise ValueError("logits: not a .npy file of format 1.0 or 2.0")
    shape, _, dtype = header(stream)
    if shape != reference.shape or dtype != np.dtype(np.float32):
        raise ValueError(f"logits: {dtype} {shape} returned, float32 {reference.shape} expected")
    stream.seek(0)
    return np.load(stream, allow_pickle=False)


def check_on_board(artifact: str, answer: dict, golden: dict, profile: TargetProfile) -> dict:
    """One model on one runtime, as the board ran it: gated through the same table as the runtime checks, with intervals.

    What the board sends is checked before it is believed: its invoke times (p50 is recomputed from them) and its
    logits (size, type and shape); a board is hardware, so its timings are never taken as emulated, whatever it
    says. A figure that fails these checks is a row of the failure table. As in the runtime checks, a runtime
    the profile does not require gates only on what it ran.
    """
    outcome = {k: v for k, v in answer.items() if k not in ("model", "runtime", "logits_npy")}
    outcome["emulated"] = False  # the build decides: this is the board itself
    if outcome.get("status") != "ok":
        required = next(r.required for r in profile.runtimes if r.name == answer["runtime"])
        outcome["problems"] = [str(outcome.get("status"))] if required else []
        return outcome
    try:
        outcome["latency"] = timings_of(answer, profile.checks.runs)
        outcome["logits"] = logits_of(answer, golden["reference_logits"])
    except (ValueError, TypeError, KeyError, binascii.Error) as exc:
        outcome.pop("latency", None)
        outcome["status"] = f"answer refused: {exc}"
        outcome["problems"] = [outcome["status"]]
        return outcome
    outcome["parity"] = compare(golden["reference_logits"], outcome["logits"], golden["labels"])
    # The gates and what they leave undecided, by the same rule as the build's runtime checks (board.decision).
    outcome["problems"] = gate(ARTIFACTS[artifact].parity, outcome, profile.tolerances.limits(), profile.latency_budget_ms(artifact))
    outcome["bounds"] = bounds(outcome["parity"])
    outcome["intervals"] = intervals(outcome, golden)
    outcome["undecided"]["latency"] = latency_undecided(
        outcome["runs"], outcome["intervals"]["p50_us"], outcome["latency"]["p50_us"], outcome["latency_budget_ms"]
    )
    del outcome["logits"]
    return outcome


def answered_checks(answer: dict, asked: list[tuple[str, str]], where: str) -> list[dict]:
    """The board's checks, one for each ``(model file, runtime)`` asked for, in that order; anything else is a fault."""
    checks = answer.get("checks") if isinstance(answer, dict) else None
    if not isinstance(checks, list) or len(checks) != len(asked):
        count = len(checks) if isinstance(checks, list) else "no list of"
        raise BoardFault(where, "bad answer", f"{len(asked)} checks asked for, {count} returned")
    for (model, runtime), check in zip(asked, checks):
        if not isinstance(check, dict) or (check.get("model"), check.get("runtime")) != (model, runtime):
            raise BoardFault(where, "bad answer", f"a check of {model} on {runtime} asked for, another returned in its place")
    return checks


def planned_checks(profile: TargetProfile, system: dict) -> tuple[list[tuple[str, str]], dict]:
    """The (artifact, runtime) pairs the board runs, and for each runtime it lacks (optional ones only, by now) why."""
    missing = {name: entry["problem"] for name, entry in system["runtimes"].items() if entry["problem"]}
    pairs = [(a, r.name) for a in profile.runtime_artifacts for r in profile.runtimes_for(a) if r.name not in missing]
    return pairs, missing


def consistent_bundle(target: Target) -> tuple[str, dict]:
    """The SHA-256 of the bundle's manifest, and the manifest, once the tarball holds exactly the files the manifest lists, with their
    digests, and the manifest's models are the ones the conversion recorded; anything else stops before a connection."""
    manifest_path = target.bundle_dir / MANIFEST
    manifest = read_json(manifest_path)
    for artifact, file in manifest["models"].items():
        recorded = read_json(target.conversion_record(artifact))["sha256"]
        if manifest["files"].get(file, {}).get("sha256") != recorded:
            raise StageError(
                f"{manifest_path}: {file} is not the model the conversion recorded ({target.conversion_record(artifact).name}); run scons again"
            )
    expected = {name: entry["sha256"] for name, entry in manifest["files"].items()}
    expected[MANIFEST] = sha256_file(manifest_path)
    with tarfile.open(target.bundle_archive, "r:gz") as tar:
        found = {}
        for member in tar:
            if not member.isfile():
                continue
            name = member.name.partition("/")[2]
            found[name] = hashlib.sha256(tar.extractfile(member).read()).hexdigest()
    if found != expected:
        differing = sorted(set(found) ^ set(expected) | {n for n in set(found) & set(expected) if found[n] != expected[n]})
        raise StageError(f"{target.bundle_archive}: does not hold what {manifest_path} lists ({', '.join(differing[:5])}); run scons again")
    return expected[MANIFEST], manifest


def check_board(profile: TargetProfile, board: Board, target: Target, ssh_config: Path | None) -> dict:
    """Describe, deliver to and check one board; the result record (outputs are written only if every gate holds)."""
    # What was checked is what is used: the manifest read once, before anything reaches the board.
    sha256, manifest = consistent_bundle(target)
    connection = Connection(board, ssh_config)
    common = ["--cache", board.cache, "--bundle", sha256]
    system = board_system(connection, profile, common)
    uploaded = deliver(connection, target.bundle_archive, system, common)
    pairs, missing = planned_checks(profile, system)
    models = manifest["models"]
    settings = profile.checks
    bench = ["--threads", settings.threads, "--batch", settings.batch, "--warmup", settings.warmup, "--runs", settings.runs]
    answer = connection.agent(
        [
            "run",
            *common,
            "--timeout",
            str(settings.timeout_s),
            *(a for artifact, runtime in pairs for a in ("--check", f"{models[artifact]}:{runtime}")),
            "--",
            *map(str, bench),
        ],
        CONNECT_TIMEOUT_S + 60 + settings.timeout_s * len(pairs),
    )
    golden = load_golden(str(target.golden))
    checks = {artifact: {} for artifact in profile.runtime_artifacts}
    answered = answered_checks(answer, [(models[artifact], runtime) for artifact, runtime in pairs], connection.board.address)
    for (artifact, runtime), result in zip(pairs, answered):
        checks[artifact][runtime] = check_on_board(artifact, result, golden, profile)
    for artifact in profile.runtime_artifacts:
        for runtime in profile.runtimes_for(artifact):
            if runtime.name in missing:
                checks[artifact][runtime.name] = {"status": f"not checked: {missing[runtime.name]}", "problems": []}
    return {
        "target": profile.name,
        "board": {"address": board.address, "name": board.name, "python": board.python},
        "system": {k: v for k, v in system.items() if k != "cached"},
        "bundle": {"manifest_sha256": sha256, "uploaded": uploaded},
        "settings": dataclasses.asdict(settings),
        "confidence": CONFIDENCE,
        "golden_examples": int(len(golden["labels"])),
        "checks": checks,
    }


def write_result(result: dict, board: Board, target: Target) -> None:
    rows = [(o.artifact, f"{o.runtime} on {board.name}", p) for o in CheckTable(result["checks"]).outcomes() for p in o.record["problems"]]
    if rows:
        print(failure_table(rows), file=sys.stderr)
        raise StageError(f"{board.address}: board checks failed for {target.name} (table above)")
    with atomic_outputs(*target.board_outputs(board.name)) as (result_tmp, plot_tmp):
        result_tmp.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        plot_latency(
            latency_series(CheckTable(result["checks"])), plot_tmp, f"Latency per invoke on {result['system']['hostname']} ({board.address})"
        )


def summary_lines(result: dict) -> list[str]:
    system = result["system"]
    lines = [
        f"board: {result['board']['address']} is {system['hostname']}, {system['machine']}, {system['cpu']}, Python {system['python']}, "
        f"numpy {system['numpy']}; bundle {result['bundle']['manifest_sha256'][:12]} "
        + ("uploaded" if result["bundle"]["uploaded"] else "already on the board, not uploaded")
    ]
    for outcome in CheckTable(result["checks"]).outcomes():
        r, artifact, runtime = outcome.record, outcome.artifact, outcome.runtime
        if not outcome.ran:
            lines.append(f"board check: {artifact} on {runtime}: {r['status']}")
            continue
        p, low_high = r["parity"], r["intervals"]["p50_us"]
        lines.append(
            f"board check: {artifact} on {runtime} {r['runtime_version']}: top-1 agreement {p['top1_agreement']:.4f}, "
            f"max |Δlogit| {p['max_abs_logit_error']:.3g}; p50 {r['latency']['p50_us']:.1f} µs "
            f"(95% CI {low_high[0]:.1f}–{low_high[1]:.1f}), budget {r['latency_budget_ms']:g} ms"
            + "".join(f"; undecided: {note}" for notes in r["undecided"].values() for note in notes)
        )
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.stages.board_check", description=__doc__.splitlines()[0])
    add_files("board_check", parser)
    parser.add_argument("--board", required=True, help="ssh://[USER@]HOST[:PORT][?python=PATH&cache=DIR]")
    return parser


def drive(args: argparse.Namespace) -> None:
    profile = read_profile(args.profile)
    board = parse_board(args.board)
    target = Target(args.target_dir, profile.name)
    try:
        result = check_board(profile, board, target, args.ssh_config)
    except BoardFault as fault:
        print(failure_table([("(all)", board.name, fault.cause)]), file=sys.stderr)
        raise
    write_result(result, board, target)
    print("\n".join(summary_lines(result)))


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
