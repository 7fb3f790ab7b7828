import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, write_tiny_dataset

from edge_build import cli
from edge_build.corpus import SPLITS
from edge_build.errors import StageError
from edge_build.layout import Data
from edge_build.stage_files import command_files
from edge_build.stages import baseline, data, quality


def split_files(files: Data) -> dict[str, Path]:
    return {split: files.split(split) for split in SPLITS}


def figures(accuracy: float, macro_f1: float, ci95: tuple[float, float], **extra) -> dict:
    return {"accuracy": accuracy, "macro_f1": macro_f1, "ci95": list(ci95), **extra}


CLASSICAL = {"name": "TF-IDF + logistic regression"}
BASELINES = {"classical": figures(0.758, 0.75, (0.70, 0.80), **CLASSICAL), "majority": figures(0.424, 0.2, (0.38, 0.47), label="negative")}


def test_a_reference_within_the_margin_and_above_the_majority_passes():
    assert quality.check_quality(figures(0.74, 0.73, (0.69, 0.79)), BASELINES, margin_points=3) == []
    # Exactly the margin behind is allowed, whatever the float subtraction leaves.
    assert (
        quality.check_quality(figures(0.75, 0.73, (0.70, 0.80)), {**BASELINES, "classical": figures(0.78, 0.77, (0.73, 0.83), **CLASSICAL)}, 3) == []
    )


def test_trailing_the_classical_baseline_by_more_than_the_margin_names_both_figures():
    breaches = quality.check_quality(figures(0.562, 0.546, (0.51, 0.61)), BASELINES, margin_points=3)
    assert breaches == [
        "the reference model's test accuracy 0.5620 (macro F1 0.5460) is 19.6 points below the classical baseline's 0.7580 "
        "(TF-IDF + logistic regression; allowed margin 3 points)"
    ]
    assert quality.check_quality(figures(0.562, 0.546, (0.51, 0.61)), BASELINES, margin_points=20) == []


def test_an_interval_reaching_the_majority_share_fails():
    breaches = quality.check_quality(figures(0.43, 0.40, (0.39, 0.47)), BASELINES, margin_points=50)
    assert breaches == [
        "the reference model's test accuracy 0.4300 (95% interval 0.3900-0.4700) is not above the majority class's share 0.4240 ('negative')"
    ]
    # Equal is not above.
    assert len(quality.check_quality(figures(0.5, 0.5, (0.424, 0.6)), BASELINES, margin_points=50)) == 1


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory) -> Data:
    root = tmp_path_factory.mktemp("baseline")
    files = Data(root / "data")
    data.build_data(str(write_tiny_dataset(root / "dataset")), files.outputs, (0.6, 0.2, 0.2), seed=3)
    return files


def test_the_baseline_stage_scores_both_baselines_and_repeats_its_bytes(tiny_data: Data, tmp_path: Path, capsys):
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    for out in (first, second):
        argv = command_files("baseline", {**{s: tiny_data.split(s) for s in SPLITS}, "labels": tiny_data.labels}, {"baseline": out})
        assert cli.run(baseline.build_parser, baseline.drive, argv) == 0
    assert first.read_bytes() == second.read_bytes()
    assert "fitted on 24 texts in" in capsys.readouterr().out
    record = json.loads(first.read_text())
    import sklearn

    assert record["model"] == baseline.MODEL_DESCRIPTION and "char_wb" in record["model"] and "C=10" in record["model"]
    assert record["scikit_learn"] == sklearn.__version__
    assert record["labels"] == ["astronomy", "cooking", "football"] and record["train_examples"] == 24
    # 8 train texts per class: the tie goes to the lowest label id.
    assert record["majority_class"] == {"label": "astronomy", "label_id": 0, "test_share": pytest.approx(2 / 6)}
    for split in ("val", "test"):
        for name in ("classical", "majority"):
            scored = record[split][name]
            assert set(scored) == {"accuracy", "macro_f1", "correct", "examples", "ci95"} and scored["examples"] == 6
            assert scored["ci95"][0] <= scored["accuracy"] <= scored["ci95"][1]
        assert record[split]["majority"]["correct"] == 2
    # Each class has its own words: the classical model separates them.
    assert record["test"]["classical"]["accuracy"] == 1.0
    assert len(record["test_predictions"]) == 6 and set(record["test_predictions"]) == {0, 1, 2}


