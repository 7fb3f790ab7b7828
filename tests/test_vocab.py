import random
from pathlib import Path

import pytest

from edge_build import wordpiece_learner
from edge_build.errors import StageError
from edge_build.special_tokens import PAD, RESERVED_TOKENS, UNK
from edge_build.stages import vocab
from edge_build.tfrecord import read_split


def test_the_vocabulary_starts_with_the_reserved_tokens(tiny_build):
    tokens = tiny_build["vocab"].read_text(encoding="utf-8").splitlines()
    assert tokens[:2] == ["[PAD]", "[UNK]"] == list(RESERVED_TOKENS) == [PAD, UNK]
    assert len(tokens) == len(set(tokens)) <= 200
    assert {"planet", "recipe", "striker"} <= set(tokens)


def test_it_is_learned_from_the_training_split_only(tiny_build, tmp_path: Path):
    # A word that appears only in the test split must not be in the vocabulary.
    train_texts, _ = read_split(tiny_build["layout"].data.split("train"))
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


def random_corpus(seed: int, words: int) -> dict[str, int]:
    """Words built from a few shared stems and suffixes, so subwords recur the way they do in text."""
    rng = random.Random(seed)
    stems = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 9))) for _ in range(60)]
    affixes = ["", "s", "ing", "ed", "er", "ly", "ation", "é", "ü"]
    counts: dict[str, int] = {}
    for _ in range(words):
        word = rng.choice(stems) + rng.choice(affixes) + (rng.choice(stems) if rng.random() < 0.2 else "")
        counts[word] = counts.get(word, 0) + rng.randint(1, 40)
    return counts


@pytest.mark.parametrize("seed, words, vocab_size", [(0, 400, 60), (1, 2000, 150), (2, 2000, 400), (3, 5000, 1000)])
def test_the_fast_learner_gives_tensorflow_texts_vocabulary(seed, words, vocab_size):
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as library

    counts = random_corpus(seed, words)
    reserved = list(RESERVED_TOKENS)
    assert wordpiece_learner.learn(counts, vocab_size, reserved) == library.learn(counts, vocab_size, reserved)


def test_every_character_seen_twice_gets_a_token_past_the_librarys_thousand_while_the_vocabulary_has_room():
    # As BERT splits Chinese: one word per character. 1,500 characters seen 2-30 times and 100 seen once; the library keeps
    # the 1,000 commonest and sends the rest to [UNK].
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as library

    repeated = {chr(0x4E00 + i): 2 + i % 29 for i in range(1500)}
    once = {chr(0x6000 + i): 1 for i in range(100)}
    counts = {**repeated, **once}
    reserved = list(RESERVED_TOKENS)
    tokens = set(wordpiece_learner.learn(counts, 8000, reserved))
    assert set(repeated) <= tokens and not set(once) & tokens
    assert len(set(repeated) & set(library.learn(counts, 8000, reserved))) == 1000
    # A vocabulary too small for all of them keeps as many as fit, each alone and after ##, commonest first.
    cap = wordpiece_learner.character_cap(list(counts.items()), 3000, reserved)
    assert cap == (3000 - len(reserved)) // 2 == 1499 and len(set(repeated) & set(wordpiece_learner.learn(counts, 3000, reserved))) == cap


def test_the_fast_learner_gives_tensorflow_texts_vocabulary_on_the_tiny_corpus(tiny_build):
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as library

    texts, _ = read_split(tiny_build["layout"].data.split("train"))
    counts = vocab.count_words(texts, lower_case=True)
    for vocab_size in (40, 80, 200):
        assert wordpiece_learner.learn(counts, vocab_size, ["[PAD]", "[UNK]"]) == library.learn(counts, vocab_size, ["[PAD]", "[UNK]"])
