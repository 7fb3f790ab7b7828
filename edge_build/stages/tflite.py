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

A raw-text artifact (``tflite_text_int8``, ``text_model.py``) carries the tokenizer
as tensorflow-text custom ops and Flex ops, which TensorFlow's own interpreter
here cannot run: its validation parity, its test logits and the check that its
token ids equal the tokenize stage's on every validation and test text all run
on the profile's runtime that can run it, in the runtime environment. The record
adds each conversion attempt, which path every op took and why, and the
calibration route.

The build stops, and no ``.tflite`` is written, when the model needs Flex ops a
runtime cannot run, when a runtime cannot load or run it (an operator version it
lacks, a missing kernel, a crash), or when it strays from the Keras model beyond
the profile's tolerances: a converter can produce a weightless model without an
error, and only these checks keep such a model from shipping.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import re
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from edge_build import cli, parity
from edge_build.artifacts import ARTIFACTS, logit_error
from edge_build.atomic import atomic_outputs
from edge_build.board.parity import DERIVED, pack_texts
from edge_build.board.runtime import RUNTIME_VERSIONS
from edge_build.config.profile import TargetProfile, read_profile
from edge_build.errors import StageError
from edge_build.isolated import failure_line, run_isolated
from edge_build.model_metadata import metadata_spec
from edge_build.model_source import check_weights_loaded, load_trained_model, trained_hyperparameters
from edge_build.provenance import build_timestamp, git_revision, package_versions
from edge_build.quantization_ladder import Verdict, attempt_table, climb, quantization_errors
from edge_build.records import read_labels, read_rows
from edge_build.runtime_envs import environment_in_use, launcher, unavailable
from edge_build.stacks import RuntimeSpec
from edge_build.stage_files import add_files, parsed
from edge_build.tasks_model import TENSOR_NAMES, mediapipe_vocabulary, representative_dataset, run_tasks_tflite, tasks_model
from edge_build.text_model import STEPS, calibrated_ranges, converter_for, ops_named_in, quantize_with_ranges, text_functions
from edge_build.tflite_host import converter_settings, make_converter, quiet_tensorflow_lite, run_tflite
from edge_build.tfrecord import read_split

PREFLIGHT_TIMEOUT_S = 120
TEXTS_TIMEOUT_S = 600
VALIDATION_TIMEOUT_S = 600
METADATA_TIMEOUT_S = 120


@dataclasses.dataclass(frozen=True)
class ConversionInputs:
    model_source: Path
    hparams: Path
    vocab: Path
    weights: Path
    train_log: Path
    labels: Path
    val_records: Path
    val_ids: Path
    test_ids: Path
    representative: Path | None = None
    test_records: Path | None = None
    train_records: Path | None = None


def inspect_model(content: bytes) -> dict:
    """Operators (with versions and counts), Flex and custom ops, and tensor types, read from the flatbuffer."""
    from tensorflow.lite.python import schema_py_generated as schema

    model = schema.ModelT.InitFromPackedBuf(bytearray(content), 0)
    op_names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    type_names = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
    operators: dict[tuple, int] = {}
    for subgraph in model.subgraphs:
        for op in subgraph.operators:
            code = model.operatorCodes[op.opcodeIndex]
            builtin = max(code.builtinCode, code.deprecatedBuiltinCode)
            name = code.customCode.decode() if code.customCode else op_names[builtin]
            kind = "builtin" if not code.customCode else ("flex" if name.startswith("Flex") else "custom")
            operators[(name, code.version, kind)] = operators.get((name, code.version, kind), 0) + 1
    tensors = [t for subgraph in model.subgraphs for t in subgraph.tensors]

    def is_constant(tensor) -> bool:
        buffer = model.buffers[tensor.buffer]
        return buffer.data is not None and len(buffer.data) > 0

    float_ops: dict[str, int] = {}
    for subgraph in model.subgraphs:
        for op in subgraph.operators:
            code = model.operatorCodes[op.opcodeIndex]
            outputs = [subgraph.tensors[i] for i in op.outputs if i >= 0]
            if not code.customCode and any(type_names[t.type] == "FLOAT32" and not is_constant(t) for t in outputs):
                name = op_names[max(code.builtinCode, code.deprecatedBuiltinCode)]
                float_ops[name] = float_ops.get(name, 0) + 1
    tensor_types: dict[str, int] = {}
    for tensor in tensors:
        tensor_types[type_names[tensor.type]] = tensor_types.get(type_names[tensor.type], 0) + 1
    return {
        "operators": [{"op": name, "version": version, "kind": kind, "count": count} for (name, version, kind), count in sorted(operators.items())],
        "flex_ops": sorted({name for name, _, kind in operators if kind == "flex"}),
        "custom_ops": sorted({name for name, _, kind in operators if kind == "custom"}),
        "tensor_types": dict(sorted(tensor_types.items())),
        "float_ops": dict(sorted(float_ops.items())),
        "float_activations": sorted(t.name.decode() for t in tensors if type_names[t.type] == "FLOAT32" and not is_constant(t)),
        "float_constants": sorted(t.name.decode() for t in tensors if type_names[t.type] == "FLOAT32" and is_constant(t)),
    }


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


