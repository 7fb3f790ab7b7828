"""The checks a converted model must pass before it is written: on the profile's runtimes, and against the Keras model.

Each runtime loads and runs the model in its runtime environment, in a process of its
own (never beside TensorFlow): the preflight (``board/preflight.py``) and the
validation split through the board's own benchmark (``board/bench.py --parity``).
A model that needs Flex ops a runtime lacks is refused by its operators alone.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from edge_build.artifacts import ARTIFACTS
from edge_build.board.decision import failure_table, messages, verdicts
from edge_build.board.parity import compare
from edge_build.board.runtime import RUNTIME_VERSIONS
from edge_build.config.profile import TargetProfile
from edge_build.errors import StageError
from edge_build.isolated import failure_line, run_isolated
from edge_build.runtime_envs import launcher, unavailable
from edge_build.stacks import RuntimeSpec

PREFLIGHT_TIMEOUT_S = 120
VALIDATION_TIMEOUT_S = 600


def preflight(model_path: Path, runtime: str, environment: dict) -> dict:
    """Load and invoke the model with ``runtime`` in its runtime environment, in a process of its own (never beside TensorFlow)."""
    reason = unavailable(environment, runtime)
    if reason:
        return {"runtime": runtime, "ok": False, "checked": False, "version": None, "error": f"not checked: {reason}"}
    python, variables = launcher(environment)
    result, abnormal = run_isolated([*python, "-m", "edge_build.board.preflight", runtime, str(model_path)], PREFLIGHT_TIMEOUT_S, variables)
    if abnormal:
        return {"runtime": runtime, "ok": False, "checked": True, "version": None, "error": abnormal}
    lines = result.stdout.strip().splitlines()
    try:
        return {**json.loads(lines[-1]), "checked": True}
    except (IndexError, json.JSONDecodeError):
        return {
            "runtime": runtime,
            "ok": False,
            "checked": True,
            "version": None,
            "error": f"exit {result.returncode}: {(result.stderr.strip().splitlines() or [''])[-1]}",
        }


def validation_on_runtime(model_path: Path, runtime: str, environment: dict, golden: Path, scratch: Path) -> tuple[dict | None, str | None]:
    """Every example of ``golden`` run by ``runtime`` with the board's own benchmark (``--parity``), in the runtime
    environment: its result, or why it could not run the model."""
    reason = unavailable(environment, runtime)
    if reason:
        return None, f"not checked: {reason}"
    out = scratch / f"{runtime}.json"
    python, variables = launcher(environment)
    command = [*python, "-m", "edge_build.board.bench", str(model_path), "--runtime", runtime, "--golden", str(golden), "--parity"]
    done, abnormal = run_isolated([*command, "--warmup=0", "--runs=1", f"--out={out}"], VALIDATION_TIMEOUT_S, variables)
    if abnormal:
        return None, abnormal
    if done.returncode != 0:
        return None, failure_line(done).replace(f"{model_path}: ", "")
    return json.loads(out.read_text(encoding="utf-8")), None


def flex_refusal(ops: dict, runtimes: tuple[RuntimeSpec, ...]) -> str | None:
    """Why a model that needs Flex ops cannot ship to these runtimes, or None."""
    flexless = [r.name for r in runtimes if not r.row.has_flex_delegate]
    if not (ops["flex_ops"] and flexless):
        return None
    able = [f"{row.name} {row.version}" for row in RUNTIME_VERSIONS if row.has_flex_delegate]
    return f"needs Flex ops {', '.join(ops['flex_ops'])}, which {', '.join(flexless)} cannot run (no Flex delegate; runtimes that can: {', '.join(able)})"


def validation_gate(artifact: str, reference: np.ndarray, logits: np.ndarray, labels: np.ndarray, profile: TargetProfile, where: str):
    """The artifact's parity gates on the validation split against the Keras model (``reference``): its figures and
    judged gates, or a ``StageError`` naming each breach after printing them as a table."""
    figures = compare(reference, logits, labels)
    judged = verdicts(ARTIFACTS[artifact].parity, figures, profile.tolerances.limits(), point_fails=True)
    broken = messages(judged, "fail")
    if broken:
        print(failure_table([(artifact, "tf.lite, validation split", problem) for problem in broken]), file=sys.stderr)
        raise StageError(f"{where}: on the validation split against the Keras model, {'; '.join(broken)}")
    return figures, judged


def required_preflights(model: Path, shipped_as: Path, runtimes: tuple[RuntimeSpec, ...], environment: dict, where: str) -> dict[str, dict]:
    """Each runtime's preflight of the model about to ship (``model``, recorded as ``shipped_as``); a ``StageError`` when a
    required runtime cannot run it (an optional one is recorded)."""
    results = {runtime.name: {**preflight(model, runtime.name, environment), "model": str(shipped_as)} for runtime in runtimes}
    failed = {r.name: results[r.name]["error"] for r in runtimes if r.required and not results[r.name]["ok"]}
    if failed:
        raise StageError(
            f"{where}: "
            + "; ".join(" ".join(filter(None, (name, results[name].get("version")))) + f" cannot run it: {error}" for name, error in failed.items())
        )
    return results
