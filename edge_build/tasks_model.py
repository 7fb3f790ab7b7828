"""The Tasks-ready model: the trained classifier behind the BERT-style inputs MediaPipe's TextClassifier feeds.

MediaPipe's ``BertPreprocessorCalculator`` finds the three inputs by their
metadata names and lays every text out as ``[CLS] s1 ... sn [SEP] 0 ...``, the
mask 1 from ``[CLS]`` through ``[SEP]``, at most ``sequence_length - 2``
WordPieces. This vocabulary has neither ``[CLS]`` nor ``[SEP]``: both look up to
id 0, ``[PAD]``. The wrapper multiplies the ids by the mask and drops position 0,
so the trained model sees ``s1 ... sn 0 ...``, the tokenize stage's ids but for
the last two WordPieces of a text that fills the window (the hashed pairs read
padding only at the end, so the ``[PAD]`` in front must go). Its output is
softmax scores: MediaPipe reports them as each category's score, and refuses an
int8 output. TensorFlow is imported inside the functions.
"""

from __future__ import annotations

import numpy as np

from edge_build.tflite_host import quiet_tensorflow_lite

#: The inputs in the order the wrapper takes them, named as MediaPipe's metadata writer expects them by default.
INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
#: The TF Lite tensor name of each input: what the metadata writer pairs with its ``ids``, ``mask`` and ``segment_ids``.
TENSOR_NAMES = {name: f"serving_default_{name}:0" for name in INPUT_NAMES}


def tasks_model(model, sequence_length: int):
    """The Keras model MediaPipe can feed: three int32 ``[1, sequence_length]`` inputs, softmax scores out."""
    import keras

    ids, mask, segment_ids = (keras.Input(shape=(sequence_length,), dtype="int32", name=name, batch_size=1) for name in INPUT_NAMES)
    masked = ids * mask
    shifted = keras.ops.concatenate([masked[:, 1:], keras.ops.zeros_like(masked[:, :1])], axis=1)
    # The segment ids are unused (one segment), but MediaPipe feeds all three inputs: the converter keeps it.
    return keras.Model([ids, mask, segment_ids], keras.ops.softmax(model(shifted), axis=-1), name="tasks_classifier")


def mediapipe_layout(ids: np.ndarray) -> dict[str, np.ndarray]:
    """What MediaPipe feeds for the texts whose tokenize-stage ids are ``ids`` (trailing padding, every token id > 0)."""
    rows, length = ids.shape
    feeds = {name: np.zeros((rows, length), np.int32) for name in INPUT_NAMES}
    for row, tokens in enumerate(ids):
        kept = tokens[tokens > 0][: length - 2]
        feeds["input_word_ids"][row, 1 : 1 + len(kept)] = kept
        feeds["input_mask"][row, : len(kept) + 2] = 1
    return feeds


def representative_dataset(representative: np.ndarray):
    """The converter's calibration samples: ``representative.npy``'s rows in MediaPipe's layout."""
    feeds = mediapipe_layout(representative)
    return lambda: ({name: feeds[name][row : row + 1] for name in INPUT_NAMES} for row in range(len(representative)))


def run_tasks_tflite(content: bytes, ids: np.ndarray) -> np.ndarray:
    """The Tasks-ready model's scores for the texts of ``ids``, on TensorFlow's interpreter, one text at a time as MediaPipe runs it."""
    import tensorflow as tf

    with quiet_tensorflow_lite():
        interpreter = tf.lite.Interpreter(model_content=content)
    interpreter.allocate_tensors()
    by_name = {detail["name"]: detail["index"] for detail in interpreter.get_input_details()}
    (output,) = interpreter.get_output_details()
    feeds = mediapipe_layout(ids)
    scores = np.zeros((len(ids), output["shape"][-1]), np.float32)
    for row in range(len(ids)):
        for name, tensor in TENSOR_NAMES.items():
            interpreter.set_tensor(by_name[tensor], feeds[name][row : row + 1])
        interpreter.invoke()
        scores[row] = interpreter.get_tensor(output["index"])[0]
    return scores
