"""The window ([tokenizer] sequence_length): "auto" sizes it from the training texts, a number is kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edge_build import window
from edge_build.corpus import SPLITS
from edge_build.errors import StageError
from edge_build.stages import data_report


@pytest.mark.parametrize(
    "lengths, expected",
    [
        ([31] * 95 + [900] * 5, 32),  # the longest 5% may be cut
        ([31] * 94 + [33] * 6, 64),  # 95% must fit whole: 33 tokens need 64
        ([3] * 50, 16),  # never below the smallest window
        ([2000] * 10, 512),  # never above the largest
        ([], 16),
    ],
)
def test_auto_takes_the_smallest_power_of_two_that_holds_95_percent(lengths, expected):
    chosen = window.choose(window.AUTO, lengths)
    assert chosen["sequence_length"] == expected and chosen["setting"] == "auto" and chosen["bounds"] == [16, 512]


def test_a_number_is_kept_and_its_coverage_recorded():
    chosen = window.choose(100, [50, 150, 90, 100])
    assert chosen == {"sequence_length": 100, "setting": 100, "train_texts": 4, "train_share_whole": 0.75}


@pytest.mark.parametrize(
    "text, message", [("not json", "not the data report's window record"), ('{"other": 1}', "KeyError"), ('{"sequence_length": 0}', "not 0")]
)
def test_a_bad_window_file_is_one_line_naming_it(tmp_path: Path, text: str, message: str):
    path = tmp_path / "window.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(StageError, match=message) as raised:
        window.read(path)
    assert str(path) in str(raised.value) and "\n" not in str(raised.value)


def test_the_data_report_writes_the_window_it_chose(tiny_build, tmp_path: Path):
    layout = tiny_build["layout"]
    out = {"page": tmp_path / "report.md", "record": tmp_path / "report.json", "window": tmp_path / "window.json"}
    splits = {split: layout.data.split(split) for split in SPLITS}
    record = data_report.build_data_report(splits, layout.data.summary, layout.vocab, True, "auto", out)
    chosen = json.loads(out["window"].read_text(encoding="utf-8"))
    # The tiny texts are 9 to 31 words, and a 200-token vocabulary splits many words into WordPieces: more than 32 tokens.
    assert chosen["sequence_length"] == record["sequence_length"] == window.read(out["window"]) == 64
    assert chosen["train_share_whole"] >= 0.99 and record["splits"]["train"]["truncated_share"] <= 0.01
    assert "sized from the data" in out["page"].read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "value, message", [('"long"', "must be 'auto' or a whole number, not 'long'"), ("0", "must be greater than 0"), ("true", "not True")]
)
def test_a_bad_sequence_length_names_the_file_and_what_is_allowed(tmp_path: Path, value: str, message: str):
    from edge_build.config.hparams import load_hyperparameters
    from edge_build.errors import ConfigError

    path = tmp_path / "hparams.toml"
    path.write_text(f"[tokenizer]\nsequence_length = {value}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=message) as raised:
        load_hyperparameters(path)
    assert str(raised.value).startswith(f"{path}: key 'tokenizer.sequence_length'")


@pytest.mark.parametrize("log", ['{"hyperparameters": {"tokenizer": {"sequence_length": "auto"}}}', "{}"])
def test_a_train_log_without_a_trained_window_is_one_line_naming_it(tmp_path: Path, log: str):
    from conftest import REPO

    from edge_build.model_source import trained_hyperparameters

    train_log = tmp_path / "train_log.json"
    train_log.write_text(log, encoding="utf-8")
    with pytest.raises(StageError, match="sequence") as raised:
        trained_hyperparameters(REPO / "model_src" / "hparams.toml", train_log)
    assert str(raised.value).startswith(str(train_log)) and "\n" not in str(raised.value)
