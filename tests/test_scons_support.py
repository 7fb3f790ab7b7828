"""The data stage's one source: a digest of the dataset's names and contents, remembered by size and mtime."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from edge_build import scons_support


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    for label, name, text in (("sport", "1.txt", "goal"), ("tech", "1.txt", "chip"), ("tech", ".hidden", "ignored")):
        (tmp_path / "corpus" / label).mkdir(parents=True, exist_ok=True)
        (tmp_path / "corpus" / label / name).write_text(text, encoding="utf-8")
    return tmp_path / "corpus"


def digest(corpus: Path) -> str:
    return scons_support.dataset_digest(str(corpus), corpus.parent / "memo.json")


def test_an_edit_a_rename_or_a_new_file_changes_the_digest_and_a_hidden_file_does_not(corpus: Path):
    first = digest(corpus)
    assert digest(corpus) == first
    (corpus / "tech" / ".hidden").write_text("still ignored", encoding="utf-8")
    assert digest(corpus) == first

    edited = corpus / "sport" / "1.txt"
    edited.write_text("gaol", encoding="utf-8")  # same size
    os.utime(edited, ns=(1, 1))
    assert digest(corpus) != first
    edited.write_text("goal", encoding="utf-8")
    assert digest(corpus) == first

    (corpus / "sport" / "1.txt").rename(corpus / "sport" / "2.txt")
    renamed = digest(corpus)
    assert renamed != first
    (corpus / "sport" / "3.txt").write_text("", encoding="utf-8")
    assert digest(corpus) != renamed


def test_an_untouched_dataset_is_not_read_again(corpus: Path, monkeypatch: pytest.MonkeyPatch):
    first = digest(corpus)
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail(f"read {self}"))
    assert digest(corpus) == first


@pytest.mark.parametrize("memo", ["", "{", "[]", '{"dataset": 1}', '{"dataset": "x", "files": [], "sha256": 3}'])
def test_an_unreadable_or_foreign_memo_is_recomputed(corpus: Path, memo: str):
    expected = digest(corpus)
    (corpus.parent / "memo.json").write_text(memo, encoding="utf-8")
    assert digest(corpus) == expected


def test_the_digest_does_not_depend_on_where_the_dataset_lies(corpus: Path, tmp_path: Path):
    moved = tmp_path / "elsewhere" / "corpus"
    moved.parent.mkdir()
    first = digest(corpus)
    corpus.rename(moved)
    assert digest(moved) == first


def test_a_single_file_and_a_missing_dataset(tmp_path: Path):
    csv = tmp_path / "data.csv"
    csv.write_text("text,label\nhi,a\n", encoding="utf-8")
    assert scons_support.dataset_digest(str(csv), tmp_path / "memo.json") != scons_support.dataset_digest(
        str(tmp_path / "none.csv"), tmp_path / "memo.json"
    )
    assert scons_support.dataset_digest("embedded:unknown", tmp_path / "memo.json") == scons_support.dataset_digest(
        str(tmp_path / "none"), tmp_path / "memo.json"
    )
