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
commonest mark in Chinese text, is ``[UNK]`` to it and ``,`` to training, and
``Lástima`` is ``lástima`` to it and ``lastima`` to training. Its vocabulary
therefore gets aliases (``mediapipe_vocabulary``), which the model maps back to
the training token's id before the classifier: after the training tokens, each
punctuation mark or symbol that training's normalization turns into one token,
then MediaPipe's spelling of each WordPiece of the training texts' non-ASCII
words (``word_aliases``).
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import numpy as np

from edge_build.convert.converter import quiet_tensorflow_lite
from edge_build.convert.job import ConversionJob, Converted
from edge_build.convert.ladder import Quantizable, quantize_by_ladder
from edge_build.errors import StageError
from edge_build.interfaces import BERT_INPUTS, BERT_TENSORS
from edge_build.special_tokens import JOINER, UNK
from edge_build.tfrecord import read_split
from edge_build.tokenizer import token_ids

#: The code points looked at for aliases: the Basic Multilingual Plane and the next, where every compatibility form lies.
ALIAS_RANGE = range(0x80, 0x20000)


#: What MediaPipe does to a text before splitting it: ASCII letters lowercased, nothing else.
ASCII_LOWER = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}


def mediapipe_vocabulary(vocab: Path, texts: list[bytes]) -> tuple[str, np.ndarray]:
    """MediaPipe's vocabulary file's text, and the training id of each of its ids.

    The training tokens keep their ids; after them come the aliases, each mapping to a training token's id: each non-ASCII
    punctuation mark or symbol outside the vocabulary that training's tokenizer turns into exactly one token (``，`` ->
    ``,``), then the word aliases of the training ``texts`` (``word_aliases``), sorted.
    """
    training = vocab.read_text(encoding="utf-8")
    tokens = training.splitlines()
    known = set(tokens)
    marks = [chr(point) for point in ALIAS_RANGE if unicodedata.category(chr(point)).startswith(("P", "S")) and chr(point) not in known]
    aliased = list(single_token_readings(vocab, marks).items())
    marked = known | {mark for mark, _ in aliased}
    aliased += sorted((alias, target) for alias, target in word_aliases(vocab, texts).items() if alias not in marked)
    remap = np.array([*range(len(tokens)), *(target for _, target in aliased)], np.int32)
    return training + "".join(f"{alias}\n" for alias, _ in aliased), remap


def single_token_readings(vocab: Path, chars: list[str]) -> dict[str, int]:
    """Each of ``chars`` that training's tokenizer reads, alone, as exactly one known token -> that token's id, in ``chars``' order."""
    unknown = vocab.read_text(encoding="utf-8").splitlines().index(UNK)
    # Two ids each: one token, then padding, is a character read as exactly one known token.
    ids = token_ids(vocab, True, [char.encode("utf-8") for char in chars], 2)
    return {char: int(first) for char, (first, second) in zip(chars, ids) if first not in (0, unknown) and second == 0}


#: MediaPipe's BertTokenizer's default delimiters (``kDefaultDelimRe``): ASCII whitespace separates words, and ASCII
#: punctuation, Unicode punctuation (P*) and these CJK ideograph ranges are tokens of their own. The same ranges as
#: tensorflow-text's (``board/wordpiece.py``), BERT's both, but MediaPipe's to follow: and the board's tokenizer stays
#: out of the tflite stage's code, so that editing it reruns only the bundle.
MEDIAPIPE_CJK = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
_ASCII_DELIMITERS = re.compile(r"[\t\n\f\r !-/:-@\[-`{-~]+")
#: The longest word MediaPipe's WordPiece takes, in UTF-8 bytes (``kDefaultMaxBytesPerToken``); a longer one is ``[UNK]``.
MEDIAPIPE_MAX_BYTES_PER_WORD = 100


def mediapipe_words(text: str) -> list[str]:
    """The words of ``text`` holding a non-ASCII character, as MediaPipe's BertTokenizer cuts and spells them (ASCII lowercased)."""
    words = []
    for chunk in _ASCII_DELIMITERS.split(text.translate(ASCII_LOWER)):
        if chunk.isascii():
            continue
        word: list[str] = []
        for char in chunk:
            if unicodedata.category(char).startswith("P") or any(low <= ord(char) <= high for low, high in MEDIAPIPE_CJK):
                words.append("".join(word))
                word = []
            else:
                word.append(char)
        words.append("".join(word))
    return [word for word in words if not word.isascii()]


