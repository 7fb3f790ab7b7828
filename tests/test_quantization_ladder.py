"""The quantization ladder's climb, driven without TensorFlow: a fake recipe step, fake judges and fake runtimes.

``climb`` converts each recipe with ``convert_recipe`` and asks a judge about the bytes; here the
recipe step returns bytes that name their recipe, and the judge is either a table of verdicts or
the real ``ladder_judge`` over fake model inspection, TensorFlow's interpreter and runtimes, so the
real parity rule decides. The trained-model ladder runs in ``test_tflite.py`` (full suite).
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_GATEWAY_PROFILE, TINY_PROFILE, TINY_TASKS_PROFILE, TINY_TRIXIE_PROFILE, with_litert, write_profile

from edge_build.board.parity import compare
from edge_build.config.profile import read_profile
from edge_build.convert import ladder
from edge_build.convert.job import ConversionJob
from edge_build.errors import StageError
from edge_build.stages.report import render_quantization_ladder

MODEL = object()  # climb hands the trained model to the recipe step, untouched
REPRESENTATIVE = np.arange(8 * 24, dtype=np.int32).reshape(8, 24)
ERRORS = [{"tensor": "logits/MatMul", "rmse_in_steps": 1.7}, {"tensor": "embedding/Gather", "rmse_in_steps": 0.3}]
#: Each recipe's model size, distinct, so an attempt's size says which bytes were weighed.
SIZES = {"int8": 310_000, "int8_per_channel": 320_000, "int8_float_worst": 420_000, "int16x8": 530_000, "dynamic_range": 640_000}
#: The validation split: 20 examples of 3 classes, labelled as the Keras model answers (reference accuracy 1).
REFERENCE = np.tile(np.array([[3.0, 1.0, 0.0], [0.0, 2.5, 1.0], [0.5, 0.0, 2.0], [1.0, 4.0, 0.0]]), (5, 1))
VAL_LABELS = REFERENCE.argmax(-1)
VAL_IDS = np.ones((20, 24), dtype=np.int32)
ENVIRONMENT = {"runtimes": {"tflite-runtime": {"version": "2.14.0", "checkable": True}, "ai-edge-litert": {"version": "2.3.0", "checkable": True}}}


class ConverterError(Exception):
    """Stands in for TensorFlow's, which ``climb`` imports when it runs."""


@pytest.fixture(autouse=True)
def without_tensorflow(monkeypatch):
    """TensorFlow's ``ConverterError`` as a stand-in module: ``climb`` runs without importing TensorFlow (seconds)."""
    stand_in = types.ModuleType("tensorflow.lite.python.convert")
    stand_in.ConverterError = ConverterError
    monkeypatch.setitem(sys.modules, "tensorflow.lite.python.convert", stand_in)
    imported_before = "tensorflow" in sys.modules
    yield
    assert imported_before or "tensorflow" not in sys.modules, "a ladder test imported TensorFlow: the fast suite cannot afford it"


def profile_with(tmp_path: Path, text: str, recipes: list[str]):
    """``text``'s profile with ``[quantization] recipes``, read as the build reads it."""
    listed = "[quantization]\nrecipes = " + json.dumps(recipes) + "\n"
    return read_profile(write_profile(tmp_path, "trial", text.replace("[quantization]\n", listed, 1)))


def content_of(name: str) -> bytes:
    return name.encode().ljust(SIZES[name], b"\0")


def recipe_of(content: bytes) -> str:
    return content.rstrip(b"\0").decode()


class FakeRecipeStep:
    """``convert_recipe``: each recipe's bytes, settings and kept-float layers, or the converter's refusal."""

    def __init__(self, refusals: dict[str, Exception] | None = None):
        self.refusals = refusals or {}
        self.converted: list[str] = []

    def __call__(self, subject, name, profile, representative, errors):
        assert subject.model is MODEL and representative is REPRESENTATIVE and errors is ERRORS
        self.converted.append(name)
        if name in self.refusals:
            raise self.refusals[name]
        kept_float = [ERRORS[0]["tensor"]] if name == "int8_float_worst" else []
        return content_of(name), {"recipe": name, "supported_ops": [f"OPS_OF_{name.upper()}"]}, kept_float


def verdict(top1: float = 1.0, *problems: str) -> ladder.Verdict:
    figures = {"tf.lite": {"examples": 20, "top1_agreement": top1, "accuracy_drop": 1.0 - top1}}
    return ladder.Verdict(figures, list(problems), {"DEQUANTIZE": 1}, np.full((20, 3), top1))


