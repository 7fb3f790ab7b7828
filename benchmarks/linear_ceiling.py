"""The linear ceiling: logistic regression on the model's own features, read from a build.

What a linear model reaches on exactly what the default model sees: the token ids of
``tokens/*.npy`` (the window the build chose), and the pairs of adjacent ids among the
first ``ngram_window``, each pair exactly (no hashing), weighted by smooth IDF,
present or absent (binary), L2-normalized, into scikit-learn's
``LogisticRegression`` with the model's ``regularization_c``. A model below it on a
corpus has a training problem; the baseline above it, a feature problem.
"""

from __future__ import annotations

import json

import numpy as np

from edge_build.corpus import SPLITS
from edge_build.layout import Layout
from edge_build.tfrecord import read_split


def features(ids: np.ndarray, vocab: int, pair_window: int | None) -> list[list[int]]:
    """Each text's feature keys: its ids, and ``vocab**2 + left * vocab + right`` for each pair."""
    texts = []
    for row in ids:
        tokens = row[row > 0].astype(np.int64)
        keys = tokens.tolist()
        if pair_window:
            leading = tokens[:pair_window]
            keys += (vocab * vocab + leading[:-1] * vocab + leading[1:]).tolist()
        texts.append(keys)
    return texts


def linear_ceiling(layout: Layout) -> dict:
    """Validation and test accuracy of the linear model on the build's splits, with what it was fitted on."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    model = json.loads(layout.train_log.read_text(encoding="utf-8"))["hyperparameters"]["model"]
    pair_window = model.get("ngram_window", 128) if model.get("kind", "ngram_bag") == "ngram_bag" else None
    c = model.get("regularization_c", 1.0)
    vocab = len(layout.vocab.read_text(encoding="utf-8").splitlines())
    texts = {split: features(np.load(layout.token_ids(split)), vocab, pair_window) for split in SPLITS}
    labels = {split: read_split(layout.data.split(split))[1] for split in SPLITS}
    vectorizer = TfidfVectorizer(analyzer=lambda keys: keys, binary=True, lowercase=False)
    train = vectorizer.fit_transform(texts["train"])
    classifier = LogisticRegression(C=c, max_iter=2000).fit(train, labels["train"])
    scores = {split: float(np.mean(classifier.predict(vectorizer.transform(texts[split])) == labels[split])) for split in ("val", "test")}
    return {
        "features": f"ids + exact pairs of the first {pair_window} ids" if pair_window else "ids",
        "weighting": "binary, smooth IDF, L2-normalized",
        "C": c,
        "distinct_features": int(train.shape[1]),
        "val_accuracy": round(scores["val"], 4),
        "test_accuracy": round(scores["test"], 4),
    }
