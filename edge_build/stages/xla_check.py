"""Stage *xla_check*: the XLA SavedModel runs XLA, matches the reference and is warmed up by its own file.

Reads the reference CPU SavedModel, the target's ``saved_model_xla``, the profile and
``test.tfrecord``; writes ``--out`` (``<target>/xla_checks.json``; never cached: its
timings are this machine's). Three checks, each
failing the stage with a table of what broke:

- parity on the whole test split: ``classify_ids`` on the reference's token ids and
  ``serving_default`` on the raw texts, logits within the profile's tolerance
  (``xla_logit_rtol`` times the reference's largest |logit| on XLA's CPU backend, ``xla_gpu_logit_rtol`` on a GPU, or the absolute ``*_max_abs_logit`` overrides)
  and the same labels, but where the reference's top two logits lie within twice
  the tolerance (a tie the tolerance allows either way);
- compilation: each signature, in a fresh process of its own, compiles an XLA
  module at the first call at each warm-up batch size, and nothing more in the
  steady-state calls after it (``edge_build.xla`` counts XLA's dumped modules);
- warm-up: replaying ``assets.extra/tf_serving_warmup_requests`` as TF Serving does
  leaves nothing to compile for the first real call at those shapes, and the file
  covers the profile's batch sizes.

A fresh process loading the CPU flavour's ``serving_default`` must compile nothing:
that control shows the count tells the flavours apart. When TensorFlow sees a GPU,
everything runs on ``/GPU:0`` and the device's name and compute capability are recorded.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from edge_build import cli, saved_model, xla
from edge_build.artifacts import ARTIFACTS
from edge_build.atomic import write_json
from edge_build.board.decision import failure_table, verdicts
from edge_build.board.parity import compare
from edge_build.config.profile import TargetProfile, Tolerances, read_profile
from edge_build.errors import StageError
from edge_build.stage_files import add_files
from edge_build.tfrecord import read_split

ARTIFACT = "saved_model_xla"


def signature_logits(path: Path, texts: list[bytes], ids: np.ndarray, device: str) -> dict:
    """Both signatures of a SavedModel over the whole split: ``classify_ids`` logits, ``serving_default`` logits and labels."""
    import tensorflow as tf

    loaded = saved_model.load(path)
    with tf.device(device):
        by_ids = saved_model.serve_in_batches(lambda batch: loaded.signatures["classify_ids"](input_ids=batch), ids)
        by_text = saved_model.classify_texts(loaded, texts)
    return {"classify_ids": by_ids["logits"], "serving_default": by_text["logits"], "labels": [label.decode("utf-8") for label in by_text["label"]]}


def compare_signatures(reference: dict, candidate: dict, y_true: np.ndarray, tolerances: Tolerances, on_gpu: bool) -> dict:
    """Per signature: the parity figures and the logit-error bound they are held to (``board.decision``: it scales with the
    logits), and for ``serving_default`` the examples whose label differs beyond a near-tie (top two within twice the bound)."""
    results = {}
    for signature in saved_model.SIGNATURES:
        figures = compare(reference[signature], candidate[signature], y_true)
        (verdict,) = verdicts(ARTIFACTS[ARTIFACT].parity, figures, tolerances.limits(on_gpu))
        results[signature] = {
            **{key: figures[key] for key in ("max_abs_logit_error", "mean_abs_logit_error", "logit_scale", "top1_agreement")},
            "limit": verdict["limit"],
            "verdict": verdict["verdict"],
            "message": verdict["message"],
        }
    top_two = np.sort(reference["serving_default"], axis=-1)[:, -2:]
    near_tie = (top_two[:, 1] - top_two[:, 0]) <= 2 * results["serving_default"]["limit"]
    differing = [i for i, (a, b) in enumerate(zip(reference["labels"], candidate["labels"])) if a != b]
    results["serving_default"]["labels_differing"] = len(differing)
    results["serving_default"]["labels_differing_beyond_a_tie"] = [i for i in differing if not near_tie[i]]
    return results


def check_parity(reference: Path, model: Path, test_records: Path, device: dict, profile: TargetProfile) -> tuple[dict, list[tuple[str, str, str]]]:
    texts, y_true = read_split(test_records)
    ids = saved_model.token_ids(reference, texts)
    # The reference stays on the CPU, as it is served; the XLA flavour runs where XLA would.
    expected = signature_logits(reference, texts, ids, "/CPU:0")
    actual = signature_logits(model, texts, ids, device["device"])
    on_gpu = device["backend"] == "gpu"
    results = compare_signatures(expected, actual, y_true, profile.tolerances, on_gpu)
    failures = [(ARTIFACT, f"{signature} on {device['device']}", r["message"]) for signature, r in results.items() if r["verdict"] == "fail"]
    beyond = results["serving_default"]["labels_differing_beyond_a_tie"]
    if beyond:
        failures.append(
            (
                ARTIFACT,
                f"serving_default on {device['device']}",
                f"label differs from the reference's on test examples {beyond[:10]} ({len(beyond)} in all)",
            )
        )
    key, tolerance = profile.tolerances.xla_limit(on_gpu)
    return {"examples": len(texts), "tolerance": {"key": key, "bound": tolerance}, "signatures": results}, failures


def check_compilation(model: Path, profile: TargetProfile) -> tuple[dict, list[tuple[str, str, str]]]:
    """Each signature at each warm-up batch size, in a fresh process per signature."""
    compilation = xla.probe_signatures(model, list(profile.xla.warmup_batch_sizes), profile.xla.steady_runs)
    failures = []
    for signature, calls in compilation.items():
        for call in calls:
            where = f"{signature} batch {call['batch']}"
            if call["modules_compiled"] == 0:
                failures.append((ARTIFACT, where, "the first call compiled no XLA module: the signature does not reach the jit-compiled function"))
            if call["recompiled_in_steady_calls"]:
                failures.append(
                    (ARTIFACT, where, f"steady-state calls compiled {call['recompiled_in_steady_calls']} more module(s) at an unchanged shape")
                )
    return compilation, failures


def check_warmup(model: Path, reference: Path, profile: TargetProfile) -> tuple[dict, dict, dict, list[tuple[str, str, str]]]:
    """The warm-up replay in a fresh process, then the CPU flavour as the control; also returns the device it ran on."""
    probe = xla.run_probe(model, "--replay-warmup", "--control", str(reference))
    warmup, control = probe["warmup"], probe["control"]
    failures = []
    expected = {(signature, size) for signature in saved_model.SIGNATURES for size in profile.xla.warmup_batch_sizes}
    covered = {(r["signature"], r["batch"]) for r in warmup["requests"]}
    for signature, size in sorted(expected - covered):
        failures.append((ARTIFACT, saved_model.WARMUP_FILE, f"no warm-up request for {signature} at batch {size} (the profile's warmup_batch_sizes)"))
    for call in warmup["real_calls_after"]:
        if call["modules_compiled"]:
            failures.append(
                (
                    ARTIFACT,
                    f"{call['signature']} batch {call['batch']}",
                    f"the first real call after the warm-up replay compiled {call['modules_compiled']} module(s)",
                )
            )
    if control["modules_compiled"]:
        failures.append(
            (
                "saved_model_cpu",
                "serving_default batch 1",
                f"the CPU flavour compiled {control['modules_compiled']} XLA module(s) too "
                "(is TF_XLA_FLAGS auto-clustering on?): the counts cannot tell the flavours apart",
            )
        )
    return (
        warmup,
        {"artifact": "saved_model_cpu", "signature": "serving_default", "batch": 1, "modules_compiled": control["modules_compiled"]},
        probe["device"],
        failures,
    )


def xla_checks(profile: TargetProfile, reference: Path, model: Path, test_records: Path, out: Path) -> dict:
    compilation, failures = check_compilation(model, profile)
    warmup, control, device, broken = check_warmup(model, reference, profile)
    failures += broken
    parity_figures, broken = check_parity(reference, model, test_records, device, profile)
    failures += broken
    if failures:
        print(failure_table(failures), file=sys.stderr)
        raise StageError(f"{model}: XLA checks failed for {profile.source} (table above)")
    record = {
        "target": profile.name,
        "artifact": ARTIFACT,
        "device": device,
        "parity": parity_figures,
        "compilation": compilation,
        "warmup": warmup,
        "control": control,
    }
    write_json(out, record)
    return record


def summary_lines(record: dict) -> list[str]:
    lines = [f"xla: ran on {xla.describe(record['device'])}"]
    for signature, figures in record["parity"]["signatures"].items():
        lines.append(
            f"xla: {signature} on {record['parity']['examples']} test examples: {figures['message']}, top-1 agreement {figures['top1_agreement']:.4f}"
        )
    for signature, calls in record["compilation"].items():
        timings = ", ".join(f"batch {c['batch']}: first {c['first_call_ms']:.0f} ms, then {c['steady_p50_ms']:.2f} ms" for c in calls)
        lines.append(f"xla: {signature} compiles once per shape ({timings})")
    replayed = record["warmup"]["requests"]
    lines.append(f"xla: warm-up file replayed ({len(replayed)} requests); the first real calls after it compiled nothing")
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.stages.xla_check", description=__doc__.splitlines()[0])
    add_files("xla_check", parser)
    return parser


def drive(args: argparse.Namespace) -> None:
    profile = read_profile(args.profile)
    record = xla_checks(profile, args.reference, args.model, args.test, args.checks)
    print("\n".join(summary_lines(record)))


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
