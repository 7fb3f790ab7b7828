"""Stage *quality*: gate the reference model against the classical and majority baselines on the test split; write ``quality.json``.

Reads the reference's logits on the test split (the reference_logits stage),
``test.tfrecord``, ``labels.txt`` and the baseline stage's ``baseline.json``. The reference
model passes when its test accuracy is no more than ``--margin`` points below the
classical baseline's and the lower end of its 95% Wilson interval is above the
majority class's share of the test split; a small neural model that loses to
TF-IDF, or cannot be told apart from always answering one class, stops the build
before anything is compiled from it. McNemar's exact test of the reference
against the classical baseline on the same examples is recorded, not gated.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from edge_build import cli
from edge_build.atomic import write_json
from edge_build.errors import QualityGateError, StageError
from edge_build.metrics import headline_figures
from edge_build.provenance import sha256_file
from edge_build.records import read_json, read_labels, read_rows
from edge_build.stage_files import add_files
from edge_build.stats import mcnemar_exact
from edge_build.tfrecord import read_split


def gap_points(reference: dict, classical: dict) -> float:
    """How many accuracy points the classical baseline is ahead of the reference (negative when behind)."""
    # Rounded: in floats 100 * (0.78 - 0.75) is 3.0000000000000027, which would breach a margin of exactly 3.
    return round(100 * (classical["accuracy"] - reference["accuracy"]), 9)


def check_quality(reference: dict, baselines: dict, margin_points: float) -> list[str]:
    """The gate's breaches (empty when it passes).

    ``reference`` and ``baselines["classical"]`` / ``baselines["majority"]`` hold
    test-split figures as ``metrics.headline_figures`` makes them; the classical entry
    also has its ``name``, the majority entry its ``label``, and the majority's
    accuracy is that class's share of the split.
    """
    classical, majority = baselines["classical"], baselines["majority"]
    breaches = []
    gap = gap_points(reference, classical)
    if gap > margin_points:
        breaches.append(
            f"the reference model's test accuracy {reference['accuracy']:.4f} (macro F1 {reference['macro_f1']:.4f}) is {gap:.3g} points below "
            f"the classical baseline's {classical['accuracy']:.4f} ({classical['name']}; allowed margin {margin_points:g} points)"
        )
    low, high = reference["ci95"]
    if not low > majority["accuracy"]:
        breaches.append(
            f"the reference model's test accuracy {reference['accuracy']:.4f} (95% interval {low:.4f}-{high:.4f}) "
            f"is not above the majority class's share {majority['accuracy']:.4f} ('{majority['label']}')"
        )
    return breaches


def read_baseline(path: Path, test_records: Path, labels: list[str]) -> dict:
    """``baseline.json``, after checking it was made from these labels and this test split."""
    if not path.is_file():
        raise StageError(f"{path}: baseline file not found (run the baseline stage first)")
    record = read_json(path)
    if record["labels"] != labels or record["test_split_sha256"] != sha256_file(test_records):
        raise StageError(f"{path}: made from other labels or another test split than {test_records} (run the baseline stage again)")
    return record


def gate_quality(reference_logits: Path, test_records: Path, labels_path: Path, baseline_path: Path, margin_points: float, out: Path) -> dict:
    """Score the reference on the test split, gate it against the baselines and write ``out`` only if it passes."""
    labels = read_labels(labels_path)
    baseline = read_baseline(baseline_path, test_records, labels)
    _, y_true = read_split(test_records)
    predictions = np.argmax(read_rows(reference_logits, len(y_true)), axis=-1)
    classical_predictions = np.asarray(baseline["test_predictions"])
    paired = mcnemar_exact(predictions == y_true, classical_predictions == y_true)
    reference = headline_figures(y_true, predictions, labels)
    baselines = {
        "classical": {"name": baseline["name"], "model": baseline["model"], **baseline["test"]["classical"]},
        "majority": {"label": baseline["majority_class"]["label"], **baseline["test"]["majority"]},
    }
    breaches = check_quality(reference, baselines, margin_points)
    if breaches:
        raise QualityGateError("quality gate: " + "; ".join(breaches))
    record = {
        "reference": reference,
        **baselines,
        "margin_points": margin_points,
        "gap_points": gap_points(reference, baselines["classical"]),
        # a and b name the two sides, as the report's INT8-vs-float test does.
        "mcnemar_vs_classical": {"a": "reference", "b": "classical", **paired},
        "passed": True,
    }
    write_json(out, record)
    return record


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.stages.quality", description=__doc__.splitlines()[0])
    add_files("quality", parser)
    parser.add_argument("--margin", type=float, required=True, help="accuracy points the reference may trail the classical baseline by")
    return parser


def drive(args: argparse.Namespace) -> None:
    if not 0 <= args.margin < math.inf:
        raise StageError(f"--margin {args.margin:g}: expected a finite number of accuracy points >= 0, such as 3")
    record = gate_quality(args.reference_logits, args.test, args.labels, args.baseline, args.margin, args.quality)
    reference, classical, majority, paired = record["reference"], record["classical"], record["majority"], record["mcnemar_vs_classical"]
    low, high = reference["ci95"]
    print(
        f"quality: passed; reference test accuracy {reference['accuracy']:.4f} (95% interval {low:.4f}-{high:.4f}, macro F1 {reference['macro_f1']:.4f}), "
        f"{classical['name']} {classical['accuracy']:.4f} (gap {record['gap_points']:+.3g} points, allowed {record['margin_points']:g}; "
        f"McNemar p = {paired['p_value']:.3g} over {paired['discordant']} discordant examples), majority class '{majority['label']}' {majority['accuracy']:.4f} -> {args.quality}"
    )


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