class TableJudge:
    """A judge that answers from a table of verdicts by recipe, and remembers which recipes it saw."""

    def __init__(self, verdicts: dict[str, ladder.Verdict]):
        self.verdicts, self.judged = verdicts, []

    def __call__(self, content: bytes) -> ladder.Verdict:
        self.judged.append(recipe_of(content))
        return self.verdicts[recipe_of(content)]


def climb(monkeypatch, profile, judge, step: FakeRecipeStep | None = None) -> tuple[ladder.Climbed, FakeRecipeStep]:
    step = step or FakeRecipeStep()
    monkeypatch.setattr(ladder, "convert_recipe", step)
    return ladder.climb(ladder.ids_model(MODEL, REPRESENTATIVE), profile, REPRESENTATIVE, ERRORS, judge), step


def outcomes(climbed: ladder.Climbed) -> list[tuple[str, str]]:
    return [(attempt.recipe, attempt.outcome) for attempt in climbed.attempts]


def test_the_first_recipe_that_passes_is_kept_and_the_later_ones_are_not_tried(tmp_path: Path, monkeypatch):
    profile = profile_with(tmp_path, TINY_PROFILE, ["int8", "int8_float_worst", "int16x8", "dynamic_range"])
    judge = TableJudge({"int8": verdict(0.5, "tf.lite: top-1 agreement 0.5"), "int8_float_worst": verdict(0.95)})
    climbed, step = climb(monkeypatch, profile, judge)
    assert step.converted == judge.judged == ["int8", "int8_float_worst"]
    assert outcomes(climbed) == [("int8", "failed"), ("int8_float_worst", "chosen"), ("int16x8", "not tried"), ("dynamic_range", "not tried")]
    failed, chosen, *untried = climbed.attempts
    assert failed.reason == "tf.lite: top-1 agreement 0.5" and failed.size_bytes == 310_000
    assert failed.figures == {"tf.lite": {"examples": 20, "top1_agreement": 0.5, "accuracy_drop": 0.5}}
    # The chosen recipe's own bytes, settings (with its conversion time), kept-float layers and validation logits.
    assert climbed.recipe == "int8_float_worst" and climbed.content == content_of("int8_float_worst")
    assert chosen.reason == "passes every gate" and chosen.size_bytes == 420_000 and chosen.kept_float == ["logits/MatMul"]
    assert chosen.float_ops == {"DEQUANTIZE": 1} and chosen.figures["tf.lite"]["top1_agreement"] == 0.95
    assert climbed.converter == {"recipe": "int8_float_worst", "supported_ops": ["OPS_OF_INT8_FLOAT_WORST"], "seconds": chosen.seconds}
    assert chosen.seconds >= 0 and failed.seconds >= 0
    np.testing.assert_array_equal(climbed.val_logits, np.full((20, 3), 0.95))
    for attempt in untried:
        assert (attempt.reason, attempt.size_bytes, attempt.seconds, attempt.figures) == ("an earlier recipe passed", None, None, {})


def test_a_first_recipe_that_passes_leaves_every_other_untried(tmp_path: Path, monkeypatch):
    profile = profile_with(tmp_path, TINY_PROFILE, ["dynamic_range", "int8"])
    climbed, step = climb(monkeypatch, profile, TableJudge({"dynamic_range": verdict()}))
    assert step.converted == ["dynamic_range"] and climbed.recipe == "dynamic_range"
    assert outcomes(climbed) == [("dynamic_range", "chosen"), ("int8", "not tried")]


LACKS_PER_CHANNEL = "cannot load TF 2.21's per-channel dense layers (the runtime table)"


