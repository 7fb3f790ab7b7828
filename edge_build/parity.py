"""How an artifact's logits compare with the reference's, and which profile tolerances that breaks.

Plain numpy: shared by the conversion stage (validation split, against the Keras
model) and the report (test split, against the reference CPU SavedModel).
"""

from __future__ import annotations

import numpy as np

from edge_build.config import Tolerances


def compare(reference: np.ndarray, candidate: np.ndarray, labels: np.ndarray) -> dict:
    """Logit errors, top-1 agreement and both accuracies of ``candidate`` against ``reference``."""
    if reference.shape != candidate.shape or len(labels) != len(reference):
        raise ValueError(f"logits {candidate.shape} against reference {reference.shape} for {len(labels)} labels")
    difference = np.abs(candidate.astype(np.float64) - reference.astype(np.float64))
    return {
        "examples": int(len(labels)),
        "max_abs_logit_error": float(np.max(difference)),
        "mean_abs_logit_error": float(np.mean(difference)),
        "top1_agreement": float(np.mean(np.argmax(candidate, -1) == np.argmax(reference, -1))),
        "accuracy": float(np.mean(np.argmax(candidate, -1) == labels)),
        "reference_accuracy": float(np.mean(np.argmax(reference, -1) == labels)),
    }


def breaches(artifact: str, figures: dict, tolerances: Tolerances) -> list[str]:
    """Each tolerance ``figures`` breaks, as ``"<figure> <value> (allowed <op> <limit>)"``; NaN breaks every check."""
    if artifact == "tflite_int8":
        checks = [
            ("top-1 agreement", figures["top1_agreement"], ">=", tolerances.int8_min_top1_agreement),
            ("accuracy drop", figures["reference_accuracy"] - figures["accuracy"], "<=", tolerances.int8_max_accuracy_drop),
        ]
    elif artifact == "tflite_fp32":
        checks = [("max |Δlogit|", figures["max_abs_logit_error"], "<=", tolerances.fp32_max_abs_logit)]
    elif artifact == "saved_model_xla":
        checks = [("max |Δlogit|", figures["max_abs_logit_error"], "<=", tolerances.xla_max_abs_logit)]
    else:
        return []
    return [
        f"{name} {value:.6g} (allowed {op} {limit:g})"
        for name, value, op, limit in checks
        if not (value <= limit if op == "<=" else value >= limit)
    ]
