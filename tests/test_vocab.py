from pathlib import Path

import pytest

from edge_build import vocab
from edge_build.errors import StageError
from edge_build.records import read_split


def test_the_vocabulary_starts_with_the_reserved_tokens(tiny_build):
    tokens = tiny_build["vocab"].read_text(encoding="utf-8").splitlines()
    assert tokens[:2] == ["[PAD]", "[UNK]"]
    assert len(tokens) == len(set(tokens)) <= 200
    assert {"planet", "recipe", "striker"} <= set(tokens)


def test_it_is_learned_from_the_training_split_only(tiny_build, tmp_path: Path):
    # A word that appears only in the test split must not be in the vocabulary.
    data_dir = tiny_build["data"]
    train_texts, _ = read_split(data_dir / "train.tfrecord")
    counts = vocab.count_words(train_texts, lower_case=True)
    assert "planet" in counts
    test_only = b"zyzzyva " * 50
    learned = vocab.learn_vocabulary(train_texts, 200, lower_case=True)
    assert "zyzzyva" not in learned
    assert "zyzzyva" in vocab.learn_vocabulary(train_texts + [test_only], 200, lower_case=True)


def test_words_are_lower_cased_and_split_on_punctuation():
    counts = vocab.count_words([b"Hello, WORLD! Hello-world."], lower_case=True)
    assert counts == {"hello": 2, ",": 1, "world": 2, "!": 1, "-": 1, ".": 1}
    assert vocab.count_words([b"Hello"], lower_case=False) == {"Hello": 1}


def test_an_empty_training_split_is_refused():
    with pytest.raises(StageError, match="no words"):
        vocab.learn_vocabulary([b"   "], 100, lower_case=True)


def test_a_missing_split_file_is_named(tmp_path: Path):
    with pytest.raises(StageError, match="train.tfrecord: split file not found"):
        vocab.build_vocab(tmp_path / "train.tfrecord", tmp_path / "vocab.txt", 100, True)
    assert not (tmp_path / "vocab.txt").exists()
