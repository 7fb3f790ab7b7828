"""The board's pure-Python tokenizer against tensorflow-text's BertTokenizer, id for id."""

import random

import numpy as np
import pytest

from edge_build.board.wordpiece import WordPiece, normalize, split_words
from edge_build.corpus import DEFAULT_DATASET, read_corpus

EDGE_CASES = [
    "Café naïve façade — “quotes” and ‘single’ … ½ ™ ©",
    "NBSP\u00a0here\u2003em space and zero\u200bwidth and soft\u00adhyphen",
    "中文字符测试 and 日本語 and 한국어",
    "tab\tnew\nline\rcr\x0bvt\x0cff\x00nul\x7fdel",
    "ÅNGSTRÖM İstanbul Straße ﬁligature Ǆ ǅ ǆ",
    "a" * 150,
    "x" + "é" * 60,
    "emoji 😀👍 test",
    "#hash ##double @user $5.00 100% a.b,c;d:e!f?g",
    "",
    "   ",
    "[UNK] [PAD] unaffable",
]


@pytest.fixture(scope="module")
def bbc_texts() -> list[str]:
    return [example.text for example in read_corpus(DEFAULT_DATASET).examples]


@pytest.fixture(scope="module")
def bbc_vocab(bbc_texts, tmp_path_factory) -> str:
    from edge_build.stages.vocab import learn_vocabulary

    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    tokens = learn_vocabulary([t.encode("utf-8") for t in bbc_texts[::7]], 3000, lower_case=True)
    path.write_text("".join(f"{t}\n" for t in tokens), encoding="utf-8")
    return str(path)


def tensorflow_text_ids(vocab: str, texts: list[str], lower_case: bool, sequence_length: int) -> np.ndarray:
    from edge_build.tokenizer import token_ids

    return token_ids(vocab, lower_case, [t.encode("utf-8") for t in texts], sequence_length)


def test_every_bbc_article_gets_the_ids_tensorflow_text_gives(bbc_texts, bbc_vocab):
    expected = tensorflow_text_ids(bbc_vocab, bbc_texts, True, 512)
    actual = WordPiece.from_file(bbc_vocab).encode(bbc_texts, 512)
    mismatched = [i for i in range(len(bbc_texts)) if not np.array_equal(expected[i], actual[i])]
    assert len(bbc_texts) == 2225 and mismatched == []


@pytest.mark.parametrize("lower_case", [True, False])
def test_unicode_edge_cases_match(bbc_vocab, lower_case):
    expected = tensorflow_text_ids(bbc_vocab, EDGE_CASES, lower_case, 64)
    actual = WordPiece.from_file(bbc_vocab, lower_case=lower_case).encode(EDGE_CASES, 64)
    for text, want, got in zip(EDGE_CASES, expected, actual):
        assert got.tolist() == want.tolist(), repr(text)


# Characters each normalization and splitting step treats differently, for random texts.
MIXABLE = [
    *"abXY09 .,;!?'\"-([#@$%&*",
    "\t",
    "\n",
    "\r",
    "\x0b",
    "\x0c",
    "\x00",
    "\x1f",
    "\x7f",
    "\x85",
    "\xa0",
    "\xad",
    "\u200b",
    "\u2028",
    "\u3000",
    "\ufeff",
    "é",
    "É",
    "ß",
    "ﬁ",
    "İ",
    "ǅ",
    "\u0301",
    "\u0327",
    "\u0600",
    "…",
    "½",
    "“",
    "—",
    "中",
    "한",
    "😀",
    "\U000e0041",
    "\u00b4",
    "①",
    "㍱",
    "\u0e31",
    "the ",
    "said ",
    "government",
    "café",
]


@pytest.mark.parametrize("lower_case", [True, False])
def test_random_mixes_of_tricky_characters_match(bbc_vocab, lower_case):
    rng = random.Random(7)
    texts = ["".join(rng.choice(MIXABLE) for _ in range(rng.randint(0, 40))) for _ in range(500)]
    expected = tensorflow_text_ids(bbc_vocab, texts, lower_case, 48)
    actual = WordPiece.from_file(bbc_vocab, lower_case=lower_case).encode(texts, 48)
    assert [t for t, want, got in zip(texts, expected, actual) if got.tolist() != want.tolist()] == []


def test_truncation_padding_and_unknown_words():
    wordpiece = WordPiece(["[PAD]", "[UNK]", "un", "##aff", "##able", "a", ",", "##b"])
    assert wordpiece.tokenize("Unaffable, a") == [2, 3, 4, 6, 5]
    assert wordpiece.tokenize("unxyz") == [1]  # no full segmentation: the whole word is [UNK]
    assert wordpiece.tokenize("a" * 101) == [1]  # over 100 bytes
    assert wordpiece.encode(["unaffable a", ""], 3).tolist() == [[2, 3, 4], [0, 0, 0]]


def test_normalization_and_splitting():
    assert normalize("Ça … ½") == "ca ... 1⁄2"
    assert split_words("hello,world  (x)") == ["hello", ",", "world", "(", "x", ")"]
    assert split_words("a\u00a0b") == ["a\u00a0b"]  # RE2's \s is ASCII only


def test_a_limit_cuts_inside_a_chunk_exactly_where_truncation_would():
    wordpiece = WordPiece(["[PAD]", "[UNK]", "un", "##aff", "##able", "a", ",", "##b"])
    text = "a unaffable,\t\ta  unaffable"
    everything = wordpiece.tokenize(text)
    assert everything == [5, 2, 3, 4, 6, 5, 2, 3, 4]
    assert [wordpiece.tokenize(text, limit) for limit in (0, 1, 3, 5, 9, 20)] == [everything[:limit] for limit in (0, 1, 3, 5, 9, 20)]
    # Chunks that hold only non-ASCII whitespace yield no ids: a limit must count ids, not chunks.
    spaced = "a \u2003 \u3000 a \u2003 unaffable"
    assert [wordpiece.tokenize(spaced, limit) for limit in range(6)] == [[], [5], [5, 5], [5, 5, 2], [5, 5, 2, 3], [5, 5, 2, 3, 4]]


def test_a_full_chunk_cache_starts_over_without_changing_any_id(bbc_texts, bbc_vocab):
    texts = EDGE_CASES + bbc_texts[:50]
    uncached = WordPiece.from_file(bbc_vocab)
    uncached.chunk_ids.capacity = 1  # every new chunk evicts the others
    assert uncached.encode(texts, 512).tolist() == WordPiece.from_file(bbc_vocab).encode(texts, 512).tolist()
    assert len(uncached.chunk_ids) == 1