@pytest.mark.parametrize(
    ("profile_text", "reason"),
    [
        (TINY_PROFILE, f"tflite-runtime 2.14.0 {LACKS_PER_CHANNEL}"),
        # ai-edge-litert loads them: only the runtime that cannot is named.
        (with_litert(TINY_PROFILE), f"tflite-runtime 2.14.0 {LACKS_PER_CHANNEL}"),
        (TINY_GATEWAY_PROFILE, f"tflite-runtime 2.14.0, tensorflow-cpu 2.15.1 {LACKS_PER_CHANNEL}"),
        # tflite-runtime cannot install on trixie's CPython 3.13, so only ai-edge-litert counts: int8 is already per-channel.
        (TINY_TRIXIE_PROFILE, "the same model as int8: every runtime here loads per-channel dense layers, so int8 has them"),
    ],
    ids=["tflite-runtime", "with-ai-edge-litert", "gateway", "trixie"],
)
def test_the_per_channel_recipe_is_skipped_with_the_runtime_tables_reason(tmp_path: Path, monkeypatch, profile_text: str, reason: str):
    profile = profile_with(tmp_path, profile_text, ["int8", "int8_per_channel", "dynamic_range"])
    judge = TableJudge({"int8": verdict(0.5, "tf.lite: top-1 agreement 0.5"), "dynamic_range": verdict()})
    climbed, step = climb(monkeypatch, profile, judge)
    # Never converted nor judged: the next recipe is tried straight away.
    assert step.converted == judge.judged == ["int8", "dynamic_range"]
    assert outcomes(climbed) == [("int8", "failed"), ("int8_per_channel", "skipped"), ("dynamic_range", "chosen")]
    skipped = climbed.attempts[1]
    assert skipped.reason == reason
    assert (skipped.size_bytes, skipped.seconds, skipped.kept_float, skipped.figures) == (None, None, [], {})


def test_a_recipe_the_converter_refuses_is_recorded_in_one_line_and_the_next_is_tried(tmp_path: Path, monkeypatch):
    profile = profile_with(tmp_path, TINY_PROFILE, ["int16x8", "int8_float_worst", "int8", "dynamic_range"])
    long_message = "error: 'tfl.fully_connected' op\n   quantized " + "x" * 400
    step = FakeRecipeStep(
        {
            "int16x8": ConverterError("<unknown>:0: error:  'tf.Cumprod' op is neither a custom op\n\tnor a flex op"),
            "int8_float_worst": RuntimeError(long_message),
            "int8": ValueError("The inference_input_type must be int8"),
        }
    )
    judge = TableJudge({"dynamic_range": verdict()})
    climbed, _ = climb(monkeypatch, profile, judge, step)
    assert step.converted == ["int16x8", "int8_float_worst", "int8", "dynamic_range"] and judge.judged == ["dynamic_range"]
    assert outcomes(climbed) == [("int16x8", "failed"), ("int8_float_worst", "failed"), ("int8", "failed"), ("dynamic_range", "chosen")]
    refused = climbed.attempts[:3]
    # Whitespace collapsed to single spaces, the message cut at 300 characters.
    assert refused[0].reason == "the converter refused it: <unknown>:0: error: 'tf.Cumprod' op is neither a custom op nor a flex op"
    assert refused[1].reason == "the converter refused it: " + " ".join(long_message.split())[:300]
    assert len(refused[1].reason) == len("the converter refused it: ") + 300
    assert refused[2].reason == "the converter refused it: The inference_input_type must be int8"
    assert all(attempt.size_bytes is None and attempt.figures == {} for attempt in refused)


def test_an_error_that_is_no_refusal_is_not_swallowed(tmp_path: Path, monkeypatch):
    profile = profile_with(tmp_path, TINY_PROFILE, ["int8", "dynamic_range"])
    with pytest.raises(KeyError, match="calibration"):
        climb(monkeypatch, profile, TableJudge({}), FakeRecipeStep({"int8": KeyError("calibration")}))


# The real judge (``ladder_judge``) over fakes of what needs TensorFlow or a runtime environment.


