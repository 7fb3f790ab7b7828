"""The parity rule (``board.parity``'s figures, ``board.decision``'s verdicts): float bounds that scale with the logits, and one decision rule for proportions.

No model here: figures are made by hand, or by ``compare`` on made-up logits, so each boundary is exact.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO

from edge_build.artifacts import ARTIFACTS
from edge_build.board import decision
from edge_build.board.decision import verdicts
from edge_build.board.parity import compare
from edge_build.config.profile import FLOAT16_ROUNDOFF, Tolerances, load_profile
from edge_build.errors import StageError
from edge_build.layout import Target


def agreement_figures(agreeing: int, n: int, only_reference: int = 0, only_candidate: int = 0) -> dict:
    """Figures of an INT8 model that agrees with the reference on ``agreeing`` of ``n`` examples."""
    return {
        "examples": n,
        "top1_agreement": agreeing / n,
        "disagreeing_examples": list(range(n - agreeing)),
        "reference_accuracy": 0.9,
        "accuracy": 0.9 - (only_reference - only_candidate) / n,
        "only_reference_correct": only_reference,
        "only_candidate_correct": only_candidate,
        "logit_scale": 5.0,
    }


def judge(artifact: str, figures: dict, tolerances: Tolerances, on_gpu: bool = False) -> list[dict]:
    """The artifact's checks judged as the build judges them: its row's checks, the profile's limits."""
    return verdicts(ARTIFACTS[artifact].parity, figures, tolerances.limits(on_gpu))


def breaches(artifact: str, figures: dict, tolerances: Tolerances, on_gpu: bool = False) -> list[str]:
    return decision.messages(judge(artifact, figures, tolerances, on_gpu), "fail")


def test_the_exact_bounds_match_clopper_pearson():
    # Reference values: scipy.stats.beta.ppf(0.05, k, n - k + 1), and the closed form at n of n.
    assert decision.lower_bound(298, 299) == pytest.approx(0.9842332168723886, abs=1e-12)
    assert decision.lower_bound(5, 10) == pytest.approx(0.2224411010081294, abs=1e-12)
    assert decision.upper_bound(0, 10) == pytest.approx(0.2588655508930522, abs=1e-12)
    assert decision.lower_bound(299, 299) == 0.05 ** (1 / 299)
    assert decision.lower_bound(0, 10) == 0.0 and decision.upper_bound(10, 10) == 1.0


def test_a_perfect_agreement_decides_099_from_299_examples():
    assert decision.examples_to_decide("top1_agreement", 0.99) == 299
    assert decision.examples_to_decide("top1_agreement", 1.0) is None  # no sample shows a proportion of 1
    assert decision.examples_to_decide("accuracy_drop", 0.01) == decision.examples_to_decide("max_abs_logit_error", 1e-4) == 1
    checks = ARTIFACTS["tflite_int8"].parity
    limits = Tolerances().limits()
    (below, _) = verdicts(checks, agreement_figures(298, 298), limits)
    (at, _) = verdicts(checks, agreement_figures(299, 299), limits)
    assert below["verdict"] == "undecided" and below["bound"] < 0.99
    assert (
        below["message"]
        == "top-1 agreement 1 (allowed >= 0.99, int8_min_top1_agreement): its 95% bound 0.989998 on 298 examples does not clear the limit"
    )
    assert at["verdict"] == "pass" and at["bound"] >= 0.99


@pytest.mark.parametrize(
    "figures, agreement, drop",
    [
        (agreement_figures(995, 1000), "undecided", "pass"),  # 0.995: its bound (0.989) does not clear 0.99
        (agreement_figures(9905, 10000), "undecided", "pass"),  # 0.9905: bound 0.9888
        (agreement_figures(9920, 10000), "pass", "pass"),  # 0.992: bound 0.9904
        (agreement_figures(980, 1000), "fail", "pass"),
        (agreement_figures(1000, 1000, only_reference=10, only_candidate=5), "pass", "undecided"),  # drop 0.005, bound above 0.01
        (agreement_figures(1000, 1000, only_reference=25, only_candidate=5), "pass", "fail"),  # drop 0.02
        (agreement_figures(10000, 10000, only_reference=30, only_candidate=20), "pass", "pass"),  # drop 0.001, bound below 0.01
    ],
)
def test_a_proportion_passes_or_fails_on_its_estimate_and_is_decided_by_its_bound(figures, agreement, drop):
    judged = verdicts(ARTIFACTS["tflite_int8"].parity, figures, Tolerances().limits())
    assert [v["verdict"] for v in judged] == [agreement, drop]


