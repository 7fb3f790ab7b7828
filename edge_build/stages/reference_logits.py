"""Stage *reference_logits*: the reference SavedModel's logits on the test split, computed once per trained model.

Reads the reference CPU SavedModel, ``test.tfrecord`` and ``labels.txt``; writes
``test_logits.npy`` (float32 ``[test examples, classes]``, in the split's order)
from ``serving_default`` on the raw texts, after checking that its label output
names the argmax of its logits. The quality gate, the runtime checks and the
report compare every artifact with these logits, and none of them has to load
TensorFlow to get them; a new calibration set does not rerun this.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from edge_build import cli, saved_model
from edge_build.atomic import atomic_output
from edge_build.records import read_labels
from edge_build.stage_files import add_files
from edge_build.tfrecord import read_split


def reference_logits(reference: Path, test_records: Path, labels_path: Path, out: Path) -> np.ndarray:
    texts, _ = read_split(test_records)
    logits = saved_model.checked_logits(reference, texts, read_labels(labels_path)).astype(np.float32)
    with atomic_output(out) as temporary, open(temporary, "wb") as handle:
        np.save(handle, logits)
    return logits


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.stages.reference_logits", description=__doc__.splitlines()[0])
    add_files("reference_logits", parser)
    return parser


def drive(args: argparse.Namespace) -> None:
    logits = reference_logits(args.reference, args.test, args.labels, args.logits)
    print(f"reference logits: {logits.shape[0]} test examples x {logits.shape[1]} classes -> {args.logits}")


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
