"""Stage *vocab*: learn a WordPiece vocabulary from the training split only.

Reads ``train.tfrecord``; writes ``vocab.txt`` (one token per line, line number =
token id).  Words are split the way ``BertTokenizer`` splits them (tensorflow-text's
``BasicTokenizer``), then tensorflow-text's WordPiece learning algorithm picks the
subwords (``edge_build.wordpiece_learner``: the same vocabulary, sooner); this is
``bert_vocab_from_dataset`` without the ``tf.data`` detour.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

from edge_build import cli
from edge_build.atomic import atomic_output
from edge_build.errors import StageError
from edge_build.special_tokens import RESERVED_TOKENS
from edge_build.stage_files import add_files
from edge_build.tfrecord import read_split

_COUNT_BATCH = 256


def count_words(texts: list[bytes], lower_case: bool) -> collections.Counter:
    """Word frequencies after BERT's normalization and whitespace/punctuation splitting."""
    import tensorflow as tf
    from tensorflow_text.python.ops.bert_tokenizer import BasicTokenizer

    splitter = BasicTokenizer(lower_case=lower_case)
    counts: collections.Counter = collections.Counter()
    for start in range(0, len(texts), _COUNT_BATCH):
        words = splitter.tokenize(tf.constant(texts[start : start + _COUNT_BATCH]))
        counts.update(words.flat_values.numpy().tolist())
    return collections.Counter({word.decode("utf-8"): n for word, n in counts.items()})


def learn_vocabulary(texts: list[bytes], vocab_size: int, lower_case: bool) -> list[str]:
    from edge_build import wordpiece_learner

    counts = count_words(texts, lower_case)
    if not counts:
        raise StageError("the training split holds no words to learn a vocabulary from")
    return wordpiece_learner.learn(counts, vocab_size, list(RESERVED_TOKENS))


def build_vocab(train_records: Path, out_path: Path, vocab_size: int, lower_case: bool) -> list[str]:
    texts, _ = read_split(train_records)
    vocab = learn_vocabulary(texts, vocab_size, lower_case)
    if list(vocab[: len(RESERVED_TOKENS)]) != list(RESERVED_TOKENS):
        raise StageError(f"the learned vocabulary does not start with {RESERVED_TOKENS}")
    with atomic_output(out_path) as temporary:
        temporary.write_text("".join(f"{token}\n" for token in vocab), encoding="utf-8")
    return vocab


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.stages.vocab", description=__doc__.splitlines()[0])
    add_files("vocab", parser)
    parser.add_argument("--vocab-size", type=int, required=True, help="the most tokens, reserved ones included")
    parser.add_argument("--lower-case", action=argparse.BooleanOptionalAction, default=True)
    return parser


def drive(args: argparse.Namespace) -> None:
    vocab = build_vocab(args.train, args.vocab, args.vocab_size, args.lower_case)
    print(f"vocab: {len(vocab)} tokens (asked for at most {args.vocab_size}) -> {args.vocab}")


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
