"""Stage *board_report*: every board of the run on one page, side by side with this machine's runtime checks.

Reads each board's ``boards/<board>/result.json`` (the board_check stage's) and
the target's ``runtime_checks.json``; writes ``boards/report.md``: per board, what
the board reported about itself, then its parity and latency rows with their 95%
confidence intervals, the same model and runtime's p50 on this machine (or
under emulation) beside them, and in the gate column each limit that lies inside
its interval. The target's own report and manifest never read board results.
"""

from __future__ import annotations

import argparse
import sys

from edge_build import cli, recommend
from edge_build.artifacts import ARTIFACTS, logit_error
from edge_build.atomic import atomic_output
from edge_build.board.decision import golden_size_words
from edge_build.config.boards import parse_board
from edge_build.config.profile import TargetProfile, read_profile
from edge_build.layout import Target
from edge_build.markdown import table
from edge_build.records import read_json
from edge_build.stage_files import add_files
from edge_build.typed_records import CheckTable, Evaluation, RuntimeCheckRecord

INTRODUCTION = """Each board ran the bundle's `bench.py --parity` on every model and runtime it has, over ssh
({golden} golden examples; batch {batch}, {threads} thread(s), {warmup} warm-up and {runs} timed invokes per model: the
profile's `[checks]`). Parity is held to the profile's tolerances and p50 to its latency budgets, both enforced, by
the rule the build's runtime checks apply: a proportion's point estimate passes or fails it, and its one-sided
exact 95% bound (shown beside it) says whether a pass is decided; a pass whose bound does not clear the limit is
marked *undecided* here and in the build's report alike. Accuracy carries its 95% Wilson interval, p50 its 95%
interval by bootstrap over the timed invokes; a latency budget inside that interval is marked *undecided* too. A
p50 interval narrows as 1/√runs, so more timed invokes (`[checks] runs`) decide it, unless the p50 sits on the
budget itself.
"""


def interval(value: float, bounds: list[float], digits: str) -> str:
    return f"{value:{digits}} ({bounds[0]:{digits}}–{bounds[1]:{digits}})"


def system_rows(result: dict) -> list[list[str]]:
    system = result["system"]
    rows = [
        ["hostname", system["hostname"]],
        ["machine (`uname -m`)", system["machine"]],
        ["CPU", system["cpu"]],
        ["system", system["system"]],
        ["Python", f"{system['python']} (`{system['python_executable']}`)"],
        ["numpy", system["numpy"]],
    ]
    for name, entry in system["runtimes"].items():
        rows.append([name, entry["version"] if not entry["problem"] else f"not usable: {entry['problem']}"])
    rows.append(
        [
            "bundle",
            f"`{result['bundle']['manifest_sha256'][:16]}…`, " + ("uploaded by this run" if result["bundle"]["uploaded"] else "already on the board"),
        ]
    )
    return rows


def gate_cell(r: dict, gate: str) -> str:
    """``pass`` (a result exists only when every gate held), and each of the gate's limits that lies inside its interval."""
    return "pass" + "".join(f"; *undecided*: {note}" for note in r["undecided"][gate])


def here(local: RuntimeCheckRecord, artifact: str, runtime: str) -> str:
    """The same model and runtime's p50 in this machine's runtime checks, and how it ran there."""
    outcome = local.outcome(artifact, runtime)
    if not outcome or not outcome.ran:
        return "not checked here"
    r = outcome.record
    return f"{r['latency']['p50_us']:.1f} µs ({'emulated ' if r['emulated'] else ''}{r['machine']})"


