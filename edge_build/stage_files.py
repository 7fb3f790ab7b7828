"""Each stage's input and output files, declared once.

``SConstruct`` builds a stage's command line and its sources and targets from a
declaration here; the stage's parser adds the same declaration's options. Files
travel by name (``--train``, ``--record``), never by position in a list.
Standard library only: ``SConstruct`` imports this to parse the graph.

A path that is not a node of the graph itself (``node=False``) is a directory
or the target profile: the caller names the files inside it (a SavedModel's,
the target's) or the profile sections the stage reads.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

_Inputs = TypeVar("_Inputs")


@dataclasses.dataclass(frozen=True)
class File:
    """One file (or directory) on a stage's command line."""

    name: str
    help: str
    optional: bool = False
    node: bool = True

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


@dataclasses.dataclass(frozen=True)
class StageFiles:
    """What one stage reads and writes."""

    inputs: tuple[File, ...] = ()
    outputs: tuple[File, ...] = ()

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        for file in self.inputs:
            parser.add_argument(file.flag, type=Path, required=not file.optional, help=file.help)
        for file in self.outputs:
            parser.add_argument(file.flag, type=Path, required=not file.optional, help=f"writes {file.help}")

    def arguments(self, stage: str, inputs: Mapping[str, object], outputs: Mapping[str, object]) -> list[str]:
        """The command line's file options, one ``--flag=path`` word each (a path that starts with ``-`` stays a value);
        an optional file given as None is left out."""
        given = {**self._checked(stage, "inputs", inputs), **self._checked(stage, "outputs", outputs)}
        files = (*self.inputs, *self.outputs)
        return [f"{file.flag}={given[file.name]}" for file in files if given[file.name] is not None]

    def sources(self, stage: str, inputs: Mapping[str, object]) -> list[object]:
        """The inputs that are nodes of the graph themselves."""
        return self._nodes(self.inputs, self._checked(stage, "inputs", inputs))

    def targets(self, stage: str, outputs: Mapping[str, object]) -> list[object]:
        """The outputs that are nodes of the graph themselves."""
        return self._nodes(self.outputs, self._checked(stage, "outputs", outputs))

    @staticmethod
    def _nodes(files: Sequence[File], given: Mapping[str, object]) -> list[object]:
        return [given[file.name] for file in files if file.node and given[file.name] is not None]

    def _checked(self, stage: str, side: str, given: Mapping[str, object]) -> Mapping[str, object]:
        declared: Sequence[File] = getattr(self, side)
        names = {file.name for file in declared}
        if unknown := sorted(set(given) - names):
            raise ValueError(f"stage {stage}: {side} {unknown} not declared (declared: {sorted(names)})")
        if missing := sorted(file.name for file in declared if not file.optional and given.get(file.name) is None):
            raise ValueError(f"stage {stage}: required {side} {missing} not given")
        return {file.name: given.get(file.name) for file in declared}


def _splits(what: str) -> tuple[File, ...]:
    return tuple(File(split, f"the {split} split's {what}") for split in ("train", "val", "test"))


_PROFILE = File("profile", "the target profile (.toml)", node=False)


def _target_dir(what: str) -> File:
    return File("target_dir", f"the target's directory (layout.Target): {what}", node=False)


_REFERENCE = File("reference", "the reference CPU SavedModel's version directory", node=False)
_LABELS = File("labels", "labels.txt from the data stage")
_VOCAB = File("vocab", "vocab.txt from the vocab stage")
_WINDOW = File("window", "the data report's window.json: the sequence length")
_HPARAMS = File("hparams", "the hyperparameters TOML")
_MODEL_SOURCE = File("model_source", "the Python file defining build_model()")
_WEIGHTS = File("weights", "model.weights.h5 from the train stage")
_TRAIN_LOG = File("train_log", "train_log.json from the train stage")
_DATA_SUMMARY = File("data_summary", "the data stage's summary.json")
_TRAIN_IDS = File("train_ids", "the train split's token ids (.npy from the tokenize stage): what the model's tables learn from")
_TRAINING = (_WEIGHTS, _TRAIN_LOG, _HPARAMS, _MODEL_SOURCE, _TRAIN_IDS)
_TEST = File("test", "test.tfrecord")
_TEST_IDS = File("test_ids", "the test split's token ids (.npy from the tokenize stage)")
_REFERENCE_LOGITS = File("reference_logits", "the reference's test logits (.npy)")
_RUNTIME_ENV = File("runtime_env", "env.json from the runtime_env stage: the board stack the runtimes run in")
_CALIBRATION_SUMMARY = File("calibration_summary", "the calibrate stage's summary.json (targets with a calibrated artifact)", optional=True)

