"""Benchmark a TF Lite model on a TF Lite runtime, and re-check the golden set with ``--parity``.

    python -m edge_build.board.bench MODEL [--runtime tflite-runtime] [--threads 1]
        [--warmup 20] [--runs 200] [--batch 1] [--golden golden.npz] [--parity]
        [--text [--text-file texts.txt] [--text-index N]]
        [--out result.json] [--outputs logits.npy]

Reports what TF Lite's ``benchmark_model`` reports: model load time, first
invoke, then per-invoke p50/p90/p99, mean, std, min and max over the timed runs,
examples per second and the process's peak resident memory. Timed inputs are
golden-set rows when a golden file is given (real token ids, or the raw texts
for a model that takes text), zeros or one short sentence otherwise.
With ``--text`` each timed run is one raw text in, its label out, the board's
tokenizer included (``text_bench``). Text mode runs as a bundle's ``bench.py --text``,
whose launcher hands in the bundle's tokenizer; run as this module, bench refuses it.
With ``--parity`` every golden example is run and compared with the reference
logits stored beside it. Imports only the standard library, numpy and the runtime.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time

import numpy as np

from . import EXIT_MODEL_FAILED, EXIT_RUNTIME_MISSING, EXIT_USAGE, fail
from .parity import compare, load_golden, unpack_texts
from .runtime import INTERPRETER_MODULES, RuntimeMissing, make_interpreter, runner_of, runtime_version
from .text_bench import UsageError, benchmark_text, choose_text, read_texts

#: Text mode's tokenizer is the bundle's (vocab.txt, manifest.json, board/wordpiece.py): the build's runtime checks run
#: this module without it, so only a bundle's launcher (``launch.bench_main``) hands it in.
TEXT_NEEDS_BUNDLE = "--text runs from a bundle, which holds the tokenizer: python3 bench.py --text in the unpacked bundle's folder"


def dequantized(interpreter, detail) -> np.ndarray:
    values = interpreter.get_tensor(detail["index"])
    if detail["dtype"] in (np.int8, np.uint8):
        scale, zero_point = detail["quantization"]
        return (values.astype(np.float32) - zero_point) * np.float32(scale)
    return values.astype(np.float32)


class Model:
    """One interpreter with its single input (token ids, or raw texts) and its logits, resized to a batch size.

    A raw-text model also outputs the token ids its tokenizer made (int32), kept as ``token_ids``.
    """

    #: What ``run`` gives: logits (a Tasks library's model gives scores: ``tasks.TextClassifierModel``).
    outputs_scores = False

    def __init__(self, runtime: str, path: str, threads: int, batch: int):
        started = time.perf_counter()
        self.interpreter = make_interpreter(runtime, path, threads)
        (self.input,) = self.interpreter.get_input_details()
        outputs = self.interpreter.get_output_details()
        (self.output,) = [d for d in outputs if d["dtype"] != np.int32] or outputs
        self.token_ids = next((d for d in outputs if d["dtype"] == np.int32 and d is not self.output), None)
        self.takes_text = self.input["dtype"] in (np.bytes_, np.object_)
        if batch != self.input["shape"][0]:
            self.interpreter.resize_tensor_input(self.input["index"], [batch, *self.input["shape"][1:]])
        self.interpreter.allocate_tensors()
        self.load_ms = (time.perf_counter() - started) * 1e3
        self.batch = batch

    def run(self, inputs: np.ndarray) -> np.ndarray:
        """Logits for a batch of ids ``[batch, sequence_length]`` or of UTF-8 texts ``[batch]``."""
        self.interpreter.set_tensor(self.input["index"], inputs if self.takes_text else inputs.astype(self.input["dtype"], copy=False))
        self.interpreter.invoke()
        return dequantized(self.interpreter, self.output)

    def last_token_ids(self) -> np.ndarray:
        """The ids the model's own tokenizer gave the last batch (raw-text models)."""
        return self.interpreter.get_tensor(self.token_ids["index"])

    def close(self) -> None:
        """Nothing to release: the interpreter goes with the object."""


def open_model(runtime: str, path: str, threads: int, batch: int):
    """``path`` in ``runtime``: an interpreter (``Model``), or a Tasks library's classifier where the runtime's row runs one."""
    if runner_of(runtime) == "text_classifier":
        from .tasks import TextClassifierModel

        return TextClassifierModel(runtime, path, threads, batch)
    return Model(runtime, path, threads, batch)


