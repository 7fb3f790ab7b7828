"""XLA in the exported SavedModel: TF Serving's warm-up requests, and a probe that watches XLA compile.

    python -m edge_build.xla probe SAVED_MODEL --calls serving_default:1 serving_default:8 --steady-runs 20 --out result.json
    python -m edge_build.xla probe SAVED_MODEL --replay-warmup --control CPU_SAVED_MODEL --out result.json

The probe loads the SavedModel in the process it runs in, which must have been
started with XLA's dump directory set (``run_probe`` starts it so): XLA writes one
``module_NNNN.*`` family of files for every module it compiles, whatever the backend
(CPU or GPU), so counting module numbers before and after a call tells exactly
what that call compiled. That is XLA's own documented output; the alternatives are
not: ``experimental_get_compiler_ir`` needs the Python ``tf.function``, which a
loaded SavedModel no longer has, and TensorFlow's XLA compilation counters are
C++ monitoring cells with no public reader.

A SavedModel's functions share one compilation cache per process: a signature
called after another at the same shape compiles nothing. Timings per signature
therefore come from a process per signature; a plain proof that each signature
compiles calls them in one process at shapes not seen before.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from edge_build import cli
from edge_build.errors import StageError
from edge_build.provenance import cpu_model
from edge_build.saved_model import SIGNATURE_INPUTS, SIGNATURES, WARMUP_FILE, load

#: Content does not matter to XLA, which compiles per shape; no data of the user's goes into the model.
WARMUP_TEXT = b"edge-build warm-up request"
#: The real call made after the replay must differ in content from the warm-up requests.
REAL_CALL_TEXT = b"a first real request after the warm-up"
PROBE_TIMEOUT_S = 600


def warmup_requests(sequence_length: int, batch_sizes: tuple[int, ...]) -> list:
    """``PredictionLog`` protos: both signatures at every batch size, smallest first."""
    import tensorflow as tf
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    logs = []
    for batch in sorted(batch_sizes):
        for signature in SIGNATURES:
            request = predict_pb2.PredictRequest(
                model_spec=model_pb2.ModelSpec(signature_name=signature),
                inputs={name: tf.make_tensor_proto(value) for name, value in call_inputs(signature, batch, sequence_length).items()},
            )
            logs.append(prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request)))
    return logs


def write_warmup_requests(path: Path, sequence_length: int, batch_sizes: tuple[int, ...]) -> None:
    """TF Serving's warm-up file: a TFRecord of serialized ``PredictionLog``s."""
    import tensorflow as tf

    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for log in warmup_requests(sequence_length, batch_sizes):
            writer.write(log.SerializeToString(deterministic=True))


def read_warmup_requests(path: Path) -> list[tuple[str, dict]]:
    """The warm-up file as ``(signature, {input name: numpy array})``, in file order."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    if not path.is_file():
        raise StageError(f"{path}: no warm-up file (the XLA export writes it)")
    requests = []
    for record in tf.data.TFRecordDataset(str(path)):
        request = prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
        requests.append((request.model_spec.signature_name, {name: tf.make_ndarray(proto) for name, proto in request.inputs.items()}))
    return requests


def compute_device() -> dict:
    """Where TensorFlow runs XLA here: its first GPU with name and compute capability, else XLA's CPU backend."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        details = tf.config.experimental.get_device_details(gpus[0])
        capability = details.get("compute_capability")
        return {
            "device": "/GPU:0",
            "backend": "gpu",
            "name": details.get("device_name", gpus[0].name),
            "compute_capability": ".".join(map(str, capability)) if capability else None,
        }
    return {"device": "/CPU:0", "backend": "cpu", "name": cpu_model(), "compute_capability": None}


def describe(device: dict) -> str:
    """One line naming where the figures were taken."""
    if device["backend"] == "gpu":
        return f"{device['device']} ({device['name']}, compute capability {device['compute_capability']})"
    return f"{device['device']} ({device['name']}): XLA's CPU backend, no GPU visible to TensorFlow"


def _compiled_modules(dump_dir: Path) -> set[str]:
    return {p.name.split(".", 1)[0] for p in dump_dir.iterdir() if p.name.startswith("module_")}


