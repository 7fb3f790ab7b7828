import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from edge_build import calibrate


def build(tiny_build, tmp_path: Path, toml: str, field: str | None = None) -> dict:
    source = tmp_path / "calibration"
    source.mkdir(parents=True, exist_ok=True)
    (source / "calibration.toml").write_text(toml, encoding="utf-8")
    if field is not None:
        (source / "field.txt").write_text(field, encoding="utf-8")
    return calibrate.build_calibration(source / "calibration.toml", tiny_build["data"], tiny_build["vocab"], True, 24, tmp_path / "out")


def test_samples_are_drawn_per_class_and_tokenized_like_training(tiny_build, tmp_path: Path):
    summary = build(tiny_build, tmp_path, "samples = 12\nsplit = \"train\"\nseed = 1\n")
    ids = np.load(tmp_path / "out" / "representative.npy")
    assert ids.dtype == np.int32 and ids.shape == (12, 24)
    assert summary["drawn"]["per_class"] == {"astronomy": 4, "cooking": 4, "football": 4}
    assert json.loads((tmp_path / "out" / "summary.json").read_text()) == summary
    assert summary["ids_sha256"] and summary["warnings"]  # 12 < 100 samples: warned
    assert (ids[:, 0] > 1).all()  # real tokens, not [PAD]/[UNK]


def test_the_draw_is_deterministic_and_seeded(tiny_build, tmp_path: Path):
    a = build(tiny_build, tmp_path / "a", "samples = 9\nseed = 1\n")
    b = build(tiny_build, tmp_path / "b", "samples = 9\nseed = 1\n")
    c = build(tiny_build, tmp_path / "c", "samples = 9\nseed = 2\n")
    assert a["ids_sha256"] == b["ids_sha256"] != c["ids_sha256"]


def test_field_samples_are_mixed_in_or_used_alone(tiny_build, tmp_path: Path):
    field = "The striker scored a penalty\n\nFlour and butter in the oven\n"
    mixed = build(tiny_build, tmp_path / "mix", 'samples = 6\nfield_samples = "field.txt"\n', field)
    assert mixed["samples"] == 8 and mixed["field_samples"]["count"] == 2
    alone = build(tiny_build, tmp_path / "only", 'samples = 0\nfield_samples = "field.txt"\nfield_samples_mode = "only"\n', field)
    assert alone["samples"] == 2 and alone["drawn"]["per_class"] == {}


FIELD_ONLY = 'samples = 0\nfield_samples = "field.txt"\nfield_samples_mode = "only"\n'


@pytest.mark.parametrize(
    "toml, field, missing, message",
    [
        ('split = "nope"\n', None, None, "calibration.toml: key 'split' is 'nope' (allowed: train, val)"),
        ('split = "val"\n', None, "val.tfrecord", "val.tfrecord: split file not found (run the data stage first)"),
        ("samples = 3\n", None, "labels.txt", "labels.txt: labels file not found (run the data stage first)"),
        ('samples = 3\nfield_samples = "field.txt"\n', "\n  \n", None, "field.txt: the field samples file is empty"),
        ('samples = 3\nfield_samples = "missing.txt"\n', None, None, "missing.txt: field samples file not found"),
        ('samples = 3\nfield_samples = "field.txt"\n', "goal striker\n语言模型\n", None, "field.txt:2: tokenizes to nothing but [UNK]/padding (1 of 5 samples do)"),
        (FIELD_ONLY, "语言模型\n数据集\n", None, "field.txt:1: tokenizes to nothing but [UNK]/padding (2 of 2 samples do)"),
        # NFKC_Casefold drops zero-width spaces: the line is not blank, yet becomes all padding.
        (FIELD_ONLY, "\u200b\u200b\n", None, "field.txt:1: tokenizes to nothing but [UNK]/padding (1 of 1 samples do)"),
    ],
    ids=["unknown-split", "missing-split-file", "missing-labels-file", "empty-field-file", "missing-field-file", "one-unknown-sample", "all-unknown", "all-padding"],
)
def test_bad_calibration_inputs_fail_in_one_line_and_write_nothing(tiny_build, tmp_path: Path, capsys, toml, field, missing, message):
    from edge_build import cli

    data_dir = tiny_build["data"]
    if missing:
        data_dir = Path(shutil.copytree(data_dir, tmp_path / "data"))
        (data_dir / missing).unlink()
    source = tmp_path / "calibration"
    source.mkdir()
    (source / "calibration.toml").write_text(toml, encoding="utf-8")
    if field is not None:
        (source / "field.txt").write_text(field, encoding="utf-8")
    argv = ["--config", str(source / "calibration.toml"), "--data-dir", str(data_dir), "--vocab", str(tiny_build["vocab"]), "--sequence-length", "24", "--out-dir", str(tmp_path / "out")]
    assert cli.run(calibrate.build_parser, calibrate.drive, argv) == cli.EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err
    assert not (tmp_path / "out").exists()


def test_the_validation_split_can_be_drawn_from(tiny_build, tmp_path: Path):
    summary = build(tiny_build, tmp_path, 'samples = 100\nsplit = "val"\n')
    assert summary["samples"] == 6 and summary["drawn"]["split"] == "val"  # all there are


@pytest.mark.parametrize("count, sizes, expected", [(20, [8, 8, 8], [7, 7, 6]), (300, [408, 308, 333, 409, 321], [69, 52, 56, 69, 54]), (50, [3, 4], [3, 4]), (2, [5, 5, 5], [1, 1, 0])])
def test_allocation_is_proportional_and_exact(count, sizes, expected):
    assert calibrate.allocate(count, sizes) == expected
