"""Input pipeline: examples/s of the training tf.data pipeline as the train stage builds it, and with its speed-ups off.

    python benchmarks/input_pipeline.py [--quick] [--build-dir build] [--out-dir benchmarks/results]

The pipeline is ``edge_build.training.make_dataset`` called as training calls it
(the training split, its batch size, shuffle buffer and seed, under the same
determinism settings), with parallel map, cache and prefetch each switched off,
then all three. Pipeline rows iterate it without training, a fresh pipeline per
run: epoch 1 parses and tokenizes every record and fills the cache, epoch 2
reads the cache. Training rows run ``edge_build.training.train`` for two epochs with
the pipeline as built and with none of the three, and report the examples/s its
log records (epoch 1 includes tracing the step functions). Ratios: the pipeline
as built over the row, same epoch.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, argument_parser, markdown_table, missing_outputs, spread, write_results

# edge_build is importable: common puts the repository on sys.path.
from edge_build import window
from edge_build.config.hparams import load_hyperparameters
from edge_build.layout import Layout
from edge_build.tokenizer import load_tokenizer
from edge_build.training import PipelineOptions, TrainInputs, count_records, make_dataset, seed_everything, train

AS_BUILT = "as built"
NONE_OF_THE_THREE = "none of the three"
VARIANTS = {
    AS_BUILT: PipelineOptions(),
    "no parallel map": PipelineOptions(parallel_map=False),
    "no cache": PipelineOptions(cache=False),
    "no prefetch": PipelineOptions(prefetch=False),
    NONE_OF_THE_THREE: PipelineOptions(parallel_map=False, cache=False, prefetch=False),
}
#: --quick times the pipeline only as built and with none of the three, to stay under a minute.
QUICK_VARIANTS = (AS_BUILT, NONE_OF_THE_THREE)
EPOCHS = ("epoch_1", "epoch_2")
#: (pipeline runs, training runs) per variant.
QUICK_RUNS = (1, 1)
FULL_RUNS = (5, 3)
HPARAMS = REPO / "model_src" / "hparams.toml"
MODEL_SOURCE = REPO / "model_src" / "model.py"


def examples_per_second(dataset) -> float:
    started = time.perf_counter()
    examples = sum(int(labels.shape[0]) for _, labels in dataset)
    return examples / (time.perf_counter() - started)


def time_pipelines(inputs: TrainInputs, hparams, variants: dict, runs: int) -> dict:
    """Variant -> epoch -> examples/s spread; the variants take turns, so drifting load hits them alike."""
    training = hparams.training
    seed_everything(training.seed)
    tokenizer = load_tokenizer(inputs.vocab, hparams.tokenizer.lower_case)
    figures = {name: {epoch: [] for epoch in EPOCHS} for name in variants}
    for _ in range(runs):
        for name, options in variants.items():
            dataset = make_dataset(
                inputs.train,
                tokenizer,
                hparams.tokenizer.sequence_length,
                training.batch_size,
                training.shuffle_buffer,
                training.seed,
                options,
            )
            for epoch in EPOCHS:
                figures[name][epoch].append(examples_per_second(dataset))
    return {name: {epoch: spread(values) for epoch, values in epochs.items()} for name, epochs in figures.items()}


def time_training(inputs: TrainInputs, hparams, runs: int) -> dict:
    """Two training epochs with the pipeline as built and with none of the three: examples/s from the log."""
    hparams = hparams.with_training(epochs=len(EPOCHS))
    figures = {name: {epoch: [] for epoch in EPOCHS} for name in (AS_BUILT, NONE_OF_THE_THREE)}
    with tempfile.TemporaryDirectory() as scratch:
        for run in range(runs):
            for name in figures:
                out = Layout(Path(scratch) / f"{run}-{name.replace(' ', '_')}")
                log = train(inputs, hparams, out.weights, out.train_log, VARIANTS[name])
                for epoch, record in zip(EPOCHS, log["epochs"]):
                    figures[name][epoch].append(record["examples_per_second"])
    return {name: {epoch: spread(values) for epoch, values in epochs.items()} for name, epochs in figures.items()}


def table(pipelines: dict, training: dict) -> str:
    headers = ["what", "pipeline", "epoch 1 examples/s", "epoch 2 examples/s", "as built x faster, epoch 1", "as built x faster, epoch 2"]
    rows = []
    for what, figures in (("iterate only", pipelines), ("train", training)):
        built = figures[AS_BUILT]
        for name, epochs in figures.items():
            medians = [epochs[epoch]["median"] for epoch in EPOCHS]
            rows.append([what, name, *medians, *(built[epoch]["median"] / epochs[epoch]["median"] for epoch in EPOCHS)])
    return markdown_table(headers, rows)


def main(argv: list[str] | None = None) -> int:
    args = argument_parser(__doc__.splitlines()[0], build_dir="a build with the data and vocab stages done").parse_args(argv)
    build = args.build_dir.resolve()
    layout = Layout(build)
    inputs = TrainInputs(
        layout.data.split("train"), layout.data.split("val"), layout.data.labels, layout.vocab, HPARAMS, MODEL_SOURCE, layout.token_ids("train")
    )
    needed = [inputs.train, inputs.val, inputs.labels, inputs.vocab, layout.data.window, inputs.train_ids]
    if missing_outputs(needed, "build the data, the vocabulary, the data report and the token ids first: scons tokenize"):
        return 2
    hparams = load_hyperparameters(HPARAMS).with_window(window.read(layout.data.window))
    pipeline_runs, training_runs = QUICK_RUNS if args.quick else FULL_RUNS
    variants = {name: VARIANTS[name] for name in QUICK_VARIANTS} if args.quick else VARIANTS
    pipelines = time_pipelines(inputs, hparams, variants, pipeline_runs)
    training = time_training(inputs, hparams, training_runs)
    settings = {
        "build_dir": str(build),
        "train_examples": count_records(inputs.train),
        "batch_size": hparams.training.batch_size,
        "runs": {"pipeline": pipeline_runs, "training": training_runs},
        "variants": {name: dataclasses.asdict(options) for name, options in variants.items()},
    }
    markdown = table(pipelines, training)
    markdown += (
        "\nMedians over the runs. Epoch 1 parses and tokenizes every record (and fills the cache); epoch 2 reads the cache "
        "where there is one. Training rows: the examples/s the training log records, epoch 1 including the step functions' tracing.\n"
    )
    write_results(args.out_dir, "input_pipeline", {**settings, "pipeline": pipelines, "training": training}, markdown, args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