def test_a_miss_on_few_examples_fails_only_where_its_bound_shows_the_breach_and_on_validation_always():
    """Validation decides (the point estimate, ``point_fails``); a later check of 299 golden examples stops the build only
    when the data show the limit broken, else says *undecided*: 3 differing of 299 is what a true 0.995 gives one build in five."""
    checks, limits = ARTIFACTS["tflite_int8"].parity[:1], Tolerances().limits()
    few = agreement_figures(296, 299)  # 0.98997: a miss; the upper bound 0.9973 is above 0.99
    (later,) = verdicts(checks, few, limits)
    assert later["verdict"] == "undecided" and later["bound"] > 0.99
    assert later["message"].endswith(f"its 95% bound {later['bound']:.6g} on 299 examples does not show the limit broken")
    assert [v["verdict"] for v in verdicts(checks, few, limits, point_fails=True)] == ["fail"]
    assert decision.breaches(checks, few, limits)  # the ladder's judge: validation figures, so it climbs
    many = agreement_figures(290, 299)  # 0.9699: the upper bound 0.984 shows the breach
    assert (
        [v["verdict"] for v in verdicts(checks, many, limits)] == [v["verdict"] for v in verdicts(checks, many, limits, point_fails=True)] == ["fail"]
    )


def test_nan_fails_every_check():
    figures = {**agreement_figures(10, 10), "top1_agreement": math.nan, "max_abs_logit_error": math.nan}
    assert [v["verdict"] for v in verdicts(ARTIFACTS["tflite_int8"].parity[:1], figures, Tolerances().limits())] == ["fail"]
    assert [v["verdict"] for v in verdicts(ARTIFACTS["tflite_fp16"].parity, figures, Tolerances().limits())] == ["fail"]


