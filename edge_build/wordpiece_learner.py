"""tensorflow-text's WordPiece vocabulary learner: the same vocabulary, about ten times sooner.

``wordpiece_tokenizer_learner_lib.learn`` binary-searches a count threshold; for
each of its ~15 candidates it runs four passes that count every substring
starting at a piece boundary (``word[s:e]`` for every end ``e``), then walk them
longest first, each token subtracting its count from all its prefixes, and keep
the tokens whose count is still at least the threshold. That walk leaves a
token exactly the count of the boundaries where it runs to the end of its word
(the longest ones trivially; each shorter one loses precisely its longer
extensions), so every other substring ends at zero and can never pass a
threshold of one or more. This module counts those word tails directly:
O(pieces) per word instead of O(length²), 45 s -> ~5 s on BBC News.
``tests/test_vocab.py`` checks that both learners give the same vocabulary.

One setting is the data's, not the library's: how many distinct characters become
tokens (``character_cap``). The library keeps the 1,000 commonest, and drops every
word holding another; BERT splits Chinese into one word per character, so a Chinese
corpus of 4,400 distinct characters lost every character past the 1,000th to
``[UNK]`` (5.3% of the test tokens of the Chinese reviews, 0.09% with the cap below).
Where a corpus has at most 1,000 distinct characters, nothing changes.
"""

from __future__ import annotations

from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as library

from edge_build.special_tokens import JOINER

# The library's defaults, which bert_vocab_from_dataset does not change either.
LOWER_THRESHOLD, UPPER_THRESHOLD = 10, int(1e7)
ITERATIONS, MAX_INPUT_TOKENS, MAX_TOKEN_LENGTH, MAX_UNIQUE_CHARS, SLACK_RATIO = 4, int(5e6), 50, 1000, 0.05


def tail_counts(words: list[tuple[str, int]], split_points) -> dict[str, int]:
    """How often each word tail ``word[s:]`` starting at a piece boundary occurs (``##`` marks s > 0)."""
    counts: dict[str, int] = {}
    for word, count in words:
        indices = split_points(word)
        if not indices:
            continue
        for start in (0, *indices[:-1]):
            token = word if start == 0 else JOINER + word[start:]
            counts[token] = counts.get(token, 0) + count
    return counts


def every_boundary(word: str) -> range:
    return range(1, len(word) + 1)


def vocabulary_for(words: list[tuple[str, int]], char_tokens: set[str], threshold: int, reserved: list[str]) -> list[str]:
    """What the library's ``learn_with_thresh`` returns for a threshold of one or more.

    The search never tries less: its lower bound starts at 10 and only rises, so
    a threshold is at least half of that.
    """
    split_points = every_boundary
    for _ in range(ITERATIONS):
        kept = {token: n for token, n in tail_counts(words, split_points).items() if n >= threshold}
        tokens = library.ensure_all_tokens_exist(char_tokens, kept, True, JOINER)

        def split_points(word: str, tokens=tokens):
            return library.get_split_indices(word, tokens, True, JOINER)

    return library.generate_final_vocabulary(reserved, char_tokens, tokens)


def character_cap(words: list[tuple[str, int]], vocab_size: int, reserved_tokens: list[str]) -> int:
    """How many distinct characters may become tokens: every one the training words hold at least twice (one seen once
    teaches the model nothing it can use again), as far as the vocabulary has room for each twice (alone and after
    ``##``), and never fewer than the library's ``MAX_UNIQUE_CHARS``."""
    counts: dict[str, int] = {}
    for word, count in words:
        for char in word:
            counts[char] = counts.get(char, 0) + count
    repeated = sum(1 for n in counts.values() if n >= 2)
    return max(MAX_UNIQUE_CHARS, min(repeated, (vocab_size - len(reserved_tokens)) // 2))


def learn(word_counts: dict[str, int], vocab_size: int, reserved_tokens: list[str]) -> list[str]:
    """What ``wordpiece_tokenizer_learner_lib.learn(word_counts, vocab_size, reserved_tokens, max_unique_chars=cap)``
    returns, ``cap`` being ``character_cap``."""
    items = list(word_counts.items())
    upper, lower = library.get_search_threshs(items, UPPER_THRESHOLD, LOWER_THRESHOLD)
    candidates = library.get_input_words(items, reserved_tokens, MAX_TOKEN_LENGTH)
    allowed = library.get_allowed_chars(candidates, character_cap(candidates, vocab_size, reserved_tokens))
    words = library.filter_input_words(candidates, allowed, MAX_INPUT_TOKENS)
    char_tokens = library.extract_char_tokens(words)
    slack = max(SLACK_RATIO * vocab_size, 0)
    while True:  # the library's learn_binary_search, as a loop
        threshold = (upper + lower) // 2
        vocab = vocabulary_for(words, char_tokens, threshold, reserved_tokens)
        if (len(vocab) <= vocab_size and vocab_size - len(vocab) <= slack) or lower >= upper or threshold <= 1:
            return vocab
        if len(vocab) > vocab_size:
            lower = threshold + 1
        else:
            upper = threshold - 1
