"""Reading back what earlier stages wrote: the splits in ``tf.data`` pipelines, labels and JSON records.

Stages that only need a split's texts and labels read it with ``edge_build.tfrecord``, without TensorFlow.
Standard library at import: numpy and TensorFlow load only where arrays or ``tf.data`` are read, so
that the report, which reads JSON records only, loads neither.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from edge_build.errors import StageError

if TYPE_CHECKING:
    import numpy as np


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


def read_split_with_tensorflow(path: Path | str) -> tuple[list[bytes], np.ndarray]:
    """A split's texts and labels through ``tf.data``, for a stage that has TensorFlow loaded and traces functions.

    The export reads its validation texts here, not with ``edge_build.tfrecord``:
    TensorFlow numbers every function it traces in a process, the SavedModel's
    function names carry those numbers, and the same reads keep its bytes the same.
    """
    import numpy as np
    import tensorflow as tf

    if not Path(path).is_file():
        raise StageError(f"{path}: split file not found (run the data stage first)")
    texts, labels = [], []
    for text, label in tf.data.TFRecordDataset(str(path)).map(parse_example).as_numpy_iterator():
        texts.append(text)
        labels.append(label)
    return texts, np.asarray(labels, dtype=np.int32)


def read_labels(path: Path | str) -> list[str]:
    """The class names of ``labels.txt``, one a line as the data stage wrote them, checked against its ``summary.json``.

    Split at LF only: ``str.splitlines`` would also split at characters a label might hold (U+2028, U+0085).
    """
    path = Path(path)
    if not path.is_file():
        raise StageError(f"{path}: labels file not found (run the data stage first)")
    labels = path.read_text(encoding="utf-8").removesuffix("\n").split("\n")
    if len(labels) < 2:
        raise StageError(f"{path}: expected at least 2 labels, found {len(labels)}")
    summary = path.with_name("summary.json")
    if summary.is_file() and read_json(summary).get("labels") != labels:
        raise StageError(f"{path}: its {len(labels)} labels differ from those {summary} lists (run scons again)")
    return labels


def read_json(path: Path | str) -> dict:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StageError(f"{path}: not found (run the stage that writes it first)") from None
    except json.JSONDecodeError as exc:
        raise StageError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None


def read_rows(path: Path | str, examples: int) -> np.ndarray:
    """A ``.npy`` with one row per example of a split (token ids, logits), after checking the count."""
    import numpy as np

    if not Path(path).is_file():
        raise StageError(f"{path}: not found (run the stage that writes it first)")
    rows = np.load(path, allow_pickle=False)
    if rows.ndim != 2 or len(rows) != examples:
        raise StageError(f"{path}: an array of shape {rows.shape} for a split of {examples} examples (made from another split? run scons again)")
    return rows
