"""Each stage's files are declared once (edge_build.stage_files): SConstruct's command lines and the stages' parsers agree."""

import argparse
import dataclasses
import importlib
from pathlib import Path

import pytest

from edge_build.stage_files import STAGE_FILES, command_files, stage_inputs
from edge_build.stages import __path__ as stages_path


def stage_modules() -> list[str]:
    import pkgutil

    return sorted(m.name for m in pkgutil.iter_modules(stages_path))


def test_every_stage_has_a_declaration_and_every_declaration_a_stage():
    assert sorted(STAGE_FILES) == stage_modules()


@pytest.mark.parametrize("stage", sorted(STAGE_FILES))
def test_the_parser_takes_each_declared_file_by_name(stage: str):
    parser = importlib.import_module(f"edge_build.stages.{stage}").build_parser()
    files = STAGE_FILES[stage]
    options = {option: action for action in parser._actions for option in action.option_strings}
    for file in (*files.inputs, *files.outputs):
        action = options[file.flag]
        assert action.dest == file.name and action.nargs is None and action.required is not file.optional
    # No file travels by position in a list.
    assert not [
        action.dest for action in parser._actions if action.nargs not in (None, 0) and action.type is not None and "Path" in repr(action.type)
    ]


def test_a_command_line_names_every_file_and_leaves_out_an_absent_optional_one():
    inputs = {"profile": "p.toml", "target_dir": "t", "data_summary": "s.json", "window": "w.json", "train_log": "l.json"}
    inputs |= {"weights": "m.h5", "vocab": "v.txt", "calibration_summary": None}
    assert command_files("manifest", inputs) == [
        "--profile=p.toml", "--target-dir=t", "--data-summary=s.json", "--window=w.json",
        "--train-log=l.json", "--weights=m.h5", "--vocab=v.txt",
    ]  # fmt: skip


def test_an_undeclared_or_missing_file_is_a_wiring_error():
    with pytest.raises(ValueError, match=r"stage vocab: inputs \['val'\] not declared \(declared: \['train'\]\)"):
        command_files("vocab", {"train": "a", "val": "b"}, {"vocab": "v"})
    with pytest.raises(ValueError, match=r"stage vocab: required outputs \['vocab'\] not given"):
        command_files("vocab", {"train": "a"})


def full_command_line(stage: str) -> list[str]:
    """Every declared file of ``stage`` on its command line, each at a path named after it."""
    files = STAGE_FILES[stage]
    return [f"{file.flag}=/{file.name}" for file in (*files.inputs, *files.outputs)]


@pytest.mark.parametrize(
    ("stage", "module", "class_name", "extra"),
    [
        ("calibrate", "edge_build.stages.calibrate", "CalibrationInputs", {"lower_case": True, "sequence_length": 24}),
        ("evaluate", "edge_build.evaluation", "EvaluationInputs", {}),
        ("manifest", "edge_build.stages.manifest", "ManifestInputs", {}),
        ("train", "edge_build.training", "TrainInputs", {}),
        ("report", "edge_build.stages.report", "ReportInputs", {}),
    ],
)
def test_a_stage_builds_its_inputs_by_declared_name(stage: str, module: str, class_name: str, extra: dict):
    args = importlib.import_module(f"edge_build.stages.{stage}").build_parser().parse_args(full_command_line(stage))
    inputs = stage_inputs(stage, getattr(importlib.import_module(module), class_name), args, **extra)
    for field in dataclasses.fields(inputs):
        assert getattr(inputs, field.name) == extra.get(field.name, Path(f"/{field.name}"))


@dataclasses.dataclass(frozen=True)
class VocabInputs:
    train: Path
    lower_case: bool = True


def test_an_inputs_field_that_is_no_declared_file_nor_passed_fails_loudly():
    args = argparse.Namespace(train=Path("t.tfrecord"), vocab=Path("v.txt"))
    assert stage_inputs("vocab", VocabInputs, args, lower_case=False) == VocabInputs(Path("t.tfrecord"), False)
    with pytest.raises(ValueError, match=r"stage vocab: VocabInputs fields \['lower_case'\] are no declared inputs \(\['train'\]\) nor passed"):
        stage_inputs("vocab", VocabInputs, args)
    with pytest.raises(ValueError, match=r"stage vocab: \['train'\] passed as extra values but declared as input files"):
        stage_inputs("vocab", VocabInputs, args, train=Path("other"), lower_case=True)
    with pytest.raises(ValueError, match=r"stage vocab: extra values \['size'\] are no fields of VocabInputs"):
        stage_inputs("vocab", VocabInputs, args, lower_case=True, size=3)
    with pytest.raises(ValueError, match=r"stage data: VocabInputs fields \['train'\] are no declared inputs"):
        stage_inputs("data", VocabInputs, argparse.Namespace(train=Path("t")), lower_case=True)
