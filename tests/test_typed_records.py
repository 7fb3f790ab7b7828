"""Each shared record has one reader: it refuses what is not such a record in one line, and the checks' table walks in order."""

import json
import re
from pathlib import Path

import pytest
from conftest import REPO

from edge_build.errors import StageError
from edge_build.typed_records import CheckTable, Evaluation, Recommended, RuntimeCheckRecord

HOST_RECORDS = REPO / "tests" / "testdata" / "report_host"
HOST_CHECKS = HOST_RECORDS / "runtime_checks.json"


def test_a_host_builds_record_reads_and_walks_in_the_order_the_checks_ran():
    checks = RuntimeCheckRecord.read(HOST_CHECKS)
    assert checks.artifacts == ["tflite_fp32", "tflite_fp16", "tflite_int8", "tflite_tasks_int8"]
    assert [(o.artifact, o.runtime) for o in checks.ran()][:2] == [("tflite_fp32", "tflite-runtime"), ("tflite_fp32", "ai-edge-litert")]
    assert checks.outcome("tflite_int8", "tflite-runtime").ran and checks.outcome("tflite_int8", "nope") is None
    assert checks.installed("tflite-runtime")["version"] == "2.14.0"


def test_an_outcome_that_did_not_run_is_walked_but_has_no_figures():
    table = CheckTable({"tflite_int8": {"a": {"status": "ok"}, "b": {"status": "not installed (optional)"}}})
    assert [o.runtime for o in table.outcomes()] == ["a", "b"] and [o.runtime for o in table.ran()] == ["a"]


@pytest.mark.parametrize(
    "text, message",
    [("{", "JSONDecodeError"), (json.dumps({"checks": {}}), "KeyError: 'target'"), ("[]", "TypeError")],
)
def test_what_is_not_a_runtime_checks_record_is_refused_in_one_line(tmp_path: Path, text: str, message: str):
    path = tmp_path / "runtime_checks.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(StageError, match="^" + re.escape(f"{path}: not a runtime checks record (") + ".*" + re.escape(message)) as raised:
        RuntimeCheckRecord.read(path)
    assert "\n" not in str(raised.value)
    with pytest.raises(StageError, match=re.escape(f"{tmp_path / 'nope.json'}: not found")):
        RuntimeCheckRecord.read(tmp_path / "nope.json")


def test_a_host_builds_evaluation_reads_with_every_artifact():
    evaluation = Evaluation.read(HOST_RECORDS / "eval.json")
    assert evaluation.target == "host" and list(evaluation.artifacts) == [
        "saved_model_cpu",
        "tflite_fp32",
        "tflite_fp16",
        "tflite_int8",
        "tflite_tasks_int8",
    ]
    assert evaluation.int8_vs_float["a"] == "tflite_int8" and len(evaluation.labels) == 5
    with pytest.raises(StageError, match=re.escape(f"{HOST_CHECKS}: not an evaluation record (KeyError: 'labels')")):
        Evaluation.read(HOST_CHECKS)


def test_a_recommendation_reads_in_the_order_it_was_decided_and_refuses_what_it_does_not_know(tmp_path: Path):
    recommended = Recommended.read(HOST_RECORDS / "recommended.json")
    assert list(recommended.runtimes) == ["tflite-runtime", "ai-edge-litert"]
    assert recommended.runtimes["ai-edge-litert"] == {"artifact": "tflite_int8", "model": "model_int8.tflite", "decided_by": "timing"}
    path = tmp_path / "recommended.json"
    for text, message in [
        ("[]", "AttributeError"),
        (json.dumps({"r": {"artifact": "tflite_int8"}}), "KeyError: 'model'"),
        (json.dumps({"r": {"artifact": "tflite_int8", "model": "m", "decided_by": "luck"}}), "ValueError: r: decided_by 'luck'"),
    ]:
        path.write_text(text, encoding="utf-8")
        with pytest.raises(StageError, match="^" + re.escape(f"{path}: not a recommendation record (") + ".*" + re.escape(message)):
            Recommended.read(path)