class FakeModelWorld:
    """Model inspection, TensorFlow's interpreter and the runtimes' validation runs, for models that name their recipe.

    ``tf_lite`` and ``runtime`` map a recipe to how each runs it: ``"garbles"`` (top-1 swapped on half the
    examples), an error line (the runtime cannot run it) or nothing (the Keras model's logits exactly).
    """

    def __init__(self, monkeypatch, tf_lite=None, runtime=None, flex=None):
        self.tf_lite, self.runtime, self.flex = tf_lite or {}, runtime or {}, flex or {}
        self.interpreted: list[str] = []
        self.validated: list[tuple[str, str]] = []
        monkeypatch.setattr(ladder, "inspect_model", self.inspect_model)
        monkeypatch.setattr(ladder, "run_tflite", self.run_tflite)
        monkeypatch.setattr(ladder, "validation_on_runtime", self.validation_on_runtime)

    @staticmethod
    def logits(reference: np.ndarray, how: str | None) -> np.ndarray:
        if how == "garbles":
            garbled = reference.copy()
            garbled[:10] = np.roll(reference[:10], 1, axis=-1)
            return garbled
        return reference

    def inspect_model(self, content: bytes) -> dict:
        return {"flex_ops": self.flex.get(recipe_of(content), []), "float_ops": {"DEQUANTIZE": 1} if recipe_of(content) != "dynamic_range" else {}}

    def run_tflite(self, content: bytes, ids: np.ndarray) -> np.ndarray:
        assert ids is VAL_IDS
        self.interpreted.append(recipe_of(content))
        return self.logits(REFERENCE, self.tf_lite.get(recipe_of(content)))

    def validation_on_runtime(self, model_path: Path, runtime: str, environment: dict, golden: Path, scratch: Path):
        name = recipe_of(model_path.read_bytes())
        self.validated.append((name, runtime))
        how = self.runtime.get(name)
        if how not in (None, "garbles"):
            return None, how
        # As the board's bench does: the golden set the judge wrote, run, then compared.
        with np.load(golden) as data:
            np.testing.assert_array_equal(data["ids"], VAL_IDS)
            figures = compare(data["reference_logits"], self.logits(data["reference_logits"], how), data["labels"])
        return {"runtime_version": environment["runtimes"][runtime]["version"], "parity": figures}, None


def ids_judge(job: ConversionJob):
    """The ladder's judge of the ids model (after ``FakeModelWorld`` stood in for TensorFlow's interpreter)."""
    return ladder.ladder_judge(job, ladder.ids_model(job.model, job.representative))


def conversion_job(profile, where: str = "targets/trial.toml: tflite_int8", artifact: str = "tflite_int8") -> ConversionJob:
    """What the tflite stage hands the ladder, without the files and hyperparameters it reads them from."""
    labels = ["astronomy", "cooking", "football"]
    return ConversionJob(
        artifact=artifact,
        profile=profile,
        files=None,
        hparams=None,
        labels=labels,
        model=MODEL,
        reference=REFERENCE,
        val_ids=VAL_IDS,
        val_labels=VAL_LABELS,
        test_ids=VAL_IDS,
        representative=REPRESENTATIVE,
        environment=ENVIRONMENT,
        where=where,
    )


TOP1_BREACH = "top-1 agreement 0.5 (allowed >= 0.8, int8_min_top1_agreement)"
DROP_BREACH = "accuracy drop 0.5 (allowed <= 0.2, int8_max_accuracy_drop)"
EXACT = {"examples": 20, "top1_agreement": 1.0, "accuracy_drop": 0.0}
HALF = {"examples": 20, "top1_agreement": 0.5, "accuracy_drop": 0.5}


def test_a_recipe_that_passes_on_tf_lite_but_not_on_a_required_runtime_is_refused(tmp_path: Path, monkeypatch):
    # tflite-runtime required; ai-edge-litert optional, so never run by the ladder's judge.
    profile = profile_with(tmp_path, with_litert(TINY_PROFILE, required=False), ["int8", "int16x8", "dynamic_range"])
    world = FakeModelWorld(
        monkeypatch,
        runtime={"int8": "garbles", "int16x8": "Didn't find op for builtin opcode 'RSQRT' version '3'"},
    )
    climbed, _ = climb(monkeypatch, profile, ids_judge(conversion_job(profile)))
    assert world.interpreted == ["int8", "int16x8", "dynamic_range"]
    assert world.validated == [("int8", "tflite-runtime"), ("int16x8", "tflite-runtime"), ("dynamic_range", "tflite-runtime")]
    assert outcomes(climbed) == [("int8", "failed"), ("int16x8", "failed"), ("dynamic_range", "chosen")]
    int8, int16, chosen = climbed.attempts
    # Exact on TensorFlow's interpreter, half the top classes swapped on the runtime: refused for the runtime's figures alone.
    assert int8.figures == {"tf.lite": EXACT, "tflite-runtime 2.14.0": HALF}
    assert int8.reason == f"tflite-runtime 2.14.0: {TOP1_BREACH}; tflite-runtime 2.14.0: {DROP_BREACH}"
    # A runtime that cannot run the model: refused by name, with only TensorFlow's figures.
    assert (
        int16.figures == {"tf.lite": EXACT} and int16.reason == "tflite-runtime cannot run it: Didn't find op for builtin opcode 'RSQRT' version '3'"
    )
    assert chosen.figures == {"tf.lite": EXACT, "tflite-runtime 2.14.0": EXACT} and chosen.float_ops == {}
    assert int8.float_ops == {"DEQUANTIZE": 1}
    np.testing.assert_array_equal(climbed.val_logits, REFERENCE)


