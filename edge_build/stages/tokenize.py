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
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from edge_build import cli, window
from edge_build.atomic import atomic_outputs
from edge_build.corpus import SPLITS
from edge_build.stage_files import add_files
from edge_build.tfrecord import read_split
from edge_build.tokenizer import token_ids


def tokenize_splits(outputs: Mapping[Path, Path], vocab: Path, lower_case: bool, sequence_length: int) -> list[tuple[int, int]]:
    """Write each split file's ids (``{split file: ids file}``); return their shapes."""
    shapes = []
    with atomic_outputs(*outputs.values()) as temporaries:
        for split, temporary in zip(outputs, temporaries):
            texts, _ = read_split(split)
            ids = token_ids(vocab, lower_case, texts, sequence_length).astype(np.int32)
            with open(temporary, "wb") as handle:
                np.save(handle, ids)
            shapes.append(ids.shape)
    return shapes


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.stages.tokenize", description=__doc__.splitlines()[0])
    add_files("tokenize", parser)
    parser.add_argument("--lower-case", action=argparse.BooleanOptionalAction, required=True)
    return parser


def drive(args: argparse.Namespace) -> None:
    outputs = {getattr(args, split): getattr(args, f"{split}_ids") for split in SPLITS}
    shapes = tokenize_splits(outputs, args.vocab, args.lower_case, window.read(args.window))
    print("tokenize: " + ", ".join(f"{path} {rows}x{length}" for path, (rows, length) in zip(outputs.values(), shapes)))


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