def run_texts(model_path: Path, runtime: str, environment: dict, texts: list[bytes], scratch: Path) -> tuple[np.ndarray, np.ndarray]:
    """A raw-text model's logits and token ids for ``texts``, run by ``runtime`` in its runtime environment."""
    texts_file, out_file = scratch / "texts.npz", scratch / "outputs.npz"
    with open(texts_file, "wb") as handle:
        np.savez(handle, **pack_texts(texts))
    python, variables = launcher(environment)
    command = [*python, "-m", "edge_build.board.texts", runtime, str(model_path), str(texts_file), str(out_file)]
    result, abnormal = run_isolated(command, TEXTS_TIMEOUT_S, variables)
    if abnormal or result.returncode != 0:
        raise StageError(
            f"{runtime} could not run the raw-text model on {len(texts)} texts: {abnormal or (result.stderr.strip().splitlines() or [''])[-1]}"
        )
    with np.load(out_file, allow_pickle=False) as outputs:
        return outputs["logits"], outputs["token_ids"]


def first_id_mismatch(split: str, got: np.ndarray, expected: np.ndarray, vocab: list[str]) -> str | None:
    """The first example whose in-model token ids differ from the tokenize stage's, described; None when all match."""
    differing = np.nonzero((got != expected).any(axis=1))[0]
    if not len(differing):
        return None
    example = int(differing[0])
    position = int(np.nonzero(got[example] != expected[example])[0][0])

    def token(i: int) -> str:
        return f"{i} ({vocab[i]!r})" if 0 <= i < len(vocab) else str(i)

    return (
        f"{len(differing)} of {len(got)} {split} texts tokenize differently in the model; the first is {split} example {example}: "
        f"token {position} is {token(int(got[example, position]))}, the training tokenizer gives {token(int(expected[example, position]))}"
    )


def op_path_ladder(text_fn, model, profile: TargetProfile, runtime: str, environment: dict, scratch: Path, where: str) -> tuple[int, list[dict]]:
    """Try builtins, then custom ops, then Flex; the first step whose float model ``runtime`` loads and runs, and every attempt."""
    from tensorflow.lite.python.convert import ConverterError

    attempts: list[dict] = []
    for step, title in enumerate(STEPS):
        if step == len(STEPS) - 1 and not profile.quantization.select_tf_ops:
            raise StageError(
                f"{where}: {attempts[-1]['reason']}, and the SELECT_TF_OPS fallback is off (allowed: select_tf_ops = true in [quantization])"
            )
        try:
            with quiet_tensorflow_lite():
                content = converter_for(text_fn, model, step).convert()
        except ConverterError as exc:
            reason = f"the converter found no TF Lite builtin for {', '.join(ops_named_in(str(exc)))}"
            attempts.append({"step": title, "ok": False, "reason": reason, "custom_ops": [], "flex_ops": []})
            continue
        ops = inspect_model(content)
        probe_model = scratch / f"step{step}.tflite"
        probe_model.write_bytes(content)
        probe = preflight(probe_model, runtime, environment)
        reason = "loads and runs" if probe["ok"] else probe["error"]
        attempts.append(
            {
                "step": title,
                "ok": probe["ok"],
                "reason": f"{runtime} {probe.get('version') or ''}: {reason}",
                "custom_ops": ops["custom_ops"],
                "flex_ops": ops["flex_ops"],
            }
        )
        if probe["ok"]:
            return step, attempts
    raise StageError(f"{where}: no op path gives a model {runtime} runs: {'; '.join(a['step'] + ': ' + a['reason'] for a in attempts)}")


