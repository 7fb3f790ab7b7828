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

MediaPipe's tokenizer lowercases ASCII and does nothing else of training's
normalization (NFKC, case folding, accent stripping): a full-width comma, the
commonest mark in Chinese text, is ``[UNK]`` to it and ``,`` to training. Its
vocabulary therefore gets aliases (``mediapipe_vocabulary``): after the training tokens,
each punctuation mark or symbol that training's normalization turns into one
token, which the model maps back to that token's id before the classifier.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

import numpy as np

from edge_build.special_tokens import UNK
from edge_build.tflite_host import quiet_tensorflow_lite
from edge_build.tokenizer import token_ids

#: The inputs in the order the wrapper takes them, named as MediaPipe's metadata writer expects them by default.
INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
#: The TF Lite tensor name of each input: what the metadata writer pairs with its ``ids``, ``mask`` and ``segment_ids``.
TENSOR_NAMES = {name: f"serving_default_{name}:0" for name in INPUT_NAMES}


#: The code points looked at for aliases: the Basic Multilingual Plane and the next, where every compatibility form lies.
ALIAS_RANGE = range(0x80, 0x20000)


def mediapipe_vocabulary(vocab: Path) -> tuple[str, np.ndarray]:
    """MediaPipe's vocabulary file's text, and the training id of each of its ids.

    The training tokens keep their ids; after them come the aliases: each non-ASCII punctuation mark or symbol outside
    the vocabulary that training's tokenizer turns into exactly one token (``，`` -> ``,``), which maps to that token's id.
    """
    training = vocab.read_text(encoding="utf-8")
    tokens = training.splitlines()
    known = set(tokens)
    marks = [chr(point) for point in ALIAS_RANGE if unicodedata.category(chr(point)).startswith(("P", "S")) and chr(point) not in known]
    # Two ids each: one token, then padding, is a mark training reads as exactly one known token.
    ids = token_ids(vocab, True, [mark.encode("utf-8") for mark in marks], 2)
    unknown = tokens.index(UNK)
    aliased = [(mark, int(first)) for mark, (first, second) in zip(marks, ids) if first not in (0, unknown) and second == 0]
    remap = np.array([*range(len(tokens)), *(target for _, target in aliased)], np.int32)
    return training + "".join(f"{mark}\n" for mark, _ in aliased), remap


def tasks_model(model, sequence_length: int, remap: np.ndarray):
    """The Keras model MediaPipe can feed: three int32 ``[1, sequence_length]`` inputs, softmax scores out.

    ``remap`` gives the training id of every id of MediaPipe's vocabulary: itself for a training token, the aliased
    token's for an alias (``mediapipe_vocabulary``)."""
    import keras

    ids, mask, segment_ids = (keras.Input(shape=(sequence_length,), dtype="int32", name=name, batch_size=1) for name in INPUT_NAMES)
    masked = keras.ops.take(keras.ops.convert_to_tensor(remap, dtype="int32"), ids * mask)
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
