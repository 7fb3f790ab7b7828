"""The classifier in model_src/model.py: what the hashed bigrams see, and what padding adds (nothing)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, TINY_HPARAMS

from edge_build import training
from edge_build.config.hparams import load_hyperparameters
from edge_build.errors import ConfigError
from edge_build.layout import Layout
from edge_build.model_source import build_model, load_builder
from edge_build.stages import data, vocab

MODEL = REPO / "model_src" / "model.py"
FILLER = "the movie was plot actors story film scenes ending music cast script".split()
# Both classes hold the same four tokens; only their order tells them apart.
PHRASES = {"negative": "not good , bad", "positive": "good , not bad"}


def write_word_order_corpus(path: Path, per_class: int = 60, seed: int = 0) -> Path:
    rng = random.Random(seed)
    lines = ["text,label"]
    for label, phrase in PHRASES.items():
        for _ in range(per_class):
            before, after = (" ".join(rng.choice(FILLER) for _ in range(rng.randint(1, 4))) for _ in range(2))
            lines.append(f'"{before} {phrase} {after}",{label}')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def word_order_data(tmp_path_factory) -> Layout:
    root = tmp_path_factory.mktemp("word_order")
    layout = Layout(root / "build")
    data.build_data(str(write_word_order_corpus(root / "order.csv")), layout.data.outputs, (0.6, 0.2, 0.2), seed=3)
    vocab.build_vocab(layout.data.split("train"), layout.vocab, 200, lower_case=True)
    return layout


def val_accuracy(layout: Layout, tmp_path: Path, kind: str) -> float:
    hparams_path = tmp_path / f"{kind}.toml"
    settings = TINY_HPARAMS.replace("sequence_length = 24", "sequence_length = 16").replace("epochs = 3", "epochs = 30")
    hparams_path.write_text(settings.replace("[model]", f'[model]\nkind = "{kind}"\nngram_buckets = 512'), encoding="utf-8")
    inputs = training.TrainInputs(layout.data.split("train"), layout.data.split("val"), layout.data.labels, layout.vocab, hparams_path, MODEL)
    log = training.train(inputs, load_hyperparameters(hparams_path), tmp_path / kind / "model.weights.h5", tmp_path / kind / "train_log.json")
    return log["best_val_accuracy"]


def test_the_ngram_bag_learns_word_order_and_the_bag_cannot(word_order_data, tmp_path: Path):
    # 24 validation texts, 12 a class: the bag sees the same multiset of tokens in both classes.
    assert val_accuracy(word_order_data, tmp_path, "ngram_bag") == 1.0
    assert val_accuracy(word_order_data, tmp_path, "bag") <= 0.75


def ngram_model(sequence_length: int):
    hparams = load_hyperparameters(REPO / "model_src" / "hparams.toml").with_window(sequence_length)
    return build_model(MODEL, hparams, REPO / "model_src" / "hparams.toml", vocab_size=500, num_classes=3)


def test_padding_adds_nothing_to_the_ngram_bag():
    import keras

    keras.utils.set_random_seed(0)
    short, long = ngram_model(16), ngram_model(48)
    # Train a few steps so that every weight, the padding rows' neighbours included, moves from its initial value.
    ids = np.random.default_rng(0).integers(1, 500, size=(64, 16)).astype(np.int32)
    ids[:, 10:] = 0
    short.compile(keras.optimizers.Adam(0.05), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    short.fit(ids, np.arange(64) % 3, epochs=3, verbose=0)
    for table in ("embedding", "bigram_embedding"):
        weights = short.get_layer(table).get_weights()[0]
        assert not weights[0].any() and weights[1:].any(), table  # bucket 0 ([PAD], and pairs that touch it) stays zero
    long.set_weights(short.get_weights())
    text = ids[:4, :10]
    padded = {length: np.pad(text, ((0, 0), (0, length - 10))) for length in (16, 48)}
    np.testing.assert_allclose(short.predict(padded[16], verbose=0), long.predict(padded[48], verbose=0), rtol=1e-5, atol=1e-6)
    pairs = short.get_layer("bigram_ids")(padded[16]).numpy()
    assert (pairs[:, 9:] == 0).all() and (pairs[:, :9] > 0).all()


def test_a_kind_the_model_does_not_have_is_one_line_naming_the_file(tmp_path: Path):
    hparams_path = tmp_path / "hparams.toml"
    hparams_path.write_text('[tokenizer]\nsequence_length = 16\n[model]\nkind = "lstm"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"hparams\.toml: \[model\] in .*model\.py: kind = 'lstm': expected one of bag, ngram_bag"):
        build_model(MODEL, load_hyperparameters(hparams_path), hparams_path, vocab_size=100, num_classes=2)


def test_the_bigram_ids_stay_within_int32_and_the_buckets():
    builder = load_builder(MODEL)
    model = builder(vocab_size=46340, num_classes=2, sequence_length=4, ngram_buckets=1000)
    pairs = model.get_layer("bigram_ids")(np.array([[46339, 46339, 1, 0]], dtype=np.int32)).numpy()
    assert pairs.min() >= 0 and pairs.max() < 1000 and pairs[0, 2] == 0
    with pytest.raises(ValueError, match="vocab_size must be at most 46340"):
        builder(vocab_size=46341, num_classes=2, sequence_length=4)


@pytest.mark.parametrize(
    "keywords, message",
    [
        ({"ngram_buckets": 1}, "ngram_buckets = 1: must be a whole number from 2 to 2147483647"),
        ({"ngram_buckets": 2.5}, "ngram_buckets = 2.5: must be a whole number from 2 to 2147483647"),
        ({"ngram_buckets": 3_000_000_000}, "ngram_buckets = 3000000000: must be a whole number from 2 to 2147483647"),
        ({"ngram_buckets": True}, "ngram_buckets = True: must be a whole number"),
        ({"ngram_window": 1.5}, "ngram_window = 1.5: must be a whole number of 2 or more"),
    ],
)
def test_pair_settings_the_model_cannot_take_are_refused_before_anything_is_allocated(keywords: dict, message: str):
    with pytest.raises(ValueError, match=message):
        load_builder(MODEL)(vocab_size=100, num_classes=2, sequence_length=16, **keywords)
