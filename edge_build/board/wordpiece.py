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

Speed (``classify.py`` tokenizes on the board, per request): C-level string
methods do the per-character work (``lower``, ``translate``, ``split``), only
non-ASCII characters go through Python, and the ids of each space-separated
chunk are computed once and kept in a bounded cache, since news text repeats a
few thousand chunks; a text is tokenized only as far as ``sequence_length`` needs.
"""

from __future__ import annotations

import functools
import re
import unicodedata

import numpy as np

_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
# Unicode's Default_Ignorable_Code_Point ranges, which NFKC_Casefold removes.
_DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
MAX_BYTES_PER_WORD = 100
SUFFIX = "##"
#: Chunks whose ids are kept (about 200 bytes each); the cache starts over when full.
CACHE_CHUNKS = 1 << 15


_IGNORABLE = re.compile("[" + "".join(f"\\U{low:08x}-\\U{high:08x}" for low, high in _DEFAULT_IGNORABLE) + "]")
_ASCII_CONTROLS = {code: " " for code in (*range(0x20), 0x7F)}
# What is not printable ASCII: ASCII controls and non-ASCII characters, folded one by one.
_TO_FOLD = re.compile(r"[^ -~]+")
# Whitespace-separated runs and single ASCII punctuation characters; non-ASCII runs are split further below.
_ASCII_SPLIT = re.compile(r"[!-/:-@\[-`{-~]|[^ \t\n\f\r!-/:-@\[-`{-~]+")


def _is_own_token(char: str) -> bool:
    """Unicode punctuation and CJK ideographs are split off one by one (ASCII punctuation is, by the regex)."""
    code = ord(char)
    return unicodedata.category(char).startswith("P") or any(low <= code <= high for low, high in _CJK_RANGES)


def nfkc_casefold(text: str) -> str:
    """ICU's NFKC_Casefold, which tensorflow-text's ``case_fold_utf8`` applies."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKD", _IGNORABLE.sub("", text)).casefold())


@functools.lru_cache(maxsize=4096)
def _folded(char: str, lower_case: bool) -> str:
    """Step 1's mark removal and step 2 for one character."""
    category = unicodedata.category(char)
    if lower_case and category == "Mn":
        return ""
    return " " if category in ("Cc", "Cf") else char


def normalize(text: str, lower_case: bool = True) -> str:
    if lower_case:
        # For ASCII, case folding is lower() and nothing decomposes.
        text = text.lower() if text.isascii() else unicodedata.normalize("NFD", nfkc_casefold(text))
    if text.isascii():
        return text.translate(_ASCII_CONTROLS)
    return _TO_FOLD.sub(lambda run: "".join([_folded(char, lower_case) for char in run.group()]), text)


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


class _ChunkIds(dict):
    """Ids of each chunk of normalized text between spaces, computed on first sight; cleared when full."""

    def __init__(self, word_ids, capacity: int):
        super().__init__()
        self.word_ids = word_ids
        self.capacity = capacity

    def __missing__(self, chunk: str) -> tuple[int, ...]:
        ids = tuple(i for word in split_words(chunk) for i in self.word_ids(word))
        if len(self) >= self.capacity:
            self.clear()
        self[chunk] = ids
        return ids


class WordPiece:
    """Token ids for raw text, from a ``vocab.txt`` (line number = id)."""

    def __init__(self, vocab: list[str], lower_case: bool = True, unknown_token: str = "[UNK]"):
        self.ids = {token: i for i, token in enumerate(vocab)}
        self.lower_case = lower_case
        self.unknown_id = self.ids[unknown_token]
        self.longest = max(len(token) for token in vocab)
        self.chunk_ids = _ChunkIds(self.word_ids, CACHE_CHUNKS)

    @classmethod
    def from_file(cls, path: str, lower_case: bool = True) -> WordPiece:
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

    def tokenize(self, text: str, limit: int | None = None) -> list[int]:
        """The wordpiece ids of ``text``, or its first ``limit``."""
        # Words never span a space, so each chunk between spaces tokenizes on its own.
        ids: list[int] = []
        for chunk in normalize(text, self.lower_case).split(" "):
            if chunk:
                ids += self.chunk_ids[chunk]
                if limit is not None and len(ids) >= limit:
                    break
        return ids[:limit]

    def encode(self, texts: list[str], sequence_length: int) -> np.ndarray:
        """``[len(texts), sequence_length]`` int32 ids: the first wordpieces, zero-padded."""
        ids = np.zeros((len(texts), sequence_length), dtype=np.int32)
        for row, text in enumerate(texts):
            tokens = self.tokenize(text, sequence_length)
            ids[row, : len(tokens)] = tokens
        return ids