def word_aliases(vocab: Path, texts: list[bytes]) -> dict[str, int]:
    """MediaPipe's spelling of each WordPiece of the non-ASCII words of ``texts`` -> that WordPiece's training id.

    MediaPipe cuts a text into words where training does, but only lowercases ASCII: ``Último`` stays ``Último`` for it
    and is ``ultimo`` for training, cut into ``ult`` ``##imo``, say. Where each character of a word is, alone, one
    single-character token to training (``Ú`` is ``u``), training's WordPieces of the word are spans of MediaPipe's
    spelling too, and each span as MediaPipe spells it (``Últ``) becomes an alias of its WordPiece. WordPiece's greedy
    longest match then cuts MediaPipe's word where training cuts it, since every token and alias reads as a training
    token, so none is longer than training's choice: each word of the training texts gets training's ids. A word only
    later texts hold may still differ; the runtime checks measure what that costs.
    """
    tokens = vocab.read_text(encoding="utf-8").splitlines()
    unknown = tokens.index(UNK)
    spelled = {word for text in texts for word in mediapipe_words(text.decode("utf-8", errors="replace"))}
    # Printable only: an alias is a line of the vocabulary file, which U+2028 or U+0085 would break for some readers.
    words = sorted(word for word in spelled if word.isprintable() and len(word.encode("utf-8")) <= MEDIAPIPE_MAX_BYTES_PER_WORD)
    chars = sorted({char for word in words for char in word})
    # Training's reading of each character alone: one single-character token, or the words holding it get no alias
    # (ß reads as ss, a combining mark as nothing).
    single = {char: tokens[piece] for char, piece in single_token_readings(vocab, chars).items() if len(tokens[piece]) == 1}
    words = [word for word in words if all(char in single for char in word)]
    longest = max(map(len, words), default=0)
    aliases: dict[str, int] = {}
    for word, row in zip(words, token_ids(vocab, True, [word.encode("utf-8") for word in words], longest + 1)):
        pieces = [int(piece) for piece in row if piece]
        readings = [tokens[piece] for piece in pieces]
        # One word to training too, its WordPieces spelling its characters' readings in order.
        continued = all(reading.startswith(JOINER) for reading in readings[1:]) and not readings[0].startswith(JOINER)
        if (
            unknown in pieces
            or not continued
            or readings[0] + "".join(reading[len(JOINER) :] for reading in readings[1:]) != "".join(map(single.get, word))
        ):
            continue
        start = 0
        for index, (piece, reading) in enumerate(zip(pieces, readings)):
            prefix = JOINER if index else ""
            end = start + len(reading) - len(prefix)
            alias = prefix + word[start:end]
            if alias != reading:
                aliases.setdefault(alias, piece)
            start = end
    return aliases


def tasks_model(model, sequence_length: int, remap: np.ndarray):
    """The Keras model MediaPipe can feed: three int32 ``[1, sequence_length]`` inputs, softmax scores out.

    ``remap`` gives the training id of every id of MediaPipe's vocabulary: itself for a training token, the aliased
    token's for an alias (``mediapipe_vocabulary``)."""
    import keras

    ids, mask, segment_ids = (keras.Input(shape=(sequence_length,), dtype="int32", name=name, batch_size=1) for name in BERT_INPUTS)
    masked = keras.ops.take(keras.ops.convert_to_tensor(remap, dtype="int32"), ids * mask)
    shifted = keras.ops.concatenate([masked[:, 1:], keras.ops.zeros_like(masked[:, :1])], axis=1)
    # The segment ids are unused (one segment), but MediaPipe feeds all three inputs: the converter keeps it.
    return keras.Model([ids, mask, segment_ids], keras.ops.softmax(model(shifted), axis=-1), name="tasks_classifier")


def mediapipe_layout(ids: np.ndarray) -> dict[str, np.ndarray]:
    """What MediaPipe feeds for the texts whose tokenize-stage ids are ``ids`` (trailing padding, every token id > 0)."""
    rows, length = ids.shape
    feeds = {name: np.zeros((rows, length), np.int32) for name in BERT_INPUTS}
    for row, tokens in enumerate(ids):
        kept = tokens[tokens > 0][: length - 2]
        feeds["input_word_ids"][row, 1 : 1 + len(kept)] = kept
        feeds["input_mask"][row, : len(kept) + 2] = 1
    return feeds


def representative_dataset(representative: np.ndarray):
    """The converter's calibration samples: ``representative.npy``'s rows in MediaPipe's layout."""
    feeds = mediapipe_layout(representative)
    return lambda: ({name: feeds[name][row : row + 1] for name in BERT_INPUTS} for row in range(len(representative)))


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
        for name, tensor in BERT_TENSORS.items():
            interpreter.set_tensor(by_name[tensor], feeds[name][row : row + 1])
        interpreter.invoke()
        scores[row] = interpreter.get_tensor(output["index"])[0]
    return scores


def convert(job: ConversionJob) -> Converted:
    """The Tasks-ready model, quantized by the ladder (full INT8 first) calibrated on ``representative.npy`` in MediaPipe's
    layout, with MediaPipe's vocabulary (the training tokens and the aliases, those of the training texts' words included)
    for its metadata."""
    if not job.hparams.tokenizer.lower_case:
        raise StageError(
            f"{job.where}: {job.artifact} needs lower_case = true in [tokenizer] of {job.files.hparams}: MediaPipe's BertTokenizer always lowercases"
        )
    train_texts, _ = read_split(job.file("train"))
    representative, sequence_length = job.representative, job.sequence_length
    vocab_text, remap = mediapipe_vocabulary(job.files.vocab, train_texts)
    # The quantization ladder, as tflite_int8's: its output float32 whatever the recipe, since MediaPipe refuses an int8 output tensor.
    subject = Quantizable(
        tasks_model(job.model, sequence_length, remap), representative_dataset(representative), run_tasks_tflite, float_output=True, one_input=False
    )
    converted = quantize_by_ladder(job, subject)
    layout = {
        "inputs": BERT_TENSORS,
        "layout": "MediaPipe feeds [CLS] s1 ... sn [SEP] 0 ...; [CLS] and [SEP] are not in the vocabulary and look up to 0, so the "
        "model multiplies the ids by the mask and drops position 0: the classifier sees the tokenize stage's ids, at most "
        f"{sequence_length - 2} WordPieces",
        "output": "softmax scores (float32)",
        "aliases": int(np.count_nonzero(remap != np.arange(len(remap)))),  # a training id maps to itself, an alias elsewhere
        "aliases_why": "MediaPipe's tokenizer lowercases ASCII only: each punctuation mark or symbol that training's normalization "
        "turns into one token (a full-width comma into ','), and each WordPiece of the training texts' non-ASCII words as MediaPipe "
        "spells it ('Últ' for 'ult'), is added to its vocabulary and mapped to that token's id in the model",
    }
    converted.record["tasks_model"] = layout
    converted.vocab_text = vocab_text
    return converted
