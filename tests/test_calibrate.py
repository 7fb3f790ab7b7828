import json
from pathlib import Path

import numpy as np
import pytest

from edge_build import calibrate
from edge_build.errors import ConfigError, StageError


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


def test_a_field_sample_that_tokenizes_to_nothing_is_named(tiny_build, tmp_path: Path):
    with pytest.raises(StageError, match=r"field.txt:2: tokenizes to nothing but \[UNK\]/padding"):
        build(tiny_build, tmp_path, 'samples = 3\nfield_samples = "field.txt"\n', "goal striker\n语言模型\n")
    assert not (tmp_path / "out").exists()


def test_an_empty_or_missing_field_samples_file_is_an_error(tiny_build, tmp_path: Path):
    with pytest.raises(ConfigError, match="field.txt: the field samples file is empty"):
        build(tiny_build, tmp_path, 'samples = 3\nfield_samples = "field.txt"\n', "\n  \n")
    with pytest.raises(ConfigError, match="missing.txt: field samples file not found"):
        build(tiny_build, tmp_path, 'samples = 3\nfield_samples = "missing.txt"\n')


def test_the_validation_split_can_be_drawn_from(tiny_build, tmp_path: Path):
    summary = build(tiny_build, tmp_path, 'samples = 100\nsplit = "val"\n')
    assert summary["samples"] == 6 and summary["drawn"]["split"] == "val"  # all there are


@pytest.mark.parametrize("count, sizes, expected", [(20, [8, 8, 8], [7, 7, 6]), (300, [408, 308, 333, 409, 321], [69, 52, 56, 69, 54]), (50, [3, 4], [3, 4]), (2, [5, 5, 5], [1, 1, 0])])
def test_allocation_is_proportional_and_exact(count, sizes, expected):
    assert calibrate.allocate(count, sizes) == expected
