"""The Tasks-ready model in MediaPipe's own TextClassifier, the metadata every TF Lite model carries, and what MediaPipe cannot follow."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import REPO, TINY_HPARAMS, conversion_inputs, provisioned, write_profile

from edge_build.board.launch import model_labels
from edge_build.config.profile import load_profile, tokenizer_refusal
from edge_build.layout import Target
from edge_build.records import read_labels

TINY_TASKS_PROFILE = """
description = "tests: the Tasks-ready model, checked in MediaPipe's TextClassifier"
arch = "x86_64"
artifacts = ["tflite_tasks_int8"]

[quantization]
select_tf_ops = false

[[runtimes]]
name = "mediapipe"

[tolerances]
int8_min_top1_agreement = 0.8
int8_max_accuracy_drop = 0.2

[latency]
tasks_int8_p50_ms = 1000.0

[checks]
warmup = 2
runs = 20
"""


@pytest.fixture(scope="module")
def tasks_target(tiny_artifacts, runtime_envs) -> dict:
    """``tflite_tasks_int8`` of the tiny model, converted and run through MediaPipe 1.2.2's TextClassifier by the runtime checks."""
    from edge_build.stages import runtime_check, tflite

    layout = tiny_artifacts["layout"]
    write_profile(tiny_artifacts["root"] / "targets", "tiny-tasks", TINY_TASKS_PROFILE)
    profile = load_profile(tiny_artifacts["root"] / "targets", "tiny-tasks")
    runtime_env = provisioned(runtime_envs, profile.source)
    target = layout.target("tiny-tasks")
    record = tflite.convert(
        "tflite_tasks_int8",
        conversion_inputs(tiny_artifacts),
        profile,
        target.converted_files("tflite_tasks_int8"),
        runtime_env,
        tiny_artifacts["writer_env"],
    )
    test = runtime_check.TestSplit.read(layout.data.split("test"), layout.token_ids("test"), layout.reference_logits, layout.data.labels)
    checks = runtime_check.runtime_checks(profile, test, target, runtime_env)
    return {"record": record, "checks": checks, "target": target, "profile": profile, "runtime_env": runtime_env, "layout": layout}


def test_the_tasks_model_classifies_raw_text_in_mediapipe_within_the_int8_gates(tasks_target):
    record, checks, layout = tasks_target["record"], tasks_target["checks"], tasks_target["layout"]
    # Validation parity on TensorFlow's interpreter, fed as MediaPipe feeds it, against the Keras model on the tokenize stage's ids.
    assert [g["verdict"] for g in record["validation_gates"]] == ["pass", "pass"]
    assert record["runtimes"]["mediapipe"]["ok"] and record["runtimes"]["mediapipe"]["version"] == "1.2.2"
    # Three int32 inputs, the int8 graph, float32 scores out (MediaPipe refuses an int8 output).
    assert {"FULLY_CONNECTED", "SOFTMAX", "DEQUANTIZE"} <= {op["op"] for op in record["operators"]}
    assert record["tensor_types"]["INT8"] > 0 and record["converter"]["inference_output_type"] == "float32"
    outcome = checks["checks"]["tflite_tasks_int8"]["mediapipe"]
    assert outcome["status"] == "ok" and outcome["problems"] == [] and outcome["runtime_version"] == "1.2.2"
    parity = outcome["parity"]
    assert parity["examples"] == checks["golden_examples"] and parity["top1_agreement"] >= 0.8
    assert parity["accuracy"] >= parity["reference_accuracy"] - 0.2
    # MediaPipe's scores are TensorFlow's interpreter's on the same ids, but for int8 rounding (1/256 steps).
    assert outcome["runtime_vs_tf_lite"]["top1_agreement"] >= 0.95 and outcome["runtime_vs_tf_lite"]["max_abs_logit_error"] <= 2 / 256
    assert 0 < outcome["latency"]["p50_us"] < 1e6 and outcome["latency"]["load_ms"] > 0
    # What MediaPipe read: its BertTokenizer over the build's vocabulary, and the labels, both inside the model.
    (subgraph,) = record["metadata"]["subgraph_metadata"]
    (unit,) = subgraph["input_process_units"]
    assert unit["options_type"] == "BertTokenizerOptions" and unit["options"]["vocab_file"][0]["name"] == "vocab.txt"
    assert [t["name"] for t in subgraph["input_tensor_metadata"]] == ["ids", "segment_ids", "mask"]
    model = tasks_target["target"].artifact("tflite_tasks_int8")
    with zipfile.ZipFile(model) as packed:
        assert packed.read("vocab.txt") == layout.vocab.read_bytes()
    assert model_labels(str(model), {}) == read_labels(layout.data.labels)


