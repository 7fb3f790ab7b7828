"""The classifier in model_src/model.py: what the hashed bigrams see, its tables learned from the train split, and what padding adds (nothing)."""

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
from edge_build.stages import data, tokenize, vocab

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
    tokenize.tokenize_splits({layout.data.split("train"): layout.token_ids("train")}, layout.vocab, True, 16)
    return layout


def val_accuracy(layout: Layout, tmp_path: Path, kind: str) -> float:
    hparams_path = tmp_path / f"{kind}.toml"
    settings = TINY_HPARAMS.replace("sequence_length = 24", "sequence_length = 16").replace("epochs = 3", "epochs = 30")
    settings = settings.replace("embedding_dim = 8", 'embedding_dim = "classes"')  # the default: a logistic regression
    hparams_path.write_text(settings.replace("[model]", f'[model]\nkind = "{kind}"\nngram_buckets = 512'), encoding="utf-8")
    inputs = training.TrainInputs(
        layout.data.split("train"), layout.data.split("val"), layout.data.labels, layout.vocab, hparams_path, MODEL, layout.token_ids("train")
    )
    log = training.train(inputs, load_hyperparameters(hparams_path), tmp_path / kind / "model.weights.h5", tmp_path / kind / "train_log.json")
    return log["best_val_accuracy"]


def test_the_ngram_bag_learns_word_order_and_the_bag_cannot(word_order_data, tmp_path: Path):
    # 24 validation texts, 12 a class: the bag sees the same multiset of tokens in both classes.
    assert val_accuracy(word_order_data, tmp_path, "ngram_bag") == 1.0
    assert val_accuracy(word_order_data, tmp_path, "bag") <= 0.75


def ngram_model(sequence_length: int, train_ids: Path):
    hparams = load_hyperparameters(REPO / "model_src" / "hparams.toml").with_window(sequence_length)
    vocabulary = ["[PAD]", "[UNK]", *(f"t{index}" if index % 3 else f"##t{index}" for index in range(2, 500))]
    return build_model(MODEL, hparams, REPO / "model_src" / "hparams.toml", vocab_size=500, num_classes=3, train_ids=train_ids, vocabulary=vocabulary)


def train_ids_file(tmp_path: Path, ids: np.ndarray, length: int) -> Path:
    path = tmp_path / f"train-{length}.npy"
    np.save(path, np.pad(ids, ((0, 0), (0, length - ids.shape[1]))))
    return path


