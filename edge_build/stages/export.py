"""Stage *export*: a SavedModel, tokenizer and vocabulary inside, in TF Serving's layout.

Reads the trained weights and training log, ``vocab.txt``, ``labels.txt``, ``val.tfrecord``, the
hyperparameters and the model source; writes ``<out-dir>/1/`` (the files of
``layout.saved_model_files``) with two signatures:

  serving_default  text: tf.string [None]        -> logits, probabilities, label
  classify_ids     input_ids: tf.int32 [None, L] -> logits

and ``assets.extra/metadata.json`` (versions, git revision, labels, vocab SHA-256).
Before the version directory gets its final name, a fresh Python process loads it
and must reproduce the in-memory model's logits on the validation split.

With ``--jit-compile`` it writes the XLA flavour (``saved_model_xla``): the ids ->
logits function is ``tf.function(jit_compile=True)`` with a fixed ``[None, L]``
signature, and ``serving_default`` tokenizes outside the XLA cluster (tokenizer ops
cannot be compiled) before calling that compiled function. XLA compiles per input
shape on first use, so the flavour also carries TF Serving's warm-up file
(``assets.extra/tf_serving_warmup_requests``: both signatures at each
``--warmup-batch-sizes``), which TF Serving replays after loading. Before the
version directory gets its final name, each signature is called in a fresh process
at a shape not seen before there and must make XLA compile (``edge_build.xla``);
on a machine without a GPU, XLA's CPU backend runs it.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from edge_build import cli, saved_model, xla
from edge_build.atomic import atomic_output
from edge_build.config.hparams import Hyperparameters
from edge_build.errors import ConfigError, StageError
from edge_build.model_source import check_weights_loaded, load_trained_model, trained_hyperparameters
from edge_build.provenance import build_timestamp, git_revision, package_versions, sha256_file, size_of
from edge_build.records import read_labels, read_split_with_tensorflow
from edge_build.stage_files import add_files
from edge_build.tokenizer import encode, load_tokenizer

VERSION = "1"


def make_serving_module(model, tokenizer, labels: list[str], sequence_length: int, jit_compile: bool = False):
    """A ``tf.Module`` whose two ``tf.function``s become the SavedModel's signatures."""
    import tensorflow as tf

    class TextClassifier(tf.Module):
        def __init__(self):
            super().__init__(name="text_classifier")
            self.model = model
            self.tokenizer = tokenizer
            self.labels = tf.constant(labels)
            self.classify_ids = tf.function(
                self._classify_ids,
                jit_compile=jit_compile,
                input_signature=[tf.TensorSpec([None, sequence_length], tf.int32, name="input_ids")],
            )
            self.serving_default = tf.function(
                self._classify_text,
                input_signature=[tf.TensorSpec([None], tf.string, name="text")],
            )

        def _classify_ids(self, input_ids):
            return {"logits": self.model(input_ids, training=False)}

        def _classify_text(self, text):
            ids = encode(self.tokenizer, text, sequence_length)
            # The XLA flavour calls the compiled function: string ops stay outside the cluster,
            # ids -> logits runs inside it. The CPU flavour inlines the plain graph, as it always has.
            logits = (self.classify_ids if jit_compile else self._classify_ids)(ids)["logits"]
            return {
                "logits": logits,
                "probabilities": tf.nn.softmax(logits),
                "label": tf.gather(self.labels, tf.argmax(logits, axis=-1)),
            }

    return TextClassifier()


def metadata(hparams: Hyperparameters, labels: list[str], vocab: Path, weights: Path, warmup_batch_sizes: tuple[int, ...] | None) -> dict:
    jit_compile = warmup_batch_sizes is not None
    return {
        "flavour": "xla" if jit_compile else "cpu",
        "jit_compile": jit_compile,
        "versions": package_versions("tensorflow", "tensorflow-text", "keras", "edge-build"),
        "build_timestamp": build_timestamp(),
        "git_revision": git_revision(),
        "labels": labels,
        "sequence_length": hparams.tokenizer.sequence_length,
        "lower_case": hparams.tokenizer.lower_case,
        "vocab_size": len(vocab.read_text(encoding="utf-8").splitlines()),
        "vocab_sha256": sha256_file(vocab),
        "weights_sha256": sha256_file(weights),
        "signatures": {
            "serving_default": {"inputs": {"text": "string [None]"}, "outputs": ["logits", "probabilities", "label"]},
            "classify_ids": {"inputs": {"input_ids": f"int32 [None, {hparams.tokenizer.sequence_length}]"}, "outputs": ["logits"]},
        },
        "hyperparameters": hparams.to_dict(),
        "load_note": "import tensorflow_text before tf.saved_model.load: the tokenizer's ops live there"
        + (
            f"; XLA compiles on the first call at each batch size: TF Serving replays {saved_model.WARMUP_FILE} "
            f"(both signatures at batch sizes {', '.join(map(str, warmup_batch_sizes))}) after loading, other servers should do the same"
            if jit_compile
            else ""
        ),
        **({"warmup_batch_sizes": list(warmup_batch_sizes)} if jit_compile else {}),
    }


