"""The golden set (token ids, labels, reference logits) and the parity rule, the same on the build and on the board.

``compare`` measures a model's logits against the reference's; ``breaches`` holds
those figures to an artifact's checks (its row in the artifact table, carried
to the board in the bundle's manifest) and the profile's tolerances. The
build's gates and ``bench.py --parity`` both call ``breaches``, so the board
refuses exactly what the build refuses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

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
    """Logit errors, top-1 agreement and both accuracies of ``candidate`` against ``reference``.

    The examples whose top class differs are listed (indices into the golden set).
    """
    if reference.shape != candidate.shape or len(labels) != len(reference):
        raise ValueError(f"logits {candidate.shape} against reference {reference.shape} for {len(labels)} labels")
    difference = np.abs(candidate.astype(np.float64) - reference.astype(np.float64))
    disagree = np.flatnonzero(np.argmax(candidate, -1) != np.argmax(reference, -1))
    return {
        "examples": int(len(labels)),
        "max_abs_logit_error": float(np.max(difference)),
        "mean_abs_logit_error": float(np.mean(difference)),
        "top1_agreement": float(1 - len(disagree) / len(labels)),
        "disagreeing_examples": disagree.tolist(),
        "accuracy": float(np.mean(np.argmax(candidate, -1) == labels)),
        "reference_accuracy": float(np.mean(np.argmax(reference, -1) == labels)),
    }


#: Figures a check may name beyond those ``compare`` returns.
DERIVED = {"accuracy_drop": lambda figures: figures["reference_accuracy"] - figures["accuracy"]}


def breaches(checks: Sequence[Sequence], figures: Mapping, tolerances: Mapping[str, float]) -> list[str]:
    """Each check ``(what, figure, "<=" or ">=", tolerance key)`` the figures break, as ``"<what> <value> (allowed <op> <limit>)"``.

    NaN breaks every check.
    """
    broken = []
    for what, figure, op, key in checks:
        value = DERIVED[figure](figures) if figure in DERIVED else figures[figure]
        limit = tolerances[key]
        if not (value <= limit if op == "<=" else value >= limit):
            broken.append(f"{what} {value:.6g} (allowed {op} {limit:g})")
    return broken