def op_paths(ops: dict, attempts: list[dict]) -> dict:
    """Which path each op of the final model took, and why (read from the attempts that failed before it)."""
    custom_step = next((a for a in attempts if a["step"] == STEPS[1]), None)
    unresolved = set(re.findall(r"unresolved custom op: (\w+)", custom_step["reason"])) if custom_step else set()
    tried_as_custom = set(custom_step["custom_ops"]) if custom_step else set()

    def why_flex(op: str) -> str:
        name = op.removeprefix("Flex")
        if name in unresolved:
            return "no TF Lite builtin and no tensorflow-text kernel: the runtime refused it as a custom op"
        if name in tried_as_custom:
            return "no TF Lite builtin; with SELECT_TF_OPS on, the converter takes Flex for every op on the Flex allow-list"
        return "no TF Lite builtin"

    return {
        "builtin": sorted({o["op"] for o in ops["operators"] if o["kind"] == "builtin"}),
        "custom": {op: "tensorflow-text's TF Lite kernel (not on the Flex allow-list)" for op in ops["custom_ops"]},
        "flex": {op: why_flex(op) for op in ops["flex_ops"]},
    }


@dataclasses.dataclass
class Converted:
    """A converted model with what its record says about the conversion, and its logits on both splits (ids models: after the Flex check)."""

    content: bytes
    converter: dict
    record: dict
    val_logits: np.ndarray | None = None
    test_logits: np.ndarray | None = None
    #: The vocabulary its metadata packs, where it is not the build's (a Tasks-ready model's has aliases).
    vocab_text: str | None = None


def convert_float_model(model, precision: str, profile: TargetProfile) -> Converted:
    converter = make_converter(model, precision, profile, None)
    started = time.perf_counter()
    with quiet_tensorflow_lite():
        content = converter.convert()
    settings = {
        "seconds": round(time.perf_counter() - started, 3),
        **converter_settings(converter),
        **({"supported_types": [t.name for t in converter.target_spec.supported_types]} if converter.target_spec.supported_types else {}),
    }
    return Converted(content, settings, {})


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


def gate_figures(figures: dict) -> dict:
    return {
        "examples": figures["examples"],
        "top1_agreement": figures["top1_agreement"],
        "accuracy_drop": DERIVED["accuracy_drop"](figures),
    }


def ladder_judge(artifact: str, reference: np.ndarray, val_ids: np.ndarray, val_labels: np.ndarray, profile: TargetProfile, environment: dict):
    """The gates a recipe's model must pass: no Flex op a runtime lacks, and the artifact's parity on the validation split,
    on TensorFlow's interpreter and on every required runtime (which must load and run it)."""

    def judge(content: bytes) -> Verdict:
        ops = inspect_model(content)
        refusal = flex_refusal(ops, profile.runtimes_for(artifact))
        if refusal:
            return Verdict({}, [refusal], ops["float_ops"])
        val_logits = run_tflite(content, val_ids)
        figures, problems = {"tf.lite": parity.compare(reference, val_logits, val_labels)}, []
        with tempfile.TemporaryDirectory() as scratch:
            model_file, golden = Path(scratch) / "candidate.tflite", Path(scratch) / "validation.npz"
            model_file.write_bytes(content)
            with open(golden, "wb") as handle:
                np.savez(handle, ids=val_ids, labels=val_labels, reference_logits=reference.astype(np.float32))
            for runtime in (r for r in profile.runtimes_for(artifact) if r.required):
                result, error = validation_on_runtime(model_file, runtime.name, environment, golden, Path(scratch))
                if error:
                    problems.append(f"{runtime.name} cannot run it: {error}")
                else:
                    figures[f"{runtime.name} {result['runtime_version']}"] = result["parity"]
        problems += [f"{place}: {breach}" for place, found in figures.items() for breach in parity.breaches(artifact, found, profile.tolerances)]
        return Verdict({place: gate_figures(found) for place, found in figures.items()}, problems, ops["float_ops"], val_logits)

    return judge


