import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, TINY_PROFILE, board_launcher, conversion_inputs, environment_with, with_litert, write_profile

from edge_build.config.profile import load_profile
from edge_build.convert import gates
from edge_build.errors import StageError
from edge_build.provenance import sha256_file
from edge_build.runtime_envs import read_environment
from edge_build.stages import tflite


def read_report(paths, precision: str) -> dict:
    return json.loads((paths["target"] / f"tflite_{precision}.json").read_text())


def test_int8_keeps_int32_ids_in_and_quantizes_weights_and_activations(tiny_artifacts):
    report = read_report(tiny_artifacts, "int8")
    run = report["runtimes"]["tflite-runtime"]
    assert run["ok"] and run["version"] == "2.14.0"
    assert run["inputs"][0]["dtype"] == "int32" and run["inputs"][0]["shape"] == [1, 24]
    assert run["outputs"][0]["dtype"] == "float32"  # the profile keeps float logits
    assert report["tensor_types"]["INT8"] > 0
    ops = {op["op"]: op for op in report["operators"]}
    assert ops["FULLY_CONNECTED"]["kind"] == "builtin" and ops["GATHER"]["kind"] == "builtin"
    # int32 ids index int8 embeddings: the only float tensor left is the logits, dequantized at the end.
    assert "DEQUANTIZE" in ops and len(report["float_activations"]) == 1
    assert report["flex_ops"] == [] and report["custom_ops"] == []
    assert report["converter"]["supported_ops"] == ["TFLITE_BUILTINS_INT8"]
    assert report["converter"]["per_channel_dense"] is False  # tflite-runtime cannot run per-channel dense layers
    assert report["converter"]["calibration_samples"] == 20


def test_int8_is_smaller_and_agrees_with_float(tiny_artifacts):
    int8, fp32 = read_report(tiny_artifacts, "int8"), read_report(tiny_artifacts, "fp32")
    assert int8["size_bytes"] < fp32["size_bytes"]
    assert fp32["validation_parity"]["max_abs_logit_error"] < 1e-4
    assert int8["validation_parity"]["top1_agreement"] >= 0.8
    assert tiny_artifacts["tflite_int8"].stat().st_size == int8["size_bytes"]


def test_the_per_layer_quantization_error_is_reported(tiny_artifacts):
    errors = read_report(tiny_artifacts, "int8")["quantization_errors"]
    assert {"FULLY_CONNECTED", "GATHER"} <= {e["op"] for e in errors}
    for error in errors:
        assert error["rmse"] >= 0 and error["scale"] > 0
    assert errors == sorted(errors, key=lambda e: -e["rmse_in_steps"])


def float_weight_bytes(path: Path) -> dict[str, int]:
    """Bytes of the model's constant float tensors, per type, read from the flatbuffer."""
    from tensorflow.lite.python import schema_py_generated as schema

    model = schema.ModelT.InitFromPackedBuf(bytearray(path.read_bytes()), 0)
    names = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
    sizes: dict[str, int] = {}
    for tensor in model.subgraphs[0].tensors:
        data = model.buffers[tensor.buffer].data
        if data is not None and len(data) and names[tensor.type].startswith("FLOAT"):
            sizes[names[tensor.type]] = sizes.get(names[tensor.type], 0) + len(data)
    return sizes


def test_fp16_halves_the_weights_and_keeps_float_arithmetic(tiny_artifacts):
    fp16, fp32 = read_report(tiny_artifacts, "fp16"), read_report(tiny_artifacts, "fp32")
    assert fp16["converter"]["supported_types"] == ["float16"] and fp16["converter"]["optimizations"] == ["DEFAULT"]
    assert fp16["converter"]["supported_ops"] == ["TFLITE_BUILTINS"] and fp16["converter"]["calibration_samples"] == 0
    assert "supported_types" not in fp32["converter"]
    # Every float weight is stored as float16, at half the bytes; the tiny model's file is mostly
    # flatbuffer and the DEQUANTIZE ops' tensors, so there the file shrinks by less than half.
    weights16, weights32 = float_weight_bytes(tiny_artifacts["tflite_fp16"]), float_weight_bytes(tiny_artifacts["tflite_fp32"])
    assert set(weights16) == {"FLOAT16"} and set(weights32) == {"FLOAT32"}
    assert 2 * weights16["FLOAT16"] == weights32["FLOAT32"]
    assert fp16["float_constants"] == [] and len(fp32["float_constants"]) == fp16["tensor_types"]["FLOAT16"]
    assert fp16["size_bytes"] < fp32["size_bytes"]
    assert tiny_artifacts["tflite_fp16"].stat().st_size == fp16["size_bytes"]
    # Dequantized to float32 when the model loads: float arithmetic, float logits, int32 ids in.
    assert {op["op"] for op in fp16["operators"]} == {op["op"] for op in fp32["operators"]} | {"DEQUANTIZE"}
    assert "INT8" not in fp16["tensor_types"] and "quantization_errors" not in fp16
    run = fp16["runtimes"]["tflite-runtime"]
    assert run["ok"] and run["inputs"][0]["dtype"] == "int32" and run["outputs"][0]["dtype"] == "float32"
    assert 0 < fp16["validation_parity"]["max_abs_logit_error"] <= 1e-2 and fp16["validation_parity"]["top1_agreement"] == 1.0


