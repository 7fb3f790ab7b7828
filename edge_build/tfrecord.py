"""Read the data stage's split files without importing TensorFlow.

A stage that only reads ``train/val/test.tfrecord`` would otherwise import TensorFlow
just for ``tf.data.TFRecordDataset``, and that import costs about 4-6 s per process,
far more than reading a few MB of records.  This module decodes both layers itself,
with the standard library and numpy: the TFRecord framing, then the protobuf wire
format of the ``tf.train.Example`` records that ``edge_build.stages.data`` writes, each with
exactly two features, ``text`` (one bytes value) and ``label`` (one int64 value).

``read_split`` returns what reading a split through ``tf.data`` with
``edge_build.records.parse_example`` returns (the tests compare the two), but is
stricter: a record that is not exactly such an Example is a ``StageError`` naming the
file and the record, not something to silently ignore (extra features) or wrap around
(labels beyond int32).
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from edge_build.errors import StageError

# The kind (field number in ``tf.train.Feature``) each feature must have.
BYTES_LIST, FLOAT_LIST, INT64_LIST = 1, 2, 3
KIND_NAMES = {BYTES_LIST: "bytes_list", FLOAT_LIST: "float_list", INT64_LIST: "int64_list"}
EXPECTED_KINDS = {"text": BYTES_LIST, "label": INT64_LIST}

_HEADER = struct.Struct("<QI")  # payload length, masked CRC32C of those 8 bytes
_FOOTER = struct.Struct("<I")  # masked CRC32C of the payload
_UINT64 = (1 << 64) - 1


def _crc32c_table() -> list[int]:
    # CRC32C (Castagnoli, reflected polynomial 0x82F63B78): zlib.crc32 uses another polynomial.
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC32C_TABLE = _crc32c_table()


def crc32c(data: bytes | memoryview) -> int:
    crc, table = 0xFFFFFFFF, _CRC32C_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes | memoryview) -> int:
    # TFRecord masks its CRCs: the CRC of data that itself embeds CRCs (a TFRecord file
    # inside a record) would otherwise be weak.
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class _Malformed(Exception):
    """What is wrong with one record; ``read_split`` adds the file and the record number."""


def read_split(path: Path | str, *, verify_data: bool = False) -> tuple[list[bytes], np.ndarray]:
    """All texts (UTF-8 bytes, as stored) and labels (``np.int32``) of a split file, in file order.

    Every record's length CRC is checked.  Payload CRCs are checked only with
    ``verify_data=True``: pure-Python CRC32C runs at about 8 MB/s, so checking a 4 MB
    train split takes about 0.5 s, a tenth of the TensorFlow import this module avoids.
    Without it a damaged tag, length or feature name still fails to decode, but a
    damaged byte inside a text comes back as a different text.
    """
    if not Path(path).is_file():
        raise StageError(f"{path}: split file not found (run the data stage first)")
    data = Path(path).read_bytes()
    texts, labels = [], []
    pos = index = 0
    try:
        while pos < len(data):
            start, end, pos = _next_record(data, pos, verify_data)
            text, label = _decode_example(data, start, end)
            texts.append(text)
            labels.append(label)
            index += 1
    except _Malformed as error:
        raise StageError(f"{path}: record {index} (counting from 0): {error}") from None
    return texts, np.asarray(labels, dtype=np.int32)


def _next_record(data: bytes, pos: int, verify_data: bool) -> tuple[int, int, int]:
    """The record at ``pos``: ``(payload start, payload end, next record's position)``."""
    left = len(data) - pos
    if left < _HEADER.size:
        raise _Malformed(f"file truncated: {left} bytes left at byte {pos}, a record header has {_HEADER.size}")
    length, length_crc = _HEADER.unpack_from(data, pos)
    # Checked before the length is trusted: a garbage length would otherwise read as "truncated".
    if masked_crc32c(data[pos : pos + 8]) != length_crc:
        raise _Malformed(f"length CRC mismatch at byte {pos} (not a TFRecord file, or damaged)")
    start = pos + _HEADER.size
    end = start + length
    if end + _FOOTER.size > len(data):
        raise _Malformed(f"file truncated: the record at byte {pos} needs {_HEADER.size + length + _FOOTER.size} bytes, {left} are left")
    if verify_data and masked_crc32c(memoryview(data)[start:end]) != _FOOTER.unpack_from(data, end)[0]:
        raise _Malformed(f"data CRC mismatch in the record at byte {pos} (damaged)")
    return start, end, end + _FOOTER.size


# --- protobuf wire format ----------------------------------------------------------
# Only as much as tf.train.Example needs.  Each function takes the message as
# ``data[start:end]`` so that no record is copied before its text is.


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while pos < end and shift < 70:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result & _UINT64, pos  # protobuf keeps the low 64 bits of an over-long varint
        shift += 7
    raise _Malformed("truncated varint" if pos >= end else "varint longer than 10 bytes")


def _fields(data: bytes, pos: int, end: int):
    """Yield ``(field number, wire type, value)`` of a message: an int for a varint,
    ``(start, end)`` for a length-delimited field, ``None`` for anything skipped."""
    while pos < end:
        key, pos = _varint(data, pos, end)
        value, pos = _field_value(data, pos, end, key)
        yield key >> 3, key & 7, value


def _field_value(data: bytes, pos: int, end: int, key: int):
    number, wire_type = key >> 3, key & 7
    if number == 0:
        raise _Malformed("protobuf field number 0")
    if wire_type == 0:
        return _varint(data, pos, end)
    if wire_type == 2:
        length, pos = _varint(data, pos, end)
        value, pos = (pos, pos + length), pos + length
    elif wire_type in (1, 5):  # fixed64, fixed32
        value, pos = None, pos + (8 if wire_type == 1 else 4)
    elif wire_type == 3:  # a (deprecated) group ends at its end-group tag, not after a length
        value, pos = None, _skip_group(data, pos, end, number)
    else:
        raise _Malformed(f"protobuf field {number} has invalid wire type {wire_type}")
    if pos > end:
        raise _Malformed(f"protobuf field {number} runs past the end of its message")
    return value, pos


def _skip_group(data: bytes, pos: int, end: int, number: int) -> int:
    while pos < end:
        key, pos = _varint(data, pos, end)
        if key & 7 == 4:
            if key >> 3 != number:
                raise _Malformed(f"protobuf group {number} closed as group {key >> 3}")
            return pos
        _, pos = _field_value(data, pos, end, key)
    raise _Malformed(f"protobuf group {number} is not closed")


def _decode_example(data: bytes, start: int, end: int) -> tuple[bytes, int]:
    """``Example{features=1: Features{feature=1: map<string, Feature>}}`` -> ``(text, label)``."""
    features = {}
    # Fields with an unexpected wire type are unknown fields to protobuf, and skipped as such;
    # a repeated ``features`` field merges, so the map entries of all of them count.
    for number, wire_type, value in _fields(data, start, end):
        if number == 1 and wire_type == 2:
            for entry_number, entry_type, entry in _fields(data, *value):
                if entry_number == 1 and entry_type == 2:
                    name, feature = _map_entry(data, *entry)
                    features[name] = feature  # a repeated key: the last one wins, as in protobuf
    for name in EXPECTED_KINDS:
        if name not in features:
            raise _Malformed(f"feature {name!r} missing (found {sorted(features)})")
    extra = sorted(set(features) - set(EXPECTED_KINDS))
    if extra:
        raise _Malformed(f"unexpected feature(s) {', '.join(map(repr, extra))}; a split record has only {sorted(EXPECTED_KINDS)}")
    for name, expected in EXPECTED_KINDS.items():
        kind = features[name][0]
        if kind != expected:
            found = KIND_NAMES[kind] if kind else "no value list"
            raise _Malformed(f"feature {name!r} is {found}, expected {KIND_NAMES[expected]}")
    text = _single("text", _bytes_values(data, *features["text"][1]))
    label = _single("label", _int64_values(data, *features["label"][1]))
    if not -(2**31) <= label < 2**31:
        raise _Malformed(f"label {label} does not fit in int32")
    return text, label


def _map_entry(data: bytes, start: int, end: int) -> tuple[str, tuple[int | None, tuple[int, int]]]:
    """A map entry ``{key=1: string, value=2: Feature}`` -> ``(name, (kind, payload range))``."""
    name, feature = b"", (None, (0, 0))  # absent fields have their default values
    for number, wire_type, value in _fields(data, start, end):
        if number == 1 and wire_type == 2:
            name = data[value[0] : value[1]]
        elif number == 2 and wire_type == 2:
            feature = _feature(data, *value)
    try:
        return name.decode("utf-8"), feature
    except UnicodeDecodeError:
        raise _Malformed(f"feature name {name!r} is not UTF-8") from None


def _feature(data: bytes, start: int, end: int) -> tuple[int | None, tuple[int, int]]:
    kind, payload = None, (0, 0)
    for number, wire_type, value in _fields(data, start, end):
        if number in KIND_NAMES and wire_type == 2:
            kind, payload = number, value  # a oneof: the last kind set wins
    return kind, payload


def _bytes_values(data: bytes, start: int, end: int) -> list[bytes]:
    return [data[v[0] : v[1]] for number, wire_type, v in _fields(data, start, end) if number == 1 and wire_type == 2]


def _int64_values(data: bytes, start: int, end: int) -> list[int]:
    values = []
    for number, wire_type, value in _fields(data, start, end):
        if number != 1:
            continue
        if wire_type == 0:  # written unpacked (proto2 style); parsers must accept both
            values.append(value)
        elif wire_type == 2:  # packed: the default for proto3's repeated int64
            pos, packed_end = value
            while pos < packed_end:
                item, pos = _varint(data, pos, packed_end)
                values.append(item)
    # int64 is a 64-bit two's complement varint: -1 is ten bytes.
    return [v - (1 << 64) if v >> 63 else v for v in values]


def _single(name: str, values: list):
    if len(values) != 1:
        raise _Malformed(f"feature {name!r} has {len(values)} values, expected 1")
    return values[0]
