"""Stage *baseline*: score a fixed classical text classifier and the majority class; write ``baseline.json``.

Reads ``train.tfrecord``, ``val.tfrecord``, ``test.tfrecord`` and ``labels.txt``. The classical baseline is word (1-2) and
character (1-3) TF-IDF into a logistic regression, fitted on the train split
with settings that are never tuned, so it is a fixed bar the neural model has to
clear; the majority baseline predicts the most frequent train class. Both are
scored on the validation and test splits, and the classical model's test
predictions are kept for the quality stage's paired test.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from edge_build import cli
from edge_build.atomic import write_json
from edge_build.corpus import SPLITS
from edge_build.errors import StageError
from edge_build.metrics import headline_figures
from edge_build.provenance import sha256_file
from edge_build.records import read_labels
from edge_build.stage_files import add_files
from edge_build.tfrecord import read_split

SCORED_SPLITS = ("val", "test")
# One definition of the settings: the pipeline is built from these and the record describes it with them.
WORD_TFIDF = {"ngram_range": (1, 2), "min_df": 2, "sublinear_tf": True}
CHARACTER_TFIDF = {"analyzer": "char_wb", "ngram_range": (1, 3), "min_df": 2, "sublinear_tf": True}
LOGISTIC_REGRESSION = {"C": 10, "max_iter": 2000}
CLASSICAL_NAME = "TF-IDF + logistic regression"


def _call(name: str, settings: dict) -> str:
    return f"{name}({', '.join(f'{key}={value!r}' for key, value in settings.items())})"


MODEL_DESCRIPTION = (
    f"make_pipeline(make_union({_call('TfidfVectorizer', WORD_TFIDF)}, {_call('TfidfVectorizer', CHARACTER_TFIDF)}), "
    f"{_call('LogisticRegression', LOGISTIC_REGRESSION)}) on UTF-8-decoded texts"
)


def classical_model():
    """The baseline pipeline, unfitted."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline, make_union

    return make_pipeline(make_union(TfidfVectorizer(**WORD_TFIDF), TfidfVectorizer(**CHARACTER_TFIDF)), LogisticRegression(**LOGISTIC_REGRESSION))


def read_texts(path: Path) -> tuple[list[str], np.ndarray]:
    """A split's texts as ``str`` (what the vectorizers take) and its labels."""
    texts, labels = read_split(path)
    return [text.decode("utf-8") for text in texts], labels


def build_baseline(split_files: dict[str, Path], labels_path: Path, out: Path) -> tuple[dict, float]:
    """Fit on the train split and score both baselines on the others (``{split: path}``); write the record to ``out``; return it and the fit's seconds."""
    import sklearn

    labels = read_labels(labels_path)
    train_path = split_files["train"]
    train_texts, train_labels = read_texts(train_path)
    splits = {split: read_texts(split_files[split]) for split in SCORED_SPLITS}

    model = classical_model()
    started = time.perf_counter()
    try:
        model.fit(train_texts, train_labels)
    except ValueError as exc:
        # min_df=2 keeps only n-grams found in two train texts; too few (or too alike) texts leave none, and the settings stay fixed.
        raise StageError(
            f"{train_path}: {len(train_texts)} train texts are too few for the classical baseline's fixed TF-IDF settings (scikit-learn: {exc})"
        ) from None
    fit_seconds = time.perf_counter() - started

    # argmax takes the first of equal counts: ties go to the lowest label id.
    majority = int(np.argmax(np.bincount(train_labels, minlength=len(labels))))
    predictions = {split: model.predict(texts) for split, (texts, _) in splits.items()}
    scored = {
        split: {
            "classical": headline_figures(y_true, predictions[split], labels),
            "majority": headline_figures(y_true, np.full_like(y_true, majority), labels),
        }
        for split, (_, y_true) in splits.items()
    }
    record = {
        "name": CLASSICAL_NAME,
        "model": MODEL_DESCRIPTION,
        "scikit_learn": sklearn.__version__,
        "labels": labels,
        "train_examples": len(train_texts),
        "majority_class": {"label": labels[majority], "label_id": majority, "test_share": scored["test"]["majority"]["accuracy"]},
        **scored,
        # The quality stage pairs these with its own predictions example by example, so it must find the same file.
        "test_split_sha256": sha256_file(split_files["test"]),
        "test_predictions": predictions["test"].tolist(),
    }
    write_json(out, record)
    return record, fit_seconds


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.stages.baseline", description=__doc__.splitlines()[0])
    add_files("baseline", parser)
    return parser


def drive(args: argparse.Namespace) -> None:
    record, fit_seconds = build_baseline({split: getattr(args, split) for split in SPLITS}, args.labels, args.baseline)
    classical, majority = record["test"]["classical"], record["test"]["majority"]
    print(
        f"baseline: test accuracy {classical['accuracy']:.4f} (macro F1 {classical['macro_f1']:.4f}) for {CLASSICAL_NAME}, "
        f"{majority['accuracy']:.4f} for the majority class '{record['majority_class']['label']}'; "
        f"fitted on {record['train_examples']} texts in {fit_seconds:.1f} s -> {args.baseline}"
    )


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