@pytest.mark.parametrize("precision", ["fp32", "fp16", "int8"])
def test_the_test_logits_are_the_converted_files_own(tiny_artifacts, precision):
    from edge_build.convert.converter import run_tflite

    name = f"tflite_{precision}"
    record, layout = read_report(tiny_artifacts, precision), tiny_artifacts["layout"]
    model = tiny_artifacts[name]
    assert record["sha256"] == sha256_file(model) and record["artifact"] == name and record["target"] == "tiny"
    logits = np.load(layout.target("tiny").test_logits(name))
    assert logits.dtype == np.float32 and logits.shape == (6, 3)
    np.testing.assert_array_equal(logits, run_tflite(model.read_bytes(), np.load(layout.token_ids("test"))).astype(np.float32))


def test_only_tflite_artifacts_are_converted_and_int8_needs_the_representative_set(tiny_artifacts, tmp_path: Path):
    profile = load_profile(tiny_artifacts["profile"].parent, "tiny")
    outputs = outputs_in(tmp_path / "out", "model.tflite")
    with pytest.raises(
        StageError,
        match=r"^saved_model_cpu: not a TF Lite artifact \(the tflite stage makes tflite_fp32, tflite_fp16, tflite_int8, tflite_text_int8, tflite_tasks_int8, tflite_scores_fp32\)$",
    ):
        tflite.convert(
            "saved_model_cpu", conversion_inputs(tiny_artifacts), profile, outputs, tiny_artifacts["runtime_env"], tiny_artifacts["writer_env"]
        )
    with pytest.raises(StageError, match=r"^tflite_int8 needs the calibration stage's representative\.npy \(--representative\)$"):
        tflite.convert(
            "tflite_int8",
            conversion_inputs(tiny_artifacts, representative=None),
            profile,
            outputs,
            tiny_artifacts["runtime_env"],
            tiny_artifacts["writer_env"],
        )
    assert not (tmp_path / "out").exists()
    parser = tflite.build_parser()
    assert [a.choices for a in parser._actions if a.dest == "artifact"] == [
        ["tflite_fp32", "tflite_fp16", "tflite_int8", "tflite_text_int8", "tflite_tasks_int8", "tflite_scores_fp32"]
    ]


def test_float32_tensors_are_listed_for_the_float_model(tiny_artifacts):
    report = read_report(tiny_artifacts, "fp32")
    assert "INT8" not in report["tensor_types"] and report["float_activations"]
    assert "quantization_errors" not in report


