"""Stage *train*: ``edge_build.training.train`` from the split files to ``model.weights.h5`` and ``train_log.json``.

The training itself (input pipeline, distribution strategy, early stopping,
deterministic seeding) lives in ``edge_build.training``, where the input-pipeline
benchmark uses it too.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from edge_build import cli, window
from edge_build.config.hparams import load_hyperparameters
from edge_build.training import TrainInputs, train


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.stages.train", description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=Path, required=True, help="train.tfrecord from the data stage")
    parser.add_argument("--val", type=Path, required=True, help="val.tfrecord from the data stage")
    parser.add_argument("--labels", type=Path, required=True, help="labels.txt from the data stage")
    parser.add_argument("--vocab", type=Path, required=True, help="vocab.txt from the vocab stage")
    parser.add_argument("--hparams", type=Path, required=True, help="hyperparameters TOML")
    parser.add_argument("--window", type=Path, required=True, help="the data report's window.json: the sequence length")
    parser.add_argument("--model-source", type=Path, required=True, help="Python file defining build_model()")
    parser.add_argument("--weights", type=Path, required=True, help="the model.weights.h5 to write")
    parser.add_argument("--log", type=Path, required=True, help="the train_log.json to write")
    parser.add_argument("--epochs", type=int, help="override [training] epochs")
    parser.add_argument("--seed", type=int, help="override [training] seed")
    return parser


def drive(args: argparse.Namespace) -> None:
    hparams = load_hyperparameters(args.hparams).with_training(epochs=args.epochs, seed=args.seed).with_window(window.read(args.window))
    inputs = TrainInputs(args.train, args.val, args.labels, args.vocab, args.hparams, args.model_source)
    log = train(inputs, hparams, args.weights, args.log)
    print(f"train: best epoch {log['best_epoch']}/{len(log['epochs'])}, val accuracy {log['best_val_accuracy']:.4f} -> {args.weights}")


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