def large_logit_outputs(scale: float, error: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reference logits whose largest |logit| is ``scale``, a candidate off by ``error`` on one logit, and labels."""
    rng = np.random.default_rng(0)
    reference = rng.normal(size=(50, 52))
    reference *= scale / np.abs(reference).max()
    candidate = reference.copy()
    candidate[7, 3] += error
    return reference, candidate, np.argmax(reference, -1)


def test_the_float16_bound_scales_with_the_logits():
    # 2^-10 of the scale, plus the floor: a large-logit model may err more in absolute terms, a small one less.
    for scale, error, verdict in ((40.0, 0.035, "pass"), (40.0, 0.045, "fail"), (5.0, 0.004, "pass"), (5.0, 0.006, "fail")):
        figures = compare(*large_logit_outputs(scale, error))
        assert figures["logit_scale"] == pytest.approx(scale, rel=1e-6)
        (judged,) = judge("tflite_fp16", figures, Tolerances())
        assert judged["limit"] == pytest.approx(2 * FLOAT16_ROUNDOFF * scale + 1e-6)
        assert judged["verdict"] == verdict, judged["message"]
    # A failure names the bound and what it was computed from.
    assert breaches("tflite_fp16", compare(*large_logit_outputs(40.0, 0.045)), Tolerances()) == [
        "max |Δlogit| 0.045 (allowed <= 0.0390635, fp16_max_abs_logit: rtol 0.000976562 x max|logit| 40 + atol 1e-06)"
    ]


def test_an_absolute_bound_overrides_the_scaled_one():
    figures = compare(*large_logit_outputs(40.0, 0.004))
    assert breaches("tflite_fp16", figures, Tolerances(fp16_max_abs_logit=3e-3)) == ["max |Δlogit| 0.004 (allowed <= 0.003, fp16_max_abs_logit)"]
    assert breaches("tflite_fp16", figures, Tolerances()) == []


def test_xla_on_a_gpu_takes_the_gpus_bound():
    figures = compare(*large_logit_outputs(10.0, 1e-3))
    assert breaches("saved_model_xla", figures, Tolerances()) != []  # float32 reassociation: 2^-17 of 10
    assert breaches("saved_model_xla", figures, Tolerances(), on_gpu=True) == []  # TF32: 2^-9 of 10


def test_the_board_judges_from_the_manifest_exactly_as_the_build_does():
    # The bundle's manifest carries the limits as JSON and each model's checks; the board re-judges from its own figures.
    tolerances = Tolerances(int8_min_top1_agreement=0.995)
    manifest = json.loads(json.dumps({"tolerances": tolerances.limits(), "parity_checks": {a: ARTIFACTS[a].parity for a in ARTIFACTS}}))
    cases = [("tflite_int8", agreement_figures(996, 1000, 4, 1)), ("tflite_fp16", compare(*large_logit_outputs(40.0, 0.045)))]
    for artifact, figures in cases:
        board = verdicts(manifest["parity_checks"][artifact], json.loads(json.dumps(figures)), manifest["tolerances"])
        assert board == judge(artifact, figures, tolerances)


def test_the_golden_set_is_sized_to_decide_and_capped_by_the_split():
    host = load_profile(REPO / "targets", "host")
    assert host.checks.golden_examples == "auto" and host.golden_examples_to_decide == 299
    assert host.golden_examples(5000) == 299 and host.golden_examples(223) == 223


FP16_PROFILE = """
description = "tests: the float16 model alone, at the default (scaled) tolerances"
arch = "x86_64"
artifacts = ["tflite_fp16"]

[[runtimes]]
name = "tflite-runtime"

[latency]
fp16_p50_ms = 1000.0

[checks]
warmup = 2
runs = 20
"""


def weights_changed(tiny_build, out: Path, change) -> Path:
    """The tiny model's trained weights with ``change(model)`` applied, saved to ``out``."""
    from edge_build.model_source import load_trained_model, trained_hyperparameters

    layout = tiny_build["layout"]
    hparams = trained_hyperparameters(tiny_build["hparams"], layout.train_log)
    labels = layout.data.labels.read_text(encoding="utf-8").splitlines()
    model = load_trained_model(
        REPO / "model_src" / "model.py", hparams, tiny_build["hparams"], layout.vocab, len(labels), layout.weights, layout.token_ids("train")
    )
    change(model)
    model.save_weights(str(out))
    return out


def test_a_large_logit_model_passes_its_scaled_bound_and_a_perturbed_export_fails(tiny_build, host_runtime_env, writer_env, tmp_path: Path, capsys):
    from conftest import conversion_inputs, write_profile

    from edge_build.stages import runtime_check, tflite

    profile = load_profile(write_profile(tmp_path / "targets", "fp16", FP16_PROFILE).parent, "fp16")

    # Logits 300 times larger (argmax unchanged): float16's rounding error grows with them, and so does the bound.
    def louder(model):
        layer = model.get_layer("logits")
        layer.set_weights([w * 300 for w in layer.get_weights()])

    large = tmp_path / "large"
    record = tflite.convert(
        "tflite_fp16",
        conversion_inputs(tiny_build, weights=weights_changed(tiny_build, tmp_path / "large.weights.h5", louder)),
        profile,
        Target(large, "fp16").converted_files("tflite_fp16"),
        host_runtime_env,
        writer_env,
    )
    figures = record["validation_parity"]
    (gate,) = record["validation_gates"]
    assert figures["max_abs_logit_error"] > 1e-2  # what the old absolute bounds (1e-2 here, 2e-3 on host) would have refused
    assert gate["verdict"] == "pass" and gate["limit"] == pytest.approx(2 * FLOAT16_ROUNDOFF * figures["logit_scale"] + 1e-6)

    # An export from weights 2% off the trained ones, checked against the trained model's reference logits, fails.
    rng = np.random.default_rng(0)

    def perturbed(model):
        layer = model.get_layer("logits")
        layer.set_weights([w * (1 + 0.02 * rng.standard_normal(w.shape)) for w in layer.get_weights()])

    target = Target(tmp_path / "perturbed", "fp16")
    tflite.convert(
        "tflite_fp16",
        conversion_inputs(tiny_build, weights=weights_changed(tiny_build, tmp_path / "perturbed.weights.h5", perturbed)),
        profile,
        target.converted_files("tflite_fp16"),
        host_runtime_env,
        writer_env,
    )
    layout = tiny_build["layout"]
    test = runtime_check.TestSplit.read(layout.data.split("test"), layout.token_ids("test"), layout.reference_logits, layout.data.labels)
    with pytest.raises(StageError, match="runtime checks failed"):
        runtime_check.runtime_checks(profile, test, target, host_runtime_env)
    table = capsys.readouterr().err
    assert re.search(
        r"tflite_fp16 +tflite-runtime +max \|Δlogit\| [\d.e-]+ \(allowed <= [\d.e-]+, fp16_max_abs_logit: rtol 0\.000976562 x max\|logit\| [\d.]+ \+ atol 1e-06\)",
        table,
    ), table
    assert not any(path.exists() for path in target.runtime_check_outputs)