def quantize_by_ladder(artifact: str, model, profile: TargetProfile, representative, judge, where: str) -> Converted:
    """The first recipe of the profile's ladder whose model passes every gate, with the attempts and full INT8's per-layer errors."""
    errors = quantization_errors(make_converter(model, "int8", profile, representative), representative)
    climbed = climb(model, profile, representative, errors, judge)
    attempts = [attempt.record() for attempt in climbed.attempts]
    if climbed.recipe is None:
        print(attempt_table(climbed.attempts), file=sys.stderr)
        raise StageError(
            f"{where}: no recipe of the quantization ladder passes every gate ({len(attempts)} in [quantization] recipes: the table above; "
            "allowed: more recipes there, or looser int8 tolerances)"
        )
    record = {"quantization_errors": errors, "quantization_ladder": {"recipe": climbed.recipe, "attempts": attempts}}
    return Converted(climbed.content, climbed.converter, record, climbed.val_logits)


def convert_text_model(
    model,
    inputs: ConversionInputs,
    hparams,
    profile: TargetProfile,
    representative,
    environment: dict,
    val_ids: np.ndarray,
    test_ids: np.ndarray,
    where: str,
) -> Converted:
    """The raw-text model: op-path ladder, INT8 with the ids model's ranges, then its own token ids checked on every validation and test text."""
    if inputs.test_records is None:
        raise StageError(f"{where}: a raw-text model needs the test split's texts (--test)")
    artifact_runtimes = profile.runtimes_for("tflite_text_int8")
    runtime = artifact_runtimes[0].name
    text_fn, ids_fn = text_functions(model, inputs.vocab, hparams.tokenizer.lower_case, hparams.tokenizer.sequence_length)
    with tempfile.TemporaryDirectory() as scratch:
        started = time.perf_counter()
        step, attempts = op_path_ladder(text_fn, model, profile, runtime, environment, Path(scratch), where)
        with quiet_tensorflow_lite():
            ranges = calibrated_ranges(ids_fn, model, representative, profile.per_channel_dense)
            content, ranged = quantize_with_ranges(converter_for(text_fn, model, step), ranges, profile.per_channel_dense)
        seconds = time.perf_counter() - started
        model_file = Path(scratch) / "model.tflite"
        model_file.write_bytes(content)
        val_texts, _ = read_split(inputs.val_records)
        test_texts, _ = read_split(inputs.test_records)
        # One run for both splits: the runtime's start (importing TensorFlow) is most of it.
        logits, model_ids = run_texts(model_file, runtime, environment, val_texts + test_texts, Path(scratch))
        val_logits, test_logits = logits[: len(val_texts)], logits[len(val_texts) :]
        val_model_ids, test_model_ids = model_ids[: len(val_texts)], model_ids[len(val_texts) :]
    vocab = inputs.vocab.read_text(encoding="utf-8").splitlines()
    for split, got, expected in (("validation", val_model_ids, val_ids), ("test", test_model_ids, test_ids)):
        mismatch = first_id_mismatch(split, got, expected, vocab)
        if mismatch:
            raise StageError(f"{where}: the in-model tokenizer does not give the training tokenizer's ids: {mismatch}")
    ops = inspect_model(content)
    version = next(a["reason"].split(":")[0] for a in attempts if a["ok"])
    record = {
        "conversion_path": attempts,
        "op_paths": op_paths(ops, attempts),
        "calibration": {
            "route": "activation ranges carried over from the ids model calibrated on representative.npy",
            "why": (
                "TF 2.21's calibrator runs the float model in an interpreter without the Flex delegate, so it cannot run this model; "
                "the classifier part is the ids model's graph and the tokenizer part has no float tensors, so every float activation "
                "takes the range the ids model's calibration measured on the same representative set, matched by tensor name"
            ),
            "samples": int(len(representative)),
            "float_activations": ranged,
        },
        "token_ids_check": {"runtime": version, "examples": int(len(val_ids) + len(test_ids)), "splits": ["validation", "test"], "mismatches": 0},
        "test_logits_runtime": version,
    }
    settings = {
        "seconds": round(seconds, 3),
        "optimizations": ["DEFAULT"],
        "supported_ops": ["TFLITE_BUILTINS", *(["SELECT_TF_OPS"] if step >= 2 else [])],
        "allow_custom_ops": step >= 1,
    }
    return Converted(content, settings, record, val_logits, test_logits)


