import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO

from edge_build.config.calibration import load_calibration
from edge_build.errors import StageError
from edge_build.layout import Layout
from edge_build.stage_files import command_files
from edge_build.stages import calibrate


def outputs(folder: Path) -> dict[str, Path]:
    return {"representative": folder / "representative.npy", "summary": folder / "summary.json"}


def inputs_for(layout: Layout, split: str) -> calibrate.CalibrationInputs:
    """The files SCons hands the stage for a configuration drawing from ``split``."""
    return calibrate.CalibrationInputs(layout.data.split(split), layout.token_ids(split), layout.data.labels, layout.vocab, True, 24)


def build(tiny_build, tmp_path: Path, toml: str, field: str | None = None) -> dict:
    source = tmp_path / "calibration"
    source.mkdir(parents=True, exist_ok=True)
    (source / "calibration.toml").write_text(toml, encoding="utf-8")
    if field is not None:
        (source / "field.txt").write_text(field, encoding="utf-8")
    split = load_calibration(source / "calibration.toml").split
    return calibrate.build_calibration(source / "calibration.toml", inputs_for(tiny_build["layout"], split), outputs(tmp_path / "out"))


def test_samples_are_drawn_per_class_and_tokenized_like_training(tiny_build, tmp_path: Path):
    summary = build(tiny_build, tmp_path, 'samples = 12\nsplit = "train"\nseed = 1\n')
    ids = np.load(tmp_path / "out" / "representative.npy")
    assert ids.dtype == np.int32 and ids.shape == (12, 24)
    assert summary["drawn"]["per_class"] == {"astronomy": 4, "cooking": 4, "football": 4}
    assert json.loads((tmp_path / "out" / "summary.json").read_text()) == summary
    assert summary["ids_sha256"] and summary["warnings"]  # 12 < 100 samples: warned
    assert (ids[:, 0] > 1).all()  # real tokens, not [PAD]/[UNK]
    # Rows of the tokenize stage's train ids, which training's tokenizer made.
    train_ids = np.load(tiny_build["layout"].token_ids("train"))
    assert all((train_ids == row).all(axis=1).any() for row in ids)


def test_the_draw_is_deterministic_and_seeded(tiny_build, tmp_path: Path):
    a = build(tiny_build, tmp_path / "a", "samples = 9\nseed = 1\n")
    b = build(tiny_build, tmp_path / "b", "samples = 9\nseed = 1\n")
    c = build(tiny_build, tmp_path / "c", "samples = 9\nseed = 2\n")
    assert a["ids_sha256"] == b["ids_sha256"] != c["ids_sha256"]


def test_field_samples_are_mixed_in_or_used_alone(tiny_build, tmp_path: Path):
    field = "The striker scored a penalty\n\nFlour and butter in the oven\n"
    mixed = build(tiny_build, tmp_path / "mix", 'samples = 6\nfield_samples = "field.txt"\n', field)
    assert mixed["samples"] == 8 and mixed["field_samples"]["count"] == 2
    from edge_build.tokenizer import token_ids

    field_ids = token_ids(tiny_build["vocab"], True, [b"The striker scored a penalty", b"Flour and butter in the oven"], 24)
    np.testing.assert_array_equal(np.load(tmp_path / "mix" / "out" / "representative.npy")[-2:], field_ids)
    alone = build(tiny_build, tmp_path / "only", 'samples = 0\nfield_samples = "field.txt"\nfield_samples_mode = "only"\n', field)
    assert alone["samples"] == 2 and alone["drawn"]["per_class"] == {}


FIELD_ONLY = 'samples = 0\nfield_samples = "field.txt"\nfield_samples_mode = "only"\n'


def command_line(config: Path, layout: Layout, split: str, vocab: Path, out: Path) -> list[str]:
    """The calibrate stage's file options, as SConstruct writes them."""
    inputs = {"split": layout.data.split(split), "split_ids": layout.token_ids(split), "labels": layout.data.labels}
    return command_files("calibrate", {"config": config, **inputs, "vocab": vocab, "window": layout.data.window}, outputs(out))


