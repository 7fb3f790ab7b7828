"""Text -> token ids, the same way in training, in the exported SavedModel and in evaluation."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edge_build.special_tokens import UNK


def load_tokenizer(vocab_path: Path | str, lower_case: bool):
    """tensorflow-text's ``BertTokenizer`` over ``vocab.txt``; inside a ``tf.Module`` the file is saved as an asset."""
    import tensorflow as tf
    import tensorflow_text as tf_text

    return tf_text.BertTokenizer(str(vocab_path), lower_case=lower_case, token_out_type=tf.int32, unknown_token=UNK)


def encode(tokenizer, texts, sequence_length: int):
    """``[batch]`` strings -> ``[batch, sequence_length]`` int32 ids: the first wordpieces, zero-padded."""
    wordpieces = tokenizer.tokenize(texts).merge_dims(-2, -1)
    return wordpieces[:, :sequence_length].to_tensor(default_value=0, shape=[None, sequence_length])


def token_ids(vocab_path: Path | str, lower_case: bool, texts: list[bytes], sequence_length: int, batch: int = 256):
    """Eager, batched ``encode`` of ``texts``: an int32 numpy array ``[len(texts), sequence_length]``."""
    import tensorflow as tf

    tokenizer = load_tokenizer(vocab_path, lower_case)
    rows = [encode(tokenizer, tf.constant(texts[i : i + batch]), sequence_length).numpy() for i in range(0, len(texts), batch)]
    return np.concatenate(rows) if rows else np.zeros((0, sequence_length), dtype=np.int32)