def content_derived_uuid(fingerprint_path: Path) -> None:
    """Replace the random UUID TensorFlow writes into ``fingerprint.pb`` at every save.

    It is the only byte of a SavedModel that differs between two exports of the
    same model; derived from the graph and checkpoint hashes beside it, the same
    model keeps the same bytes (and ID), and a different one still gets another.
    """
    from tensorflow.core.protobuf import fingerprint_pb2

    fingerprint = fingerprint_pb2.FingerprintDef.FromString(fingerprint_path.read_bytes())
    content = f"{fingerprint.saved_model_checksum}:{fingerprint.checkpoint_hash}".encode("ascii")
    fingerprint.uuid = str(int(hashlib.sha256(content).hexdigest()[:32], 16))  # TF's form: a 128-bit number in decimal
    fingerprint_path.write_bytes(fingerprint.SerializeToString(deterministic=True))


def export(
    val_records: Path,
    labels_path: Path,
    vocab: Path,
    weights: Path,
    train_log: Path,
    hparams_path: Path,
    model_source: Path,
    train_ids: Path,
    out_dir: Path,
    warmup_batch_sizes: tuple[int, ...] | None = None,
) -> Path:
    """Write the SavedModel to ``out_dir/1`` after a fresh-process reload check; return that path.

    With ``warmup_batch_sizes``, the XLA flavour with a warm-up file for those sizes.
    """
    import tensorflow as tf

    jit_compile = warmup_batch_sizes is not None

    hparams = trained_hyperparameters(hparams_path, train_log)
    labels = read_labels(labels_path)
    model = load_trained_model(model_source, hparams, hparams_path, vocab, len(labels), weights, train_ids)
    # The vocabulary's path as given becomes part of the graph (the lookup table's shared
    # name), and is read again when the asset is saved: give it the same relative path in
    # every build, so that two builds in different directories write the same bytes.
    vocab_folder = tempfile.TemporaryDirectory()
    shutil.copyfile(vocab, Path(vocab_folder.name) / "vocab.txt")
    with contextlib.chdir(vocab_folder.name):
        tokenizer = load_tokenizer("vocab.txt", hparams.tokenizer.lower_case)
    module = make_serving_module(model, tokenizer, labels, hparams.tokenizer.sequence_length, jit_compile)

    val_texts, val_labels = read_split_with_tensorflow(val_records)
    expected_logits = saved_model.serve_in_batches(module.serving_default, val_texts)["logits"]
    check_weights_loaded(expected_logits, val_labels, train_log, weights)

    final = out_dir.resolve() / VERSION
    with atomic_output(final) as staging, tempfile.TemporaryDirectory() as scratch, vocab_folder:
        with contextlib.chdir(vocab_folder.name):
            tf.saved_model.save(
                module,
                str(staging),
                signatures={
                    "serving_default": module.serving_default.get_concrete_function(),
                    "classify_ids": module.classify_ids.get_concrete_function(),
                },
            )
        content_derived_uuid(staging / "fingerprint.pb")
        extra = staging / "assets.extra"
        extra.mkdir()
        (extra / "metadata.json").write_text(
            json.dumps(metadata(hparams, labels, vocab, weights, warmup_batch_sizes), indent=2) + "\n", encoding="utf-8"
        )
        if jit_compile:
            if not saved_model.xla_compiled_functions(staging):
                raise StageError(f"{final}: no function in the saved graph is marked for XLA compilation")
            xla.write_warmup_requests(staging / saved_model.WARMUP_FILE, hparams.tokenizer.sequence_length, warmup_batch_sizes)
        written = sorted(str(p.relative_to(staging)) for p in staging.rglob("*") if p.is_file())
        if written != sorted(saved_model.files(jit_compile)):
            raise StageError(f"{final}: the export wrote {written}, the build expects {sorted(saved_model.files(jit_compile))}")
        expected = Path(scratch) / "expected.npz"
        np.savez(expected, texts=np.array([t.decode("utf-8") for t in val_texts]), logits=expected_logits)
        saved_model.check_in_fresh_process(staging, expected)
        if jit_compile:
            require_compilation(staging, final)
    return final


def require_compilation(staging: Path, final: Path) -> None:
    """Each signature, called in a fresh process at a shape not seen before there, must make XLA compile a module."""
    for call in xla.signatures_compiling(staging):
        if call["modules_compiled"] == 0:
            raise StageError(
                f"{final}: calling {call['signature']} in a fresh process compiled no XLA module: the signature does not reach the jit-compiled function"
            )
    print("XLA check: serving_default and classify_ids each compile XLA in a fresh process")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.stages.export", description=__doc__.splitlines()[0])
    add_files("export", parser)
    parser.add_argument("--jit-compile", action="store_true", help="XLA-compile the ids -> logits function (the GPU flavour)")
    parser.add_argument(
        "--warmup-batch-sizes",
        type=int,
        nargs="+",
        help="with --jit-compile (required there): the batch sizes of TF Serving's warm-up requests (the profile's [xla] warmup_batch_sizes)",
    )
    return parser


def drive(args: argparse.Namespace) -> None:
    if args.jit_compile != bool(args.warmup_batch_sizes):
        raise ConfigError("--warmup-batch-sizes goes with --jit-compile, and --jit-compile needs it")
    sizes = tuple(args.warmup_batch_sizes) if args.jit_compile else None
    path = export(
        args.val, args.labels, args.vocab, args.weights, args.train_log, args.hparams, args.model_source, args.train_ids, args.out_dir, sizes
    )
    print(f"export: {'XLA' if args.jit_compile else 'CPU'} SavedModel ({size_of(path) / 1e6:.1f} MB) -> {path}")


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
