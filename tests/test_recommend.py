"""The model recommended for each runtime: the fastest that passed, a tie within TIE going to the smaller file; under
emulation the runtime table's facts, then size; a raw-text model is no candidate; a size budget is kept."""

import pytest

from edge_build.board.runtime import RUNTIMES
from edge_build.recommend import TIE, TIE_US, recommend
from edge_build.typed_records import CheckTable

ROWS = {"tflite-runtime": RUNTIMES["tflite-runtime"]["2.14.0"], "ai-edge-litert": RUNTIMES["ai-edge-litert"]["2.3.0"]}
SIZES = {"tflite_fp32": 9_000_000, "tflite_fp16": 4_600_000, "tflite_int8": 2_300_000, "tflite_text_int8": 2_900_000}


def ran(p50: float, emulated: bool = False) -> dict:
    return {"status": "ok", "emulated": emulated, "latency": {"p50_us": p50}}


def table(per_artifact: dict[str, dict[str, float]], emulated: bool = False) -> CheckTable:
    return CheckTable({name: {runtime: ran(p50, emulated) for runtime, p50 in per.items()} for name, per in per_artifact.items()})


def test_the_fastest_wins_beyond_a_tie_and_the_smaller_file_within_one():
    checks = table({"tflite_fp32": {"tflite-runtime": 22.0, "ai-edge-litert": 17.0}, "tflite_int8": {"tflite-runtime": 36.4, "ai-edge-litert": 16.0}})
    chosen = recommend(checks, SIZES, ROWS)
    assert chosen["tflite-runtime"]["artifact"] == "tflite_fp32" and chosen["tflite-runtime"]["measured"]
    assert chosen["ai-edge-litert"]["artifact"] == "tflite_int8"
    assert chosen["tflite-runtime"]["why"] == "fastest p50 (22.0 µs; tflite_int8 36.4 µs)"
    # INT8 just inside the tie: the smaller file wins, and the record says the fastest was another.
    tied = recommend(table({"tflite_fp32": {"tflite-runtime": 20.0}, "tflite_int8": {"tflite-runtime": 20.0 * TIE}}), SIZES, ROWS)
    assert tied["tflite-runtime"]["artifact"] == "tflite_int8"
    assert tied["tflite-runtime"]["why"] == f"smallest within {TIE:g}x or {TIE_US:g} µs of the fastest p50 (24.0 µs; tflite_fp32 20.0 µs)"
    # Just beyond it, the faster file wins however much larger it is.
    beyond = recommend(table({"tflite_fp32": {"tflite-runtime": 20.0}, "tflite_int8": {"tflite-runtime": 20.0 * TIE + 0.1}}), SIZES, ROWS)
    assert beyond["tflite-runtime"]["artifact"] == "tflite_fp32"
    # Within a microsecond is a tie however large the ratio (below what the timer resolves per invoke); a small
    # model 2.2 times slower is not (the tests' INT8 against float32 on tflite-runtime 2.14).
    tiny = recommend(table({"tflite_fp32": {"tflite-runtime": 1.0}, "tflite_int8": {"tflite-runtime": 1.0 + TIE_US}}), SIZES, ROWS)
    assert tiny["tflite-runtime"]["artifact"] == "tflite_int8"
    small = recommend(table({"tflite_fp32": {"tflite-runtime": 5.0}, "tflite_int8": {"tflite-runtime": 11.2}}), SIZES, ROWS)
    assert small["tflite-runtime"]["artifact"] == "tflite_fp32"


def test_under_emulation_the_runtime_table_decides_not_the_timings():
    checks = table(
        {"tflite_fp32": {"tflite-runtime": 900.0, "ai-edge-litert": 900.0}, "tflite_int8": {"tflite-runtime": 100.0, "ai-edge-litert": 100.0}}, True
    )
    chosen = recommend(checks, SIZES, ROWS)
    # tflite-runtime 2.14 runs no quantized op in XNNPACK: the float model, however fast INT8 looked under qemu.
    assert chosen["tflite-runtime"]["artifact"] == "tflite_fp32" and not chosen["tflite-runtime"]["measured"]
    assert chosen["ai-edge-litert"]["artifact"] == "tflite_int8"
    assert chosen["tflite-runtime"]["why"].endswith("tflite-runtime 2.14.0's XNNPACK delegate runs no quantized op, so the smallest float model")


@pytest.mark.parametrize("budget, expected", [(None, "tflite_fp32"), (5_000_000, "tflite_fp16"), (1_000_000, None)])
def test_a_size_budget_leaves_out_larger_models_and_a_raw_text_model_is_never_a_candidate(budget, expected):
    checks = table({"tflite_fp32": {"r": 10.0}, "tflite_fp16": {"r": 30.0}, "tflite_text_int8": {"r": 1.0}})
    checks.checks["tflite_fp32"]["s"] = {"status": "not checked: not provisioned", "problems": []}
    chosen = recommend(checks, SIZES, {"r": ROWS["tflite-runtime"], "s": ROWS["ai-edge-litert"]}, budget)
    assert chosen.get("r", {}).get("artifact") == expected and "s" not in chosen
