"""Stage *manifest*: ``<target>/manifest.json``, each artifact of a target and everything it came from.

Reads the target's artifacts, ``tflite_*.json``, ``eval.json`` and ``device_checks.json``,
the data and calibration summaries, the training log, the vocabulary and the
profile; writes ``manifest.json``: per artifact its SHA-256 and size (per file for
SavedModels), the TensorFlow / tensorflow-text / converter / runtime versions, the
git revision, the dataset and calibration-set checksums, the hyperparameters and
the metrics that do not depend on the machine (accuracy and parity, not latency),
so two builds of the same inputs write the same bytes. The bundle's
``manifest.json`` is this record plus what the board needs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from edge_build import cli
from edge_build.atomic import write_json
from edge_build.config import ARTIFACTS, TargetProfile, load_profile
from edge_build.errors import StageError
from edge_build.provenance import build_timestamp, git_revision, package_versions, sha256_file

OUTPUT_FILE = "manifest.json"


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StageError(f"{path}: not found (run the stage that writes it first)") from None
    except json.JSONDecodeError as exc:
        raise StageError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None


def file_record(path: Path) -> dict:
    return {"sha256": sha256_file(path), "size_bytes": path.stat().st_size}


def artifact_record(target_dir: Path, name: str) -> dict:
    """A file's SHA-256 and size; for a directory, those of every file and a digest of that listing."""
    relative = ARTIFACTS[name].path
    path = target_dir / relative
    if path.is_file():
        return {"path": relative, **file_record(path)}
    if not path.is_dir():
        raise StageError(f"{path}: artifact not found (run the export stage first)")
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


def converter_settings(target_dir: Path, profile: TargetProfile) -> dict:
    """Each TF Lite artifact's converter settings, without the time conversion took."""
    settings = {}
    for name in profile.tflite_artifacts:
        converter = read_json(target_dir / f"{name}.json")["converter"]
        settings[name] = {key: value for key, value in converter.items() if key != "seconds"}
    return settings


def machine_independent_metrics(target_dir: Path, profile: TargetProfile) -> dict:
    evaluation = read_json(target_dir / "eval.json")["artifacts"]
    checks = read_json(target_dir / "device_checks.json")["checks"] if profile.tflite_artifacts else {}
    metrics = {}
    for name in profile.artifacts:
        metrics[name] = {"test_accuracy": evaluation[name]["accuracy"]}
        if name in checks:
            metrics[name]["device_parity"] = {
                runtime: {key: result["parity"][key] for key in ("top1_agreement", "max_abs_logit_error", "accuracy")}
                for runtime, result in checks[name].items()
                if result["status"] == "ok"
            }
    return metrics


def build_manifest(profile: TargetProfile, target_dir: Path, data_dir: Path, model_dir: Path, vocab: Path, calibration_summary: Path | None) -> dict:
    data_summary = read_json(data_dir / "summary.json")
    train_log = read_json(model_dir / "train_log.json")
    record = {
        "target": profile.name,
        "arch": profile.arch,
        "build_timestamp": build_timestamp(),
        "git_revision": git_revision(),
        "versions": package_versions("tensorflow", "tensorflow-text", "keras", "numpy", *(r.name for r in profile.runtimes)),
        "dataset": {key: data_summary[key] for key in ("dataset", "sha256", "examples", "labels", "fractions", "seed")},
        "hyperparameters": train_log["hyperparameters"],
        "training": {
            "weights_sha256": sha256_file(model_dir / "model.weights.h5"),
            "best_epoch": train_log["best_epoch"],
            "best_val_accuracy": train_log["best_val_accuracy"],
        },
        "vocab_sha256": sha256_file(vocab),
        "artifacts": {name: artifact_record(target_dir, name) for name in profile.artifacts},
        "converter": converter_settings(target_dir, profile),
        "metrics": machine_independent_metrics(target_dir, profile),
    }
    if calibration_summary is not None:
        calibration = read_json(calibration_summary)
        record["calibration"] = {key: calibration[key] for key in ("ids_sha256", "samples", "drawn", "field_samples", "sequence_length")}
    write_json(target_dir / OUTPUT_FILE, record)
    return record


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.manifest", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", type=Path, required=True, help="targets/<name>.toml")
    parser.add_argument("--target-dir", type=Path, required=True, help="the target's artifacts; manifest.json goes here")
    parser.add_argument("--data-dir", type=Path, required=True, help="the data stage's output directory (summary.json)")
    parser.add_argument("--model-dir", type=Path, required=True, help="the train stage's output directory")
    parser.add_argument("--vocab", type=Path, required=True, help="vocab.txt")
    parser.add_argument("--calibration-summary", type=Path, help="the calibrate stage's summary.json (INT8 targets)")
    return parser


def drive(args: argparse.Namespace) -> None:
    profile = load_profile(args.profile.parent, args.profile.stem)
    record = build_manifest(profile, args.target_dir, args.data_dir, args.model_dir, args.vocab, args.calibration_summary)
    print(f"manifest: {len(record['artifacts'])} artifact(s) of {profile.name}, git {record['git_revision']} -> {args.target_dir / OUTPUT_FILE}")


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
