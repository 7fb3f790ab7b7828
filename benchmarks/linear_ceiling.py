"""The linear ceiling: logistic regression on the model's own features, read from a build.

What a linear model reaches on exactly what the default model sees: the token ids of
``tokens/*.npy`` (the window the build chose); unless the kind is ``bag``, the runs of
two to ``ngram_order`` adjacent ids among the first ``ngram_window``, each exactly (no
hashing); for ``ngram_char_bag``, the character n-grams each of those ids spells, as
``model_src/model.py`` spells them. Each feature is weighted by smooth IDF, present
or absent (binary), the vector L2-normalized, into scikit-learn's
``LogisticRegression`` with the model's ``regularization_c``. A model below it on a
corpus has a training problem; the baseline above it, a feature problem.
"""

from __future__ import annotations

import inspect
import json

import numpy as np
from common import REPO

from edge_build.corpus import SPLITS
from edge_build.layout import Layout
from edge_build.model_source import load_builder
from edge_build.tfrecord import read_split


def features(ids: np.ndarray, orders: range, window: int, spellings: np.ndarray | None) -> list[list[str]]:
    """Each text's features as strings: its ids, its n-grams of ``orders`` and its ids' spelled n-grams among the first ``window``."""
    texts = []
    for row in ids:
        tokens = row[row > 0].tolist()
        leading = tokens[:window]
        keys = [f"t{token}" for token in tokens]
        for order in orders:
            keys += ["n" + "_".join(map(str, leading[start : start + order])) for start in range(len(leading) - order + 1)]
        if spellings is not None:
            keys += [f"c{gram}" for token in leading for gram in spellings[token] if gram]
        texts.append(keys)
    return texts


def linear_ceiling(layout: Layout) -> dict:
    """Validation and test accuracy of the linear model on the build's splits, with what it was fitted on."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    builder = load_builder(REPO / "model_src" / "model.py")
    # The model's own defaults, overridden by the [model] keys the build was trained with.
    model = {name: p.default for name, p in inspect.signature(builder).parameters.items() if p.default is not inspect.Parameter.empty}
    model.update(json.loads(layout.train_log.read_text(encoding="utf-8"))["hyperparameters"]["model"])
    orders = range(2, model["ngram_order"] + 1) if model["kind"] != "bag" else range(0)
    vocabulary = layout.vocab.read_text(encoding="utf-8").splitlines()
    spelled = model["kind"] == "ngram_char_bag"
    spellings = builder.__globals__["piece_character_ngrams"](vocabulary, model["character_order"]) if spelled else None
    texts = {split: features(np.load(layout.token_ids(split)), orders, model["ngram_window"], spellings) for split in SPLITS}
    labels = {split: read_split(layout.data.split(split))[1] for split in SPLITS}
    vectorizer = TfidfVectorizer(analyzer=lambda keys: keys, binary=True, lowercase=False)
    train = vectorizer.fit_transform(texts["train"])
    classifier = LogisticRegression(C=model["regularization_c"], max_iter=2000).fit(train, labels["train"])
    scores = {split: float(np.mean(classifier.predict(vectorizer.transform(texts[split])) == labels[split])) for split in ("val", "test")}
    described = (
        ["ids"] + [f"exact {order}-grams" for order in orders] + ([f"spelled character 1-{model['character_order']}-grams"] if spelled else [])
    )
    return {
        "features": ", ".join(described) + (f" (n-grams of the first {model['ngram_window']} ids)" if orders else ""),
        "weighting": "binary, smooth IDF, L2-normalized",
        "C": model["regularization_c"],
        "distinct_features": int(train.shape[1]),
        "val_accuracy": round(scores["val"], 4),
        "test_accuracy": round(scores["test"], 4),
    }