def test_the_tasks_model_and_its_metadata_are_byte_reproducible(tasks_target, tiny_artifacts, tmp_path: Path):
    from edge_build.stages import tflite

    again = Target(tmp_path, "tiny-tasks")
    inputs = conversion_inputs(tiny_artifacts)
    tflite.convert(
        "tflite_tasks_int8",
        inputs,
        tasks_target["profile"],
        again.converted_files("tflite_tasks_int8"),
        tasks_target["runtime_env"],
        tiny_artifacts["writer_env"],
    )
    assert again.artifact("tflite_tasks_int8").read_bytes() == tasks_target["target"].artifact("tflite_tasks_int8").read_bytes()


def test_every_tflite_model_carries_its_vocabulary_labels_and_provenance(tiny_artifacts):
    layout, target = tiny_artifacts["layout"], Target(tiny_artifacts["target"], "tiny")
    labels = read_labels(layout.data.labels)
    for name in ("tflite_fp32", "tflite_fp16", "tflite_int8"):
        record = json.loads(target.conversion_report(name).read_text(encoding="utf-8"))
        shown = record["metadata"]
        assert shown["name"] == f"{name} (tiny)" and shown["author"] == "edge-build"
        assert shown["version"].endswith(", built " + shown["version"].split(", built ")[1]) and len(shown["version"].split(",")[0]) >= 40
        (subgraph,) = shown["subgraph_metadata"]
        assert [f["type"] for t in subgraph["input_tensor_metadata"] for f in t["associated_files"]] == ["VOCABULARY"]
        assert [f["type"] for t in subgraph["output_tensor_metadata"] for f in t["associated_files"]] == ["TENSOR_AXIS_LABELS"]
        with zipfile.ZipFile(target.artifact(name)) as packed:
            assert packed.read("vocab.txt") == layout.vocab.read_bytes()
            # Pinned member times: the metadata keeps the file byte-reproducible.
            assert {info.date_time for info in packed.infolist()} == {(1980, 1, 1, 0, 0, 0)}
        assert model_labels(str(target.artifact(name)), {}) == labels


def test_a_cased_tokenizer_refuses_the_tasks_model_naming_the_key(tmp_path: Path):
    write_profile(tmp_path, "tasks", TINY_TASKS_PROFILE)
    profile = load_profile(tmp_path, "tasks")
    hparams = tmp_path / "hparams.toml"
    assert tokenizer_refusal(profile, True, hparams) is None
    assert tokenizer_refusal(profile, False, hparams) == (
        f"{hparams}: key 'tokenizer.lower_case': false, which MediaPipe's BertTokenizer cannot follow (it always lowercases), "
        f"and {profile.source} lists tflite_tasks_int8 (allowed: lower_case = true, or drop tflite_tasks_int8 from 'artifacts')"
    )
    # From the command line: one line, exit 2, nothing built.
    hparams.write_text(TINY_HPARAMS.replace("lower_case = true", "lower_case = false"), encoding="utf-8")
    command = [
        sys.executable,
        "-m",
        "SCons",
        "-Q",
        f"targets_dir={tmp_path}",
        "target=tasks",
        f"hparams={hparams}",
        f"build_dir={tmp_path / 'build'}",
    ]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr == f"scons: *** {tokenizer_refusal(profile, False, hparams)}\n"
    assert not (tmp_path / "build").exists()
