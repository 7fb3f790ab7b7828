"""How an artifact's logits compare with the reference's, and which profile tolerances that breaks.

Plain numpy: the comparison itself lives with the device code (``device.golden``),
which must run without edge-build's host side; the conversion stage, the device
checks and the report all use it.
"""

from __future__ import annotations

from edge_build.config import Tolerances
from edge_build.device.golden import compare

__all__ = ["breaches", "compare"]


def breaches(artifact: str, figures: dict, tolerances: Tolerances, on_gpu: bool = False) -> list[str]:
    """Each tolerance ``figures`` breaks, as ``"<figure> <value> (allowed <op> <limit>)"``; NaN breaks every check.

    ``on_gpu``: the figures of saved_model_xla were taken on a GPU (its own tolerance).
    """
    if artifact == "tflite_int8":
        checks = [
            ("top-1 agreement", figures["top1_agreement"], ">=", tolerances.int8_min_top1_agreement),
            ("accuracy drop", figures["reference_accuracy"] - figures["accuracy"], "<=", tolerances.int8_max_accuracy_drop),
        ]
    elif artifact == "tflite_fp32":
        checks = [("max |Δlogit|", figures["max_abs_logit_error"], "<=", tolerances.fp32_max_abs_logit)]
    elif artifact == "saved_model_xla":
        checks = [("max |Δlogit|", figures["max_abs_logit_error"], "<=", tolerances.xla_limit(on_gpu)[1])]
    else:
        return []
    return [
        f"{name} {value:.6g} (allowed {op} {limit:g})"
        for name, value, op, limit in checks
        if not (value <= limit if op == "<=" else value >= limit)
    ]


def failure_table(rows: list[tuple[str, str, str]]) -> str:
    """``(artifact, where, what broke)`` rows as the table a failed gate prints."""
    return "\n".join([f"  {'artifact':<12} {'checked on':<28} what broke", *(f"  {a:<12} {w:<28} {problem}" for a, w, problem in rows)])
