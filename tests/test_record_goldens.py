"""``eval.json`` and ``manifest.json`` from small, seeded inputs, against golden files: no model, no TensorFlow.

The target is made by hand in a temporary folder (``made_target``): stand-in model
files with their conversion records, seeded logits, a test split written as
TFRecords by the encoder below, and the shared records of the BBC News host build
in ``tests/testdata/report_host/``. What varies with the machine (the folder, the
build's package versions) is pinned; a change to what the evaluate or manifest
stage writes shows up as a diff of ``tests/testdata/records/``.
"""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
from conftest import REPO, varint

from edge_build.config.profile import read_profile
from edge_build.evaluation import EvaluationInputs
from edge_build.layout import Target
from edge_build.stages import evaluate, manifest
from edge_build.tfrecord import masked_crc32c

SHARED = REPO / "tests" / "testdata" / "report_host"
GOLDEN = REPO / "tests" / "testdata" / "records"
LABELS = ["business", "entertainment", "politics", "sport", "tech"]
EXAMPLES = 40
#: How far each TF Lite model's logits stray from the reference's (float32 reordering, float16 weights, INT8): a scale and a shift,
#: which leave every top-1 class as it was.
STRAY = {"tflite_fp32": 1e-6, "tflite_fp16": 2e-4, "tflite_int8": 0.01, "tflite_tasks_int8": 0.01}


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def split_record(text: bytes, label: int) -> bytes:
    """One TFRecord of ``Example{text: bytes_list, label: int64_list}``, as the data stage writes them."""
    text_feature, label_feature = field(1, field(1, text)), field(3, field(1, varint(label)))
    features = field(1, field(1, b"text") + field(2, text_feature)) + field(1, field(1, b"label") + field(2, label_feature))
    data = field(1, features)
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data))


def made_target(root: Path) -> tuple[Target, EvaluationInputs]:
    """A host target whose models are stand-ins and whose logits are seeded: what evaluate and manifest read."""
    rng = np.random.default_rng(26)
    reference_logits = rng.normal(0.0, 3.0, (EXAMPLES, len(LABELS))).astype(np.float32)
    labels = np.argmax(reference_logits, axis=-1)
    labels[::8] = (labels[::8] + 1) % len(LABELS)  # the reference gets 5 of 40 wrong
    shared = root / "shared"
    shared.mkdir()
    (shared / "labels.txt").write_text("".join(f"{name}\n" for name in LABELS), encoding="utf-8")
    (shared / "test.tfrecord").write_bytes(b"".join(split_record(f"article {i}".encode(), int(y)) for i, y in enumerate(labels)))
    np.save(shared / "reference_logits.npy", reference_logits)
    for folder in (shared / "reference", root / "host" / "saved_model_cpu" / "1"):
        (folder / "variables").mkdir(parents=True)
        (folder / "saved_model.pb").write_bytes(b"stand-in graph")
        (folder / "variables" / "variables.data-00000-of-00001").write_bytes(b"stand-in weights")
    target = Target(root / "host", "host")
    for name, stray in STRAY.items():
        content = f"TFL3 stand-in for {name}".encode()
        target.artifact(name).write_bytes(content)
        logits = reference_logits * np.float32(1 + stray) + np.float32(stray)
        np.save(target.test_logits(name), logits)
        record = json.loads((SHARED / f"{name}.json").read_text(encoding="utf-8"))
        record.update(sha256=hashlib.sha256(content).hexdigest(), size_bytes=len(content))
        target.conversion_record(name).write_text(json.dumps(record), encoding="utf-8")
    return target, EvaluationInputs(shared / "reference", shared / "reference_logits.npy", shared / "test.tfrecord", shared / "labels.txt")


def pinned(text: str, root: Path) -> str:
    """The record with this run's folder written as ``<build>``: the same wherever the test runs."""
    return text.replace(str(root), "<build>")


def test_the_evaluation_record_matches_its_golden_file(tmp_path: Path, golden):
    target, inputs = made_target(tmp_path)
    evaluate.build_evaluation(read_profile(SHARED / "host.toml"), inputs, target)
    golden(pinned(target.evaluation.read_text(encoding="utf-8"), tmp_path), GOLDEN / "eval.json")


def test_the_manifest_matches_its_golden_file(tmp_path: Path, golden, monkeypatch):
    target, inputs = made_target(tmp_path)
    profile = read_profile(SHARED / "host.toml")
    evaluate.build_evaluation(profile, inputs, target)
    parity = {name: {"tflite-runtime": {"top1_agreement": 1.0}} for name in profile.runtime_artifacts}
    target.runtime_parity.write_text(json.dumps(parity), encoding="utf-8")
    recommended = {"tflite-runtime": {"artifact": "tflite_fp32", "model": "model_fp32.tflite", "decided_by": "timing"}}
    target.recommended.write_text(json.dumps(recommended), encoding="utf-8")
    weights, vocab = tmp_path / "model.weights.h5", tmp_path / "vocab.txt"
    weights.write_bytes(b"stand-in weights")
    vocab.write_text("[PAD]\n[UNK]\narticle\n", encoding="utf-8")
    # The build's own package versions are this machine's: pinned, as the build pins its date and revision.
    monkeypatch.setattr(manifest, "package_versions", lambda *names: {name: "pinned" for name in names})
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    monkeypatch.setenv("EDGE_BUILD_GIT_REVISION", "pinned")
    window = tmp_path / "window.json"
    window.write_text(json.dumps({"sequence_length": 512, "rule": "fixed"}), encoding="utf-8")
    files = manifest.ManifestInputs(
        SHARED / "data_summary.json", window, SHARED / "train_log.json", weights, vocab, SHARED / "calibration_summary.json"
    )
    manifest.build_manifest(profile, files, target)
    golden(pinned(target.manifest.read_text(encoding="utf-8"), tmp_path), GOLDEN / "manifest.json")


def test_evaluating_tf_lite_models_loads_no_tensorflow(tmp_path: Path):
    # Only the XLA SavedModel, or one that is not a copy of the reference, needs TensorFlow to be scored.
    code = (
        "import sys, pathlib, test_record_goldens as t; from edge_build.stages import evaluate; from edge_build.config.profile import read_profile; "
        "target, inputs = t.made_target(pathlib.Path(sys.argv[1])); evaluate.build_evaluation(read_profile(t.SHARED / 'host.toml'), inputs, target); "
        "print('tensorflow' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=REPO / "tests", capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout) == (0, "False\n"), result.stderr[-2000:]
