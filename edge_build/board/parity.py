"""The golden set (token ids, labels, reference logits) and the parity rule, the same on the build and on the board.

``compare`` measures a model's logits against the reference's; ``verdicts`` holds
those figures to an artifact's checks (its row in the artifact table, carried
to the board in the bundle's manifest) and the profile's tolerances. The
build's gates, the board check and ``bench.py --parity`` all call it, so the
board decides exactly what the build decides. The rule, in full:

- **Float parity** (``max |Δlogit|``): a float model's error grows with its logits
  (a rounding error is relative to the numbers rounded), so the bound scales with
  them: ``|Δlogit| <= rtol * scale + atol``, where ``scale`` is the reference's
  largest ``|logit|`` over the examples checked. A tolerance given as a plain number
  (the profile's ``*_max_abs_logit`` keys) is an absolute bound instead.
- **Proportions** (top-1 agreement, accuracy drop): ``board.decision``'s rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .decision import lower_bound, upper_bound

GOLDEN_KEYS = ("ids", "labels", "reference_logits")


def pack_texts(texts: Sequence[bytes]) -> dict:
    """Raw texts as two plain arrays (UTF-8 bytes end to end, and where each text starts): ``np.load`` needs no pickle for them."""
    lengths = np.array([len(t) for t in texts], dtype=np.int64)
    return {"text_bytes": np.frombuffer(b"".join(texts), dtype=np.uint8), "text_offsets": np.concatenate([[0], np.cumsum(lengths)])}


def unpack_texts(arrays: Mapping[str, np.ndarray]) -> list[bytes]:
    """The texts ``pack_texts`` stored (a golden set of a raw-text model carries them)."""
    if "text_bytes" not in arrays:
        raise ValueError("no raw texts here (a golden set holds them only for targets with a raw-text model)")
    data, offsets = arrays["text_bytes"].tobytes(), arrays["text_offsets"].tolist()
    return [data[start:end] for start, end in zip(offsets[:-1], offsets[1:])]


def load_golden(path: str) -> dict:
    with np.load(path, allow_pickle=False) as data:
        missing = [key for key in GOLDEN_KEYS if key not in data]
        if missing:
            raise ValueError(f"{path}: not a golden set (missing {', '.join(missing)})")
        return {key: data[key] for key in data.files}


def compare(reference: np.ndarray, candidate: np.ndarray, labels: np.ndarray) -> dict:
    """Logit errors, top-1 agreement and both accuracies of ``candidate`` against ``reference``, with the counts the rule needs.

    The examples whose top class differs are listed (indices into the golden set).
    """
    if reference.shape != candidate.shape or len(labels) != len(reference):
        raise ValueError(f"logits {candidate.shape} against reference {reference.shape} for {len(labels)} labels")
    difference = np.abs(candidate.astype(np.float64) - reference.astype(np.float64))
    disagree = np.flatnonzero(np.argmax(candidate, -1) != np.argmax(reference, -1))
    correct, reference_correct = np.argmax(candidate, -1) == labels, np.argmax(reference, -1) == labels
    return {
        "examples": int(len(labels)),
        "max_abs_logit_error": float(np.max(difference)),
        "mean_abs_logit_error": float(np.mean(difference)),
        "logit_scale": float(np.max(np.abs(reference))),
        "top1_agreement": float(1 - len(disagree) / len(labels)),
        "disagreeing_examples": disagree.tolist(),
        "accuracy": float(np.mean(correct)),
        "reference_accuracy": float(np.mean(reference_correct)),
        "only_reference_correct": int(np.sum(reference_correct & ~correct)),
        "only_candidate_correct": int(np.sum(correct & ~reference_correct)),
    }


def passing_side_bound(figure: str, figures: Mapping) -> float | None:
    """The one-sided 95% bound of a proportion figure on its passing side; ``None`` for a figure without one (a logit error)."""
    if figure == "top1_agreement":
        n = figures["examples"]
        return lower_bound(n - len(figures["disagreeing_examples"]), n)
    if figure == "accuracy_drop":
        # Only the examples exactly one model gets right move the drop: (reference-only - candidate-only) / n.
        # Given d of them, each is the reference's with probability q; the drop's bound is d (2 q_upper - 1) / n.
        reference_only, discordant = figures["only_reference_correct"], figures["only_reference_correct"] + figures["only_candidate_correct"]
        return 0.0 if discordant == 0 else discordant * (2 * upper_bound(reference_only, discordant) - 1) / figures["examples"]
    return None


def limit_of(key: str, tolerance, figures: Mapping) -> tuple[float, str]:
    """A tolerance's bound on these figures, and how it was reached: a number is absolute; ``{"rtol", "atol"}`` scales with the logits."""
    if isinstance(tolerance, Mapping):
        rtol, atol, scale = tolerance["rtol"], tolerance["atol"], figures["logit_scale"]
        return rtol * scale + atol, f"{key}: rtol {rtol:g} x max|logit| {scale:.4g} + atol {atol:g}"
    return float(tolerance), key


#: Figures a check may name beyond those ``compare`` returns.
DERIVED = {"accuracy_drop": lambda figures: figures["reference_accuracy"] - figures["accuracy"]}


def verdicts(checks: Sequence[Sequence], figures: Mapping, tolerances: Mapping) -> list[dict]:
    """Each check ``(what, figure, "<=" or ">=", tolerance key)`` judged by the rule above: ``pass``, ``undecided`` or ``fail``.

    NaN fails every check.
    """
    judged = []
    for what, figure, op, key in checks:
        value = DERIVED[figure](figures) if figure in DERIVED else figures[figure]
        limit, derivation = limit_of(key, tolerances[key], figures)
        meets = bool(value <= limit if op == "<=" else value >= limit)
        bound = passing_side_bound(figure, figures)
        decided = bound is None or (bound <= limit if op == "<=" else bound >= limit)
        verdict = "fail" if not meets else "pass" if decided else "undecided"
        message = f"{what} {value:.6g} (allowed {op} {limit:.6g}, {derivation})"
        if verdict == "undecided":
            message += f": its 95% bound {bound:.6g} on {figures['examples']} examples does not clear the limit"
        judged.append({"check": what, "key": key, "value": value, "limit": limit, "bound": bound, "verdict": verdict, "message": message})
    return judged


def messages(judged: Sequence[Mapping], verdict: str) -> list[str]:
    """The messages of the checks ``verdicts`` judged ``verdict``: ``"fail"`` gives
    ``"<what> <value> (allowed <op> <limit>, <the key, or how the limit was reached>)"``."""
    return [v["message"] for v in judged if v["verdict"] == verdict]