class _Watch:
    """Calls a loaded signature and reports what XLA compiled during the call and how long it took."""

    def __init__(self, loaded, dump_dir: Path, device: str):
        self.loaded, self.dump_dir, self.device = loaded, dump_dir, device

    def call(self, signature: str, inputs: dict) -> tuple[int, float]:
        import tensorflow as tf

        tensors = {name: tf.constant(value) for name, value in inputs.items()}
        function = self.loaded.signatures[signature]
        before = _compiled_modules(self.dump_dir)
        started = time.perf_counter()
        with tf.device(self.device):
            outputs = function(**tensors)
        _ = [tensor.numpy() for tensor in outputs.values()]  # wait for the result, not just the dispatch
        elapsed_ms = (time.perf_counter() - started) * 1e3
        return len(_compiled_modules(self.dump_dir) - before), elapsed_ms


def call_inputs(signature: str, batch: int, sequence_length: int, real: bool = False) -> dict:
    """A warm-up request's inputs at ``batch``; with ``real``, the same shapes with other content."""
    import numpy as np  # here: the report imports this module for describe() and loads no numpy

    if signature == "serving_default":
        value = np.array([REAL_CALL_TEXT if real else WARMUP_TEXT] * batch, dtype=object)
    else:
        value = np.full([batch, sequence_length], 1 if real else 0, dtype=np.int32)
    return {SIGNATURE_INPUTS[signature]: value}


def probe_calls(watch: _Watch, calls: list[tuple[str, int]], steady_runs: int, sequence_length: int) -> list[dict]:
    """Per ``(signature, batch)``, in order: modules compiled by the first call and its time, then ``steady_runs`` timed calls."""
    rows = []
    for signature, batch in calls:
        inputs = call_inputs(signature, batch, sequence_length)
        compiled, first_ms = watch.call(signature, inputs)
        steady = [watch.call(signature, inputs) for _ in range(steady_runs)]
        times = sorted(ms for _, ms in steady)
        rows.append(
            {
                "signature": signature,
                "batch": batch,
                "modules_compiled": compiled,
                "first_call_ms": first_ms,
                "steady_runs": steady_runs,
                "recompiled_in_steady_calls": sum(n for n, _ in steady),
                "steady_p50_ms": statistics.median(times) if times else None,
                "steady_min_ms": times[0] if times else None,
            }
        )
    return rows


def replay_warmup(watch: _Watch, saved_model: Path, sequence_length: int) -> dict:
    """TF Serving's warm-up, replayed: each request in file order, then one real call per signature and shape."""
    requests = read_warmup_requests(saved_model / WARMUP_FILE)
    replayed = []
    for signature, inputs in requests:
        compiled, elapsed_ms = watch.call(signature, inputs)
        replayed.append(
            {"signature": signature, "batch": int(next(iter(inputs.values())).shape[0]), "modules_compiled": compiled, "replay_ms": elapsed_ms}
        )
    real = []
    for signature, batch in sorted({(r["signature"], r["batch"]) for r in replayed}):
        compiled, elapsed_ms = watch.call(signature, call_inputs(signature, batch, sequence_length, real=True))
        real.append({"signature": signature, "batch": batch, "modules_compiled": compiled, "call_ms": elapsed_ms})
    return {"requests": replayed, "real_calls_after": real}


def _watch(saved_model: Path, dump_dir: Path, device: dict) -> tuple[_Watch, int]:
    sequence_length = json.loads((saved_model / "assets.extra" / "metadata.json").read_text(encoding="utf-8"))["sequence_length"]
    return _Watch(load(saved_model), dump_dir, device["device"]), sequence_length


def probe(saved_model: Path, calls: list[tuple[str, int]], steady_runs: int, replay: bool, control: Path | None) -> dict:
    """Run in the probe's own process (``XLA_FLAGS`` already naming the dump directory): the warm-up replay,
    then the calls, then one ``serving_default`` call of the ``control`` SavedModel, as asked."""
    dump_dir = Path(os.environ["EDGE_BUILD_XLA_DUMP"])
    device = compute_device()
    watch, sequence_length = _watch(saved_model, dump_dir, device)
    result = {"saved_model": str(saved_model), "device": device}
    if replay:
        result["warmup"] = replay_warmup(watch, saved_model, sequence_length)
    result["calls"] = probe_calls(watch, calls, steady_runs, sequence_length)
    if control:
        # A SavedModel without jit_compile compiles nothing of its own; anything counted here means the count is not telling.
        control_watch, control_length = _watch(control, dump_dir, device)
        (result["control"],) = probe_calls(control_watch, [("serving_default", 1)], 0, control_length)
        result["control"]["saved_model"] = str(control)
    return result