def board_section(result: dict, local: RuntimeCheckRecord, deploy: list[str]) -> list[str]:
    name = result["board"]["name"]
    lines = [f"## {result['board']['address']} (`{result['system']['hostname']}`)", "", *table(["", ""], system_rows(result)), ""]
    parity_rows, latency_rows, skipped = [], [], []
    for outcome in CheckTable(result["checks"]).outcomes():
        model, runtime, r = ARTIFACTS[outcome.artifact].path, outcome.runtime, outcome.record
        if not outcome.ran:
            skipped.append(f"- {model} on {runtime}: {r['status']}")
            continue
        p, bounds = r["parity"], r["intervals"]
        parity_rows.append(
            [
                model,
                f"{runtime} {r['runtime_version']}",
                f"{p['top1_agreement']:.4f} (≥ {r['bounds']['top1_agreement']:.4f})",
                interval(p["accuracy"], bounds["accuracy"], ".4f"),
                f"{p['reference_accuracy'] - p['accuracy']:+.4f} (≤ {r['bounds']['accuracy_drop']:+.4f})",
                logit_error(outcome.artifact, p["max_abs_logit_error"]),
                gate_cell(r, "parity"),
            ]
        )
        latency = r["latency"]
        latency_rows.append(
            [
                model,
                runtime,
                interval(latency["p50_us"], bounds["p50_us"], ".1f") + " µs",
                f"{latency['p99_us']:.1f} µs",
                f"{r['peak_rss_mb']:.1f} MB",
                here(local, outcome.artifact, runtime),
                f"{r['latency_budget_ms']:g} ms",
                gate_cell(r, "latency"),
            ]
        )
    lines += [f"### Parity ({result['golden_examples']} golden examples)", ""]
    lines += table(
        ["model", "runtime", "top-1 agreement (95% bound)", "accuracy (95% CI)", "accuracy drop (95% bound)", "max abs Δlogit", "gate"], parity_rows
    )
    lines += ["", "### Latency per invoke", ""]
    lines += table(["model", "runtime", "p50 (95% CI)", "p99", "peak RSS", "p50 here", "budget", "gate"], latency_rows)
    if skipped:
        lines += ["", "Not checked on this board (optional runtimes; they do not gate):", "", *skipped]
    lines += ["", *deploy]
    lines += [f"![latency per invoke on {result['system']['hostname']}]({name}/latency.png)", ""]
    return lines


def recommendation_lines(result: dict, sizes: dict[str, int], profile: TargetProfile) -> list[str]:
    """What to deploy on this board, per runtime, from its own timings (``edge_build.recommend``)."""
    chosen = recommend.for_target(CheckTable(result["checks"]), sizes, profile)
    lines = [f"- {runtime}: {ARTIFACTS[c['artifact']].path}, {c['why']}" for runtime, c in chosen.items()]
    return ["### What to deploy on this board", "", *lines, *([""] + recommend.xnnpack_notes(profile, chosen) if lines else []), ""]


def board_report(results: list[dict], local: RuntimeCheckRecord, sizes: dict[str, int], profile: TargetProfile) -> str:
    settings = results[0]["settings"]
    golden = results[0]["golden_examples"]
    lines = [f"# Boards: {profile.name}", "", INTRODUCTION.format(golden=golden, **settings)]
    lines += [golden_size_words(golden, profile.golden_examples_to_decide, local.test_examples), ""]
    where = local.stack
    lines += [f"*p50 here* is this build machine's runtime check of the same model and runtime, on {where}.", ""]
    for result in results:
        lines += board_section(result, local, recommendation_lines(result, sizes, profile))
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.stages.board_report", description=__doc__.splitlines()[0])
    add_files("board_report", parser)
    parser.add_argument("--board", action="append", required=True, help="a board of the run (ssh://...), once per board, in report order")
    return parser


def drive(args: argparse.Namespace) -> None:
    profile = read_profile(args.profile)
    target = Target(args.target_dir, profile.name)
    results = [read_json(target.board_outputs(parse_board(board).name)[0]) for board in args.board]
    with atomic_output(target.boards_report) as temporary:
        sizes = recommend.sizes_of(Evaluation.read(target.evaluation))
        temporary.write_text(board_report(results, RuntimeCheckRecord.read(target.runtime_checks), sizes, profile), encoding="utf-8")
    print(f"board report: {len(results)} board(s) -> {target.boards_report}")


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