#: Every stage's files, by stage module name.
STAGE_FILES: dict[str, StageFiles] = {
    "data": StageFiles(
        outputs=(*_splits("TFRecord"), File("labels", "labels.txt"), File("summary", "summary.json: counts, duplicates, lengths")),
    ),
    "vocab": StageFiles(inputs=_splits("TFRecord")[:1], outputs=(File("vocab", "vocab.txt"),)),
    "data_report": StageFiles(
        inputs=(*_splits("TFRecord"), File("summary", "the data stage's summary.json"), _VOCAB),
        outputs=(
            File("page", "report.md"),
            File("record", "report.json"),
            File("window", "window.json: the sequence length the data chose (edge_build.window)"),
        ),
    ),
    "tokenize": StageFiles(
        inputs=(*_splits("TFRecord"), _VOCAB, _WINDOW),
        outputs=tuple(File(f"{split}_ids", f"the {split} split's token ids (.npy)") for split in ("train", "val", "test")),
    ),
    "train": StageFiles(
        inputs=(*_splits("TFRecord")[:2], _LABELS, _VOCAB, _HPARAMS, _WINDOW, _MODEL_SOURCE, _TRAIN_IDS),
        outputs=(File("weights", "model.weights.h5"), File("log", "train_log.json")),
    ),
    "export": StageFiles(
        inputs=(File("val", "val.tfrecord: the reload check's texts"), _LABELS, _VOCAB, *_TRAINING),
        outputs=(File("out_dir", "the SavedModel base directory; version 1 goes inside", node=False),),
    ),
    "reference_logits": StageFiles(inputs=(_REFERENCE, _TEST, _LABELS), outputs=(File("logits", "the reference's test logits (.npy)"),)),
    "calibrate": StageFiles(
        inputs=(
            File("config", "calibration.toml; the caller names the field samples it names as sources"),
            File("split", "the split file the configuration draws from (its labels)"),
            File("split_ids", "that split's token ids (.npy from the tokenize stage)"),
            _LABELS,
            File("vocab", "vocab.txt (tokenizes field samples)"),
            _WINDOW,
        ),
        outputs=(File("representative", "representative.npy"), File("summary", "the calibration summary.json")),
    ),
    "baseline": StageFiles(inputs=(*_splits("TFRecord"), _LABELS), outputs=(File("baseline", "baseline.json"),)),
    "quality": StageFiles(
        inputs=(_REFERENCE_LOGITS, _TEST, _LABELS, File("baseline", "baseline.json from the baseline stage")),
        outputs=(File("quality", "quality.json"),),
    ),
    "xla_check": StageFiles(
        inputs=(_PROFILE, _REFERENCE, File("model", "saved_model_xla's version directory", node=False), _TEST),
        outputs=(File("checks", "xla_checks.json"),),
    ),
    "tflite": StageFiles(
        inputs=(
            _PROFILE,
            _LABELS,
            File("val", "val.tfrecord (its labels)"),
            File("val_ids", "the validation split's token ids (.npy)"),
            _TEST_IDS,
            _VOCAB,
            *_TRAINING,
            File("representative", "representative.npy from the calibration stage (calibrated artifacts)", optional=True),
            File("test", "test.tfrecord: its texts (raw-text artifacts: their token ids are checked on them)", optional=True),
            File("train", "train.tfrecord: its texts (the Tasks-ready artifact: its vocabulary's word aliases)", optional=True),
            File("runtime_env", "env.json of the profile's runtime environment (the preflight runs there)"),
            File("writer_env", "env.json of the metadata writer's environment (MediaPipe 0.10.21)"),
        ),
        outputs=(
            File("model", "the .tflite model"),
            File("record", "the conversion record (.json)"),
            File("test_logits", "the model's test logits on TensorFlow's interpreter (.npy)"),
        ),
    ),
    "runtime_check": StageFiles(
        inputs=(
            _PROFILE,
            _target_dir("its artifacts; the checks' outputs go here"),
            File("test", "test.tfrecord (its labels)"),
            _TEST_IDS,
            _REFERENCE_LOGITS,
            _LABELS,
            _RUNTIME_ENV,
        ),
    ),
    "evaluate": StageFiles(
        inputs=(_PROFILE, _target_dir("its artifacts; eval.json goes here"), _REFERENCE, _REFERENCE_LOGITS, _TEST, _LABELS),
    ),
    "report": StageFiles(
        inputs=(
            _PROFILE,
            _target_dir("its records; report.md goes here"),
            File("evaluation", "the evaluate stage's eval.json"),
            _DATA_SUMMARY,
            File("data_report", "the data report's report.json"),
            File("quality", "the quality gate's quality.json"),
            _TRAIN_LOG,
            _CALIBRATION_SUMMARY,
            File("xla_checks", "the xla_check stage's xla_checks.json (targets with saved_model_xla)", optional=True),
        ),
    ),
    "manifest": StageFiles(
        inputs=(
            _PROFILE,
            _target_dir("its artifacts and records; manifest.json goes here"),
            _DATA_SUMMARY,
            _WINDOW,
            _TRAIN_LOG,
            _WEIGHTS,
            _VOCAB,
            _CALIBRATION_SUMMARY,
        ),
    ),
    "bundle": StageFiles(
        inputs=(
            _PROFILE,
            _target_dir("its models, golden set and manifest; the bundle goes here"),
            File("reference", "the reference CPU SavedModel's version directory (vocabulary and tokenizer settings)", node=False),
            _TEST,
            _TEST_IDS,
            _LABELS,
        ),
    ),
    "board_check": StageFiles(
        inputs=(
            _PROFILE,
            _target_dir("its bundle and golden set; results go under boards/"),
            File("ssh_config", "an ssh configuration file, passed as -F to every ssh call", optional=True),
        ),
    ),
    "board_report": StageFiles(inputs=(_PROFILE, _target_dir("its runtime checks and boards/"))),
    "runtime_env": StageFiles(
        inputs=(File("apt_dir", "the private apt configuration, lists and package cache", node=False),),
        outputs=(File("out", "env.json; the environment goes beside it"),),
    ),
}


