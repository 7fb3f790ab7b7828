"""Text -> token ids, the same way in training, in the exported SavedModel and in evaluation."""

from __future__ import annotations

from pathlib import Path

from edge_build.vocab import UNK


def load_tokenizer(vocab_path: Path | str, lower_case: bool):
    """tensorflow-text's ``BertTokenizer`` over ``vocab.txt``; inside a ``tf.Module`` the file is saved as an asset."""
    import tensorflow as tf
    import tensorflow_text as tf_text

    return tf_text.BertTokenizer(str(vocab_path), lower_case=lower_case, token_out_type=tf.int32, unknown_token=UNK)


def encode(tokenizer, texts, sequence_length: int):
    """``[batch]`` strings -> ``[batch, sequence_length]`` int32 ids: the first wordpieces, zero-padded."""
    wordpieces = tokenizer.tokenize(texts).merge_dims(-2, -1)
    return wordpieces[:, :sequence_length].to_tensor(default_value=0, shape=[None, sequence_length])
