"""The split files written by the *data* stage, read back by later stages."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edge_build.errors import StageError

FEATURES = ("text", "label")


def feature_spec():
    import tensorflow as tf

    return {
        "text": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
    }


def parse_example(serialized):
    """One serialized ``tf.train.Example`` -> ``(text, label)`` tensors (for ``tf.data``)."""
    import tensorflow as tf

    parsed = tf.io.parse_single_example(serialized, feature_spec())
    return parsed["text"], tf.cast(parsed["label"], tf.int32)


def read_split(path: Path | str) -> tuple[list[bytes], np.ndarray]:
    """All texts (UTF-8 bytes) and labels of a split file, in file order."""
    import tensorflow as tf

    if not Path(path).is_file():
        raise StageError(f"{path}: split file not found (run the data stage first)")
    texts, labels = [], []
    for text, label in tf.data.TFRecordDataset(str(path)).map(parse_example).as_numpy_iterator():
        texts.append(text)
        labels.append(label)
    return texts, np.asarray(labels, dtype=np.int32)


def read_labels(path: Path | str) -> list[str]:
    if not Path(path).is_file():
        raise StageError(f"{path}: labels file not found (run the data stage first)")
    labels = Path(path).read_text(encoding="utf-8").splitlines()
    if len(labels) < 2:
        raise StageError(f"{path}: expected at least 2 labels, found {len(labels)}")
    return labels
