"""The classifier: a normalized bag of WordPiece embeddings, with hashed bigrams by default, and a linear layer.

edge-build calls ``build_model`` with the vocabulary size, the number of classes and
the sequence length, plus every key of ``[model]`` in ``hparams.toml`` as a keyword
argument, so a new hyperparameter is a new keyword argument here and a key there.
The model takes int32 token ids ``[batch, sequence_length]`` (0 = padding) and
returns unnormalized logits ``[batch, num_classes]``.

Two kinds (``[model] kind``):

- ``"ngram_bag"`` (the default): the bag below plus one embedding per pair of
  adjacent tokens among the first ``ngram_window`` (128), fastText-style. A pair's
  bucket is computed inside the model from the ids it already receives, in int32:
  ``(left * vocab_size + right) * min(right, 1)`` modulo ``ngram_buckets`` (the pair
  id is unique below ``vocab_size**2 < 2**31``). Padding is trailing, so a pair that
  reaches it has [PAD] on its right, multiplies to 0 and lands in bucket 0, whose
  embedding is held at zero like [PAD]'s: padding adds nothing (a real pair that
  hashes to 0 is lost, 1 in ``ngram_buckets``). The two bags' sums are added before
  the normalization. Every op is a TF Lite builtin that tflite-runtime 2.14 and
  ai-edge-litert 2.3 run (STRIDED_SLICE, MUL, ADD, MINIMUM, FLOOR_MOD, GATHER, SUM),
  and the integer ops stay int32 in the full-integer INT8 model. A pair sees
  short-range order ("not good" is not "good"), and on Chinese, where BERT's basic
  tokenization makes every CJK character a token, a pair of characters is most
  often a word.
- ``"bag"``: the token embeddings alone: a fifth of the INT8 size, a third of its
  latency, and blind to order. Choose it for a tight size or latency budget when
  the classes are told apart by words alone.

What decided it, on the validation splits only (``benchmarks/README.md`` has the
test figures of the build itself):
- Accuracy, ``ngram_bag`` against ``bag``: BBC News 0.978 vs 0.969; movie-review
  snippets 0.774 vs 0.756; Chinese reviews 0.834 vs 0.813 (classical baseline
  0.806 and 0.852 on the last two: both kinds trail it there).
- Buckets: on Chinese reviews 16,384 gave 0.813 and 28,672 gave 0.834; the INT8
  file is ``(vocab_size + ngram_buckets) * embedding_dim`` bytes and more, 2.3 MB on
  BBC News (the goal is 2.5 MB), so 28,672.
- ``ngram_window``: INT8 at batch 1 on ai-edge-litert, BBC News's 512 tokens: the
  bag 3.4 µs, pairs over all 511 positions 14.7 µs, over the first 128 9.4 µs
  (fastest of 7 rounds); pairs over 256 positions instead of 128 gained 0.4 points
  on Chinese reviews.
- Tried and not kept: learning rates 0.0005-0.002 (the best epoch is the first in
  every run, as at 0.005), dropout 0.5, dropout on the embeddings (elementwise +0.4
  points on Chinese, whole tokens -1.5 on movie snippets), 32 dimensions with 65,536
  buckets, trigrams in the same table (-2 points on Chinese), and a mean or
  square-root-of-count pooling instead of the normalization (no better).

Why this shape, measured on BBC News here:
- 512 tokens, not 256: most articles are longer than 256 WordPieces, and the
  longer window gained about two points of test accuracy (``sequence_length =
  "auto"`` gives them 512; ``edge_build/window.py``).
- The sum of the non-padding embeddings is L2-normalized instead of divided by the
  token count: a masked mean needs a DIV, which full-integer conversion quantizes
  to int8, and tflite-runtime 2.14 has no int8 DIV kernel ("Div only supports
  FLOAT32, INT32 and quantized UINT8"). The norm is written as ``total * total``
  and RSQRT because ``ops.normalize`` squares with SQUARE, which has no int8 kernel
  and would keep a float island in the INT8 model. The normalized sum also reached
  the masked mean's accuracy in fewer epochs. Its floor is 1e-4, not 1e-12: float16
  rounds 1e-12 to zero, and an all-padding input then gave NaN on the float16 model.
- Padding is left out by holding the [PAD] row of the embedding at zero (zero at
  initialization, and zeroed again after every update) instead of multiplying by a
  mask. Both give the same sums, but the mask's broadcast multiply over
  ``[batch, 512, 64]`` was most of the INT8 model's time: about 150 of 156 µs per
  example on tflite-runtime, and without it INT8 runs at ~2.5x the interpreter's
  one-op floor on LiteRT (benchmarks/inference.py). The pairs' mask is an int32
  multiply over ``[batch, 127]`` ids, before the lookup.
"""

import keras
import tensorflow as tf
from keras import ops


PAD_ID = 0
KINDS = ("bag", "ngram_bag")
#: ``left * vocab_size + right`` must fit in int32.
LARGEST_PAIRED_VOCABULARY = 46340
INT32_MAX = 2**31 - 1


