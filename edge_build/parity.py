"""The build's side of the parity rule: an artifact's checks and tolerances, and the table a failed gate prints.

The rule itself is ``board.parity.breaches``, which the board runs too.
"""

from __future__ import annotations

from edge_build.artifacts import ARTIFACTS
from edge_build.board.parity import breaches as breaches_of
from edge_build.board.parity import compare
from edge_build.config.profile import Tolerances

__all__ = ["breaches", "compare", "failure_table"]


def breaches(artifact: str, figures: dict, tolerances: Tolerances, on_gpu: bool = False) -> list[str]:
    """Each tolerance of the profile that ``artifact``'s figures break (``on_gpu``: saved_model_xla ran on a GPU)."""
    return breaches_of(ARTIFACTS[artifact].parity, figures, tolerances.limits(on_gpu))


def failure_table(rows: list[tuple[str, str, str]]) -> str:
    """``(artifact, where, what broke)`` rows as the table a failed gate prints."""
    return "\n".join([f"  {'artifact':<12} {'checked on':<28} what broke", *(f"  {a:<12} {w:<28} {problem}" for a, w, problem in rows)])
