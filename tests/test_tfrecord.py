"""edge_build.tfrecord reads split files exactly as TensorFlow's ``tf.data`` pipeline over them does."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from conftest import varint

from edge_build import records, tfrecord
from edge_build.errors import StageError

TEXTS = [
    "Plain ASCII headline.",
    "naïve café — Zürich, 東京, Ελλάδα, 🙂",
    "",
    "long " + "wörd " * 25_000,  # > 100 kB, with multi-byte characters
    "line\nbreaks\tand\x00nul",
]
# Small, multi-byte varint, the largest int32, and -1 (a ten-byte varint).
LABELS = [0, 1, 2, 300, 2**31 - 1, -1, 3]


def example(text: bytes | None, label: int | None, /, **extra: tf.train.Feature) -> bytes:
    feature = dict(extra)
    if text is not None:
        feature["text"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[text]))
    if label is not None:
        feature["label"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))
    # As the data stage writes them.
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString(deterministic=True)


def write_records(path: Path, serialized: list[bytes]) -> Path:
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in serialized:
            writer.write(record)
    return path


def write_split(path: Path) -> Path:
    texts = [TEXTS[i % len(TEXTS)].encode("utf-8") for i in range(len(LABELS))]
    return write_records(path, [example(text, label) for text, label in zip(texts, LABELS)])


def tensorflow_read_split(path: Path) -> tuple[list[bytes], np.ndarray]:
    """The reference: the split read the way the training stage's ``tf.data`` pipeline reads it."""
    pairs = list(tf.data.TFRecordDataset(str(path)).map(records.parse_example).as_numpy_iterator())
    return [text for text, _ in pairs], np.asarray([label for _, label in pairs], dtype=np.int32)


def assert_same_as_tensorflow(path: Path) -> tuple[list[bytes], np.ndarray]:
    texts, labels = tfrecord.read_split(path)
    expected_texts, expected_labels = tensorflow_read_split(path)
    assert texts == expected_texts
    assert all(type(text) is bytes for text in texts)
    assert labels.dtype == np.int32 == expected_labels.dtype
    np.testing.assert_array_equal(labels, expected_labels)
    return texts, labels


def test_reads_what_tensorflow_reads(tmp_path):
    texts, labels = assert_same_as_tensorflow(write_split(tmp_path / "train.tfrecord"))
    assert len(texts) == len(LABELS) and labels.tolist() == LABELS
    assert b"" in texts and max(map(len, texts)) > 100_000
    assert tfrecord.read_split(tmp_path / "train.tfrecord", verify_data=True)[0] == texts


def test_empty_split(tmp_path):
    texts, labels = assert_same_as_tensorflow(write_records(tmp_path / "empty.tfrecord", []))
    assert texts == [] and labels.shape == (0,)


def field(number: int, wire_type: int, payload: bytes) -> bytes:
    key = varint(number << 3 | wire_type)
    return key + (varint(len(payload)) + payload if wire_type == 2 else payload)


def test_unpacked_int64_and_unknown_fields(tmp_path):
    """Encodings TensorFlow never writes but a protobuf parser must accept."""
    unknown = (
        field(15, 0, varint(7))
        + field(14, 1, bytes(8))
        + field(13, 5, bytes(4))
        + field(12, 2, b"skip")
        + field(11, 3, field(1, 0, varint(1)))
        + varint(11 << 3 | 4)  # a group holding one varint
    )
    label = field(3, 2, field(1, 0, varint(5)) + unknown)  # Int64List, unpacked value
    text = field(1, 2, field(1, 2, b"hello") + unknown)
    entries = field(1, 2, field(1, 2, b"label") + field(2, 2, label)) + field(1, 2, field(1, 2, b"text") + field(2, 2, text))
    record = unknown + field(1, 2, entries + unknown) + unknown
    # The oracle is protobuf itself: TensorFlow's fast Example parser rejects some unknown fields.
    parsed = tf.train.Example.FromString(record).features.feature
    assert parsed["text"].bytes_list.value == [b"hello"] and parsed["label"].int64_list.value == [5]
    texts, labels = tfrecord.read_split(write_records(tmp_path / "odd.tfrecord", [record]))
    assert texts == [b"hello"] and labels.tolist() == [5]