def model_inputs(model: Model, golden: dict) -> np.ndarray:
    """What the model takes, for every golden example: its token ids, or its raw texts."""
    return np.array(unpack_texts(golden), dtype=object) if model.takes_text else golden["ids"]


def timing_inputs(model: Model, golden: dict | None) -> list[np.ndarray]:
    if golden is None:
        if model.takes_text:
            return [np.full([model.batch], b"A short sentence to time the model on.", dtype=object)]
        return [np.zeros([model.batch, *model.input["shape"][1:]], dtype=np.int32)]
    rows = model_inputs(model, golden)
    return [np.take(rows, range(start, start + model.batch), axis=0, mode="wrap") for start in range(0, len(rows), model.batch)]


def percentile_summary(invoke_us: list[float], batch: int) -> dict:
    values = np.asarray(invoke_us)
    return {
        "p50_us": float(np.percentile(values, 50)),
        "p90_us": float(np.percentile(values, 90)),
        "p99_us": float(np.percentile(values, 99)),
        "mean_us": float(values.mean()),
        "std_us": float(values.std()),
        "min_us": float(values.min()),
        "max_us": float(values.max()),
        "examples_per_second": float(batch * 1e6 / values.mean()),
    }


def benchmark(model: Model, golden: dict | None, warmup: int, runs: int) -> dict:
    inputs = timing_inputs(model, golden)
    started = time.perf_counter()
    model.run(inputs[0])
    first_ms = (time.perf_counter() - started) * 1e3
    for i in range(warmup):
        model.run(inputs[i % len(inputs)])
    invoke_us = []
    for i in range(runs):
        ids = inputs[i % len(inputs)]
        started = time.perf_counter_ns()
        model.run(ids)
        invoke_us.append((time.perf_counter_ns() - started) / 1e3)
    return latency_figures(model, first_ms, invoke_us)


def latency_figures(model: Model, first_ms: float, invoke_us: list[float]) -> dict:
    """The result's ``latency``, whatever a timed run is (one invoke, or text -> label)."""
    return {"load_ms": model.load_ms, "first_invoke_ms": first_ms, **percentile_summary(invoke_us, model.batch), "invoke_us": invoke_us}


def golden_outputs(model: Model, golden: dict) -> np.ndarray:
    rows = model_inputs(model, golden)
    logits = [model.run(np.take(rows, range(start, start + model.batch), axis=0, mode="wrap")) for start in range(0, len(rows), model.batch)]
    return np.concatenate(logits)[: len(rows)]


def run(args: argparse.Namespace, make_encoder=None) -> dict:
    """The benchmark's result; in text mode ``make_encoder(model)`` gives what turns one text into the model's input."""
    if args.text and make_encoder is None:
        raise UsageError(TEXT_NEEDS_BUNDLE)
    result = {
        "model": args.model,
        "runtime": args.runtime,
        "runtime_version": runtime_version(args.runtime),
        "machine": platform.machine(),
        "python": platform.python_version(),
        # Set by the emulated runner: timings under emulation say nothing about the board.
        "emulated": os.environ.get("EDGE_BUILD_EMULATED", "") == "1",
        "threads": args.threads,
        "batch": args.batch,
        "warmup": args.warmup,
        "runs": args.runs,
    }
    golden = load_golden(args.golden) if args.golden else None
    if args.text:
        # Before the model loads: a refusal should not wait for it.
        timed = choose_text(read_texts(args.text_file, golden, args.golden), args.text_index)
    model = open_model(args.runtime, args.model, args.threads, args.batch)
    result["outputs"] = "scores" if model.outputs_scores else "logits"
    try:
        if args.text:
            text_record, first_ms, step_us = benchmark_text(model, timed, make_encoder(model), args.warmup, args.runs)
            result.update(text_record, latency=latency_figures(model, first_ms, step_us))
        else:
            result["latency"] = benchmark(model, golden, args.warmup, args.runs)
        if golden is not None and (args.parity or args.outputs):
            logits = golden_outputs(model, golden)
            if args.outputs:
                np.save(args.outputs, logits)
            result["parity"] = compare(golden["reference_logits"], logits, golden["labels"])
    finally:
        model.close()
    result["peak_rss_mb"] = peak_rss_mb()
    return result


