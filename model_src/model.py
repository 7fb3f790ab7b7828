"""The classifier: a normalized bag of WordPiece embeddings and a linear layer.

edge-build calls ``build_model`` with the vocabulary size, the number of classes and
the sequence length, plus every key of ``[model]`` in ``hparams.toml`` as a keyword
argument, so a new hyperparameter is a new keyword argument here and a key there.
The model takes int32 token ids ``[batch, sequence_length]`` (0 = padding) and
returns unnormalized logits ``[batch, num_classes]``.

Why this shape, measured on BBC News here:
- 512 tokens, not 256: most articles are longer than 256 WordPieces, and the
  longer window gained about two points of test accuracy.
- The sum of the non-padding embeddings is L2-normalized instead of divided by the
  token count: a masked mean needs a DIV, which full-integer conversion quantizes
  to int8, and tflite-runtime 2.14 has no int8 DIV kernel ("Div only supports
  FLOAT32, INT32 and quantized UINT8"). The norm is written as ``total * total``
  and RSQRT because ``ops.normalize`` squares with SQUARE, which has no int8 kernel
  and would keep a float island in the INT8 model. The normalized sum also reached
  the masked mean's accuracy in fewer epochs.
- Padding is left out by holding the [PAD] row of the embedding at zero (zero at
  initialization, and zeroed again after every update) instead of multiplying by a
  mask. Both give the same sums, but the mask's broadcast multiply over
  ``[batch, 512, 64]`` was most of the INT8 model's time: about 150 of 156 µs per
  example on tflite-runtime, and without it INT8 runs at ~2.5x the interpreter's
  one-op floor on LiteRT (benchmarks/inference.py).
"""

import keras
from keras import ops


PAD_ID = 0


def zero_padding_row(embeddings):
    return ops.concatenate([ops.zeros_like(embeddings[:PAD_ID + 1]), embeddings[PAD_ID + 1:]], axis=0)


class PaddingRowStaysZero(keras.constraints.Constraint):
    """Applied by the optimizer after each update: [PAD] embeds to zero, so it adds nothing to a sum."""

    def __call__(self, embeddings):
        return zero_padding_row(embeddings)


def uniform_with_zero_padding_row(shape, dtype=None):
    """Keras's default embedding initializer, with the [PAD] row zeroed."""
    return zero_padding_row(keras.initializers.RandomUniform(-0.05, 0.05)(shape, dtype))


class NormalizedBagOfEmbeddings(keras.layers.Layer):
    """L2-normalized sum of the token embeddings ([PAD] embeds to zero; all-padding rows give zeros)."""

    def call(self, embeddings):
        total = ops.sum(embeddings, axis=1)
        squared_norm = ops.sum(total * total, axis=-1, keepdims=True)
        return total * ops.rsqrt(ops.maximum(squared_norm, 1e-12))


def build_model(
    vocab_size: int,
    num_classes: int,
    sequence_length: int,
    embedding_dim: int = 64,
    dropout: float = 0.3,
) -> keras.Model:
    token_ids = keras.Input(shape=(sequence_length,), dtype="int32", name="input_ids")
    embeddings = keras.layers.Embedding(
        vocab_size, embedding_dim, embeddings_initializer=uniform_with_zero_padding_row,
        embeddings_constraint=PaddingRowStaysZero(), name="embedding",
    )(token_ids)
    pooled = NormalizedBagOfEmbeddings(name="bag_of_embeddings")(embeddings)
    pooled = keras.layers.Dropout(dropout, name="dropout")(pooled)
    logits = keras.layers.Dense(num_classes, name="logits")(pooled)
    return keras.Model(token_ids, logits, name="text_classifier")