def convert_tasks_model(
    model, profile: TargetProfile, representative: np.ndarray, sequence_length: int, vocab: Path, train_texts: list[bytes]
) -> Converted:
    """The Tasks-ready model (``tasks_model.py``), full INT8 calibrated on ``representative.npy`` in MediaPipe's layout, with
    MediaPipe's vocabulary (the training tokens and the aliases, those of the training texts' words included) for its metadata."""
    import tensorflow as tf

    vocab_text, remap = mediapipe_vocabulary(vocab, train_texts)
    converter = make_converter(tasks_model(model, sequence_length, remap), "int8", profile, None)
    converter.representative_dataset = representative_dataset(representative)
    converter.inference_output_type = tf.float32  # MediaPipe refuses an int8 output tensor
    started = time.perf_counter()
    with quiet_tensorflow_lite():
        content = converter.convert()
    settings = {"seconds": round(time.perf_counter() - started, 3), **converter_settings(converter)}
    layout = {
        "inputs": TENSOR_NAMES,
        "layout": "MediaPipe feeds [CLS] s1 ... sn [SEP] 0 ...; [CLS] and [SEP] are not in the vocabulary and look up to 0, so the "
        "model multiplies the ids by the mask and drops position 0: the classifier sees the tokenize stage's ids, at most "
        f"{sequence_length - 2} WordPieces",
        "output": "softmax scores (float32)",
        "aliases": int(np.count_nonzero(remap != np.arange(len(remap)))),  # a training id maps to itself, an alias elsewhere
        "aliases_why": "MediaPipe's tokenizer lowercases ASCII only: each punctuation mark or symbol that training's normalization "
        "turns into one token (a full-width comma into ','), and each WordPiece of the training texts' non-ASCII words as MediaPipe "
        "spells it ('Últ' for 'ult'), is added to its vocabulary and mapped to that token's id in the model",
    }
    return Converted(content, settings, {"tasks_model": layout}, vocab_text=vocab_text)


def metadata_names(content: bytes, kind: str) -> tuple[list[str], list[str]]:
    """The names the metadata gives the model's inputs and outputs, in the model's order: a Tasks-ready model's inputs by their
    tensor names (how MediaPipe's writer pairs them), an ids or raw-text model's by what they hold."""
    from tensorflow.lite.python import schema_py_generated as schema

    if kind == "tasks":
        return list(TENSOR_NAMES.values()), ["scores"]
    (subgraph,) = schema.ModelT.InitFromPackedBuf(bytearray(content), 0).subgraphs
    outputs = ["token_ids" if subgraph.tensors[i].type == schema.TensorType.INT32 else "logits" for i in subgraph.outputs]
    return ["input_ids" if kind == "ids" else "text"], outputs


def with_metadata(
    content: bytes, artifact: str, profile: TargetProfile, vocab_text: str, labels: list[str], writer_env: Path, where: str
) -> tuple[bytes, dict]:
    """The model with its TF Lite metadata (vocabulary, labels, name, version), written by MediaPipe's writer in its environment
    (``edge_build.model_metadata``), and that metadata as MediaPipe's displayer shows it."""
    row = ARTIFACTS[artifact]
    inputs, outputs = metadata_names(content, row.inputs)
    # The revision and time the manifest records: SConstruct pins the time to the last commit's, so two builds give the same bytes.
    version = f"{git_revision() or 'no git revision'}, built {build_timestamp()}"
    with environment_in_use(writer_env) as environment, tempfile.TemporaryDirectory() as scratch:
        # The writer packs the file under its own name: MediaPipe and the board look for vocab.txt.
        vocab = Path(scratch) / "vocab.txt"
        vocab.write_text(vocab_text, encoding="utf-8")
        spec = metadata_spec(row.inputs, f"{artifact} ({profile.name})", row.description, version, vocab, labels, inputs, outputs)
        reason = unavailable(environment, "mediapipe")
        if reason:
            raise StageError(f"{where}: MediaPipe's metadata writer cannot run: {reason}")
        model_in, model_out, spec_file, shown = (Path(scratch) / name for name in ("in.tflite", "out.tflite", "spec.json", "metadata.json"))
        model_in.write_bytes(content)
        spec_file.write_text(json.dumps(spec), encoding="utf-8")
        python, variables = launcher(environment)
        command = [*python, "-m", "edge_build.model_metadata", str(model_in), str(model_out), str(spec_file), str(shown)]
        done, abnormal = run_isolated(command, METADATA_TIMEOUT_S, variables)
        if abnormal or done.returncode != 0:
            raise StageError(f"{where}: MediaPipe's metadata writer failed: {abnormal or failure_line(done)}")
        return model_out.read_bytes(), json.loads(shown.read_text(encoding="utf-8"))


