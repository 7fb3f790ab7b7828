"""The build's side of the parity rule: an artifact's checks and tolerances, and the table a failed gate prints.

The rule itself is ``board.parity.verdicts``, which the board runs too.
"""

from __future__ import annotations

from edge_build.artifacts import ARTIFACTS
from edge_build.board.parity import compare, messages, verdicts
from edge_build.config.profile import Tolerances

__all__ = ["breaches", "compare", "failure_table", "gate", "judge", "messages", "recorded"]


def judge(artifact: str, figures: dict, tolerances: Tolerances, on_gpu: bool = False) -> list[dict]:
    """Each of ``artifact``'s parity checks judged on its figures: pass, undecided or fail (``on_gpu``: saved_model_xla ran on a GPU)."""
    return verdicts(ARTIFACTS[artifact].parity, figures, tolerances.limits(on_gpu))


def breaches(artifact: str, figures: dict, tolerances: Tolerances, on_gpu: bool = False) -> list[str]:
    """Each tolerance of the profile that ``artifact``'s figures break."""
    return messages(judge(artifact, figures, tolerances, on_gpu), "fail")


def recorded(judged: list[dict]) -> list[dict]:
    """The judged checks as a record keeps them (``eval.json``'s ``gates``, a conversion's ``validation_gates``)."""
    return [{key: v[key] for key in ("check", "limit", "verdict", "message")} for v in judged]


def failure_table(rows: list[tuple[str, str, str]]) -> str:
    """``(artifact, where, what broke)`` rows as the table a failed gate prints."""
    return "\n".join([f"  {'artifact':<12} {'checked on':<28} what broke", *(f"  {a:<12} {w:<28} {problem}" for a, w, problem in rows)])


def gate(artifact: str, outcome: dict, tolerances: Tolerances, budget_ms: float) -> list[str]:
    """What a runtime check that ran breaks: the artifact's parity checks, and its p50 against the latency budget.

    The budget and the parity checks left undecided are recorded in ``outcome``; emulated timings
    (``outcome["emulated"]``) say nothing about the board, so a p50 over budget there is a note in
    ``outcome``, not a problem.
    """
    judged = judge(artifact, outcome["parity"], tolerances)
    problems = messages(judged, "fail")
    outcome["undecided"] = {"parity": messages(judged, "undecided")}
    p50_ms = outcome["latency"]["p50_us"] / 1e3
    outcome["latency_budget_ms"] = budget_ms
    if p50_ms > budget_ms:
        if outcome["emulated"]:
            outcome["latency_note"] = f"p50 {p50_ms:.3f} ms over the {budget_ms:g} ms budget, not enforced: emulated timings"
        else:
            problems.append(f"p50 {p50_ms:.3f} ms (budget <= {budget_ms:g} ms)")
    if problems and outcome["parity"]["disagreeing_examples"]:
        problems.append(f"top-1 differs on golden examples {outcome['parity']['disagreeing_examples'][:10]}")
    return problems
