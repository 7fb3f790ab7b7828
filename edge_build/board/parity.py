"""The golden set (token ids, labels, reference logits) and the parity figures, the same on the build and on the board.

``compare`` measures a model's logits against the reference's; ``board.decision.verdicts``
holds those figures to an artifact's checks (its row in the artifact table, carried
to the board in the bundle's manifest) and the profile's tolerances.
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
