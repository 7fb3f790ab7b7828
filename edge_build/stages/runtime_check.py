"""Stage *runtime_check*: parity and latency of every TF Lite artifact in the profile's runtime environments.

Reads the reference's test logits, the test split (labels) and its token ids,
``labels.txt``, the profile, the target's ``.tflite`` files with their records and
test logits on TensorFlow's interpreter, and the runtime environment's
``env.json`` where there is one; writes ``golden.npz`` (the golden set: token
ids, labels and the reference's logits for N test examples, and their raw texts
when the target has a raw-text model),
``runtime_checks.json`` (every figure, timings included), ``runtime_parity.json``
(the figures that do not depend on the machine, which the manifest records) and
``latency.png``. Nothing here imports TensorFlow.

For each artifact and each runtime that checks it (a raw-text model: only the
runtimes with the Flex delegate and tensorflow-text's kernels), ``python -m edge_build.board.bench`` runs in its
own process, exactly as on a board (tflite_runtime cannot share a process with
TensorFlow): it runs the golden set and times invokes. Here its logits are
compared with the reference (the artifact's parity checks: ``board.decision``, as
``bench.py --parity`` applies them on the board) and with TensorFlow's own
``tf.lite.Interpreter`` on the same file, which tells a runtime-version
difference from a quantization one. A missing runtime, a model that fails to
load, a crash (a signal), a timeout, a tolerance or a latency budget broken:
each fails the stage with a table of what broke.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from edge_build import cli, recommend
from edge_build.artifacts import ARTIFACTS, logit_error
from edge_build.atomic import atomic_outputs
from edge_build.board import EXIT_RUNTIME_MISSING
from edge_build.board.decision import failure_table, gate
from edge_build.board.parity import compare, pack_texts
from edge_build.config.profile import TargetProfile, read_profile
from edge_build.convert.converter import conversion_mismatch
from edge_build.errors import StageError
from edge_build.isolated import failure_line, run_isolated
from edge_build.layout import Target
from edge_build.plots import latency_series, plot_latency
from edge_build.records import read_json, read_labels, read_rows
from edge_build.runtime_envs import describe, environment_in_use, launcher, unavailable
from edge_build.stacks import RuntimeSpec
from edge_build.stage_files import add_files
from edge_build.tfrecord import read_split
from edge_build.typed_records import CheckTable


@dataclasses.dataclass(frozen=True)
class TestSplit:
    """The test split as the checks see it: labels, token ids and the reference's logits, in split order."""

    __test__ = False  # a name pytest would otherwise try to collect

    labels: np.ndarray
    ids: np.ndarray
    reference_logits: np.ndarray
    label_names: list[str]
    texts: list[bytes]

    @classmethod
    def read(cls, test_records: Path, test_ids: Path, reference_logits: Path, labels: Path) -> TestSplit:
        texts, y_true = read_split(test_records)
        return cls(y_true, read_rows(test_ids, len(y_true)), read_rows(reference_logits, len(y_true)), read_labels(labels), texts)


def build_golden(test: TestSplit, examples: int, with_texts: bool = False) -> dict:
    """``examples`` test-split examples, evenly spread over the (class-ordered) split, with the reference's logits (and raw texts, for raw-text models)."""
    chosen = np.unique(np.linspace(0, len(test.labels) - 1, min(examples, len(test.labels))).round().astype(int))
    texts = pack_texts([test.texts[i] for i in chosen]) if with_texts else {}
    return {
        **texts,
        "ids": test.ids[chosen].astype(np.int32),
        "labels": test.labels[chosen].astype(np.int32),
        "reference_logits": test.reference_logits[chosen].astype(np.float32),
        "label_names": np.array(test.label_names),
        "test_indices": chosen.astype(np.int32),
    }


#: What runs one model on one runtime: the board's own benchmark, which opens it as the runtime's row says (``Runtime.runner``).
RUNNER = "edge_build.board.bench"


def run_in_environment(model: Path, spec: RuntimeSpec, golden: Path, profile: TargetProfile, scratch: Path, runtime_env: dict) -> dict:
    """The board's benchmark for ``model`` on the runtime, in its own process, in the runtime environment; failures come
    back as a ``status``, not an exception."""
    settings, runtime = profile.checks, spec.name
    reason = unavailable(runtime_env, runtime)
    if reason:
        return {"status": f"not checked: {reason}"}
    out, outputs = scratch / f"{model.stem}-{runtime}.json", scratch / f"{model.stem}-{runtime}.npy"
    python, environment = launcher(runtime_env)
    command = [
        *python,
        "-m",
        RUNNER,
        str(model),
        "--runtime",
        runtime,
        "--golden",
        str(golden),
        "--threads",
        str(settings.threads),
        "--batch",
        str(settings.batch),
        "--warmup",
        str(settings.warmup),
        "--runs",
        str(settings.runs),
        "--out",
        str(out),
        "--outputs",
        str(outputs),
    ]
    done, abnormal = run_isolated(command, settings.timeout_s, environment)
    if abnormal:
        return {"status": abnormal}
    if done.returncode != 0:
        reason = failure_line(done)
        return {"status": ("missing: " if done.returncode == EXIT_RUNTIME_MISSING else "failed: ") + reason}
    return {"status": "ok", **json.loads(out.read_text(encoding="utf-8")), "logits": np.load(outputs)}


