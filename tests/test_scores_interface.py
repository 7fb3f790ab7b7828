"""The scores interface: a float32 ids model with its softmax inside the graph, for apps.

It was added as a row of the interface table, a row of the artifact table, its name in
the interpreter runtimes' rows, and ``edge_build/convert/scores.py``: this test shows
the stage converts, gates, checks and records it through the table alone.
"""

from __future__ import annotations

import json

import numpy as np
from conftest import TINY_PROFILE, conversion_inputs, without_artifacts, write_profile

from edge_build.artifacts import ARTIFACTS
from edge_build.interfaces import INTERFACES

SCORES_PROFILE = without_artifacts(
    TINY_PROFILE.replace('"tflite_int8"]', '"tflite_int8", "tflite_scores_fp32"]'), "saved_model_cpu", "saved_model_xla", "tflite_fp16", "tflite_int8"
)


def test_the_scores_interface_is_a_row_and_a_converter():
    row = INTERFACES[ARTIFACTS["tflite_scores_fp32"].interface]
    assert (row.converter, row.outputs, row.metadata, row.default_rank, row.recommended) == ("scores", "scores", "ids", None, False)


def test_a_scores_model_converts_through_the_table_and_gives_the_references_classes_as_probabilities(tiny_artifacts, tmp_path):
    from edge_build.config.profile import load_profile
    from edge_build.layout import Target
    from edge_build.stages import runtime_check, tflite

    layout = tiny_artifacts["layout"]
    write_profile(tmp_path / "targets", "scores", SCORES_PROFILE)
    profile = load_profile(tmp_path / "targets", "scores")
    target = Target(tmp_path / "scores", "scores")
    files = target.converted_files("tflite_scores_fp32")
    record = tflite.convert(
        "tflite_scores_fp32", conversion_inputs(tiny_artifacts), profile, files, tiny_artifacts["runtime_env"], tiny_artifacts["writer_env"]
    )
    scores = np.load(files["test_logits"])
    reference = np.load(layout.reference_logits)
    # Probabilities, in the reference's order of classes.
    np.testing.assert_allclose(scores.sum(axis=1), 1.0, atol=1e-5)
    assert (scores >= 0).all() and (scores.argmax(axis=1) == reference.argmax(axis=1)).all()
    assert record["validation_parity"]["top1_agreement"] == 1.0 and record["outputs"] == "softmax scores (float32)"
    assert "SOFTMAX" in {op["op"] for op in record["operators"]} and record["runtimes"]["tflite-runtime"]["ok"]
    # Its metadata names the output by what it holds, with the labels on it.
    (subgraph,) = record["metadata"]["subgraph_metadata"]
    assert [t["name"] for t in subgraph["output_tensor_metadata"]] == ["scores"]
    # The runtime checks run it on the profile's runtime, held to the reference's labels, its scores against TF's interpreter's.
    for name in ("tflite_fp32",):
        tflite.convert(
            name,
            conversion_inputs(tiny_artifacts),
            profile,
            target.converted_files(name),
            tiny_artifacts["runtime_env"],
            tiny_artifacts["writer_env"],
        )
    test = runtime_check.TestSplit.read(layout.data.split("test"), layout.token_ids("test"), layout.reference_logits, layout.data.labels)
    runtime_check.runtime_checks(profile, test, target, tiny_artifacts["runtime_env"])
    checked = json.loads(target.runtime_checks.read_text(encoding="utf-8"))["checks"]["tflite_scores_fp32"]["tflite-runtime"]
    assert (checked["status"], checked["problems"], checked["parity"]["top1_agreement"]) == ("ok", [], 1.0)