def test_a_train_split_too_small_for_the_fixed_features_fails_in_one_line(tmp_path: Path):
    # Two classes of three texts that share no word: the train split keeps one text per class, and min_df=2 leaves no word.
    dataset = tmp_path / "dataset"
    for label, words in {"a": ["alpha bravo", "charlie delta", "echo foxtrot"], "b": ["golf hotel", "india juliet", "kilo lima"]}.items():
        (dataset / label).mkdir(parents=True)
        for i, text in enumerate(words):
            (dataset / label / f"{i}.txt").write_text(text, encoding="utf-8")
    files = Data(tmp_path / "data")
    data.build_data(str(dataset), files.outputs, (0.6, 0.2, 0.2), seed=3)
    out = tmp_path / "baseline.json"
    with pytest.raises(
        StageError,
        match=r"train\.tfrecord: 2 train texts are too few for the classical baseline's fixed TF-IDF settings \(scikit-learn: .*no terms remain",
    ) as caught:
        baseline.build_baseline(split_files(files), files.labels, out)
    assert "\n" not in str(caught.value) and not out.exists()


@pytest.fixture(scope="module")
def tiny_baseline(tiny_build, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("quality") / "baseline.json"
    baseline.build_baseline(split_files(tiny_build["layout"].data), tiny_build["labels"], out)
    return out


def quality_arguments(tiny_build, baseline_json: Path, margin: str, out: Path) -> list[str]:
    layout = tiny_build["layout"]
    inputs = {"reference_logits": layout.reference_logits, "test": tiny_build["test"], "labels": tiny_build["labels"], "baseline": baseline_json}
    return [*command_files("quality", inputs, {"quality": out}), "--margin", margin]


def run_quality(tiny_build, baseline_json: Path, margin: str, out: Path) -> int:
    return cli.run(quality.build_parser, quality.drive, quality_arguments(tiny_build, baseline_json, margin, out))


def test_the_quality_gate_passes_the_tiny_model_and_records_the_comparison(tiny_build, tiny_baseline: Path, tmp_path: Path, capsys):
    out = tmp_path / "quality.json"
    assert run_quality(tiny_build, tiny_baseline, "100", out) == 0
    assert capsys.readouterr().out.startswith("quality: passed; reference test accuracy ")
    record = json.loads(out.read_text())
    stored = json.loads(tiny_baseline.read_text())
    assert list(record) == ["reference", "classical", "majority", "margin_points", "gap_points", "mcnemar_vs_classical", "passed"]
    assert record["passed"] is True and record["margin_points"] == 100.0
    assert record["reference"]["examples"] == 6 and set(record["reference"]) == {"accuracy", "macro_f1", "correct", "examples", "ci95"}
    assert record["classical"] == {"name": baseline.CLASSICAL_NAME, "model": baseline.MODEL_DESCRIPTION, **stored["test"]["classical"]}
    assert record["majority"] == {"label": "astronomy", **stored["test"]["majority"]}
    assert record["gap_points"] == pytest.approx(100 * (record["classical"]["accuracy"] - record["reference"]["accuracy"]))
    paired = record["mcnemar_vs_classical"]
    assert set(paired) == {"a", "b", "a_only", "b_only", "discordant", "p_value"} and (paired["a"], paired["b"]) == ("reference", "classical")
    assert paired["a_only"] - paired["b_only"] == record["reference"]["correct"] - record["classical"]["correct"]
    again = tmp_path / "again.json"
    run_quality(tiny_build, tiny_baseline, "100", again)
    assert again.read_bytes() == out.read_bytes()


def test_a_reference_behind_the_baselines_fails_the_build_in_one_line(tiny_build, tiny_baseline: Path, tmp_path: Path, capsys):
    # Claims no real baseline could make: a perfect classical model, and every test example in the majority class.
    # The majority breach fires whatever the tiny model scores; the margin breach whenever it is below 1.0.
    record = json.loads(tiny_baseline.read_text())
    record["test"]["classical"].update(accuracy=1.0, correct=6)
    record["test"]["majority"].update(accuracy=1.0, correct=6)
    crippled = tmp_path / "baseline.json"
    crippled.write_text(json.dumps(record), encoding="utf-8")
    out = tmp_path / "quality.json"
    assert run_quality(tiny_build, crippled, "0", out) == cli.EXIT_USER_ERROR
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: quality gate: the reference model's test accuracy ")
    assert "is not above the majority class's share 1.0000 ('astronomy')" in err[0]
    assert not out.exists()


def test_a_baseline_from_another_test_split_is_refused(tiny_build, tmp_path: Path):
    # The same texts split with another seed: same labels and sizes, other examples in the test split.
    files = Data(tmp_path / "data")
    data.build_data(str(tiny_build["dataset"]), files.outputs, (0.6, 0.2, 0.2), seed=4)
    other = tmp_path / "baseline.json"
    baseline.build_baseline(split_files(files), files.labels, other)
    with pytest.raises(StageError, match="made from other labels or another test split"):
        quality.gate_quality(tiny_build["layout"].reference_logits, tiny_build["test"], tiny_build["labels"], other, 3.0, tmp_path / "quality.json")
    assert not (tmp_path / "quality.json").exists()


@pytest.mark.parametrize("margin", ["-1", "nan", "inf"])
def test_a_negative_margin_is_refused_in_one_line(tiny_build, tiny_baseline: Path, tmp_path: Path, capsys, margin):
    out = tmp_path / "quality.json"
    assert run_quality(tiny_build, tiny_baseline, margin, out) == cli.EXIT_USER_ERROR
    assert capsys.readouterr().err == f"error: --margin {float(margin):g}: expected a finite number of accuracy points >= 0, such as 3\n"
    assert not out.exists()


def test_the_build_gated_the_tiny_model_with_the_layouts_files(tiny_build):
    record = json.loads(tiny_build["quality"].read_text())
    assert record["passed"] is True and record["margin_points"] == 3.0
    # The reference's figures come from the reference_logits stage's logits on the test split.
    from edge_build.tfrecord import read_split

    _, y_true = read_split(tiny_build["test"])
    logits = np.load(tiny_build["layout"].reference_logits)
    assert logits.shape == (6, 3) and logits.dtype == np.float32
    assert record["reference"]["correct"] == int(np.sum(np.argmax(logits, axis=-1) == y_true))


def test_a_missing_baseline_is_named(tiny_build, tmp_path: Path):
    with pytest.raises(StageError, match=r"baseline\.json: baseline file not found \(run the baseline stage first\)"):
        quality.read_baseline(tmp_path / "baseline.json", tiny_build["test"], ["astronomy", "cooking", "football"])


def test_reference_logits_of_another_split_are_refused(tiny_build, tiny_baseline: Path, tmp_path: Path):
    logits = tmp_path / "test_logits.npy"
    np.save(logits, np.zeros((5, 3), np.float32))
    with pytest.raises(StageError, match=r"test_logits\.npy: an array of shape \(5, 3\) for a split of 6 examples"):
        quality.gate_quality(logits, tiny_build["test"], tiny_build["labels"], tiny_baseline, 3.0, tmp_path / "quality.json")
    assert not (tmp_path / "quality.json").exists()


GATE_IN_A_NEW_PROCESS = """
import sys
from edge_build import cli
from edge_build.stages import quality
code = cli.run(quality.build_parser, quality.drive, sys.argv[1:])
print(code, 'tensorflow' in sys.modules)
"""


def test_the_gate_reads_the_test_split_and_logits_without_tensorflow(tiny_build, tiny_baseline: Path, tmp_path: Path):
    out = tmp_path / "quality.json"
    argv = quality_arguments(tiny_build, tiny_baseline, "100", out)
    result = subprocess.run([sys.executable, "-c", GATE_IN_A_NEW_PROCESS, *argv], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "0 False"
    assert json.loads(out.read_text())["passed"] is True
