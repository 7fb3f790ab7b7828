"""Stage *tokenize*: every split's token ids, once per vocabulary, for the stages that need ids but not TensorFlow.

Reads the split files and ``vocab.txt``; writes one ``.npy`` per split: int32
ids ``[examples, sequence_length]`` in file order, made by the same
tensorflow-text ``BertTokenizer`` as training and the exported SavedModel
(``edge_build.tokenizer``). Calibration draws its rows from here, the
conversion checks parity on them, and the runtime checks, the report and the
bundle's tokenizer check read the test split's: none of them imports
TensorFlow to tokenize, and a new calibration set reruns none of this.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from edge_build import cli, window
from edge_build.atomic import atomic_outputs
from edge_build.errors import StageError
from edge_build.tfrecord import read_split
from edge_build.tokenizer import token_ids


def tokenize_splits(splits: list[Path], vocab: Path, lower_case: bool, sequence_length: int, outputs: list[Path]) -> list[tuple[int, int]]:
    """Write each split's ids to the output at the same position; return their shapes."""
    if len(splits) != len(outputs):
        raise StageError(f"{len(splits)} split file(s) but {len(outputs)} output(s): give one output per split")
    shapes = []
    with atomic_outputs(*outputs) as temporaries:
        for split, temporary in zip(splits, temporaries):
            texts, _ = read_split(split)
            ids = token_ids(vocab, lower_case, texts, sequence_length).astype(np.int32)
            with open(temporary, "wb") as handle:
                np.save(handle, ids)
            shapes.append(ids.shape)
    return shapes


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.stages.tokenize", description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=Path, nargs="+", required=True, help="split files (.tfrecord)")
    parser.add_argument("--vocab", type=Path, required=True)
    parser.add_argument("--lower-case", action=argparse.BooleanOptionalAction, required=True)
    parser.add_argument("--window", type=Path, required=True, help="the data report's window.json: the sequence length")
    parser.add_argument("--out", type=Path, nargs="+", required=True, help="one .npy per split, in the same order")
    return parser


def drive(args: argparse.Namespace) -> None:
    shapes = tokenize_splits(args.splits, args.vocab, args.lower_case, window.read(args.window), args.out)
    print("tokenize: " + ", ".join(f"{path} {rows}x{length}" for path, (rows, length) in zip(args.out, shapes)))


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
