"""Training the classifier from ``model_src`` with a custom, deterministic loop (the train stage runs ``train``).

Reads ``train.tfrecord``, ``val.tfrecord``, ``labels.txt``, ``vocab.txt``, the
hyperparameters TOML and the model source; writes ``model.weights.h5`` (the best
validation epoch's weights) and ``train_log.json`` (loss, accuracy and examples/s
per epoch). Stops once ``[training] patience`` epochs in a row bring no better
validation epoch. Runs under the ``tf.distribute`` strategy of ``[training] strategy``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from pathlib import Path

from edge_build.atomic import atomic_outputs
from edge_build.config.hparams import Hyperparameters
from edge_build.errors import ConfigError
from edge_build.model_source import build_model
from edge_build.records import parse_example, read_labels
from edge_build.tokenizer import encode, load_tokenizer


@dataclasses.dataclass(frozen=True)
class TrainInputs:
    train: Path
    val: Path
    labels: Path
    vocab: Path
    hparams: Path
    model_source: Path
    train_ids: Path


@dataclasses.dataclass(frozen=True)
class PipelineOptions:
    """The input pipeline's speed-ups, all on in training; ``benchmarks/input_pipeline.py`` measures each one off."""

    parallel_map: bool = True
    cache: bool = True
    prefetch: bool = True


def make_dataset(
    records: Path,
    tokenizer,
    sequence_length: int,
    batch_size: int,
    shuffle_buffer: int = 0,
    seed: int = 0,
    pipeline: PipelineOptions = PipelineOptions(),
):
    """TFRecords -> parse -> tokenize -> truncate/pad -> cache -> (shuffle) -> batch -> prefetch."""
    import tensorflow as tf

    def tokenize(text, label):
        return encode(tokenizer, tf.expand_dims(text, 0), sequence_length)[0], label

    parallel_calls = tf.data.AUTOTUNE if pipeline.parallel_map else None
    dataset = (
        tf.data.TFRecordDataset(str(records)).map(parse_example, num_parallel_calls=parallel_calls).map(tokenize, num_parallel_calls=parallel_calls)
    )
    if pipeline.cache:
        dataset = dataset.cache()
    if shuffle_buffer:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.batch(batch_size)
    return dataset.prefetch(tf.data.AUTOTUNE) if pipeline.prefetch else dataset


def make_strategy(name: str):
    """The ``tf.distribute`` strategy of ``[training] strategy``.

    Call it before any other TensorFlow op: multi-worker collectives must be
    configured before the runtime starts.
    """
    import tensorflow as tf

    if name == "mirrored":
        # One replica per GPU; without one, per logical CPU device (a single one unless configured, as the tests do).
        devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
        return tf.distribute.MirroredStrategy([device.name for device in devices])
    if name == "multi_worker_mirrored":
        try:
            return tf.distribute.MultiWorkerMirroredStrategy()  # the cluster and this worker's task come from TF_CONFIG
        except ValueError as exc:
            expected = '{"cluster": {"worker": ["host:port", ...]}, "task": {"type": "worker", "index": N}}'
            raise ConfigError(f"TF_CONFIG: {exc} (expected JSON like {expected})") from exc
    return tf.distribute.get_strategy()


def distribute(strategy, dataset):
    """Split each global batch across the replicas (and the workers)."""
    import tensorflow as tf

    options = tf.data.Options()
    # A split is one TFRecord file, so workers cannot take whole files: each reads it all and keeps
    # its share of every batch. They shuffle with the same seed, so the shares do not overlap.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return strategy.experimental_distribute_dataset(dataset.with_options(options))


def seed_everything(seed: int) -> None:
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()


def count_records(records: Path) -> int:
    import tensorflow as tf

    return int(tf.data.TFRecordDataset(str(records)).reduce(0, lambda n, _: n + 1))


def run_epoch(step_fn, data, progress=None) -> tuple[float, float, int]:
    """One pass of ``step_fn`` over ``data``: the mean loss, the accuracy and the examples seen (``progress``: a Progbar to advance)."""
    loss_total, correct_total, seen = 0.0, 0, 0
    for batch in data:
        loss_sum, correct, examples = step_fn(batch)
        loss_total += float(loss_sum)
        correct_total += int(correct)
        seen += int(examples)
        if progress is not None:
            progress.add(1, values=[("loss", loss_total / seen), ("accuracy", correct_total / seen)])
    return loss_total / seen, correct_total / seen, seen


