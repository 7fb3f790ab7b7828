"""The device's pure-Python tokenizer against tensorflow-text's BertTokenizer, id for id."""

import numpy as np
import pytest

from edge_build.data import DEFAULT_DATASET, read_corpus
from edge_build.device.wordpiece import WordPiece, normalize, split_words

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
    from edge_build.vocab import learn_vocabulary

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