def peak_rss_mb() -> float:
    """This process's peak resident memory.

    Linux's ``VmHWM`` belongs to the current program image; ``ru_maxrss`` keeps the
    peak of the process that forked us (TensorFlow's, on the build machine) across exec.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux, bytes on macOS


def build_parser(in_bundle: bool = False, **defaults: str) -> argparse.ArgumentParser:
    """The options; a bundle's launcher (``in_bundle``) chooses the model when none is given, and passes its runtime and golden set as defaults."""
    parser = argparse.ArgumentParser(prog="bench.py", description=__doc__.splitlines()[0], allow_abbrev=False)
    help_text = (
        "the model, by artifact or file name (default: the one the bundle's manifest recommends for the runtime)"
        if in_bundle
        else "the .tflite model"
    )
    parser.add_argument("model", help=help_text, **({"nargs": "?"} if in_bundle else {}))
    parser.add_argument("--runtime", choices=sorted(INTERPRETER_MODULES), default="tflite-runtime")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--golden", help="golden.npz: token ids (and raw texts), labels and reference logits")
    parser.add_argument("--parity", action="store_true", help="run every golden example and compare with the reference")
    parser.add_argument(
        "--text",
        action="store_true",
        help="time text -> label instead of the invoke alone: each run tokenizes one raw text with the bundle's WordPiece tokenizer, "
        "invokes and takes the argmax; a model that takes raw text (its tokenizer inside, or MediaPipe's TextClassifier) gets the "
        "UTF-8 text as always, and reports no tokenizer figure of its own (batch 1; a bundle's bench.py only)",
    )
    parser.add_argument("--text-file", help="with --text, the texts: UTF-8, one per line (default: the golden set's raw texts)")
    parser.add_argument("--text-index", type=int, help="with --text, the text to time, by 0-based position (default: the median-length one)")
    parser.add_argument("--out", help="write the result as JSON here")
    parser.add_argument("--outputs", help="write the golden set's logits (float32 .npy) here")
    parser.set_defaults(**defaults)
    return parser


def main(argv: list[str] | None = None) -> int:
    return execute(build_parser().parse_args(argv))


def execute(args: argparse.Namespace, make_encoder=None) -> int:
    """Run and print the benchmark the options ask for; the exit code. Text mode needs ``make_encoder`` (see ``run``)."""
    if args.parity and not args.golden:
        return fail("--parity needs --golden", EXIT_USAGE)
    if args.text and args.batch != 1:
        return fail(f"--text times one text per run: --batch 1, not {args.batch}", EXIT_USAGE)
    try:
        result = run(args, make_encoder)
    except UsageError as exc:
        return fail(exc, EXIT_USAGE)
    except RuntimeMissing as exc:
        return fail(exc, EXIT_RUNTIME_MISSING)
    except (RuntimeError, ValueError) as exc:
        return fail(f"{args.model}: {exc}", EXIT_MODEL_FAILED)
    text = json.dumps(result, indent=2)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
    latency = result["latency"]
    print(
        f"{args.model} on {args.runtime} {result['runtime_version']} ({result['machine']}, {args.threads} thread(s), batch {args.batch}): "
        f"load {latency['load_ms']:.1f} ms, first {latency['first_invoke_ms']:.2f} ms, p50 {latency['p50_us']:.1f} us, "
        f"p90 {latency['p90_us']:.1f} us, p99 {latency['p99_us']:.1f} us, {latency['examples_per_second']:.0f} examples/s, "
        f"peak RSS {result['peak_rss_mb']:.1f} MB" + (" (emulated: not representative)" if result["emulated"] else "")
    )
    if args.text:
        timed, tokenizer_p50 = result["timed_text"], result["tokenizer_p50_us"]
        print(
            f"text -> label on text #{timed['index']} of {timed['of']} ({timed['characters']} characters), label {timed['label_index']}: "
            + ("tokenizer inside the invoke" if tokenizer_p50 is None else f"tokenizer p50 {tokenizer_p50:.1f} us")
        )
    if "parity" in result:
        p = result["parity"]
        print(
            f"parity on {p['examples']} golden examples: top-1 agreement {p['top1_agreement']:.4f}, "
            # Scores (a Tasks library's) against the reference's logits: no logit error to speak of.
            + ("" if result["outputs"] == "scores" else f"max |Δlogit| {p['max_abs_logit_error']:.3g}, ")
            + f"accuracy {p['accuracy']:.4f} (reference {p['reference_accuracy']:.4f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
