"""tensorflow-text's ``BertTokenizer`` in plain Python, id for id.

The device has no TensorFlow, yet ``classify.py`` must turn raw text into the
exact ids the model was trained on. Each step mirrors tensorflow-text 2.21's
``BasicTokenizer`` and ``WordpieceTokenizer``:

1. lower_case: ICU's NFKC_Casefold (compatibility forms unfolded, "…" -> "...",
   default-ignorable characters such as U+200B dropped), then NFD, then nonspacing
   marks (Mn) dropped;
2. control and format characters (Cc, Cf) become spaces;
3. split on RE2's ``\\s`` (ASCII space, tab, newline, form feed, carriage return:
   *not* Unicode spaces such as U+00A0), and split off every ASCII punctuation
   character, Unicode punctuation (P*) and CJK ideograph as a token of its own;
4. WordPiece: greedy longest match, ``##`` before continuations; a word with no
   full segmentation, or longer than 100 UTF-8 bytes, becomes ``[UNK]``;
5. the first ``sequence_length`` ids are kept, the rest of the row is 0 (``[PAD]``).
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np

_CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)
# Unicode's Default_Ignorable_Code_Point ranges, which NFKC_Casefold removes.
_DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)
MAX_BYTES_PER_WORD = 100
SUFFIX = "##"


_IGNORABLE = {code: None for low, high in _DEFAULT_IGNORABLE for code in range(low, high + 1)}
# Whitespace-separated runs and single ASCII punctuation characters; non-ASCII runs are split further below.
_ASCII_SPLIT = re.compile(r"[!-/:-@\[-`{-~]|[^ \t\n\f\r!-/:-@\[-`{-~]+")


def _is_own_token(char: str) -> bool:
    """Unicode punctuation and CJK ideographs are split off one by one (ASCII punctuation is, by the regex)."""
    code = ord(char)
    return unicodedata.category(char).startswith("P") or any(low <= code <= high for low, high in _CJK_RANGES)


def nfkc_casefold(text: str) -> str:
    """ICU's NFKC_Casefold, which tensorflow-text's ``case_fold_utf8`` applies."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKD", text.translate(_IGNORABLE)).casefold())


def normalize(text: str, lower_case: bool = True) -> str:
    if text.isascii():
        # The fast path: for ASCII, case folding is lower() and nothing decomposes.
        text = text.lower() if lower_case else text
        return "".join(" " if c < " " or c == "\x7f" else c for c in text) if not text.isprintable() else text
    if lower_case:
        text = "".join(c for c in unicodedata.normalize("NFD", nfkc_casefold(text)) if unicodedata.category(c) != "Mn")
    return "".join(" " if unicodedata.category(c) in ("Cc", "Cf") else c for c in text)


def split_words(text: str) -> list[str]:
    words = []
    for run in _ASCII_SPLIT.findall(text):
        if run.isascii():
            words.append(run)
            continue
        current = []
        for char in run:
            if _is_own_token(char):
                if current:
                    words.append("".join(current))
                    current = []
                words.append(char)
            else:
                current.append(char)
        if current:
            words.append("".join(current))
    return words


class WordPiece:
    """Token ids for raw text, from a ``vocab.txt`` (line number = id)."""

    def __init__(self, vocab: list[str], lower_case: bool = True, unknown_token: str = "[UNK]"):
        self.ids = {token: i for i, token in enumerate(vocab)}
        self.lower_case = lower_case
        self.unknown_id = self.ids[unknown_token]
        self.longest = max(len(token) for token in vocab)

    @classmethod
    def from_file(cls, path: str, lower_case: bool = True) -> "WordPiece":
        with open(path, encoding="utf-8") as handle:
            return cls(handle.read().splitlines(), lower_case)

    def word_ids(self, word: str) -> list[int]:
        if len(word.encode("utf-8")) > MAX_BYTES_PER_WORD:
            return [self.unknown_id]
        pieces, start = [], 0
        while start < len(word):
            prefix = SUFFIX if start else ""
            for end in range(min(len(word), start + self.longest), start, -1):
                piece = self.ids.get(prefix + word[start:end])
                if piece is not None:
                    pieces.append(piece)
                    start = end
                    break
            else:
                return [self.unknown_id]
        return pieces

    def tokenize(self, text: str) -> list[int]:
        return [i for word in split_words(normalize(text, self.lower_case)) for i in self.word_ids(word)]

    def encode(self, texts: list[str], sequence_length: int) -> np.ndarray:
        """``[len(texts), sequence_length]`` int32 ids: the first wordpieces, zero-padded."""
        ids = np.zeros((len(texts), sequence_length), dtype=np.int32)
        for row, text in enumerate(texts):
            tokens = self.tokenize(text)[:sequence_length]
            ids[row, : len(tokens)] = tokens
        return ids