def test_padding_adds_nothing_to_the_ngram_bag(tmp_path: Path):
    import keras

    keras.utils.set_random_seed(0)
    ids = np.random.default_rng(0).integers(1, 500, size=(64, 16)).astype(np.int32)
    ids[:, 10:] = 0
    # The same train texts at two windows: the tables learned from them (IDF, buckets) must not see the padding either.
    short, long = ngram_model(16, train_ids_file(tmp_path, ids, 16)), ngram_model(48, train_ids_file(tmp_path, ids, 48))
    assert short.feature_tables == long.feature_tables
    short.compile(keras.optimizers.Adam(0.05), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    short.fit(ids, np.arange(64) % 3, epochs=3, verbose=0)
    for table in ("embedding", "bigram_embedding", "trigram_embedding", "character_embedding"):
        layer = short.get_layer(table)
        assert layer.feature_weights[0] == 0 and (layer.feature_weights[1:] > 0).all(), table  # [PAD], and pairs that touch it
        rows, weights, *tables = layer.get_weights()
        np.testing.assert_array_equal(weights, layer.feature_weights)  # training leaves them as the train split gave them
        rows[0] = 100.0  # whatever padding's row holds, its weight keeps it out
        layer.set_weights([rows, weights, *tables])
    long.set_weights(short.get_weights())
    text = ids[:4, :10]
    padded = {length: np.pad(text, ((0, 0), (0, length - 10))) for length in (16, 48)}
    np.testing.assert_allclose(short.predict(padded[16], verbose=0), long.predict(padded[48], verbose=0), rtol=1e-5, atol=1e-6)
    pairs, buckets = short.get_layer("bigram_ids")(padded[16]).numpy(), short.feature_tables["ngrams"]["bigram"]["buckets"]
    assert (pairs[:, 9:] == 0).all()
    np.testing.assert_array_equal(pairs[:, :9], (text[:, :-1].astype(np.int64) * 500 + text[:, 1:]) % buckets)


def test_the_feature_weights_are_scikit_learns_smooth_idf_of_the_train_split(tmp_path: Path):
    from sklearn.feature_extraction.text import TfidfVectorizer

    ids = np.random.default_rng(1).integers(1, 40, size=(50, 12)).astype(np.int32)
    ids[::3, 6:] = 0  # some shorter texts; a token repeated in a text counts once
    model = ngram_model(12, train_ids_file(tmp_path, ids, 12))
    vectorizer = TfidfVectorizer(analyzer=lambda row: [int(i) for i in row if i]).fit(list(ids))
    expected = dict(zip(vectorizer.get_feature_names_out(), vectorizer.idf_))
    weights = model.get_layer("embedding").feature_weights
    np.testing.assert_allclose([weights[i] for i in expected], list(expected.values()), rtol=1e-6)
    unseen = sorted(set(range(1, 500)) - set(expected))
    np.testing.assert_allclose(weights[unseen], np.log(51) + 1, rtol=1e-6)  # in no train text: the largest weight


def test_auto_buckets_hold_eight_per_ngram_seen_twice_within_the_size_budget():
    builder = load_builder(MODEL)
    ids = np.random.default_rng(2).integers(1, 30, size=(400, 8)).astype(np.int32)  # 2,800 pairs over 841 possible ones: most seen twice
    model = builder(vocab_size=30, num_classes=4, sequence_length=8, train_ids=ids, kind="ngram_bag")
    for name in ("bigram", "trigram"):
        table = model.feature_tables["ngrams"][name]
        assert table["buckets"] == 2 ** int(np.ceil(np.log2(8 * table["seen_twice"]))) and table["seen_twice"] > 100, name
        assert table["colliding_share"] < 0.2, name
    assert model.feature_tables["ngrams"]["bigram"]["colliding_share"] == 0  # 900 pair ids or fewer, each its own bucket
    assert model.feature_tables["row_width"] == 4
    small = builder(vocab_size=30, num_classes=4, sequence_length=8, train_ids=ids, kind="ngram_bag", max_model_mb=0.01)
    # 10,000 bytes hold 2,000 rows of 4 numbers and a weight: 30 for the tokens, and the largest n-gram table halved until the rest fit.
    assert sum(table["buckets"] for table in small.feature_tables["ngrams"].values()) <= 2000 - 30
    assert small.feature_tables["int8_table_mb"] <= 0.01
    with pytest.raises(ValueError, match="max_model_mb = 0.0001: holds no n-gram tables beside 30 token rows of 5 bytes"):
        builder(vocab_size=30, num_classes=4, sequence_length=8, train_ids=ids, kind="ngram_bag", max_model_mb=0.0001)


def test_triples_keep_every_int32_step_below_2_to_the_31_and_match_the_numpy_twin():
    builder = load_builder(MODEL)
    ids = np.array([[46339, 46339, 46339, 1, 0, 0], [46338, 1, 46339, 46337, 2, 0]], dtype=np.int32)
    model = builder(vocab_size=46340, num_classes=2, sequence_length=6, train_ids=ids, kind="ngram_bag", ngram_buckets=1_000_003)
    triples = model.get_layer("trigram_ids")(ids).numpy()
    keys = ids[:, :4].astype(np.int64) * 46340 + ids[:, 1:5]
    expected = ((keys % (2**31 // 46340)) * 46340 + ids[:, 2:]) * np.minimum(ids[:, 2:], 1) % 1_000_003
    np.testing.assert_array_equal(triples, expected)
    assert ((keys % (2**31 // 46340)) * 46340 + ids[:, 2:]).max() < 2**31  # the int32 product never wraps
    assert (triples[0, 2:] == 0).all() and (triples[1, 3:] == 0).all() and (triples[:, :2] > 0).all()


def test_a_kind_the_model_does_not_have_is_one_line_naming_the_file(tmp_path: Path):
    hparams_path = tmp_path / "hparams.toml"
    hparams_path.write_text('[tokenizer]\nsequence_length = 16\n[model]\nkind = "lstm"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"hparams\.toml: \[model\] in .*model\.py: kind = 'lstm': expected one of bag, ngram_bag, ngram_char_bag"):
        build_model(
            MODEL,
            load_hyperparameters(hparams_path),
            hparams_path,
            vocab_size=100,
            num_classes=2,
            train_ids=train_ids_file(tmp_path, np.zeros((1, 16), np.int32), 16),
        )


def test_the_bigram_ids_stay_within_int32_and_the_buckets():
    builder = load_builder(MODEL)
    model = builder(vocab_size=46340, num_classes=2, sequence_length=4, train_ids=np.zeros((1, 4), np.int32), kind="ngram_bag", ngram_buckets=1000)
    pairs = model.get_layer("bigram_ids")(np.array([[46339, 46339, 1, 0]], dtype=np.int32)).numpy()
    assert pairs.min() >= 0 and pairs.max() < 1000 and pairs[0, 2] == 0
    with pytest.raises(ValueError, match="vocab_size must be at most 46340"):
        builder(vocab_size=46341, num_classes=2, sequence_length=4, train_ids=np.zeros((1, 4), np.int32))


@pytest.mark.parametrize(
    "keywords, message",
    [
        ({"ngram_buckets": 1}, 'ngram_buckets = 1: must be a whole number from 2 to 2147483647, or "auto"'),
        ({"ngram_buckets": 2.5}, 'ngram_buckets = 2.5: must be a whole number from 2 to 2147483647, or "auto"'),
        ({"ngram_buckets": 3_000_000_000}, "ngram_buckets = 3000000000: must be a whole number from 2 to 2147483647"),
        ({"ngram_buckets": True}, "ngram_buckets = True: must be a whole number"),
        ({"ngram_buckets": "many"}, "ngram_buckets = 'many': must be a whole number"),
        ({"ngram_window": 1.5}, "ngram_window = 1.5: must be a whole number of 3 or more"),
        ({"ngram_order": 4}, "ngram_order = 4: must be a whole number from 2 to 3"),
        ({"embedding_dim": "wide"}, "embedding_dim = 'wide': must be a whole number of 1 or more, or \"classes\""),
        ({"regularization_c": 0}, "regularization_c = 0: must be a number above 0"),
        ({"max_model_mb": "big"}, "max_model_mb = 'big': must be a number above 0"),
    ],
)
def test_pair_settings_the_model_cannot_take_are_refused_before_anything_is_allocated(keywords: dict, message: str):
    with pytest.raises(ValueError, match=message):
        load_builder(MODEL)(vocab_size=100, num_classes=2, sequence_length=16, train_ids=np.zeros((1, 16), np.int32), **keywords)


# British and American spellings: only characters tell the classes apart once the words are new.
SPELLINGS = {
    "british": "colour flavour honour neighbour labour humour favour harbour rumour vapour valour armour behaviour odour vigour "
    "organise realise recognise apologise analyse centre theatre metre fibre litre",
    "american": "color flavor honor neighbor labor humor favor harbor rumor vapor valor armor behavior odor vigor "
    "organize realize recognize apologize analyze center theater meter fiber liter",
}


def spelling_corpus(seed: int = 0):
    """Texts of three words of one spelling; validation texts use only words no train text holds, so their ids are new."""
    rng = np.random.default_rng(seed)
    words = {label: text.split() for label, text in SPELLINGS.items()}
    seen = rng.permutation(len(words["british"]))
    train_words, val_words = seen[:15], seen[15:]
    vocabulary = ["[PAD]", "[UNK]", *words["british"], *words["american"]]
    index = {word: i for i, word in enumerate(vocabulary)}

    def texts(positions, count):
        labels = np.arange(count) % 2
        ids = [[index[words[list(SPELLINGS)[label]][rng.choice(positions)]] for _ in range(3)] for label in labels]
        return np.pad(np.array(ids, dtype=np.int32), ((0, 0), (0, 5))), labels

    return vocabulary, texts(train_words, 400), texts(val_words, 200)


def spelling_accuracy(kind: str) -> float:
    import keras

    keras.utils.set_random_seed(0)
    vocabulary, (train_ids, train_labels), (val_ids, val_labels) = spelling_corpus()
    model = load_builder(MODEL)(vocab_size=len(vocabulary), num_classes=2, sequence_length=8, train_ids=train_ids, vocabulary=vocabulary, kind=kind)
    model.compile(keras.optimizers.Adam(0.05), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(train_ids, train_labels, epochs=20, batch_size=32, verbose=0)
    return float(np.mean(np.argmax(model.predict(val_ids, verbose=0), axis=-1) == val_labels))


def test_the_character_kind_learns_spellings_the_ids_alone_cannot_tell_apart():
    assert spelling_accuracy("ngram_char_bag") >= 0.9
    assert spelling_accuracy("ngram_bag") <= 0.6  # new ids: only the bias is left, and the classes are balanced


def test_the_character_ngrams_of_a_piece_and_of_padding():
    vocabulary = ["[PAD]", "[UNK]", "play", "##ing", "a", "##s", "好", "lay"]
    spellings = load_builder(MODEL).__globals__["piece_character_ngrams"](vocabulary, 3)
    grams = {"<", "p", "l", "a", "y", "<p", "pl", "la", "ay", "<pl", "pla", "lay"}
    assert (spellings[:2] == 0).all()  # [PAD] and [UNK] spell nothing
    assert np.count_nonzero(spellings[2]) == len(grams) and np.count_nonzero(spellings[3]) == 6  # i n g in ng ing: no word-start mark
    assert (spellings[4:7] == 0).all()  # a piece of one character is its own token's row already
    play, lay = (set(spellings[i][spellings[i] > 0]) for i in (2, 7))
    assert len(play & lay) == 7  # < l a y la ay lay; not <l, <la (a word starting "la") nor <p ...
    assert np.count_nonzero(load_builder(MODEL).__globals__["piece_character_ngrams"](vocabulary, 4)[2]) == len(grams) + 2  # <pla, play


def test_padding_adds_nothing_to_the_character_kind():
    import keras

    keras.utils.set_random_seed(1)
    vocabulary, (train_ids, train_labels), _ = spelling_corpus()
    builder = load_builder(MODEL)
    short, long = (
        builder(
            vocab_size=len(vocabulary),
            num_classes=2,
            sequence_length=length,
            train_ids=np.pad(train_ids, ((0, 0), (0, length - 8))),
            vocabulary=vocabulary,
            kind="ngram_char_bag",
        )
        for length in (8, 24)
    )
    assert short.feature_tables == long.feature_tables
    short.compile(keras.optimizers.Adam(0.05), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    short.fit(train_ids, train_labels, epochs=2, verbose=0)
    long.set_weights(short.get_weights())
    np.testing.assert_allclose(
        short.predict(train_ids[:8], verbose=0), long.predict(np.pad(train_ids[:8], ((0, 0), (0, 16))), verbose=0), rtol=1e-5, atol=1e-6
    )
    rows, weights = short.get_layer("character_embedding")(np.zeros((1, 8), np.int32))
    assert not rows.numpy().any() and not weights.numpy().any()


def test_loaded_weights_fold_each_tokens_characters_into_one_row(tmp_path):
    """Loading trained weights folds the n-gram rows per token: the same logits, one lookup per position."""
    import keras

    keras.utils.set_random_seed(2)
    vocabulary, (train_ids, train_labels), (val_ids, _) = spelling_corpus()
    build = lambda: load_builder(MODEL)(  # noqa: E731
        vocab_size=len(vocabulary), num_classes=2, sequence_length=8, train_ids=train_ids, vocabulary=vocabulary, kind="ngram_char_bag"
    )
    trained = build()
    trained.compile(keras.optimizers.Adam(0.05), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    trained.fit(train_ids, train_labels, epochs=2, verbose=0)
    trained.save_weights(tmp_path / "model.weights.h5")
    loaded = build()
    loaded.load_weights(tmp_path / "model.weights.h5")
    assert loaded.get_layer("character_embedding").folded and not trained.get_layer("character_embedding").folded
    np.testing.assert_allclose(loaded.predict(val_ids, verbose=0), trained.predict(val_ids, verbose=0), rtol=1e-5, atol=1e-6)
