"""Stage *manifest*: ``<target>/manifest.json``, each artifact of a target and everything it came from.

Reads the target's artifacts, their conversion records, ``eval.json`` and
``runtime_parity.json`` (the runtime checks' machine-independent figures), the data
and calibration summaries, the training log, the weights, the vocabulary and the
profile; writes ``manifest.json``: per artifact its SHA-256 and size (per file for
SavedModels), the TensorFlow / tensorflow-text / converter / runtime versions, the
git revision, the dataset and calibration-set checksums, the hyperparameters and
the metrics that do not depend on the machine (accuracy and parity, not latency),
so two builds of the same inputs write the same bytes. The bundle's
``manifest.json`` is this record plus what the board needs.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import sys
from pathlib import Path

from edge_build import cli
from edge_build.artifacts import ARTIFACTS
from edge_build.atomic import write_json
from edge_build.config.profile import TargetProfile, read_profile
from edge_build.errors import StageError
from edge_build.layout import Target
from edge_build.provenance import build_timestamp, git_revision, package_versions, sha256_file
from edge_build.records import read_json
from edge_build.stacks import not_installable
from edge_build.stage_files import add_files, stage_inputs
from edge_build.typed_records import Evaluation, Recommended


def file_record(path: Path) -> dict:
    return {"sha256": sha256_file(path), "size_bytes": path.stat().st_size}


def artifact_record(target: Target, name: str) -> dict:
    """A file's SHA-256 and size; for a directory, those of every file and a digest of that listing."""
    relative = ARTIFACTS[name].path
    path = target.artifact(name)
    if path.is_file():
        return {"path": relative, **file_record(path)}
    if not path.is_dir():
        raise StageError(f"{path}: artifact not found (run the {ARTIFACTS[name].format.replace('saved_model', 'export')} stage first)")
    files = {p.relative_to(path).as_posix(): file_record(p) for p in sorted(path.rglob("*")) if p.is_file()}
    if not files:
        raise StageError(f"{path}: the artifact directory is empty")
    listing = "".join(f"{name} {record['sha256']}\n" for name, record in files.items())
    return {
        "path": relative,
        "sha256": hashlib.sha256(listing.encode("utf-8")).hexdigest(),
        "size_bytes": sum(record["size_bytes"] for record in files.values()),
        "files": files,
    }


def converter_settings(target: Target, profile: TargetProfile) -> dict:
    """Each TF Lite artifact's converter settings, without the time conversion took."""
    settings = {}
    for name in profile.runtime_artifacts:
        converter = read_json(target.conversion_record(name))["converter"]
        settings[name] = {key: value for key, value in converter.items() if key != "seconds"}
    return settings


def machine_independent_metrics(target: Target, profile: TargetProfile) -> dict:
    evaluation = Evaluation.read(target.evaluation).artifacts
    runtime_parity = read_json(target.runtime_parity) if profile.runtime_artifacts else {}
    metrics = {}
    for name in profile.artifacts:
        metrics[name] = {"test_accuracy": evaluation[name]["accuracy"]}
        if name in runtime_parity:
            metrics[name]["runtime_parity"] = runtime_parity[name]
    return metrics


@dataclasses.dataclass(frozen=True)
class ManifestInputs:
    """The shared files a target's manifest records (the target's own come from ``layout.Target``)."""

    data_summary: Path
    window: Path
    train_log: Path
    weights: Path
    vocab: Path
    calibration_summary: Path | None = None


def build_manifest(profile: TargetProfile, inputs: ManifestInputs, target: Target) -> dict:
    data_summary = read_json(inputs.data_summary)
    train_log = read_json(inputs.train_log)
    calibration_summary = inputs.calibration_summary
    record = {
        "target": profile.name,
        "arch": profile.arch,
        "build_timestamp": build_timestamp(),
        "git_revision": git_revision(),
        # The build's own packages, then the runtimes as the board stack pins them (they run in its environment, not this one).
        "versions": {
            **package_versions("tensorflow", "tensorflow-text", "keras", "numpy"),
            **{r.name: r.version for r in profile.runtimes if not_installable(r, profile.stack) is None},
        },
        "dataset": {key: data_summary[key] for key in ("dataset", "sha256", "examples", "labels", "fractions", "seed")},
        "hyperparameters": train_log["hyperparameters"],
        # How the window in the hyperparameters above was chosen ("auto": from the training texts' token counts).
        "window": read_json(inputs.window),
        "training": {
            "weights_sha256": sha256_file(inputs.weights),
            "best_epoch": train_log["best_epoch"],
            "best_val_accuracy": train_log["best_val_accuracy"],
        },
        "vocab_sha256": sha256_file(inputs.vocab),
        "artifacts": {name: artifact_record(target, name) for name in profile.artifacts},
        "converter": converter_settings(target, profile),
        "metrics": machine_independent_metrics(target, profile),
    }
    if profile.runtimes:
        record["stack"] = profile.runtime_environment().record()
        # Decided by this machine's timings where they mean something: verify-reproducible counts it as measured.
        record["recommended"] = dict(Recommended.read(target.recommended).runtimes)
    if calibration_summary is not None:
        calibration = read_json(calibration_summary)
        record["calibration"] = {key: calibration[key] for key in ("ids_sha256", "samples", "drawn", "field_samples", "sequence_length")}
    write_json(target.manifest, record)
    return record


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.stages.manifest", description=__doc__.splitlines()[0])
    add_files("manifest", parser)
    return parser


def drive(args: argparse.Namespace) -> None:
    profile = read_profile(args.profile)
    target = Target(args.target_dir, profile.name)
    record = build_manifest(profile, stage_inputs("manifest", ManifestInputs, args), target)
    print(f"manifest: {len(record['artifacts'])} artifact(s) of {profile.name}, git {record['git_revision']} -> {target.manifest}")


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
