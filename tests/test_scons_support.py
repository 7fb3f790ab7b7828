"""The data stage's one source: a digest of the dataset's names and contents, remembered by size and mtime."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
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


#: Words a shell or SCons's substitution would act on: each must reach the program unchanged.
HOSTILE_WORDS = [
    "`touch {marker}`x",
    "$(touch {marker})",
    "x; touch {marker}",
    "${__import__('os').system('touch {marker}')}",
    'a"b',
    "$HOME",
    "\\t",
    "|",
]


def test_run_argv_hands_every_word_over_unchanged_and_runs_nothing_else(tmp_path: Path):
    marker = tmp_path / "ran"
    words = [word.replace("{marker}", str(marker)) for word in HOSTILE_WORDS]
    out = tmp_path / "argv.json"
    program = "import json, sys; json.dump(sys.argv[2:], open(sys.argv[1], 'w'))"
    env = {"ARGV": [sys.executable, "-c", program, str(out), *words], "ENV": dict(os.environ)}
    assert scons_support.run_argv([], [], env) == 0
    assert json.loads(out.read_text()) == words and not marker.exists()
    assert scons_support.show_argv([], [], env).endswith(shlex.join(words))  # what verbose=1 shows can be pasted into a shell
    env["ARGV"] = [sys.executable, "-c", "raise SystemExit(3)"]
    assert scons_support.run_argv([], [], env) == 3


def test_a_commands_signature_follows_its_words():
    words = ["-m", "edge_build.stages.data", "--label-column", "a b"]
    signature = scons_support.argv_signature(words)
    assert re.fullmatch(r"[0-9a-f]{64}", signature)  # nothing in it for SCons to substitute
    assert scons_support.argv_signature(list(words)) == signature
    assert scons_support.argv_signature([*words[:-1], "a  b"]) != signature


@pytest.mark.parametrize("value, named", [("a\nb", "LF"), ("a\rb", "CR"), ("a\0b", "NUL"), ("a\r\nb", "CR and LF")])
def test_a_variable_with_a_line_break_or_nul_is_refused(value: str, named: str):
    with pytest.raises(ValueError, match=f"^label_column=: holds {named}, which no build variable may hold$"):
        scons_support.refuse_control_characters({"dataset": "ok.csv", "label_column": value})
    scons_support.refuse_control_characters({"label_column": "`$;|\"'\t"})  # a tab is a delimiter, not a line break