def run_probe(saved_model: Path, *arguments: str) -> dict:
    """``probe`` in a fresh process whose XLA dumps every module it compiles into a private directory."""
    with tempfile.TemporaryDirectory() as scratch:
        dump_dir, out = Path(scratch) / "xla_dump", Path(scratch) / "probe.json"
        dump_dir.mkdir()
        environment = {
            **os.environ,
            # Appended: XLA reads the last value of a repeated flag, and keeps the user's other flags.
            "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={dump_dir}".strip(),
            "EDGE_BUILD_XLA_DUMP": str(dump_dir),
        }
        command = [sys.executable, "-m", "edge_build.xla", "probe", str(saved_model), *arguments, "--out", str(out)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=PROBE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise StageError(f"{saved_model}: the XLA probe ({' '.join(arguments)}) ran past {PROBE_TIMEOUT_S} s") from None
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if line.startswith("error:")] or done.stderr.strip().splitlines()[-1:]
            raise StageError(
                f"{saved_model}: the XLA probe ({' '.join(arguments)}) failed in a fresh process: {' '.join(lines) or 'exit ' + str(done.returncode)}"
            )
        return json.loads(out.read_text(encoding="utf-8"))


def call_arguments(calls: list[tuple[str, int]]) -> list[str]:
    return ["--calls", *(f"{signature}:{batch}" for signature, batch in calls)]


def probe_signatures(saved_model: Path, batch_sizes: list[int], steady_runs: int) -> dict[str, list[dict]]:
    """Each signature at each batch size, in a fresh process per signature: within one process the
    signatures share compiled modules, so the second would compile nothing at a shape the first has seen."""
    return {
        signature: run_probe(saved_model, *call_arguments([(signature, size) for size in batch_sizes]), "--steady-runs", str(steady_runs))["calls"]
        for signature in SIGNATURES
    }


def signatures_compiling(saved_model: Path) -> list[dict]:
    """One fresh process, one call per signature, each at a shape not seen before in it: each first call must compile."""
    return run_probe(saved_model, *call_arguments([(signature, size) for size, signature in enumerate(SIGNATURES, start=1)]))["calls"]


def signature_call(value: str) -> tuple[str, int]:
    signature, _, batch = value.partition(":")
    if signature not in SIGNATURES or not batch.isdigit() or int(batch) < 1:
        raise argparse.ArgumentTypeError(f"{value!r}: expected SIGNATURE:BATCH with a signature of {', '.join(SIGNATURES)} and a batch of 1 or more")
    return signature, int(batch)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.xla", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    probe_command = commands.add_parser("probe", help="load a SavedModel and record what XLA compiles per call (run_probe starts this)")
    probe_command.add_argument("saved_model", type=Path)
    probe_command.add_argument(
        "--replay-warmup", action="store_true", help=f"first replay {WARMUP_FILE}, then make one real call per signature and shape"
    )
    probe_command.add_argument("--calls", type=signature_call, nargs="+", default=[], metavar="SIGNATURE:BATCH", help="calls to watch, in order")
    probe_command.add_argument("--steady-runs", type=int, default=0, help="timed calls after the first, per --calls entry")
    probe_command.add_argument("--control", type=Path, help="last, call this SavedModel's serving_default once (a model that must compile nothing)")
    probe_command.add_argument("--out", type=Path, required=True)
    return parser


def drive(args: argparse.Namespace) -> None:
    if "EDGE_BUILD_XLA_DUMP" not in os.environ:
        raise StageError("the probe needs XLA's dump directory: start it with edge_build.xla.run_probe")
    result = probe(args.saved_model, args.calls, args.steady_runs, args.replay_warmup, args.control)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