def convert(
    artifact: str, inputs: ConversionInputs, profile: TargetProfile, outputs: Mapping[str, Path], runtime_env: Path, writer_env: Path
) -> dict:
    """Convert, check and write ``outputs`` (the stage's declared ``model``, ``record`` and ``test_logits``); return the record.

    ``runtime_env`` is the profile's runtime environment (``env.json``): each runtime
    that checks this artifact loads and invokes the model there before anything is
    written. A required runtime that cannot stops the build; an optional one is recorded.
    ``writer_env`` is the metadata writer's environment (``stacks.writer_environment``).
    """
    # Held for the whole conversion: no other build replaces the environment while its runtimes check this model.
    with environment_in_use(runtime_env) as environment:
        return convert_in(environment, artifact, inputs, profile, outputs, writer_env)


def convert_in(
    environment: dict, artifact: str, inputs: ConversionInputs, profile: TargetProfile, outputs: Mapping[str, Path], writer_env: Path
) -> dict:
    """``convert``, with the runtime environment's record."""
    row = ARTIFACTS[artifact]
    if row.kind != "tflite":
        raise StageError(
            f"{artifact}: not a TF Lite artifact (the tflite stage makes {', '.join(a for a, r in ARTIFACTS.items() if r.kind == 'tflite')})"
        )
    precision = row.precision
    model_out, report_out, logits_out = outputs["model"], outputs["record"], outputs["test_logits"]
    hparams = trained_hyperparameters(inputs.hparams, inputs.train_log)
    labels = read_labels(inputs.labels)
    model = load_trained_model(inputs.model_source, hparams, inputs.hparams, inputs.vocab, len(labels), inputs.weights)
    _, val_labels = read_split(inputs.val_records)
    val_ids = read_rows(inputs.val_ids, len(val_labels))
    reference = model(val_ids, training=False).numpy()
    test_ids = np.load(inputs.test_ids, allow_pickle=False)
    if test_ids.ndim != 2 or test_ids.shape[1] != hparams.tokenizer.sequence_length:
        raise StageError(f"{inputs.test_ids}: expected int32 ids [N, {hparams.tokenizer.sequence_length}], found {test_ids.shape} (run scons again)")

    representative = None
    if row.calibrated:
        if inputs.representative is None:
            raise StageError(f"{artifact} needs the calibration stage's representative.npy (--representative)")
        representative = np.load(inputs.representative)
        if representative.ndim != 2 or representative.shape[1] != hparams.tokenizer.sequence_length or not len(representative):
            raise StageError(f"{inputs.representative}: expected int32 ids [N, {hparams.tokenizer.sequence_length}], found {representative.shape}")
    where = f"{model_out.name} for {profile.source}"
    runtimes = profile.runtimes_for(artifact)
    if row.inputs == "text":
        converted = convert_text_model(model, inputs, hparams, profile, representative, environment, val_ids, test_ids, where)
    elif row.inputs == "tasks":
        if not hparams.tokenizer.lower_case:
            raise StageError(
                f"{where}: {artifact} needs lower_case = true in [tokenizer] of {inputs.hparams}: MediaPipe's BertTokenizer always lowercases"
            )
        if inputs.train_records is None:
            raise StageError(f"{where}: {artifact} needs the training split's texts for its vocabulary's aliases (--train)")
        train_texts, _ = read_split(inputs.train_records)
        converted = convert_tasks_model(model, profile, representative, hparams.tokenizer.sequence_length, inputs.vocab, train_texts)
    elif row.calibrated:
        judge = ladder_judge(artifact, reference, val_ids, val_labels, profile, environment)
        converted = quantize_by_ladder(artifact, model, profile, representative, judge, where)
    else:
        converted = convert_float_model(model, precision, profile)
    vocab_text = converted.vocab_text or inputs.vocab.read_text(encoding="utf-8")
    content, metadata = with_metadata(converted.content, artifact, profile, vocab_text, labels, writer_env, where)
    if row.inputs != "text":
        # Run again on the bytes that ship: the metadata is a zip after the graph, which it leaves alone.
        converted.val_logits = converted.test_logits = None

    ops = inspect_model(content)
    refusal = flex_refusal(ops, runtimes)
    if refusal:
        raise StageError(f"{where}: {refusal}")
    # After the Flex check, which is about the graph alone: a partly loaded model would convert fine and be wrong.
    check_weights_loaded(reference, val_labels, inputs.train_log, inputs.weights)
    # An ids or Tasks-ready model runs on TensorFlow's own interpreter here (a Tasks-ready one fed as MediaPipe feeds it).
    run = run_tasks_tflite if row.inputs == "tasks" else run_tflite
    if converted.val_logits is None:
        converted.val_logits = run(content, val_ids)
    if converted.test_logits is None:
        converted.test_logits = run(content, test_ids)
    figures = parity.compare(reference, converted.val_logits, val_labels)
    judged = parity.judge(artifact, figures, profile.tolerances)
    broken = parity.messages(judged, "fail")
    if broken:
        print(parity.failure_table([(artifact, "tf.lite, validation split", problem) for problem in broken]), file=sys.stderr)
        raise StageError(f"{where}: on the validation split against the Keras model, {'; '.join(broken)}")

    report = {
        "artifact": artifact,
        "target": profile.name,
        "size_bytes": len(content),
        "sha256": hashlib.sha256(content).hexdigest(),
        "converter": {
            "tensorflow": package_versions("tensorflow")["tensorflow"],
            "inference_output_type": "float32",
            "per_channel_dense": profile.per_channel_dense if precision == "int8" else None,
            "calibration_samples": int(len(representative)) if representative is not None else 0,
            **converted.converter,  # the chosen recipe's own settings
        },
        **ops,
        "validation_parity": figures,
        "validation_gates": parity.recorded(judged),
        **converted.record,
        "metadata": metadata,
    }
    with atomic_outputs(model_out, report_out, logits_out) as (model_tmp, report_tmp, logits_tmp):
        model_tmp.write_bytes(content)
        with open(logits_tmp, "wb") as handle:
            np.save(handle, converted.test_logits.astype(np.float32))
        results = {runtime.name: {**preflight(model_tmp, runtime.name, environment), "model": str(model_out)} for runtime in runtimes}
        failed = {r.name: results[r.name]["error"] for r in runtimes if r.required and not results[r.name]["ok"]}
        if failed:
            raise StageError(
                f"{where}: "
                + "; ".join(
                    " ".join(filter(None, (name, results[name].get("version")))) + f" cannot run it: {error}" for name, error in failed.items()
                )
            )
        report["runtimes"] = results
        report_tmp.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.stages.tflite", description=__doc__.splitlines()[0])
    parser.add_argument("--artifact", choices=[a for a, row in ARTIFACTS.items() if row.kind == "tflite"], required=True)
    add_files("tflite", parser)
    return parser


def drive(args: argparse.Namespace) -> None:
    profile = read_profile(args.profile)
    inputs = ConversionInputs(
        args.model_source,
        args.hparams,
        args.vocab,
        args.weights,
        args.train_log,
        args.labels,
        args.val,
        args.val_ids,
        args.test_ids,
        args.representative,
        args.test,
        args.train,
    )
    report = convert(args.artifact, inputs, profile, parsed("tflite", args), args.runtime_env, args.writer_env)
    figures = report["validation_parity"]
    flex = ", ".join(report["flex_ops"]) or "none"
    runtimes = ", ".join(f"{name} {r['version']} ok" if r["ok"] else f"{name}: {r['error']}" for name, r in report["runtimes"].items())
    print(
        f"tflite: {args.model} {report['size_bytes'] / 1e6:.2f} MB; val top-1 agreement {figures['top1_agreement']:.4f}, "
        f"max |Δlogit| {logit_error(args.artifact, figures['max_abs_logit_error'])}; Flex ops: {flex}; {runtimes}"
        + "".join(f"; undecided: {g['message']}" for g in report["validation_gates"] if g["verdict"] == "undecided")
    )


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
