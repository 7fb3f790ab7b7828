"""Classification metrics in plain numpy (no TensorFlow), shared by every evaluation."""

from __future__ import annotations

import math
import statistics

import numpy as np

from edge_build.stats import wilson_interval


def classification_metrics(y_true: np.ndarray, y_pred: np.ndarray, labels: list[str]) -> dict:
    """Accuracy with its 95% Wilson interval, per-class precision/recall/F1/support, macro F1 and the confusion matrix.

    ``confusion[i][j]`` counts examples of class ``i`` predicted as ``j``.  A class
    that is never predicted has precision 0 (and likewise recall for no support).
    """
    y_true = np.asarray(y_true, dtype=np.int64)
    y_pred = np.asarray(y_pred, dtype=np.int64)
    if y_true.shape != y_pred.shape or y_true.ndim != 1 or y_true.size == 0:
        raise ValueError(f"need two equal, non-empty 1-D label arrays, got {y_true.shape} and {y_pred.shape}")
    n = len(labels)
    confusion = np.zeros((n, n), dtype=np.int64)
    np.add.at(confusion, (y_true, y_pred), 1)
    true_positive = np.diag(confusion)
    predicted = confusion.sum(axis=0)
    support = confusion.sum(axis=1)
    precision = np.divide(true_positive, predicted, out=np.zeros(n), where=predicted > 0)
    recall = np.divide(true_positive, support, out=np.zeros(n), where=support > 0)
    denominator = precision + recall
    f1 = np.divide(2 * precision * recall, denominator, out=np.zeros(n), where=denominator > 0)
    return {
        "examples": int(y_true.size),
        "correct": int(true_positive.sum()),
        "accuracy": float(true_positive.sum() / y_true.size),
        "ci95": list(wilson_interval(int(true_positive.sum()), int(y_true.size))),
        "macro_f1": float(f1.mean()),
        "per_class": {
            label: {
                "precision": float(precision[i]),
                "recall": float(recall[i]),
                "f1": float(f1[i]),
                "support": int(support[i]),
            }
            for i, label in enumerate(labels)
        },
        "confusion_matrix": confusion.tolist(),
    }


def headline_figures(y_true: np.ndarray, y_pred: np.ndarray, labels: list[str]) -> dict:
    """Accuracy, macro F1, counts and the 95% Wilson interval of one set of predictions."""
    metrics = classification_metrics(y_true, y_pred, labels)
    return {key: metrics[key] for key in ("accuracy", "macro_f1", "correct", "examples", "ci95")}


def distribution(values: list[int]) -> dict:
    """Minimum, median, mean, 95th percentile and maximum of a non-empty list of counts (lengths in
    characters or tokens); p95 is the nearest-rank percentile, so every figure is exact or rounded once."""
    ordered = sorted(int(v) for v in values)
    return {
        "min": ordered[0],
        "median": statistics.median(ordered),
        "mean": round(statistics.fmean(ordered), 1),
        "p95": ordered[math.ceil(0.95 * len(ordered)) - 1],
        "max": ordered[-1],
    }