def test_the_device_runtime_runs_the_int8_model_in_its_own_process(tiny_artifacts):
    # In the stack's environment, as on the board: numpy and tflite-runtime, without edge-build or TensorFlow.
    script = (
        "import importlib.util, sys, numpy as np\n"
        "from tflite_runtime.interpreter import Interpreter\n"
        "it = Interpreter(model_path=sys.argv[1]); it.allocate_tensors()\n"
        "i = it.get_input_details()[0]; it.set_tensor(i['index'], np.ones(i['shape'], np.int32)); it.invoke()\n"
        "print(it.get_tensor(it.get_output_details()[0]['index']).shape, importlib.util.find_spec('tensorflow') is None)\n"
    )
    python, environment = board_launcher(read_environment(tiny_artifacts["runtime_env"]))
    result = subprocess.run([*python, "-c", script, str(tiny_artifacts["tflite_int8"])], env=environment, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "(1, 3) True"


def outputs_in(folder: Path, model: str) -> dict[str, Path]:
    """The tflite stage's outputs (``edge_build.stage_files``) in ``folder``."""
    return {"model": folder / model, "record": folder / "report.json", "test_logits": folder / "test_logits.npy"}


def convert_for(
    tiny_artifacts,
    tmp_path: Path,
    profile_text: str,
    precision: str,
    model_source: Path | None = None,
    runtime_env: Path | None = None,
):
    write_profile(tmp_path / "targets", "trial", profile_text)
    outputs = outputs_in(tmp_path / "out", f"model_{precision}.tflite")
    inputs = conversion_inputs(tiny_artifacts, **({"model_source": model_source} if model_source else {}))
    tflite.convert(
        f"tflite_{precision}",
        inputs,
        load_profile(tmp_path / "targets", "trial"),
        outputs,
        runtime_env or tiny_artifacts["runtime_env"],
        tiny_artifacts["writer_env"],
    )
    return outputs["model"]


def test_int8_logits_when_the_profile_asks_for_them(tiny_artifacts, tmp_path: Path):
    out = convert_for(tiny_artifacts, tmp_path, TINY_PROFILE.replace('output_type = "float32"', 'output_type = "int8"'), "int8")
    run = json.loads((out.parent / "report.json").read_text())["runtimes"]["tflite-runtime"]
    assert run["inputs"][0]["dtype"] == "int32" and run["outputs"][0]["dtype"] == "int8"


def test_a_tolerance_below_what_the_model_achieves_stops_the_build(tiny_artifacts, tmp_path: Path):
    with pytest.raises(
        StageError,
        match=r"model_fp32.tflite for .*trial.toml: on the validation split against the Keras model, max \|Δlogit\| .* \(allowed <= 1e-12, fp32_max_abs_logit\)",
    ):
        convert_for(tiny_artifacts, tmp_path, TINY_PROFILE.replace("fp32_max_abs_logit = 1e-4", "fp32_max_abs_logit = 1e-12"), "fp32")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


FLEX_MODEL = """
import keras
import tensorflow as tf


class RunningProduct(keras.layers.Layer):
    def call(self, x):
        return tf.math.cumprod(x, axis=-1)  # no TF Lite builtin: needs Flex


# Keras keys a layer's weights by its class's name: this one takes the trained model's token rows and their IDF weights.
class WeightedBag(keras.layers.Layer):
    def __init__(self, rows, width, **kwargs):
        super().__init__(**kwargs)
        self.rows, self.width = rows, width

    def build(self, input_shape):
        self.embeddings = self.add_weight(shape=(self.rows, self.width), name="embeddings")
        self.weights_of_rows = self.add_weight(shape=(self.rows,), trainable=False, name="idf")

    def call(self, ids):
        return tf.gather(self.embeddings, ids)


def build_model(vocab_size, num_classes, sequence_length, embedding_dim=8, dropout=0.0):
    ids = keras.Input((sequence_length,), dtype="int32", name="input_ids")
    x = WeightedBag(vocab_size, embedding_dim, name="embedding")(ids)
    x = RunningProduct()(x)
    x = keras.layers.GlobalAveragePooling1D()(x)
    return keras.Model(ids, keras.layers.Dense(num_classes, name="logits")(x))
"""


def test_a_model_that_needs_flex_ops_is_refused_for_runtimes_without_the_delegate(tiny_artifacts, tmp_path: Path):
    source = tmp_path / "flex_model.py"
    source.write_text(FLEX_MODEL, encoding="utf-8")
    profile = TINY_PROFILE.replace("select_tf_ops = false", "select_tf_ops = true")
    # The Flex check reads the converted graph before anything compares outputs (these weights fit only in part).
    refusal = (
        r"trial.toml: needs Flex ops FlexCumprod, which tflite-runtime cannot run \(no Flex delegate; runtimes that can: tensorflow-cpu 2\.15\.1\)$"
    )
    with pytest.raises(StageError, match=refusal):
        convert_for(tiny_artifacts, tmp_path, profile, "fp32", model_source=source)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


# The default model with one huge-range activation: its logits pass through a tensor that also holds an offset
# of about 10^4, so 256 int8 levels cannot keep them apart, while float activations keep them exactly.
HUGE_RANGE_MODEL = """
import functools
import importlib.util

import keras
from keras import ops

spec = importlib.util.spec_from_file_location("default_model", DEFAULT_MODEL)
default_model = importlib.util.module_from_spec(spec)
spec.loader.exec_module(default_model)


class Offset(keras.layers.Layer):
    def call(self, ids):
        return ops.expand_dims(ops.cast(ops.sum(ops.minimum(ids, 1), axis=1), "float32") * 100.0 + 1e4, -1)


@functools.wraps(default_model.build_model)  # the same keyword arguments, so the same [model] keys
def build_model(**settings):
    model = default_model.build_model(**settings)
    offset = Offset()(model.input)
    return keras.Model(model.input, keras.layers.Subtract()([keras.layers.Add()([model.output, offset]), offset]))
"""


def huge_range_model(folder: Path) -> Path:
    source = folder / "huge_range_model.py"
    source.write_text(HUGE_RANGE_MODEL.replace("DEFAULT_MODEL", repr(str(REPO / "model_src" / "model.py"))), encoding="utf-8")
    return source


def test_a_model_full_int8_cannot_hold_climbs_the_quantization_ladder(tiny_artifacts, tmp_path: Path):
    out = convert_for(tiny_artifacts, tmp_path, TINY_PROFILE, "int8", model_source=huge_range_model(tmp_path))
    record = json.loads((out.parent / "report.json").read_text())
    attempts = record["quantization_ladder"]["attempts"]
    assert [(a["recipe"], a["outcome"]) for a in attempts] == [
        ("int8", "failed"),
        ("int8_per_channel", "skipped"),
        ("int8_float_worst", "failed"),
        ("int16x8", "failed"),
        ("dynamic_range", "chosen"),
    ]
    assert record["quantization_ladder"]["recipe"] == record["converter"]["recipe"] == "dynamic_range"
    full, per_channel, float_worst, int16, chosen = attempts
    # Each failure says which gate, where: full INT8 loses the logits under the offset.
    assert full["figures"]["tf.lite"]["top1_agreement"] < 0.8 and "tf.lite: top-1 agreement" in full["reason"]
    assert "tflite-runtime 2.14.0" in full["figures"] and full["size_bytes"] > 0
    assert per_channel["reason"] == "tflite-runtime 2.14.0 cannot load TF 2.21's per-channel dense layers (the runtime table)"
    # The layer the per-layer error table marks worst stayed float, which cannot undo a range set upstream.
    assert float_worst["kept_float"] == [record["quantization_errors"][0]["tensor"]]
    # tflite-runtime 2.14 has no int16 RSQRT: the runtime refuses the 16x8 model whatever TensorFlow's interpreter says.
    assert int16["reason"].startswith("tflite-runtime cannot run it:") and "RSQRT" in int16["reason"]
    # Dynamic range: int8 weights, float activations, the Keras model's answers on the validation split everywhere.
    assert chosen["reason"] == "passes every gate" and chosen["float_ops"]
    assert {place: figures["top1_agreement"] for place, figures in chosen["figures"].items()} == {"tf.lite": 1.0, "tflite-runtime 2.14.0": 1.0}
    assert record["converter"]["calibration_samples"] == 0 and record["converter"]["supported_ops"] == ["TFLITE_BUILTINS"]
    # The ladder weighs the converted graph; the file adds its metadata (vocabulary, labels) after it.
    assert record["size_bytes"] == out.stat().st_size > chosen["size_bytes"]


def test_a_ladder_of_full_int8_alone_fails_with_the_attempt_table(tiny_artifacts, tmp_path: Path, capsys):
    profile = TINY_PROFILE.replace("select_tf_ops = false", 'select_tf_ops = false\nrecipes = ["int8"]')
    with pytest.raises(
        StageError, match=r"trial.toml: no recipe of the quantization ladder passes every gate \(1 in \[quantization\] recipes: the table above;"
    ):
        convert_for(tiny_artifacts, tmp_path, profile, "int8", model_source=huge_range_model(tmp_path))
    table = capsys.readouterr().err.splitlines()
    assert table[-2].split()[:3] == ["recipe", "outcome", "size"]
    assert table[-1].split()[:2] == ["int8", "failed"] and "top-1 agreement" in table[-1]
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_preflight_names_an_operator_version_the_runtime_lacks(tiny_artifacts, tmp_path: Path):
    # Dynamic-range quantization in TF 2.21 emits FULLY_CONNECTED v12, which tflite-runtime 2.14 predates.
    script = (
        "import sys, tensorflow as tf, keras\n"
        "ids = keras.Input((24,), dtype='int32')\n"
        "x = keras.layers.Flatten()(keras.layers.Embedding(300, 8)(ids))\n"
        "model = keras.Model(ids, keras.layers.Dense(600)(x))\n"
        "c = tf.lite.TFLiteConverter.from_keras_model(model); c.optimizations = [tf.lite.Optimize.DEFAULT]\n"
        "open(sys.argv[1], 'wb').write(c.convert())\n"
    )
    model = tmp_path / "dynamic_range.tflite"
    subprocess.run([sys.executable, "-c", script, str(model)], check=True, capture_output=True)
    result = gates.preflight(model, "tflite-runtime", read_environment(tiny_artifacts["runtime_env"]))
    assert not result["ok"] and result["checked"]
    assert "FULLY_CONNECTED" in result["error"] and "version '12'" in result["error"]


def test_preflight_reports_a_corrupt_model_and_a_crash(host_runtime_env: Path, tmp_path: Path, monkeypatch):
    environment = read_environment(host_runtime_env)
    corrupt = tmp_path / "corrupt.tflite"
    corrupt.write_bytes(b"TFL3" + bytes(range(256)) * 4)
    result = gates.preflight(corrupt, "tflite-runtime", environment)
    assert not result["ok"] and result["checked"] and result["error"]

    def crash(*args, **kwargs):
        return subprocess.CompletedProcess(args, -11, "", "")

    monkeypatch.setattr(subprocess, "run", crash)
    assert gates.preflight(corrupt, "tflite-runtime", environment) == {
        "runtime": "tflite-runtime",
        "ok": False,
        "checked": True,
        "version": None,  # unknown: the process died before it said; the report reads the key all the same
        "error": "crashed (signal 11)",
    }


def test_preflight_runs_in_the_stacks_environment_not_this_python(host_runtime_env: Path, tmp_path: Path, monkeypatch):
    environment = read_environment(host_runtime_env)
    started = []

    def record(command, *args, **kwargs):
        started.append((command, kwargs.get("env")))
        return subprocess.CompletedProcess(command, 0, '{"runtime": "tflite-runtime", "ok": true, "version": "2.14.0"}\n', "")

    monkeypatch.setattr(subprocess, "run", record)
    model = tmp_path / "model.tflite"
    assert gates.preflight(model, "tflite-runtime", environment) == {"runtime": "tflite-runtime", "ok": True, "version": "2.14.0", "checked": True}
    ((command, variables),) = started
    assert command == [*environment["python"], "-m", "edge_build.board.preflight", "tflite-runtime", str(model)]
    assert command[0] != sys.executable and variables["PYTHONPATH"].endswith(str(REPO))


NOT_PROVISIONED = "not provisioned: pip install failed: no wheel"


def test_an_optional_runtime_that_cannot_run_never_stops_the_conversion(tiny_artifacts, tmp_path: Path):
    runtime_env = environment_with(tiny_artifacts["runtime_env"], tmp_path / "env.json", "ai-edge-litert", NOT_PROVISIONED)
    out = convert_for(tiny_artifacts, tmp_path, with_litert(TINY_PROFILE), "fp32", runtime_env=runtime_env)
    runtimes = json.loads((out.parent / "report.json").read_text())["runtimes"]
    assert runtimes["tflite-runtime"]["ok"] and runtimes["tflite-runtime"]["checked"]
    assert {key: runtimes["ai-edge-litert"][key] for key in ("ok", "checked", "error")} == {
        "ok": False,
        "checked": False,
        "error": f"not checked: {NOT_PROVISIONED}",
    }
    assert out.is_file()


def test_a_required_runtime_that_cannot_run_stops_the_conversion(tiny_artifacts, tmp_path: Path):
    runtime_env = environment_with(tiny_artifacts["runtime_env"], tmp_path / "env.json", "ai-edge-litert", NOT_PROVISIONED, required=True)
    profile = with_litert(TINY_PROFILE, required=True)
    with pytest.raises(StageError, match=r"trial.toml: ai-edge-litert\s+cannot run it: not checked: not provisioned: pip install failed: no wheel"):
        convert_for(tiny_artifacts, tmp_path, profile, "fp32", runtime_env=runtime_env)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
