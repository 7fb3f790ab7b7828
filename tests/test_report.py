import json
from pathlib import Path

import numpy as np
import pytest

from edge_build import report
from edge_build.metrics import classification_metrics


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


def test_the_report_evaluates_the_saved_model_on_the_test_split(tiny_build, tmp_path: Path):
    evaluation = report.build_report("host", tiny_build["data"], tiny_build["train_log"], tiny_build["saved_model"], tmp_path)
    assert json.loads((tmp_path / "eval.json").read_text()) == evaluation
    result = evaluation["artifacts"]["saved_model_cpu"]
    assert result["examples"] == 6
    assert np.sum(result["confusion_matrix"]) == 6
    assert result["correct"] == int(np.trace(result["confusion_matrix"]))
    assert result["size_bytes"] > 0
    markdown = (tmp_path / "report.md").read_text()
    assert "# edge-build report: target `host`" in markdown
    assert "| saved_model_cpu |" in markdown and "confusion matrix" in markdown
    headline = report.headline(evaluation, tmp_path / "report.md")
    assert f"accuracy {result['accuracy']:.4f}" in headline
