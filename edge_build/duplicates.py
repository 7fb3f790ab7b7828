"""Exact and near-duplicate texts: normalization, grouping, MinHash with LSH banding, union-find.

Standard library and numpy only, and no TensorFlow: the data stage finds duplicates
before it imports TensorFlow to write anything.

Exact duplicates: two texts are copies when their normalized forms are equal. ``normalize``
applies ``unicodedata.normalize("NFKC", text).casefold()``, then collapses every run of
Unicode whitespace (what ``str.split()`` splits on) to one space and strips both ends.

Near-duplicates: the shingles of a normalized text are its word 5-grams (words: the pieces
between its single spaces). A shingle's 64-bit hash is the sum, mod 2**64, of its words'
BLAKE2b hashes each times an odd constant of its position: stable across processes and
machines, unlike ``hash()``, and each distinct word is hashed once. A text of fewer than 5
words would have one shingle, the whole text, so it can only match an exact copy; such texts
are left out. Each text gets a MinHash signature of 128 hash functions (``h(x)`` = the high
32 bits of ``a*x + b mod 2**64``, ``a`` odd; all constants come from BLAKE2b, so every run draws
the same functions), cut into 32 bands of 4 rows. Two texts that agree on a whole band are
candidates: a pair with Jaccard similarity 0.8 is missed with probability
``(1 - 0.8**4)**32 < 1e-7``. A candidate is a near-duplicate when the exact Jaccard similarity
of the two shingle sets (of 64-bit hashes) is at least ``NEAR_DUPLICATE_JACCARD``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import unicodedata
from collections.abc import Iterator, Sequence

import numpy as np

NORMALIZATION = 'unicodedata.normalize("NFKC", text).casefold(), then every run of Unicode whitespace collapsed to one space, stripped'
SHINGLE_WORDS = 5
SHINGLE = f"word {SHINGLE_WORDS}-grams"
#: Pairs at least this similar (Jaccard similarity of their shingle sets) are near-duplicates.
NEAR_DUPLICATE_JACCARD = 0.8
HASH_FUNCTIONS = 128
BANDS = 32
ROWS_PER_BAND = HASH_FUNCTIONS // BANDS


def normalize(text: str) -> str:
    """The form two texts must share to be exact duplicates (see the module docstring)."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def group_indices(keys: Sequence[str]) -> list[list[int]]:
    """Indices of equal keys, grouped; groups in order of their first index."""
    groups: dict[str, list[int]] = {}
    for index, key in enumerate(keys):
        groups.setdefault(key, []).append(index)
    return list(groups.values())


def stable_hash(text: str, salt: str = "") -> int:
    """A 64-bit hash that is the same in every process (``hash()`` is salted per process)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8, person=salt.encode("utf-8")).digest(), "little")


def _constants(salt: str, count: int) -> np.ndarray:
    """``count`` 64-bit constants, the same in every run; odd, so that multiplying by one permutes the 64-bit values."""
    return np.array([stable_hash(str(i), salt) | 1 for i in range(count)], dtype=np.uint64)


# uint64 arithmetic wraps, so every product and sum below is mod 2**64.
_SHINGLE_MULTIPLIERS = _constants("shingle", SHINGLE_WORDS)
_MINHASH_MULTIPLIERS = _constants("minhash-a", HASH_FUNCTIONS)
_MINHASH_INCREMENTS = _constants("minhash-b", HASH_FUNCTIONS)
_BAND_MULTIPLIERS = _constants("band", ROWS_PER_BAND)


@dataclasses.dataclass(frozen=True)
class Shingles:
    """The hashed shingles of several texts: text ``i``'s are ``hashes[starts[i]:starts[i + 1]]``."""

    hashes: np.ndarray
    starts: np.ndarray

    @classmethod
    def of(cls, normalized_texts: Sequence[str]) -> Shingles:
        """The hashed word 5-grams of texts of at least 5 words (see the module docstring).

        Hashing each distinct word once, rather than each shingle, makes BBC News several times faster.
        """
        words = [text.split(" ") for text in normalized_texts]
        vocabulary = {word: stable_hash(word) for word in set(itertools.chain.from_iterable(words))}
        word_hashes = np.fromiter((vocabulary[word] for text in words for word in text), dtype=np.uint64)
        word_counts = np.array([len(text) for text in words])
        shingle_counts = word_counts - (SHINGLE_WORDS - 1)
        starts = np.concatenate(([0], np.cumsum(shingle_counts)))
        # Shingle j of text i begins at word j of text i.
        text_first_words = np.cumsum(word_counts) - word_counts
        shingle_positions = np.arange(starts[-1]) - np.repeat(starts[:-1], shingle_counts)
        first_words = np.repeat(text_first_words, shingle_counts) + shingle_positions
        hashes = sum(word_hashes[first_words + k] * _SHINGLE_MULTIPLIERS[k] for k in range(SHINGLE_WORDS))
        return cls(hashes, starts)

    def __len__(self) -> int:
        return len(self.starts) - 1

    def shingle_set(self, text: int) -> frozenset[int]:
        return frozenset(self.hashes[self.starts[text] : self.starts[text + 1]].tolist())