def test_a_recipe_that_fails_on_tf_lite_is_refused_with_each_place_named(tmp_path: Path, monkeypatch):
    profile = profile_with(tmp_path, TINY_PROFILE, ["int8", "dynamic_range"])
    FakeModelWorld(monkeypatch, tf_lite={"int8": "garbles"}, runtime={"int8": "garbles"})
    climbed, _ = climb(monkeypatch, profile, ids_judge(conversion_job(profile)))
    assert climbed.attempts[0].reason == "; ".join(
        f"{place}: {breach}" for place in ("tf.lite", "tflite-runtime 2.14.0") for breach in (TOP1_BREACH, DROP_BREACH)
    )
    assert climbed.attempts[0].figures == {"tf.lite": HALF, "tflite-runtime 2.14.0": HALF}


def test_a_model_that_needs_flex_ops_is_refused_before_it_runs_anywhere(tmp_path: Path, monkeypatch):
    profile = profile_with(tmp_path, TINY_PROFILE, ["int8", "dynamic_range"])
    world = FakeModelWorld(monkeypatch, flex={"int8": ["FlexCumprod"]})
    climbed, _ = climb(monkeypatch, profile, ids_judge(conversion_job(profile)))
    assert world.interpreted == ["dynamic_range"] and world.validated == [("dynamic_range", "tflite-runtime")]
    refused = climbed.attempts[0]
    assert refused.outcome == "failed" and refused.figures == {} and refused.float_ops == {"DEQUANTIZE": 1}
    assert refused.reason == (
        "needs Flex ops FlexCumprod, which tflite-runtime cannot run (no Flex delegate; runtimes that can: tensorflow-cpu 2.15.1)"
    )


def test_the_tasks_model_climbs_the_ladder_run_by_its_own_runner_and_keeps_a_float_output(tmp_path: Path, monkeypatch):
    """A wrapper of three inputs (the Tasks-ready model): its own runner, no per-layer table, runtimes given raw text left to the runtime checks."""
    profile = profile_with(tmp_path, TINY_TASKS_PROFILE, ["int8", "int8_float_worst", "int16x8", "dynamic_range"])
    world = FakeModelWorld(monkeypatch, tf_lite={"int8": "garbles"})
    subject = ladder.Quantizable(MODEL, lambda: iter(()), world.run_tflite, float_output=True, one_input=False)
    job = conversion_job(profile, "targets/trial.toml: tflite_tasks_int8", "tflite_tasks_int8")
    step = FakeRecipeStep()
    monkeypatch.setattr(ladder, "convert_recipe", step)
    climbed = ladder.climb(subject, profile, REPRESENTATIVE, ERRORS, ladder.ladder_judge(job, subject))
    assert outcomes(climbed) == [("int8", "failed"), ("int8_float_worst", "skipped"), ("int16x8", "chosen"), ("dynamic_range", "not tried")]
    assert "feeds one input, and this model takes three" in climbed.attempts[1].reason
    assert world.interpreted == ["int8", "int16x8"] and world.validated == []  # MediaPipe reads raw text: the runtime checks run it
    assert climbed.attempts[0].figures == {"tf.lite": HALF} and climbed.attempts[2].figures == {"tf.lite": EXACT}


def quantize(monkeypatch, job: ConversionJob, step: FakeRecipeStep | None = None):
    """``quantize_by_ladder`` with the recipe step faked and full INT8's per-layer errors given."""
    monkeypatch.setattr(ladder, "convert_recipe", step or FakeRecipeStep())
    monkeypatch.setattr(ladder, "make_converter", lambda model, recipe, profile, representative: ("converter", recipe))
    monkeypatch.setattr(ladder, "quantization_errors", lambda converter, representative: ERRORS if converter == ("converter", "int8") else None)
    return ladder.quantize_by_ladder(job)