def train(
    inputs: TrainInputs,
    hparams: Hyperparameters,
    weights_out: Path,
    log_out: Path,
    pipeline: PipelineOptions = PipelineOptions(),
) -> dict:
    """Train, keep the best validation epoch, write the weights and the log; return the log."""
    import keras
    import tensorflow as tf

    training = hparams.training
    strategy = make_strategy(training.strategy)
    sequence_length = hparams.tokenizer.sequence_length
    seed_everything(training.seed)
    labels = read_labels(inputs.labels)
    vocabulary = inputs.vocab.read_text(encoding="utf-8").splitlines()
    tokenizer = load_tokenizer(inputs.vocab, hparams.tokenizer.lower_case)
    with strategy.scope():
        model = build_model(inputs.model_source, hparams, inputs.hparams, len(vocabulary), len(labels), inputs.train_ids, vocabulary)
        optimizer = keras.optimizers.Adam(training.learning_rate)
        # Slots created inside the first trace would make tf.function trace twice.
        optimizer.build(model.trainable_variables)
        step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
    train_data = distribute(
        strategy,
        make_dataset(inputs.train, tokenizer, sequence_length, training.batch_size, training.shuffle_buffer, training.seed, pipeline),
    )
    val_data = distribute(strategy, make_dataset(inputs.val, tokenizer, sequence_length, training.batch_size, pipeline=pipeline))
    train_examples = count_records(inputs.train)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    def sums(per_example_loss, logits, y):
        correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), y), tf.int32))
        return tf.reduce_sum(per_example_loss), correct, tf.shape(y)[0]

    def replica_train_step(ids, y):
        replica = tf.distribute.get_replica_context()
        # The mean over this step's whole batch, whatever the replica count (the last batch is smaller).
        global_batch = replica.all_reduce(tf.distribute.ReduceOp.SUM, tf.shape(y, out_type=tf.int64)[0])
        with tf.GradientTape() as tape:
            logits = model(ids, training=True)
            per_example_loss = loss_fn(y, logits)
            loss = tf.nn.compute_average_loss(per_example_loss, global_batch_size=global_batch)
            if model.losses:  # the model's penalties (an L2 on its tables), once per step whatever the replica count
                loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
        gradients = tape.gradient(loss, model.trainable_variables)
        # The optimizer sums the replicas' gradients: clip by the norm of that sum, as one device would.
        gradients, _ = tf.clip_by_global_norm(
            gradients, training.clip_norm, use_norm=tf.linalg.global_norm(replica.all_reduce(tf.distribute.ReduceOp.SUM, gradients))
        )
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return sums(per_example_loss, logits, y)

    def replica_eval_step(ids, y):
        logits = model(ids, training=False)
        return sums(loss_fn(y, logits), logits, y)

    def total(per_replica):
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    @tf.function(input_signature=(train_data.element_spec,))
    def train_step(batch):
        results = strategy.run(replica_train_step, args=batch)
        step.assign_add(1)
        return [total(result) for result in results]

    @tf.function(input_signature=(val_data.element_spec,))
    def eval_step(batch):
        return [total(result) for result in strategy.run(replica_eval_step, args=batch)]

    steps_per_epoch = math.ceil(train_examples / training.batch_size)
    epochs, best, best_weights = [], None, None
    for epoch in range(1, training.epochs + 1):
        print(f"Epoch {epoch}/{training.epochs}", flush=True)
        started = time.perf_counter()
        # A live bar on a terminal; one line per epoch in logs and CI.
        progress = keras.utils.Progbar(steps_per_epoch, verbose=1 if sys.stdout.isatty() else 2, stateful_metrics=["loss", "accuracy"])
        loss, accuracy, seen = run_epoch(train_step, train_data, progress)
        seconds = time.perf_counter() - started
        val_loss, val_accuracy, _ = run_epoch(eval_step, val_data)
        record = {
            "epoch": epoch,
            "loss": round(loss, 6),
            "accuracy": round(accuracy, 6),
            "val_loss": round(val_loss, 6),
            "val_accuracy": round(val_accuracy, 6),
            "seconds": round(seconds, 3),
            "examples_per_second": round(seen / seconds, 1),
        }
        epochs.append(record)
        print(f"  val_loss {val_loss:.4f}  val_accuracy {val_accuracy:.4f}  {record['examples_per_second']:.0f} examples/s", flush=True)
        # Compare the logged (rounded) figures, so that the log's best epoch is the one it shows as best,
        # and the stopping decision depends on nothing that varies between two runs.
        if best is None or (record["val_accuracy"], -record["val_loss"]) > (best["val_accuracy"], -best["val_loss"]):
            best, best_weights = record, model.get_weights()
        elif training.patience and epoch - best["epoch"] >= training.patience:
            print(f"  no better validation epoch in {training.patience}: stopping after epoch {epoch}", flush=True)
            break

    model.set_weights(best_weights)
    log = {
        "hyperparameters": hparams.to_dict(),
        "strategy": training.strategy,
        "replicas": strategy.num_replicas_in_sync,
        "train_examples": train_examples,
        "feature_tables": dict(getattr(model, "feature_tables", None) or {}),
        "steps": int(step.numpy()),
        "train_step_traces": train_step.experimental_get_tracing_count(),
        "best_epoch": best["epoch"],
        "stopped_early": len(epochs) < training.epochs,
        "best_val_accuracy": best["val_accuracy"],
        "best_val_loss": best["val_loss"],
        "epochs": epochs,
    }
    write_outputs(strategy, model, log, weights_out, log_out)
    return log


def write_outputs(strategy, model, log: dict, weights_out: Path, log_out: Path) -> None:
    """The trained weights and the log, written by the chief alone.

    Every worker ends with the same weights; only the chief writes them, so that workers
    sharing a file system never write the same paths at once.
    """
    if strategy.extended.should_checkpoint:
        with atomic_outputs(weights_out, log_out) as (weights_tmp, log_tmp):
            model.save_weights(str(weights_tmp))
            log_tmp.write_text(json.dumps(log, indent=2) + "\n", encoding="utf-8")
    else:
        resolver = strategy.cluster_resolver
        print(f"train: {resolver.task_type} {resolver.task_id} is not the chief: the chief writes {weights_out.name} and {log_out.name}", flush=True)
