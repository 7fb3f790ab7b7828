"""Stage *tflite*: convert the trained model to one TF Lite artifact (ids in: float32, float16 weights or INT8; raw text in: INT8).

Reads the weights, the training log, ``vocab.txt``, ``labels.txt``, the validation
split with its token ids, the test split's token ids, the hyperparameters, the
model source, the target profile and, for a calibrated artifact, the calibration
stage's ``representative.npy``. Writes the artifact's ``.tflite``, its record
``<artifact>.json`` (converter settings, every operator with its version and
count (builtin, Flex or custom), which tensors stayed float, the validation-split
parity against the Keras model, the per-layer quantization error (INT8), and the
result of loading and invoking the model on each runtime the profile lists) and
``<artifact>.test_logits.npy``: its logits on the test split on TensorFlow's own
interpreter, which the runtime checks and the report compare with, so neither
has to load TensorFlow.

The artifact's interface (``edge_build.interfaces``) names the converter of the
conversion wing (``edge_build/convert/``) that makes the model, and how TensorFlow's
interpreter runs it here; this stage reads the inputs, calls the converter, writes
the metadata, gates the model and writes the record. A raw-text artifact
(``tflite_text_int8``) carries the tokenizer as tensorflow-text custom ops and Flex
ops, which TensorFlow's own interpreter here cannot run: its converter runs it on
the profile's runtime that can, in the runtime environment.

The build stops, and no ``.tflite`` is written, when the model needs Flex ops a
runtime cannot run, when a runtime cannot load or run it (an operator version it
lacks, a missing kernel, a crash), or when it strays from the Keras model beyond
the profile's tolerances: a converter can produce a weightless model without an
error, and only these checks keep such a model from shipping.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from edge_build import cli
from edge_build.artifacts import ARTIFACTS, logit_error
from edge_build.atomic import atomic_outputs
from edge_build.board.decision import recorded
from edge_build.config.profile import TargetProfile, read_profile
from edge_build.convert.gates import flex_refusal, required_preflights, validation_gate
from edge_build.convert.job import ConversionInputs, ConversionJob, Converted, load_job
from edge_build.convert.metadata import with_metadata
from edge_build.convert.operators import inspect_model
from edge_build.errors import StageError
from edge_build.model_source import check_weights_loaded
from edge_build.provenance import package_versions
from edge_build.runtime_envs import environment_in_use
from edge_build.stage_files import add_files, parsed, stage_inputs

#: The conversion wing: an interface's converter and host runner are modules of it (``Interface.converter``).
WING = "edge_build.convert"


def wing_function(name: str):
    """``module:function`` of the conversion wing."""
    module, _, function = name.partition(":")
    return getattr(importlib.import_module(f"{WING}.{module}"), function)


def convert(
    artifact: str, inputs: ConversionInputs, profile: TargetProfile, outputs: Mapping[str, Path], runtime_env: Path, writer_env: Path
) -> dict:
    """Convert, check and write ``outputs`` (the stage's declared ``model``, ``record`` and ``test_logits``); return the record.

    ``runtime_env`` is the profile's runtime environment (``env.json``): each runtime
    that checks this artifact loads and invokes the model there before anything is
    written. A required runtime that cannot stops the build; an optional one is recorded.
    ``writer_env`` is the metadata writer's environment (``stacks.writer_environment``).
    """
    row = ARTIFACTS[artifact]
    if row.format != "tflite":
        tflite = ", ".join(a for a, r in ARTIFACTS.items() if r.format == "tflite")
        raise StageError(f"{artifact}: not a TF Lite artifact (the tflite stage makes {tflite})")
    # Held for the whole conversion: no other build replaces the environment while its runtimes check this model.
    with environment_in_use(runtime_env) as environment:
        job = load_job(artifact, inputs, profile, environment, f"{outputs['model'].name} for {profile.source}")
        converted = wing_function(f"{row.interface_row.converter}:convert")(job)
        content, metadata = with_metadata(
            converted.content, artifact, profile, converted.vocab_text or inputs.vocab.read_text(encoding="utf-8"), job.labels, writer_env, job.where
        )
        return checked_and_written(job, converted, content, metadata, outputs)


def checked_and_written(job: ConversionJob, converted: Converted, content: bytes, metadata: dict, outputs: Mapping[str, Path]) -> dict:
    """The gates every model passes before it is written (no Flex op a runtime lacks, the Keras model's weights loaded,
    validation parity, every required runtime runs it), then the model, its test logits and its record."""
    artifact, profile, where = job.artifact, job.profile, job.where
    ops = inspect_model(content)
    runtimes = profile.runtimes_for(artifact)
    refusal = flex_refusal(ops, runtimes)
    if refusal:
        raise StageError(f"{where}: {refusal}")
    # After the Flex check, which is about the graph alone: a partly loaded model would convert fine and be wrong.
    check_weights_loaded(job.reference, job.val_labels, job.files.train_log, job.files.weights)
    runner = job.row.interface_row.host_runner
    if runner is not None:
        # Run on the bytes that ship: the metadata is a zip after the graph, which it leaves alone.
        run = wing_function(runner)
        converted.val_logits, converted.test_logits = run(content, job.val_ids), run(content, job.test_ids)
    figures, judged = validation_gate(artifact, job.reference, converted.val_logits, job.val_labels, profile, where)
    record = {
        "artifact": artifact,
        "target": profile.name,
        "size_bytes": len(content),
        "sha256": hashlib.sha256(content).hexdigest(),
        "converter": {
            "tensorflow": package_versions("tensorflow")["tensorflow"],
            "inference_output_type": "float32",
            "per_channel_dense": profile.per_channel_dense if job.row.precision == "int8" else None,
            "calibration_samples": int(len(job.representative)) if job.representative is not None else 0,
            **converted.converter,  # the chosen recipe's own settings
        },
        **ops,
        "validation_parity": figures,
        "validation_gates": recorded(judged),
        **converted.record,
        "metadata": metadata,
    }
    model_out, record_out, logits_out = outputs["model"], outputs["record"], outputs["test_logits"]
    with atomic_outputs(model_out, record_out, logits_out) as (model_tmp, record_tmp, logits_tmp):
        model_tmp.write_bytes(content)
        with open(logits_tmp, "wb") as handle:
            np.save(handle, converted.test_logits.astype(np.float32))
        record["runtimes"] = required_preflights(model_tmp, model_out, runtimes, job.environment, where)
        record_tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.stages.tflite", description=__doc__.splitlines()[0])
    parser.add_argument("--artifact", choices=[a for a, row in ARTIFACTS.items() if row.format == "tflite"], required=True)
    add_files("tflite", parser)
    return parser


def drive(args: argparse.Namespace) -> None:
    profile = read_profile(args.profile)
    inputs = stage_inputs("tflite", ConversionInputs, args)
    record = convert(args.artifact, inputs, profile, parsed("tflite", args), args.runtime_env, args.writer_env)
    figures = record["validation_parity"]
    flex = ", ".join(record["flex_ops"]) or "none"
    runtimes = ", ".join(f"{name} {r['version']} ok" if r["ok"] else f"{name}: {r['error']}" for name, r in record["runtimes"].items())
    print(
        f"tflite: {args.model} {record['size_bytes'] / 1e6:.2f} MB; val top-1 agreement {figures['top1_agreement']:.4f}, "
        f"max |Δlogit| {logit_error(args.artifact, figures['max_abs_logit_error'])}; Flex ops: {flex}; {runtimes}"
        + "".join(f"; undecided: {g['message']}" for g in record["validation_gates"] if g["verdict"] == "undecided")
    )


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
