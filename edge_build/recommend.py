"""Which model to deploy on each runtime, decided by the checks' timings where they mean something.

For each runtime, the candidates are the profile's token-id TF Lite models that
ran and passed there (a failed check stops the build before this), no larger
than ``[deploy] max_model_mb`` when the profile sets it. A raw-text model is no
candidate: its p50 includes the tokenizer that an ids model leaves to the caller.

- **Measured** (native runtime checks, or a board): the fastest p50 at batch 1.
  A p50 within ``TIE`` times the fastest, or within ``TIE_US`` microseconds of
  it, counts as a tie, and the smallest file among the tied wins: 20% is about
  what two runs of one model move apart on a shared machine, and a microsecond is
  below what the timer resolves per invoke there. Wider margins (1.5x or 10 µs,
  before) kept two builds agreeing more often, but called a model 2.2 times
  slower a tie on a small model (the tests': INT8 11.2 µs against float32 5.0 on
  tflite-runtime 2.14, whose XNNPACK delegate takes no quantized op; BBC News:
  27.7 against 19.5 µs), and shipped it as the one to deploy.
- **Emulated** (qemu's timings are not the board's): the runtime table decides.
  INT8 only where that version's default XNNPACK delegate runs quantized ops
  (``Runtime.quantized_xnnpack``), then the smallest file. The record says so.

The runtime checks decide and write ``recommended.json``; the report reads it back and
words each choice with ``explained``, deciding nothing again. The board report decides
from a board's own timings. Standard library only: the report, the manifest and the board report share it.
"""

from __future__ import annotations

from collections.abc import Mapping

from edge_build.artifacts import ARTIFACTS
from edge_build.board.runtime import Runtime
from edge_build.config.profile import TargetProfile
from edge_build.typed_records import BY_RUNTIME_TABLE, BY_TIMING, CheckTable, Evaluation, Recommended

#: A p50 within this factor of the fastest, or this many microseconds of it, is a tie: size decides among the tied.
TIE = 1.2
TIE_US = 1.0


def recommend(checks: CheckTable, sizes: Mapping[str, int], rows: Mapping[str, Runtime], max_bytes: int | None = None) -> dict[str, dict]:
    """Per runtime that ran a candidate: ``artifact``, ``measured`` (timings decided) and ``why``, in one sentence."""
    chosen = {}
    for runtime, outcomes in candidates(checks, sizes, max_bytes).items():
        emulated = any(o.record["emulated"] for o in outcomes)
        chosen[runtime] = by_rule(outcomes, sizes, rows[runtime]) if emulated else by_timing(outcomes, sizes)
    return chosen


def candidates(checks: CheckTable, sizes: Mapping[str, int], max_bytes: int | None) -> dict[str, list]:
    """Per runtime, the outcomes of the models it may recommend that ran there within the size budget, in the order they ran."""
    per_runtime: dict[str, list] = {}
    for outcome in checks.ran():
        if ARTIFACTS[outcome.artifact].interface_row.recommended and (max_bytes is None or sizes[outcome.artifact] <= max_bytes):
            per_runtime.setdefault(outcome.runtime, []).append(outcome)
    return per_runtime


def p50s(outcomes: list, sizes: Mapping[str, int]) -> tuple[dict[str, float], str]:
    """Each outcome's p50 by artifact, and the fastest (the smaller file on an equal p50)."""
    p50 = {o.artifact: o.record["latency"]["p50_us"] for o in outcomes}
    return p50, min(p50, key=lambda name: (p50[name], sizes[name]))


def by_timing(outcomes: list, sizes: Mapping[str, int]) -> dict:
    p50, fastest = p50s(outcomes, sizes)
    tied = [name for name in p50 if p50[name] <= max(TIE * p50[fastest], p50[fastest] + TIE_US)]
    return timed(min(tied, key=lambda name: (sizes[name], p50[name])), outcomes, sizes)


def timed(best: str, outcomes: list, sizes: Mapping[str, int]) -> dict:
    """``best``, decided by the timings of ``outcomes``, with the p50s that decided it in its ``why``."""
    p50, fastest = p50s(outcomes, sizes)
    others = "; ".join(f"{name} {p50[name]:.1f} µs" for name in p50 if name != best)
    if best == fastest:
        why = f"fastest p50 ({p50[best]:.1f} µs" + (f"; {others})" if others else ")")
    else:
        why = f"smallest within {TIE:g}x or {TIE_US:g} µs of the fastest p50 ({p50[best]:.1f} µs; {others})"
    return {"artifact": best, "measured": True, "p50_us": p50[best], "size_bytes": sizes[best], "why": why}


def by_rule(outcomes: list, sizes: Mapping[str, int], row: Runtime) -> dict:
    names = [o.artifact for o in outcomes]
    usable = [name for name in names if ARTIFACTS[name].precision != "int8" or row.quantized_xnnpack]
    return ruled(min(usable or names, key=lambda name: sizes[name]), sizes, row)


def ruled(best: str, sizes: Mapping[str, int], row: Runtime) -> dict:
    """``best``, decided by the runtime table's row, with the row's fact in its ``why``."""
    choice = "runs quantized ops, so the smallest model" if row.quantized_xnnpack else "runs no quantized op, so the smallest float model"
    why = f"emulated, so the runtime table decides: {row.name} {row.version}'s XNNPACK delegate {choice}"
    return {"artifact": best, "measured": False, "p50_us": None, "size_bytes": sizes[best], "why": why}


def for_target(checks: CheckTable, sizes: Mapping[str, int], profile: TargetProfile) -> dict[str, dict]:
    """``recommend`` with a target's runtimes' rows and its ``[deploy]`` budget."""
    return recommend(checks, sizes, {r.name: r.row for r in profile.runtimes}, profile.deploy.max_bytes)


def explained(recommended: Recommended, checks: CheckTable, sizes: Mapping[str, int], profile: TargetProfile) -> dict[str, dict]:
    """``recommended.json``'s choices as ``recommend`` gives them (``measured``, ``size_bytes``, ``why``), decided nothing
    again: the choice is the record's; its ``why`` quotes the checks' p50s on that runtime, or the runtime table's row."""
    outcomes = candidates(checks, sizes, profile.deploy.max_bytes)
    rows = {r.name: r.row for r in profile.runtimes}
    return {
        runtime: timed(c["artifact"], outcomes[runtime], sizes) if c["decided_by"] == BY_TIMING else ruled(c["artifact"], sizes, rows[runtime])
        for runtime, c in recommended.runtimes.items()
    }


def deployable(chosen: Mapping[str, dict]) -> dict[str, dict]:
    """What the manifest and the bundle record of a recommendation: the model and what decided it, no timings."""
    return {
        runtime: {"artifact": c["artifact"], "model": ARTIFACTS[c["artifact"]].path, "decided_by": BY_TIMING if c["measured"] else BY_RUNTIME_TABLE}
        for runtime, c in chosen.items()
    }


def sizes_of(evaluation: Evaluation) -> dict[str, int]:
    return {name: figures["size_bytes"] for name, figures in evaluation.artifacts.items()}


def xnnpack_notes(profile: TargetProfile, chosen: Mapping[str, dict]) -> list[str]:
    """One line per runtime whose XNNPACK delegate takes no quantized op: why INT8 is slow there."""
    return [
        f"{r.name} {r.version}'s default XNNPACK delegate takes no quantized op, so INT8 runs on TF Lite's own int8 kernels there "
        "(reductions on reference ones) and can be slower than float32."
        for r in profile.runtimes
        if r.name in chosen and not r.row.quantized_xnnpack
    ]