def check_artifact(name: str, target: Target, golden: dict, golden_path: Path, profile: TargetProfile, scratch: Path, runtime_env: dict) -> dict:
    model = target.artifact(name)
    problem = conversion_mismatch(model, read_json(target.conversion_record(name)))
    if problem:
        return {runtime.name: {"status": problem, "problems": [problem]} for runtime in profile.runtimes_for(name)}
    # TensorFlow's interpreter on the same file, run by the conversion stage over the whole test split.
    host_logits = np.load(target.test_logits(name), allow_pickle=False)[golden["test_indices"]]
    results = {}
    for runtime in profile.runtimes_for(name):
        outcome = run_in_environment(model, runtime, golden_path, profile, scratch, runtime_env)
        # A runtime the profile does not require is reported when it cannot run here; it gates only on what it ran.
        problems = [] if outcome["status"] == "ok" or not runtime.required else [outcome["status"]]
        if outcome["status"] == "ok":
            runtime_logits = outcome.pop("logits")
            host = compare(host_logits, runtime_logits, golden["labels"])
            outcome["runtime_vs_tf_lite"] = {k: host[k] for k in ("max_abs_logit_error", "top1_agreement", "disagreeing_examples")}
            problems += gate(ARTIFACTS[name].parity, outcome, profile.tolerances.limits(), profile.latency_budget_ms(name))
        outcome["problems"] = problems
        results[runtime.name] = outcome
    return results


def machine_independent(checks: dict) -> dict:
    """Per artifact and runtime that ran, the parity figures that do not depend on the machine (what the manifest records)."""
    keys = ("top1_agreement", "max_abs_logit_error", "accuracy")
    figures: dict = {name: {} for name in checks}
    for outcome in CheckTable(checks).ran():
        figures[outcome.artifact][outcome.runtime] = {key: outcome.record["parity"][key] for key in keys}
    return figures


def runtime_checks(profile: TargetProfile, test: TestSplit, target: Target, runtime_env: Path) -> dict:
    with environment_in_use(runtime_env) as environment:
        return checked_in(environment, profile, test, target)


def checked_in(environment: dict, profile: TargetProfile, test: TestSplit, target: Target) -> dict:
    """The runtime checks, run in ``environment``: ``runtime_checks.json``'s record."""
    golden = build_golden(
        test, profile.golden_examples(len(test.labels)), any(ARTIFACTS[a].interface_row.given_text for a in profile.runtime_artifacts)
    )
    files = target.runtime_check_files
    with atomic_outputs(*files.values()) as temporaries, tempfile.TemporaryDirectory() as scratch:
        written = dict(zip(files, temporaries))
        with open(written["golden"], "wb") as handle:
            np.savez(handle, **golden)
        checks = {
            name: check_artifact(name, target, golden, written["golden"], profile, Path(scratch), environment) for name in profile.runtime_artifacts
        }
        rows = [(o.artifact, o.runtime, problem) for o in CheckTable(checks).outcomes() for problem in o.record["problems"]]
        if rows:
            print(failure_table(rows), file=sys.stderr)
            raise StageError(f"{target.dir}: runtime checks failed for {profile.source} (table above)")
        summary = {
            "target": profile.name,
            "environment": environment,
            "stack": describe(environment),
            "golden_examples": int(len(golden["labels"])),
            "golden_examples_to_decide": profile.golden_examples_to_decide,
            "test_examples": int(len(test.labels)),
            "settings": dataclasses.asdict(profile.checks),
            "checks": checks,
        }
        written["checks"].write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        written["parity"].write_text(json.dumps(machine_independent(checks), indent=2) + "\n", encoding="utf-8")
        sizes = {name: target.artifact(name).stat().st_size for name in profile.runtime_artifacts}
        chosen = recommend.for_target(CheckTable(checks), sizes, profile)
        written["recommended"].write_text(json.dumps(recommend.deployable(chosen), indent=2) + "\n", encoding="utf-8")
        plot_latency(latency_series(CheckTable(checks)), written["latency_plot"])
    return summary


def summary_lines(summary: dict) -> list[str]:
    lines = []
    for outcome in CheckTable(summary["checks"]).outcomes():
        r, artifact, runtime = outcome.record, outcome.artifact, outcome.runtime
        if not outcome.ran:
            lines.append(f"runtime check: {artifact} on {runtime}: {r['status']}")
            continue
        p, latency = r["parity"], r["latency"]
        lines.append(
            f"runtime check: {artifact} on {runtime} {r['runtime_version']}: top-1 agreement {p['top1_agreement']:.4f}, "
            f"max |Δlogit| {logit_error(artifact, p['max_abs_logit_error'])}, vs tf.lite {r['runtime_vs_tf_lite']['max_abs_logit_error']:.3g}; "
            f"p50 {latency['p50_us']:.1f} µs, p99 {latency['p99_us']:.1f} µs, peak RSS {r['peak_rss_mb']:.0f} MB"
            + (f" on {r['machine']} (emulated: timings not representative)" if r["emulated"] else "")
            + "".join(f"; undecided: {note}" for note in r["undecided"]["parity"])
        )
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.stages.runtime_check", description=__doc__.splitlines()[0])
    add_files("runtime_check", parser)
    return parser


def drive(args: argparse.Namespace) -> None:
    profile = read_profile(args.profile)
    test = TestSplit.read(args.test, args.test_ids, args.reference_logits, args.labels)
    summary = runtime_checks(profile, test, Target(args.target_dir, profile.name), args.runtime_env)
    print(f"runtime check: on {summary['stack']}")
    print("\n".join(summary_lines(summary)))


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