@pytest.mark.parametrize("where", ["footer", "data", "header", "long text"])
def test_truncated_file(tmp_path, where):
    path = write_split(tmp_path / "train.tfrecord")
    data = path.read_bytes()
    first_record = 12 + len(example(TEXTS[0].encode("utf-8"), LABELS[0])) + 4
    keep = {"footer": len(data) - 1, "data": len(data) - 10, "header": first_record + 5, "long text": len(data) - 5000}[where]
    path.write_bytes(data[:keep])
    with pytest.raises(StageError, match="truncated") as error:
        tfrecord.read_split(path)
    assert str(path) in str(error.value) and "\n" not in str(error.value)


def flip_byte(path: Path, marker: bytes) -> None:
    data = bytearray(path.read_bytes())
    data[data.index(marker)] ^= 0x01
    path.write_bytes(bytes(data))


def test_flipped_byte_in_a_feature_name_fails_to_decode(tmp_path):
    path = write_split(tmp_path / "train.tfrecord")
    flip_byte(path, b"label")  # the first record's "label" becomes "mabel"
    with pytest.raises(StageError, match=r"record 0 .*feature 'label' missing") as error:
        tfrecord.read_split(path)
    assert str(path) in str(error.value)


def test_flipped_byte_in_a_text_fails_the_data_crc(tmp_path):
    """Decoding cannot notice a changed text byte; only the data CRC can."""
    path = write_split(tmp_path / "train.tfrecord")
    flip_byte(path, "café".encode())
    with pytest.raises(StageError, match=r"record 1 .*data CRC mismatch") as error:
        tfrecord.read_split(path, verify_data=True)
    assert str(path) in str(error.value)


def test_flipped_byte_in_a_length_fails_the_length_crc(tmp_path):
    path = write_split(tmp_path / "train.tfrecord")
    data = bytearray(path.read_bytes())
    data[0] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(StageError, match=r"record 0 .*length CRC mismatch"):
        tfrecord.read_split(path)


@pytest.mark.parametrize(
    "record, problem",
    [
        (example(b"text only", None), "feature 'label' missing"),
        (example(None, 1), "feature 'text' missing"),
        (example(b"t", 1, source=tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"x"]))), "unexpected feature(s) 'source'"),
        (example(None, 1, text=tf.train.Feature(int64_list=tf.train.Int64List(value=[1]))), "feature 'text' is int64_list, expected bytes_list"),
        (
            example(b"t", None, label=tf.train.Feature(float_list=tf.train.FloatList(value=[1.0]))),
            "feature 'label' is float_list, expected int64_list",
        ),
        (example(b"t", None, label=tf.train.Feature()), "feature 'label' is no value list, expected int64_list"),
        (example(None, 1, text=tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"a", b"b"]))), "feature 'text' has 2 values, expected 1"),
        (example(b"t", None, label=tf.train.Feature(int64_list=tf.train.Int64List())), "feature 'label' has 0 values, expected 1"),
        (example(b"t", 2**31), "label 2147483648 does not fit in int32"),
        (b"\x0a\x05\x0a\x03", "runs past the end"),
    ],
)
def test_malformed_record(tmp_path, record, problem):
    path = write_records(tmp_path / "val.tfrecord", [example(b"fine", 0), record])
    with pytest.raises(StageError) as error:
        tfrecord.read_split(path)
    message = str(error.value)
    assert message.startswith(f"{path}: record 1 ") and problem in message and "\n" not in message


def test_missing_file(tmp_path):
    path = tmp_path / "test.tfrecord"
    with pytest.raises(StageError, match="split file not found") as error:
        tfrecord.read_split(path)
    assert str(error.value) == f"{path}: split file not found (run the data stage first)"


def test_crc32c():
    assert tfrecord.crc32c(b"123456789") == 0xE3069283  # the standard CRC-32C check value
    assert tfrecord.crc32c(b"") == 0


def test_does_not_import_tensorflow():
    code = "import sys, edge_build.tfrecord; print(sorted(m for m in sys.modules if m.startswith(('tensorflow', 'google.protobuf'))))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parents[1])
    assert result.stdout.strip() == "[]"