@pytest.mark.parametrize(
    "toml, field, missing, message",
    [
        ('split = "nope"\n', None, None, "calibration.toml: key 'split' is 'nope' (allowed: train, val)"),
        ('split = "val"\n', None, "data/val.tfrecord", "val.tfrecord: split file not found (run the data stage first)"),
        ("samples = 3\n", None, "data/labels.txt", "labels.txt: labels file not found (run the data stage first)"),
        ("samples = 3\n", None, "tokens/train.npy", "train.npy: not found (run the stage that writes it first)"),
        ('samples = 3\nfield_samples = "field.txt"\n', "\n  \n", None, "field.txt: the field samples file is empty"),
        ('samples = 3\nfield_samples = "missing.txt"\n', None, None, "missing.txt: field samples file not found"),
        (
            'samples = 3\nfield_samples = "field.txt"\n',
            "goal striker\n语言模型\n",
            None,
            "field.txt:2: tokenizes to nothing but [UNK]/padding (1 of 5 samples do)",
        ),
        (FIELD_ONLY, "语言模型\n数据集\n", None, "field.txt:1: tokenizes to nothing but [UNK]/padding (2 of 2 samples do)"),
        # NFKC_Casefold drops zero-width spaces: the line is not blank, yet becomes all padding.
        (FIELD_ONLY, "\u200b\u200b\n", None, "field.txt:1: tokenizes to nothing but [UNK]/padding (1 of 1 samples do)"),
    ],
    ids=[
        "unknown-split",
        "missing-split-file",
        "missing-labels-file",
        "missing-split-ids",
        "empty-field-file",
        "missing-field-file",
        "one-unknown-sample",
        "all-unknown",
        "all-padding",
    ],
)
def test_bad_calibration_inputs_fail_in_one_line_and_write_nothing(tiny_build, tmp_path: Path, capsys, toml, field, missing, message):
    from edge_build import cli

    layout = tiny_build["layout"]
    if missing:
        layout = Layout(tmp_path / "build")
        for folder in ("data", "tokens", "vocab"):
            shutil.copytree(tiny_build["layout"].root / folder, layout.root / folder)
        (layout.root / missing).unlink()
    source = tmp_path / "calibration"
    source.mkdir()
    (source / "calibration.toml").write_text(toml, encoding="utf-8")
    if field is not None:
        (source / "field.txt").write_text(field, encoding="utf-8")
    split = "val" if 'split = "val"' in toml else "train"
    argv = command_line(source / "calibration.toml", layout, split, layout.vocab, tmp_path / "out")
    assert cli.run(calibrate.build_parser, calibrate.drive, argv) == cli.EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err
    assert not (tmp_path / "out").exists()


def test_the_validation_split_can_be_drawn_from(tiny_build, tmp_path: Path):
    summary = build(tiny_build, tmp_path, 'samples = 100\nsplit = "val"\n')
    assert summary["samples"] == 6 and summary["drawn"]["split"] == "val"  # all there are
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "representative.npy"), np.load(tiny_build["layout"].token_ids("val")))


def test_ids_made_from_another_split_are_refused(tiny_build, tmp_path: Path):
    (tmp_path / "calibration.toml").write_text("samples = 12\n", encoding="utf-8")
    layout = tiny_build["layout"]
    wrong = calibrate.CalibrationInputs(layout.data.split("train"), layout.token_ids("val"), layout.data.labels, layout.vocab, True, 24)
    with pytest.raises(
        StageError, match=r"val\.npy: an array of shape \(6, 24\) for a split of 24 examples \(made from another split\? run scons again\)"
    ):
        calibrate.build_calibration(tmp_path / "calibration.toml", wrong, outputs(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_ids_of_another_sequence_length_are_refused(tiny_build, tmp_path: Path):
    (tmp_path / "calibration.toml").write_text("samples = 12\n", encoding="utf-8")
    layout = tiny_build["layout"]
    longer = calibrate.CalibrationInputs(layout.data.split("train"), layout.token_ids("train"), layout.data.labels, layout.vocab, True, 32)
    with pytest.raises(StageError, match=r"train\.npy: ids of length 24, the tokenizer's sequence length is 32"):
        calibrate.build_calibration(tmp_path / "calibration.toml", longer, outputs(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


DRAW_IN_A_NEW_PROCESS = """
import sys
from edge_build import cli
from edge_build.stages import calibrate
code = cli.run(calibrate.build_parser, calibrate.drive, sys.argv[1:])
print(code, 'tensorflow' in sys.modules)
"""


def test_drawn_samples_need_no_tensorflow_and_field_samples_do(tiny_build, tmp_path: Path):
    # Without field samples the stage reads labels from the split file and rows from the tokenize stage's ids.
    results = {}
    for name, toml in (("drawn", "samples = 12\n"), ("field", 'samples = 3\nfield_samples = "field.txt"\n')):
        source = tmp_path / name
        source.mkdir()
        (source / "calibration.toml").write_text(toml, encoding="utf-8")
        (source / "field.txt").write_text("goal striker penalty\n", encoding="utf-8")
        argv = command_line(source / "calibration.toml", tiny_build["layout"], "train", tiny_build["vocab"], source / "out")
        result = subprocess.run([sys.executable, "-c", DRAW_IN_A_NEW_PROCESS, *argv], cwd=REPO, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-2000:]
        results[name] = result.stdout.strip().splitlines()[-1]
    assert results == {"drawn": "0 False", "field": "0 True"}


@pytest.mark.parametrize(
    "count, sizes, expected",
    [(20, [8, 8, 8], [7, 7, 6]), (300, [408, 308, 333, 409, 321], [69, 52, 56, 69, 54]), (50, [3, 4], [3, 4]), (2, [5, 5, 5], [1, 1, 0])],
)
def test_allocation_is_proportional_and_exact(count, sizes, expected):
    assert calibrate.allocate(count, sizes) == expected
