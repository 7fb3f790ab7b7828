"""Evaluation: every artifact of a target on the test split, against the reference, and its gate.

The evaluate stage writes what this returns as ``eval.json``; the report, the
manifest and the bundle read that record. The reference's logits come from
``serving_default`` on the raw texts (the reference_logits stage); so do those of
a SavedModel that is not a byte-identical copy of the reference. TF Lite models'
come from TensorFlow's interpreter on the test split's token ids (the tflite
stage), once the model file is checked to be the one converted; a raw-text
model's from the Flex-capable runtime its record names (``test_logits_runtime``),
on the raw test texts: TF 2.21's interpreter has no Flex delegate. TensorFlow is
loaded only for the XLA SavedModel. A breach of the profile's tolerances raises
with the figures. Accuracies carry 95% Wilson intervals; INT8 and its float twin
get an exact McNemar test.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from edge_build import saved_model, xla
from edge_build.artifacts import ARTIFACTS
from edge_build.board.decision import messages, recorded, verdicts
from edge_build.board.parity import compare
from edge_build.config.profile import TargetProfile
from edge_build.convert.converter import conversion_mismatch
from edge_build.errors import StageError
from edge_build.layout import Target
from edge_build.metrics import classification_metrics
from edge_build.provenance import sha256_file, size_of
from edge_build.records import read_json, read_labels, read_rows
from edge_build.stats import mcnemar_exact
from edge_build.tfrecord import read_split

REFERENCE = "saved_model_cpu"


def int8_mcnemar(predictions: dict, y_true: np.ndarray) -> dict | None:
    """Exact McNemar test of the INT8 model against its float32 twin (the reference without one):
    whether the examples only one of them gets right tell a real difference from noise."""
    if "tflite_int8" not in predictions:
        return None
    float_name = "tflite_fp32" if "tflite_fp32" in predictions else REFERENCE
    test = mcnemar_exact(predictions["tflite_int8"] == y_true, predictions[float_name] == y_true)
    return {"a": "tflite_int8", "b": float_name, **test}


@dataclasses.dataclass(frozen=True)
class EvaluationInputs:
    """The shared files a target's evaluation reads (the target's own come from ``layout.Target``)."""

    reference: Path
    reference_logits: Path
    test: Path
    labels: Path


def same_files(a: Path, b: Path) -> bool:
    """Whether two directories hold the same files with the same bytes."""

    def listing(root: Path) -> dict[str, str]:
        return {p.relative_to(root).as_posix(): sha256_file(p) for p in sorted(root.rglob("*")) if p.is_file()}

    return listing(a) == listing(b)


def recorded_tflite_logits(name: str, target: Target, inputs: EvaluationInputs, texts_and_labels, reference_logits: np.ndarray) -> np.ndarray:
    """A TF Lite model's: the tflite stage's logits on the test split, once the file is checked to be the one converted."""
    problem = conversion_mismatch(target.artifact(name), read_json(target.conversion_record(name)))
    if problem:
        raise StageError(problem)
    return read_rows(target.test_logits(name), len(reference_logits))


def saved_model_logits(name: str, target: Target, inputs: EvaluationInputs, texts_and_labels, reference_logits: np.ndarray) -> np.ndarray:
    """A SavedModel's: the reference's own when it is a byte-identical copy, else ``serving_default`` on the raw texts."""
    path = target.artifact(name)
    if same_files(path, inputs.reference):
        return reference_logits
    texts, labels = texts_and_labels
    return saved_model.checked_logits(path, texts, labels)


#: Each format's logits on the test split, computed where they are cheapest to get right.
LOGITS_OF_FORMAT = {"tflite": recorded_tflite_logits, "saved_model": saved_model_logits}


def raw_text_record(name: str, target: Target) -> dict:
    """For a TF Lite model whose interface carries part of its conversion record into eval.json (``Interface.record_keys``: a
    raw-text model's op paths, calibration route and tokenizer check), that part (``raw_text``); nothing for others."""
    keys = ARTIFACTS[name].interface_row.record_keys
    if ARTIFACTS[name].format != "tflite" or not keys:
        return {}
    record = read_json(target.conversion_record(name))
    return {"raw_text": {key: record[key] for key in keys}}


def evaluate(profile: TargetProfile, inputs: EvaluationInputs, target: Target) -> dict:
    """Every artifact of the target against the reference on the test split; raises when a tolerance is broken."""
    labels = read_labels(inputs.labels)
    texts, y_true = read_split(inputs.test)
    reference_logits = read_rows(inputs.reference_logits, len(y_true))
    on_gpu = "saved_model_xla" in profile.artifacts and xla.compute_device()["backend"] == "gpu"
    results, failures, predictions = {}, [], {REFERENCE: np.argmax(reference_logits, axis=-1)}
    for name in profile.artifacts:
        path = target.artifact(name)
        logits = LOGITS_OF_FORMAT[ARTIFACTS[name].format](name, target, inputs, (texts, labels), reference_logits)
        figures = compare(reference_logits, logits, y_true)
        judged = verdicts(ARTIFACTS[name].parity, figures, profile.tolerances.limits(on_gpu))
        broken = messages(judged, "fail")
        failures += [f"{name}: {b}" for b in broken]
        predictions[name] = np.argmax(logits, axis=-1)
        results[name] = {
            "path": str(path),
            "size_bytes": size_of(path),
            **classification_metrics(y_true, predictions[name], labels),
            "parity": {k: figures[k] for k in ("max_abs_logit_error", "mean_abs_logit_error", "logit_scale", "top1_agreement")},
            "gates": recorded(judged),
            **raw_text_record(name, target),
        }
    evaluation = {
        "target": profile.name,
        "split": "test",
        "labels": labels,
        "reference": {"path": str(inputs.reference), **classification_metrics(y_true, predictions[REFERENCE], labels)},
        "artifacts": results,
        "int8_vs_float": int8_mcnemar(predictions, y_true),
    }
    if failures:
        raise StageError(f"{profile.source} tolerances broken on the test split: {'; '.join(failures)}")
    return evaluation