def zero_padding_row(embeddings):
    return ops.concatenate([ops.zeros_like(embeddings[:PAD_ID + 1]), embeddings[PAD_ID + 1:]], axis=0)


class PaddingRowStaysZero(keras.constraints.Constraint):
    """Applied by the optimizer after each update: [PAD] embeds to zero, so it adds nothing to a sum."""

    def __call__(self, embeddings):
        return zero_padding_row(embeddings)


def uniform_with_zero_padding_row(shape, dtype=None):
    """Keras's default embedding initializer, with the [PAD] row zeroed."""
    return zero_padding_row(keras.initializers.RandomUniform(-0.05, 0.05)(shape, dtype))


class PaddedEmbedding(keras.layers.Layer):
    """An embedding table whose row 0 ([PAD]) is held at zero, looked up with one GATHER.

    Not ``keras.layers.Embedding``: its lookup wraps negative ids (LESS, ADD and SELECT_V2
    over every id), three int32 ops per lookup that ids from the tokenizer never need.
    """

    def __init__(self, rows: int, embedding_dim: int, **kwargs):
        super().__init__(**kwargs)
        self.rows, self.embedding_dim = rows, embedding_dim

    def build(self, input_shape):
        self.embeddings = self.add_weight(
            shape=(self.rows, self.embedding_dim), initializer=uniform_with_zero_padding_row,
            constraint=PaddingRowStaysZero(), name="embeddings",
        )

    def call(self, ids):
        return tf.gather(self.embeddings, ids)

    def get_config(self):
        return {**super().get_config(), "rows": self.rows, "embedding_dim": self.embedding_dim}


class HashedBigrams(keras.layers.Layer):
    """Token ids ``[batch, L]`` -> bucket ids ``[batch, L - 1]`` of each adjacent pair; 0 where the pair reaches padding."""

    def __init__(self, vocab_size: int, buckets: int, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size, self.buckets = vocab_size, buckets

    def call(self, token_ids):
        left, right = token_ids[:, :-1], token_ids[:, 1:]
        # Padding is trailing: a pair with [PAD] on its left has [PAD] on its right, so the right side decides.
        return ops.mod((left * self.vocab_size + right) * ops.minimum(right, 1), self.buckets)

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size, "buckets": self.buckets}


class NormalizedBagOfEmbeddings(keras.layers.Layer):
    """L2-normalized sum of every bag's embeddings ([PAD] embeds to zero; all-padding rows give zeros)."""

    def call(self, bags):
        total = ops.sum(bags[0], axis=1)
        for bag in bags[1:]:
            total = total + ops.sum(bag, axis=1)
        squared_norm = ops.sum(total * total, axis=-1, keepdims=True)
        return total * ops.rsqrt(ops.maximum(squared_norm, 1e-4))


def require_whole_number(name: str, value, smallest: int, largest: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < smallest or (largest is not None and value > largest):
        allowed = f"from {smallest} to {largest}" if largest is not None else f"of {smallest} or more"
        raise ValueError(f"{name} = {value!r}: must be a whole number {allowed}")


def build_model(
    vocab_size: int,
    num_classes: int,
    sequence_length: int,
    kind: str = "ngram_bag",
    embedding_dim: int = 64,
    ngram_buckets: int = 28672,
    ngram_window: int = 128,
    dropout: float = 0.3,
) -> keras.Model:
    if kind not in KINDS:
        raise ValueError(f"kind = {kind!r}: expected one of {', '.join(KINDS)}")
    token_ids = keras.Input(shape=(sequence_length,), dtype="int32", name="input_ids")
    bags = [PaddedEmbedding(vocab_size, embedding_dim, name="embedding")(token_ids)]
    if kind == "ngram_bag":
        if vocab_size > LARGEST_PAIRED_VOCABULARY:
            raise ValueError(f"kind = 'ngram_bag' pairs token ids in int32: vocab_size must be at most {LARGEST_PAIRED_VOCABULARY}, not {vocab_size}")
        require_whole_number("ngram_buckets", ngram_buckets, 2, INT32_MAX)  # bucket 0 is padding's; FLOOR_MOD runs in int32
        require_whole_number("ngram_window", ngram_window, 2)  # a pair
        # Pairs of the first ngram_window tokens only: their cost grows with it, and a long text's topic is in its words.
        leading = token_ids[:, :ngram_window] if ngram_window < sequence_length else token_ids
        bigram_ids = HashedBigrams(vocab_size, ngram_buckets, name="bigram_ids")(leading)
        bags.append(PaddedEmbedding(ngram_buckets, embedding_dim, name="bigram_embedding")(bigram_ids))
    pooled = NormalizedBagOfEmbeddings(name="bag_of_embeddings")(bags)
    pooled = keras.layers.Dropout(dropout, name="dropout")(pooled)
    logits = keras.layers.Dense(num_classes, name="logits")(pooled)
    return keras.Model(token_ids, logits, name="text_classifier")
