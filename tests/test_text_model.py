"""The raw-text model (tflite_text_int8): tokenizer inside as tensorflow-text custom ops plus Flex, on the runtime that can run it."""

import dataclasses
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_GATEWAY_PROFILE, TINY_HPARAMS, board_launcher, conversion_inputs, write_profile

from edge_build.board.parity import pack_texts
from edge_build.config.profile import load_profile, read_profile
from edge_build.errors import ConfigError, StageError
from edge_build.layout import Target
from edge_build.runtime_envs import read_environment
from edge_build.stages import tflite
from edge_build.tfrecord import read_split


def record(paths: dict) -> dict:
    return json.loads((paths["target"] / "tflite_text_int8.json").read_text(encoding="utf-8"))


def test_the_conversion_record_names_the_custom_and_flex_ops_and_each_attempt(gateway_artifacts):
    report = record(gateway_artifacts)
    assert report["custom_ops"] and report["flex_ops"]
    assert {"FastBertNormalize", "FastWordpieceTokenizeWithOffsets"} <= set(report["custom_ops"])
    assert "FlexRaggedRange" in report["flex_ops"]
    assert set(report["op_paths"]["custom"]) == set(report["custom_ops"]) and set(report["op_paths"]["flex"]) == set(report["flex_ops"])
    steps = report["conversion_path"]
    assert [s["ok"] for s in steps] == [False, False, True]
    assert "no TF Lite builtin" in steps[0]["reason"]
    assert "unresolved custom op: RaggedRange" in steps[1]["reason"]
    # The classifier is INT8 with the ids model's ranges: only the dequantized logits stay float.
    assert report["tensor_types"]["INT8"] > 0 and report["calibration"]["float_activations"] > 0
    assert report["token_ids_check"]["mismatches"] == 0 and report["test_logits_runtime"] == "tensorflow-cpu 2.15.1"
    run = report["runtimes"]["tensorflow-cpu"]
    assert run["ok"] and run["inputs"][0]["dtype"] == "bytes"
    assert sorted(o["dtype"] for o in run["outputs"]) == ["float32", "int32"]
    assert "tflite-runtime" not in report["runtimes"]  # it has no Flex delegate: the model is not checked there


def test_the_in_model_tokenizer_gives_the_training_ids_on_the_test_split(gateway_artifacts, tmp_path: Path):
    layout = gateway_artifacts["layout"]
    texts, _ = read_split(layout.data.split("test"))
    np.savez(tmp_path / "texts.npz", **pack_texts(texts))
    python, variables = board_launcher(read_environment(gateway_artifacts["runtime_env"]))
    command = [*python, "-m", "edge_build.board.texts", "tensorflow-cpu", str(gateway_artifacts["tflite_text_int8"])]
    subprocess.run([*command, str(tmp_path / "texts.npz"), str(tmp_path / "out.npz")], env=variables, check=True, capture_output=True)
    with np.load(tmp_path / "out.npz") as outputs:
        np.testing.assert_array_equal(outputs["token_ids"], np.load(layout.token_ids("test")))
        # And its logits are the ones the conversion recorded for the report.
        np.testing.assert_allclose(outputs["logits"], np.load(gateway_artifacts["target"] / "tflite_text_int8.test_logits.npy"))


def test_the_runtime_checks_run_the_raw_text_model_only_where_it_can_run(gateway_artifacts):
    checks = json.loads((gateway_artifacts["target"] / "runtime_checks.json").read_text(encoding="utf-8"))["checks"]
    assert set(checks["tflite_text_int8"]) == {"tensorflow-cpu"}
    assert set(checks["tflite_int8"]) == {"tflite-runtime", "tensorflow-cpu"}
    text = checks["tflite_text_int8"]["tensorflow-cpu"]
    assert text["status"] == "ok" and text["parity"]["top1_agreement"] >= 0.8
    assert text["runtime_vs_tf_lite"]["max_abs_logit_error"] == 0.0  # the conversion's test logits came from this runtime
    with np.load(gateway_artifacts["target"] / "golden.npz") as golden:
        assert len(golden["text_offsets"]) == len(golden["labels"]) + 1


def test_a_tokenizer_setting_that_differs_from_training_is_refused(gateway_artifacts, tmp_path: Path):
    # The tiny texts start with a capital: without lower-casing, the first word tokenizes differently.
    hparams = tmp_path / "hparams.toml"
    hparams.write_text(TINY_HPARAMS.replace("lower_case = true", "lower_case = false"), encoding="utf-8")
    profile = load_profile(gateway_artifacts["profile"].parent, "tiny-gateway")
    out = tmp_path / "out"
    outputs = Target(out, "tiny-gateway").converted_files("tflite_text_int8")
    inputs = dataclasses.replace(conversion_inputs(gateway_artifacts), hparams=hparams)
    with pytest.raises(
        StageError,
        match=r"does not give the training tokenizer's ids: \d+ of \d+ validation texts .* the first is validation example \d+: token 0 is",
    ):
        tflite.convert("tflite_text_int8", inputs, profile, outputs, gateway_artifacts["runtime_env"], gateway_artifacts["writer_env"])
    assert not out.exists() or not any(out.iterdir())


def test_without_the_select_tf_ops_fallback_the_raw_text_model_is_refused(gateway_artifacts, tmp_path: Path):
    path = write_profile(tmp_path, "no-flex", TINY_GATEWAY_PROFILE.replace("select_tf_ops = true", "select_tf_ops = false"))
    out = tmp_path / "out"
    outputs = Target(out, "tiny-gateway").converted_files("tflite_text_int8")
    with pytest.raises(StageError, match="unresolved custom op: RaggedRange.*the SELECT_TF_OPS fallback is off"):
        tflite.convert(
            "tflite_text_int8",
            conversion_inputs(gateway_artifacts),
            read_profile(path),
            outputs,
            gateway_artifacts["runtime_env"],
            gateway_artifacts["writer_env"],
        )
    assert not out.exists()


def test_a_raw_text_model_needs_a_runtime_with_flex_and_tensorflow_text_kernels(tmp_path: Path):
    text = TINY_GATEWAY_PROFILE.replace('[[runtimes]]\nname = "tensorflow-cpu"\n', "")
    with pytest.raises(
        ConfigError,
        match=r"tflite_text_int8 takes raw text .* none of tflite-runtime can run \(allowed: add a runtime that can: tensorflow-cpu 2\.15\.1\)",
    ):
        read_profile(write_profile(tmp_path, "no-text-runtime", text))
