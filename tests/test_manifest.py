"""<target>/manifest.json: what each artifact is and every input it came from."""

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_STACK_RECORD, TINY_TRIXIE_PROFILE, reported_copy

from edge_build.errors import StageError
from edge_build.layout import Target
from edge_build.provenance import sha256_file
from edge_build.stages import manifest


@pytest.fixture(scope="module")
def tiny_manifest(tiny_artifacts, tmp_path_factory) -> dict:
    reported = reported_copy(tiny_artifacts, tmp_path_factory.mktemp("manifest") / "tiny")
    return {"target": reported["target"], "record": reported["record"], "args": reported["manifest_args"], "paths": tiny_artifacts}


def test_every_artifact_is_recorded_with_its_checksum_and_size(tiny_manifest):
    target, record = tiny_manifest["target"], tiny_manifest["record"]
    assert json.loads((target / "manifest.json").read_text(encoding="utf-8")) == record
    assert set(record["artifacts"]) == {"saved_model_cpu", "saved_model_xla", "tflite_fp32", "tflite_fp16", "tflite_int8"}
    int8 = record["artifacts"]["tflite_int8"]
    assert int8["sha256"] == sha256_file(target / "model_int8.tflite") and int8["size_bytes"] == (target / "model_int8.tflite").stat().st_size
    saved = record["artifacts"]["saved_model_cpu"]
    assert saved["files"]["saved_model.pb"]["sha256"] == sha256_file(target / "saved_model_cpu" / "1" / "saved_model.pb")
    listing = "".join(f"{name} {f['sha256']}\n" for name, f in saved["files"].items())
    assert saved["sha256"] == hashlib.sha256(listing.encode()).hexdigest()
    assert saved["size_bytes"] == sum(f["size_bytes"] for f in saved["files"].values())


def test_versions_inputs_and_hyperparameters_are_recorded(tiny_manifest):
    record, paths = tiny_manifest["record"], tiny_manifest["paths"]
    assert record["versions"]["tensorflow"].startswith("2.21") and record["versions"]["tflite-runtime"] == "2.14.0"
    # The runtime's version is the stack's pin (it runs in the stack's environment, not in this Python), and the stack is named.
    assert record["stack"] == TINY_STACK_RECORD
    assert record["converter"]["tflite_int8"]["tensorflow"] == record["versions"]["tensorflow"]
    assert "seconds" not in record["converter"]["tflite_int8"]
    data_summary = json.loads((paths["data"] / "summary.json").read_text(encoding="utf-8"))
    assert record["dataset"]["sha256"] == data_summary["sha256"]
    calibration = json.loads((paths["calibration"] / "summary.json").read_text(encoding="utf-8"))
    assert record["calibration"]["ids_sha256"] == calibration["ids_sha256"]
    assert record["hyperparameters"]["tokenizer"]["sequence_length"] == 24
    assert record["training"]["weights_sha256"] == sha256_file(paths["weights"])
    assert record["vocab_sha256"] == sha256_file(paths["vocab"])
    assert record["git_revision"] is None or len(record["git_revision"]) >= 40


def test_it_holds_no_measured_timings_so_rebuilds_write_the_same_bytes(tiny_manifest, monkeypatch):
    text = (tiny_manifest["target"] / "manifest.json").read_text(encoding="utf-8")
    assert "_us" not in text and "seconds" not in text
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    first = manifest.build_manifest(*tiny_manifest["args"])
    assert first["build_timestamp"] == "2023-11-14T22:13:20+00:00"
    assert manifest.build_manifest(*tiny_manifest["args"]) == first


@pytest.mark.parametrize("missing", ["eval.json", "runtime_parity.json"])
def test_a_missing_input_is_named_and_nothing_is_written(tiny_manifest, tmp_path: Path, missing):
    profile, inputs, target = tiny_manifest["args"]
    copy = tmp_path / "tiny"
    shutil.copytree(target.dir, copy)
    (copy / "manifest.json").unlink()
    (copy / missing).unlink()
    with pytest.raises(StageError, match=rf"{missing.replace('.', '[.]')}: not found"):
        manifest.build_manifest(profile, inputs, Target(copy, "tiny"))
    assert not (copy / "manifest.json").exists()


def test_runtime_parity_comes_from_the_runtime_checks_machine_independent_record(tiny_manifest, tmp_path: Path, monkeypatch):
    record, target = tiny_manifest["record"], tiny_manifest["target"]
    runtime_parity = json.loads((target / "runtime_parity.json").read_text(encoding="utf-8"))
    tflite = ["tflite_fp32", "tflite_fp16", "tflite_int8"]
    assert sorted(runtime_parity) == sorted(tflite)
    for name in tflite:
        assert record["metrics"][name]["runtime_parity"] == runtime_parity[name]
    for name in ("saved_model_cpu", "saved_model_xla"):
        assert set(record["metrics"][name]) == {"test_accuracy"}
    # runtime_checks.json, with its timings, is not read: without it the manifest is the same.
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    profile, inputs, _ = tiny_manifest["args"]
    copy = tmp_path / "tiny"
    shutil.copytree(target, copy)
    (copy / "runtime_checks.json").unlink()
    assert manifest.build_manifest(profile, inputs, Target(copy, "tiny")) == manifest.build_manifest(*tiny_manifest["args"])


def test_a_trixie_stack_records_the_runtimes_it_can_install(tiny_artifacts, tmp_path: Path):
    record = reported_copy(tiny_artifacts, tmp_path / "tiny", TINY_TRIXIE_PROFILE)["record"]
    assert record["stack"]["title"] == "Debian 13 trixie" and record["stack"]["python"] == "3.13" and record["stack"]["numpy"] == "2.2.6"
    assert record["stack"]["runtimes"] == {"ai-edge-litert": {"version": "2.3.0", "required": True}}
    assert record["versions"]["ai-edge-litert"] == "2.3.0"
    assert "tflite-runtime" not in record["versions"], "listed as optional, but it cannot install on CPython 3.13"
    # numpy here is this build's own; the board's is the stack's.
    assert record["versions"]["numpy"] == np.__version__