def parsed(stage: str, args: argparse.Namespace, side: str = "outputs") -> dict[str, Path]:
    """A parsed command line's declared ``side`` ("inputs" or "outputs"), by name."""
    return {file.name: getattr(args, file.name) for file in getattr(STAGE_FILES[stage], side)}


def stage_inputs(stage: str, inputs_class: type[_Inputs], args: argparse.Namespace, **extra: Any) -> _Inputs:
    """A stage's inputs dataclass built by field name from its parsed command line.

    Each field of ``inputs_class`` takes the declared input file of the same name from ``args``, or a value
    passed in ``extra`` (one that is not a declared file: ``lower_case``, a sequence length). A field that
    is neither, an ``extra`` that is no field or that names a declared file, raises ValueError: a field and
    a declaration that drift apart fail loudly rather than swap two paths."""
    if not dataclasses.is_dataclass(inputs_class):
        raise TypeError(f"stage {stage}: {inputs_class!r} is not a dataclass")
    fields = [field.name for field in dataclasses.fields(inputs_class)]
    declared = {file.name for file in STAGE_FILES[stage].inputs}
    if clash := sorted(declared & set(extra)):
        raise ValueError(f"stage {stage}: {clash} passed as extra values but declared as input files")
    if unknown := sorted(set(extra) - set(fields)):
        raise ValueError(f"stage {stage}: extra values {unknown} are no fields of {inputs_class.__name__}")
    if strays := [name for name in fields if name not in declared and name not in extra]:
        raise ValueError(f"stage {stage}: {inputs_class.__name__} fields {strays} are no declared inputs ({sorted(declared)}) nor passed")
    return inputs_class(**{name: extra[name] if name in extra else getattr(args, name) for name in fields})


def add_files(stage: str, parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    STAGE_FILES[stage].add_to(parser)
    return parser


def command_files(stage: str, inputs: Mapping[str, object] | None = None, outputs: Mapping[str, object] | None = None) -> list[str]:
    """The file options of ``stage``'s command line, as SConstruct writes them."""
    return STAGE_FILES[stage].arguments(stage, inputs or {}, outputs or {})
