import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, TINY_PROFILE, environment_with, evaluate_and_report, with_litert, without_artifacts, write_profile

from edge_build.artifacts import ARTIFACTS
from edge_build.config.profile import load_profile
from edge_build.errors import StageError
from edge_build.layout import Target
from edge_build.metrics import classification_metrics
from edge_build.runtime_envs import describe, read_environment
from edge_build.stages import report
from edge_build.typed_records import Evaluation


def test_metrics_on_hand_made_predictions():
    labels = ["a", "b", "c"]
    y_true = np.array([0, 0, 0, 1, 1, 2])
    y_pred = np.array([0, 0, 1, 1, 1, 1])
    m = classification_metrics(y_true, y_pred, labels)
    assert m["accuracy"] == pytest.approx(4 / 6) and m["correct"] == 4 and m["examples"] == 6
    assert m["confusion_matrix"] == [[2, 1, 0], [0, 2, 0], [0, 1, 0]]
    assert m["per_class"]["a"] == {"precision": 1.0, "recall": pytest.approx(2 / 3), "f1": pytest.approx(0.8), "support": 3}
    assert m["per_class"]["b"]["precision"] == pytest.approx(0.5) and m["per_class"]["b"]["recall"] == 1.0
    # Never predicted, never right: zeros, not NaN.
    assert m["per_class"]["c"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    assert m["macro_f1"] == pytest.approx((0.8 + 2 / 3 + 0) / 3)


def test_metrics_refuse_mismatched_arrays():
    with pytest.raises(ValueError):
        classification_metrics(np.array([0, 1]), np.array([0]), ["a", "b"])


def test_the_report_evaluates_every_artifact_against_the_reference(tiny_artifacts):
    profile = load_profile(tiny_artifacts["profile"].parent, "tiny")
    target = tiny_artifacts["target"]
    evaluation = evaluate_and_report(profile, tiny_artifacts, tiny_artifacts["xla_checks"], Target(target, "tiny"))
    assert json.loads((target / "eval.json").read_text()) == evaluation
    assert list(evaluation["artifacts"]) == ["saved_model_cpu", "saved_model_xla", "tflite_fp32", "tflite_fp16", "tflite_int8"]
    for name, result in evaluation["artifacts"].items():
        assert result["examples"] == 6 and np.sum(result["confusion_matrix"]) == 6
        assert result["correct"] == int(np.trace(result["confusion_matrix"]))
        # Every parity check of the artifact's row was judged, and none failed.
        assert [g["check"] for g in result["gates"]] == [check[0] for check in ARTIFACTS[name].parity]
        assert result["size_bytes"] > 0 and all(g["verdict"] != "fail" for g in result["gates"])
    artifacts = evaluation["artifacts"]
    assert artifacts["saved_model_cpu"]["parity"]["max_abs_logit_error"] == 0.0
    assert artifacts["saved_model_xla"]["parity"]["max_abs_logit_error"] <= 1e-4
    assert artifacts["tflite_fp32"]["parity"]["max_abs_logit_error"] <= 1e-4
    assert artifacts["tflite_fp16"]["parity"]["max_abs_logit_error"] <= 1e-2
    assert artifacts["tflite_int8"]["size_bytes"] < artifacts["tflite_fp16"]["size_bytes"] < artifacts["tflite_fp32"]["size_bytes"]
    # TF Lite figures are the tflite stage's logits on the test split.
    from edge_build.tfrecord import read_split

    _, y_true = read_split(tiny_artifacts["test"])
    for name in ("tflite_fp32", "tflite_fp16", "tflite_int8"):
        logits = np.load(target / f"{name}.test_logits.npy")
        assert artifacts[name]["correct"] == int(np.sum(np.argmax(logits, axis=-1) == y_true))
    markdown = (target / "report.md").read_text()
    assert "# edge-build report: target `tiny`" in markdown
    # The board software stack the runtimes ran on, and the Python that ran them.
    environment = read_environment(tiny_artifacts["runtime_env"])
    assert f"Board software stack: {describe(environment)} (`{environment['python'][-1]}`)." in markdown
    assert "Board software stack: Debian 12 bookworm: CPython 3.11." in markdown and "user-mode emulation" not in markdown
    for section in (
        "| tflite_int8 |",
        "## TF Lite conversion",
        "per-layer quantization error",
        "## Calibration",
        "Confusion matrix",
        "## Quality floor",
        "## XLA SavedModel: both signatures, compiled and warmed up",
    ):
        assert section in markdown
    # Both XLA signatures with parity, and per batch size compile and steady-state times, on a named device.
    checks = json.loads(tiny_artifacts["xla_checks"].read_text())
    assert "XLA's CPU backend, no GPU visible to TensorFlow" in markdown
    for signature in ("classify_ids", "serving_default"):
        figures = checks["parity"]["signatures"][signature]
        assert (
            f"| `{signature}` | {figures['max_abs_logit_error']:.3g} | {figures['limit']:.3g} | {figures['mean_abs_logit_error']:.3g} | {figures['top1_agreement']:.4f} |"
            in markdown
        )
        for call in checks["compilation"][signature]:
            assert (
                f"| `{signature}` | {call['batch']} | {call['modules_compiled']} | {call['first_call_ms']:.1f} | {call['steady_p50_ms']:.3f} |"
                in markdown
            )
    reference = evaluation["reference"]
    low, high = reference["ci95"]
    assert low <= reference["accuracy"] <= high and f"(95% Wilson interval {low:.3f}–{high:.3f})" in markdown
    assert all(r["ci95"][0] <= r["accuracy"] <= r["ci95"][1] for r in artifacts.values())
    # INT8 against its float twin, example by example.
    paired = evaluation["int8_vs_float"]
    assert (paired["a"], paired["b"]) == ("tflite_int8", "tflite_fp32") and 0 <= paired["p_value"] <= 1
    assert paired["a_only"] - paired["b_only"] == artifacts["tflite_int8"]["correct"] - artifacts["tflite_fp32"]["correct"]
    assert f"INT8 against tflite_fp32 (exact McNemar test on the test split): {paired['a_only']} examples only tflite_int8 gets right" in markdown
    assert markdown.startswith("# edge-build report: target `tiny`\n\nData: ") and "duplicate groups, each kept in one split" in markdown
    headline = report.headline(Evaluation.read(Target(target, "tiny").evaluation), target / "report.md")
    assert f"accuracy {artifacts['tflite_int8']['accuracy']:.4f}" in headline


def test_a_tolerance_breach_on_the_test_split_fails_the_report(tiny_artifacts, tmp_path: Path):
    text = TINY_PROFILE.replace("fp32_max_abs_logit = 1e-4", "fp32_max_abs_logit = 1e-12")
    write_profile(tmp_path / "targets", "tiny", text)
    profile = load_profile(tmp_path / "targets", "tiny")
    out = tmp_path / "target"
    shutil.copytree(tiny_artifacts["target"], out)
    for stale in ("eval.json", "report.md"):
        (out / stale).unlink(missing_ok=True)
    with pytest.raises(
        StageError,
        match=r"targets/tiny.toml tolerances broken on the test split: tflite_fp32: max \|Δlogit\| .* \(allowed <= 1e-12, fp32_max_abs_logit\)",
    ) as caught:
        evaluate_and_report(profile, tiny_artifacts, tiny_artifacts["xla_checks"], Target(out, "tiny"))
    assert str(caught.value).startswith(f"{tmp_path / 'targets' / 'tiny.toml'} tolerances broken")  # the profile's own file
    assert not (out / "eval.json").exists() and not (out / "report.md").exists()


def test_an_optional_runtime_that_was_not_checked_is_a_row_of_the_report(tiny_artifacts, tmp_path: Path):
    from edge_build.stages import runtime_check

    profile = load_profile(write_profile(tmp_path / "targets", "tiny", with_litert(TINY_PROFILE)).parent, "tiny")
    reason = "not provisioned: pip install failed: no wheel for this platform"
    runtime_env = environment_with(tiny_artifacts["runtime_env"], tmp_path / "env.json", "ai-edge-litert", reason)
    out = stale_free_copy(tiny_artifacts, tmp_path / "target")
    layout = tiny_artifacts["layout"]
    test = runtime_check.TestSplit.read(layout.data.split("test"), layout.token_ids("test"), layout.reference_logits, layout.data.labels)
    runtime_check.runtime_checks(profile, test, Target(out, "tiny"), runtime_env)
    evaluate_and_report(profile, tiny_artifacts, out / "xla_checks.json", Target(out, "tiny"))
    markdown = (out / "report.md").read_text()
    assert f"not checked: {reason} (optional runtime: reported, not gated)" in markdown
    assert "| tflite_int8 | tflite-runtime 2.14.0 |" in markdown


def stale_free_copy(tiny_artifacts, destination: Path) -> Path:
    shutil.copytree(tiny_artifacts["target"], destination)
    for stale in ("eval.json", "report.md"):
        (destination / stale).unlink(missing_ok=True)
    return destination


def test_a_tflite_model_that_is_not_the_converted_one_is_refused(tiny_artifacts, tmp_path: Path):
    # Its test logits were computed from the file the conversion wrote; a file changed since would be scored by another model's logits.
    profile = load_profile(tiny_artifacts["profile"].parent, "tiny")
    out = stale_free_copy(tiny_artifacts, tmp_path / "target")
    model = out / "model_fp16.tflite"
    converted = model.read_bytes()
    model.write_bytes(converted + b"\0")
    with pytest.raises(StageError) as caught:
        evaluate_and_report(profile, tiny_artifacts, out / "xla_checks.json", Target(out, "tiny"))
    assert str(caught.value) == (
        f"corrupted: {model} has {len(converted) + 1} bytes, the conversion wrote {len(converted)} (truncated or replaced; delete it and run scons to rebuild it)"
    )
    assert not (out / "eval.json").exists() and not (out / "report.md").exists()


@pytest.mark.parametrize("listed", [True, False], ids=["listed-without-record", "record-without-listing"])
def test_the_xla_checks_record_goes_with_saved_model_xla(tiny_artifacts, tmp_path: Path, listed):
    text = TINY_PROFILE if listed else without_artifacts(TINY_PROFILE, "saved_model_xla")
    write_profile(tmp_path / "targets", "tiny", text)
    profile = load_profile(tmp_path / "targets", "tiny")
    out = stale_free_copy(tiny_artifacts, tmp_path / "target")
    with pytest.raises(StageError, match=r"tiny\.toml: the XLA checks' record is given exactly when the profile lists saved_model_xla"):
        evaluate_and_report(profile, tiny_artifacts, None if listed else out / "xla_checks.json", Target(out, "tiny"))
    assert not (out / "report.md").exists()


def test_the_stages_after_conversion_import_no_tensorflow():
    code = (
        "import sys; from edge_build.stages import calibrate, quality, evaluate, report, manifest, bundle, runtime_check; "
        "print('tensorflow' in sys.modules, 'keras' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False False"


def test_a_report_without_the_xla_savedmodel_runs_without_tensorflow(tiny_artifacts, tmp_path: Path):
    # The reference's logits, the TF Lite models' logits and the test split are all read from files: no interpreter, no tokenizer.
    profile_path = write_profile(tmp_path / "targets", "tiny", without_artifacts(TINY_PROFILE, "saved_model_xla"))
    out = stale_free_copy(tiny_artifacts, tmp_path / "target")
    layout = tiny_artifacts["layout"]
    target = ["--profile", profile_path, "--target-dir", out]
    evaluate_argv = [*target, "--reference", layout.reference, "--reference-logits", layout.reference_logits, "--test", layout.data.split("test")]
    evaluate_argv += ["--labels", layout.data.labels]
    report_argv = [*target, "--evaluation", out / "eval.json", "--data-summary", layout.data.summary, "--data-report", layout.data.report_json]
    report_argv += ["--quality", layout.quality, "--train-log", layout.train_log, "--calibration-summary", layout.calibration_summary]
    code = (
        "import json, sys; from edge_build import cli; from edge_build.stages import evaluate, report; "
        "argv = json.loads(sys.argv[1]); "
        "codes = [cli.run(stage.build_parser, stage.drive, args) for stage, args in zip((evaluate, report), argv)]; "
        "print(codes, 'tensorflow' in sys.modules)"
    )
    argv = json.dumps([[str(a) for a in evaluate_argv], [str(a) for a in report_argv]])
    result = subprocess.run([sys.executable, "-c", code, argv], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "[0, 0] False"
    evaluation = json.loads((out / "eval.json").read_text())
    assert list(evaluation["artifacts"]) == ["saved_model_cpu", "tflite_fp32", "tflite_fp16", "tflite_int8"]
    assert evaluation["artifacts"]["saved_model_cpu"]["parity"]["max_abs_logit_error"] == 0.0


# The tiny profile with the raw-text model beside INT8, checked on tflite-runtime and on tensorflow-cpu (Flex).
RAW_TEXT_PROFILE = (
    without_artifacts(TINY_PROFILE, "saved_model_xla")
    .replace('"tflite_int8"]', '"tflite_int8", "tflite_text_int8"]')
    .replace("select_tf_ops = false", "select_tf_ops = true")
    .replace('name = "tflite-runtime"\n', 'name = "tflite-runtime"\n\n[[runtimes]]\nname = "tensorflow-cpu"\n', 1)
)
TEXT_CUSTOM_OPS = ["FastBertNormalize", "FastWordpieceTokenizeWithOffsets"]
TEXT_FLEX_OPS = ["FlexRaggedRange", "FlexRaggedTensorToTensor"]
TEXT_RECORD = {
    "custom_ops": TEXT_CUSTOM_OPS,
    "flex_ops": TEXT_FLEX_OPS,
    "conversion_path": [
        {"step": "TF Lite builtins", "ok": False, "reason": "FastBertNormalize has no builtin kernel", "custom_ops": [], "flex_ops": []},
        {
            "step": "+ tensorflow-text custom ops",
            "ok": False,
            "reason": "RaggedRange has neither a builtin nor a tensorflow-text kernel",
            "custom_ops": TEXT_CUSTOM_OPS,
            "flex_ops": [],
        },
        {"step": "+ SELECT_TF_OPS (Flex)", "ok": True, "reason": "every op has a kernel", "custom_ops": TEXT_CUSTOM_OPS, "flex_ops": TEXT_FLEX_OPS},
    ],
    "op_paths": {
        "builtin": ["FULLY_CONNECTED", "GATHER"],
        "custom": {name: "tensorflow-text kernel; not on the Flex allow-list" for name in TEXT_CUSTOM_OPS},
        "flex": {name: "no builtin and no tensorflow-text kernel" for name in TEXT_FLEX_OPS},
    },
    "calibration": {
        "route": "ids model's ranges carried over",
        "why": "TF 2.21's calibrator has no Flex delegate",
        "samples": 20,
        "float_activations": 1,
    },
    "token_ids_check": {"runtime": "tensorflow-cpu 2.15.1", "examples": 12, "splits": ["validation", "test"], "mismatches": 0},
    "test_logits_runtime": "tensorflow-cpu 2.15.1",
}


def with_raw_text_model(target: Path) -> None:
    """The tiny INT8 model's files and checks standing in for a raw-text model checked only on tensorflow-cpu (synthetic records)."""
    shutil.copyfile(target / "model_int8.tflite", target / "model_text_int8.tflite")
    shutil.copyfile(target / "tflite_int8.test_logits.npy", target / "tflite_text_int8.test_logits.npy")
    record = json.loads((target / "tflite_int8.json").read_text())
    record.update(TEXT_RECORD, artifact="tflite_text_int8", runtimes={"tensorflow-cpu": {"version": "2.15.1", "ok": True, "error": None}})
    (target / "tflite_text_int8.json").write_text(json.dumps(record))
    checks = json.loads((target / "runtime_checks.json").read_text())
    installed = checks["environment"]["runtimes"]
    installed["tflite-runtime"]["disk_mb"] = 5.2
    installed["tensorflow-cpu"] = {"version": "2.15.1", "required": True, "checkable": True, "reason": None, "disk_mb": 1650.0}
    on_tflite_runtime = checks["checks"]["tflite_int8"]["tflite-runtime"]
    on_tensorflow = {**on_tflite_runtime, "runtime": "tensorflow-cpu", "runtime_version": "2.15.1"}
    checks["checks"]["tflite_int8"]["tensorflow-cpu"] = {**on_tensorflow, "peak_rss_mb": 600.0}
    checks["checks"]["tflite_text_int8"] = {"tensorflow-cpu": {**on_tensorflow, "peak_rss_mb": 612.0}}
    (target / "runtime_checks.json").write_text(json.dumps(checks))


def test_a_raw_text_model_s_ops_conversion_path_and_runtimes_are_in_the_report(tiny_artifacts, tmp_path: Path):
    profile = load_profile(write_profile(tmp_path / "targets", "tiny", RAW_TEXT_PROFILE).parent, "tiny")
    out = stale_free_copy(tiny_artifacts, tmp_path / "target")
    with_raw_text_model(out)
    evaluation = evaluate_and_report(profile, tiny_artifacts, None, Target(out, "tiny"))
    raw_text = evaluation["artifacts"]["tflite_text_int8"]["raw_text"]
    assert raw_text["custom_ops"] == TEXT_CUSTOM_OPS and raw_text["flex_ops"] == TEXT_FLEX_OPS
    assert raw_text["conversion_path"] == TEXT_RECORD["conversion_path"] and raw_text["test_logits_runtime"] == "tensorflow-cpu 2.15.1"
    assert "raw_text" not in evaluation["artifacts"]["tflite_int8"]
    # Scored like any TF Lite model: from its test logits.
    assert evaluation["artifacts"]["tflite_text_int8"]["correct"] == evaluation["artifacts"]["tflite_int8"]["correct"]
    markdown = (out / "report.md").read_text()
    assert "### tflite_text_int8: raw text in, tokenizer inside" in markdown
    assert (
        "It holds the tensorflow-text custom ops `FastBertNormalize`, `FastWordpieceTokenizeWithOffsets` and the Flex ops "
        "`FlexRaggedRange`, `FlexRaggedTensorToTensor`, so it runs only where both have kernels: tensorflow-cpu." in markdown
    )
    assert "| TF Lite builtins | refused | FastBertNormalize has no builtin kernel | none | none |" in markdown
    assert "| + SELECT_TF_OPS (Flex) | converted | every op has a kernel | `FastBertNormalize`, `FastWordpieceTokenizeWithOffsets` |" in markdown
    assert "| `FlexRaggedRange` | SELECT_TF_OPS (Flex) | no builtin and no tensorflow-text kernel |" in markdown
    assert "| `FastBertNormalize` | tensorflow-text custom op | tensorflow-text kernel; not on the Flex allow-list |" in markdown
    assert "Calibration route: ids model's ranges carried over (20 samples; ranges set for 1 float activations): TF 2.21's calibrator" in markdown
    assert (
        "produced on tensorflow-cpu 2.15.1 for 12 examples (validation and test splits) were compared with the training tokenizer's: 0 mismatches"
        in markdown
    )
    # Checked only where it can run; the ids model everywhere.
    assert "| tflite_text_int8 | tensorflow-cpu 2.15.1 |" in markdown and "| tflite_text_int8 | tflite-runtime" not in markdown
    assert "| tflite_int8 | tflite-runtime 2.14.0 |" in markdown and "| tflite_int8 | tensorflow-cpu 2.15.1 |" in markdown
    assert "tflite_text_int8 is checked only on tensorflow-cpu: it takes raw text" in markdown
    # The price of Flex: disk and peak memory of each runtime side by side.
    checks = json.loads((out / "runtime_checks.json").read_text())["checks"]
    peaks = ", ".join(f"{name} {checks[name]['tflite-runtime']['peak_rss_mb']:.0f}" for name in ("tflite_fp32", "tflite_fp16", "tflite_int8"))
    assert f"| tflite-runtime 2.14.0 | 5 | {peaks} |" in markdown
    assert "| tensorflow-cpu 2.15.1 | 1650 | tflite_int8 600, tflite_text_int8 612 |" in markdown