def test_a_ladder_where_nothing_passes_fails_with_the_attempt_table(tmp_path: Path, monkeypatch, capsys):
    profile = profile_with(tmp_path, TINY_PROFILE, ["int8", "int8_per_channel", "int16x8", "dynamic_range"])
    FakeModelWorld(
        monkeypatch, tf_lite={"int8": "garbles", "dynamic_range": "garbles"}, runtime={"int16x8": "Didn't find op for builtin opcode 'RSQRT'"}
    )
    step = FakeRecipeStep({"dynamic_range": ConverterError("dynamic range\nrefused")})
    with pytest.raises(StageError) as raised:
        quantize(monkeypatch, conversion_job(profile), step)
    assert str(raised.value) == (
        "targets/trial.toml: tflite_int8: no recipe of the quantization ladder passes every gate (4 in [quantization] recipes: "
        "the table above; allowed: more recipes there, or looser int8 tolerances)"
    )
    table = capsys.readouterr().err.splitlines()
    assert [line.split()[:2] for line in table] == [
        ["recipe", "outcome"],
        ["int8", "failed"],
        ["int8_per_channel", "skipped"],
        ["int16x8", "failed"],
        ["dynamic_range", "failed"],
    ]
    header, int8, per_channel, int16, dynamic = table
    assert header.split() == ["recipe", "outcome", "size", "why"]
    # Columns under the header: the size in MB where a model was made, "-" where none was, then why, in full.
    why = header.index("why")
    assert [(" ".join(line[:why].split()[2:]), line[why:]) for line in (int8, per_channel, int16, dynamic)] == [
        ("0.31 MB", f"tf.lite: {TOP1_BREACH}; tf.lite: {DROP_BREACH}"),
        ("-", f"tflite-runtime 2.14.0 {LACKS_PER_CHANNEL}"),
        ("0.53 MB", "tflite-runtime cannot run it: Didn't find op for builtin opcode 'RSQRT'"),
        ("-", "the converter refused it: dynamic range refused"),
    ]


def test_the_attempt_records_are_what_the_report_renders(tmp_path: Path, monkeypatch):
    profile = profile_with(tmp_path, TINY_PROFILE, ["int8", "int8_per_channel", "int8_float_worst", "dynamic_range"])
    FakeModelWorld(monkeypatch, runtime={"int8": "garbles"})
    converted = quantize(monkeypatch, conversion_job(profile))
    assert converted.content == content_of("int8_float_worst") and converted.converter["recipe"] == "int8_float_worst"
    np.testing.assert_array_equal(converted.val_logits, REFERENCE)
    # The conversion record keeps full INT8's per-layer errors and every attempt, as JSON.
    record = json.loads(json.dumps(converted.record))
    assert record["quantization_errors"] == ERRORS and record["quantization_ladder"]["recipe"] == "int8_float_worst"
    attempts = record["quantization_ladder"]["attempts"]
    assert [(a["recipe"], a["outcome"]) for a in attempts] == [
        ("int8", "failed"),
        ("int8_per_channel", "skipped"),
        ("int8_float_worst", "chosen"),
        ("dynamic_range", "not tried"),
    ]
    int8, per_channel, chosen, untried = attempts
    assert set(int8) == {"description", "recipe", "outcome", "reason", "size_bytes", "seconds", "kept_float", "float_ops", "figures"}
    assert int8["description"] == "full-integer INT8, calibrated" and untried["description"] == "int8 weights, float activations (dynamic range)"
    assert int8["size_bytes"] == 310_000 and int8["figures"] == {"tf.lite": EXACT, "tflite-runtime 2.14.0": HALF}
    assert chosen["kept_float"] == ["logits/MatMul"] and chosen["size_bytes"] == 420_000
    assert (per_channel["size_bytes"], per_channel["figures"], untried["size_bytes"], untried["figures"]) == (None, {}, None, {})
    # The report's table: one row per attempt, the figures of each place checked, size only where a model was made.
    lines = render_quantization_ladder("tflite_int8", record["quantization_ladder"])
    assert lines[1] == "### tflite_int8: quantization ladder (recipe `int8_float_worst` kept)"
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[5:]]
    assert rows == [
        ["`int8`", "failed", "0.31 MB", "tf.lite 1.0000 / +0.00 pt; tflite-runtime 2.14.0 0.5000 / +50.00 pt", "DEQUANTIZE 1", int8["reason"]],
        ["`int8_per_channel`", "skipped", "", "", "", f"tflite-runtime 2.14.0 {LACKS_PER_CHANNEL}"],
        [
            "`int8_float_worst`",
            "chosen",
            "0.42 MB",
            "tf.lite 1.0000 / +0.00 pt; tflite-runtime 2.14.0 1.0000 / +0.00 pt",
            "DEQUANTIZE 1",
            "passes every gate",
        ],
        ["`dynamic_range`", "not tried", "", "", "", "an earlier recipe passed"],
    ]
