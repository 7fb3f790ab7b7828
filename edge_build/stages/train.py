"""Stage *train*: ``edge_build.training.train`` from the split files to ``model.weights.h5`` and ``train_log.json``.

The training itself (input pipeline, distribution strategy, early stopping,
deterministic seeding) lives in ``edge_build.training``, where the input-pipeline
benchmark uses it too.
"""

from __future__ import annotations

import argparse
import sys

from edge_build import cli, window
from edge_build.config.hparams import load_hyperparameters
from edge_build.stage_files import add_files, stage_inputs
from edge_build.training import TrainInputs, train


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.stages.train", description=__doc__.splitlines()[0])
    add_files("train", parser)
    parser.add_argument("--epochs", type=int, help="override [training] epochs")
    parser.add_argument("--seed", type=int, help="override [training] seed")
    return parser


def drive(args: argparse.Namespace) -> None:
    hparams = load_hyperparameters(args.hparams).with_training(epochs=args.epochs, seed=args.seed).with_window(window.read(args.window))
    inputs = stage_inputs("train", TrainInputs, args)
    log = train(inputs, hparams, args.weights, args.log)
    print(f"train: best epoch {log['best_epoch']}/{len(log['epochs'])}, val accuracy {log['best_val_accuracy']:.4f} -> {args.weights}")


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