def minhash_signatures(shingles: Shingles) -> np.ndarray:
    """One row of ``HASH_FUNCTIONS`` minima per text."""
    signatures = np.empty((len(shingles), HASH_FUNCTIONS), dtype=np.uint64)
    # One hash function at a time over every shingle of every text: a (shingles x 128)
    # matrix would take a gigabyte for BBC News.
    for column, (a, b) in enumerate(zip(_MINHASH_MULTIPLIERS, _MINHASH_INCREMENTS)):
        signatures[:, column] = np.minimum.reduceat((shingles.hashes * a + b) >> np.uint64(32), shingles.starts[:-1])
    return signatures


def _band_buckets(band: np.ndarray) -> Iterator[list[int]]:
    """Rows (by index) whose band hashes to the same value, for each value shared by two or more."""
    # One 64-bit key per row instead of a row-wise unique: a collision only adds a candidate, which the exact check rejects.
    keys = (band * _BAND_MULTIPLIERS).sum(axis=1, dtype=np.uint64)
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    by_bucket = np.argsort(inverse, kind="stable")
    ends = np.cumsum(counts)
    for bucket in np.flatnonzero(counts > 1):
        yield by_bucket[ends[bucket] - counts[bucket] : ends[bucket]].tolist()


def candidate_pairs(signatures: np.ndarray) -> set[tuple[int, int]]:
    """Row pairs ``(i, j)``, ``i < j``, whose signatures agree on at least one band."""
    # Near-copies usually share every band: pairing each distinct bucket once spares a clique of
    # thousands (a retweet with different links) 31 repetitions of its millions of pairs.
    buckets = {
        tuple(bucket) for start in range(0, HASH_FUNCTIONS, ROWS_PER_BAND) for bucket in _band_buckets(signatures[:, start : start + ROWS_PER_BAND])
    }
    return {pair for bucket in buckets for pair in itertools.combinations(bucket, 2)}


def jaccard(a: frozenset[int], b: frozenset[int]) -> float:
    return len(a & b) / len(a | b)


@dataclasses.dataclass(frozen=True)
class NearPair:
    """Two texts (indices into the list given to ``near_duplicate_pairs``, ``a < b``) and their similarity."""

    a: int
    b: int
    jaccard: float


def near_duplicate_pairs(normalized_texts: Sequence[str], threshold: float = NEAR_DUPLICATE_JACCARD) -> list[NearPair]:
    """Every pair of the (distinct, normalized) texts whose shingle sets have Jaccard similarity >= ``threshold``, sorted."""
    indices = [i for i, text in enumerate(normalized_texts) if text.count(" ") >= SHINGLE_WORDS - 1]
    if len(indices) < 2:
        return []
    shingles = Shingles.of([normalized_texts[i] for i in indices])
    shingle_set = functools.cache(shingles.shingle_set)  # a text can be in many candidate pairs
    pairs = []
    for i, j in sorted(candidate_pairs(minhash_signatures(shingles))):
        similarity = jaccard(shingle_set(i), shingle_set(j))
        if similarity >= threshold:
            pairs.append(NearPair(indices[i], indices[j], similarity))
    return pairs


class UnionFind:
    """Disjoint sets over ``0..size-1``; each set is represented by its smallest member."""

    def __init__(self, size: int) -> None:
        self.parent = list(range(size))

    def find(self, item: int) -> int:
        while self.parent[item] != item:
            self.parent[item] = self.parent[self.parent[item]]  # path halving keeps the trees flat
            item = self.parent[item]
        return item

    def union(self, a: int, b: int) -> None:
        low, high = sorted((self.find(a), self.find(b)))
        self.parent[high] = low


def connected_components(size: int, edges: Sequence[tuple[int, int]]) -> list[list[int]]:
    """The items ``0..size-1`` joined by ``edges``, each component sorted, in order of its smallest item."""
    sets = UnionFind(size)
    for a, b in edges:
        sets.union(a, b)
    components: dict[int, list[int]] = {}
    for item in range(size):
        components.setdefault(sets.find(item), []).append(item)
    return list(components.values())
