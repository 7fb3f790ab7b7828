"""Stage *calibrate*: build the INT8 representative dataset from real text.

Reads ``calibration/calibration.toml`` (and the field-samples file it names), the
split it draws from (its labels, from the split file) and that split's token ids
(the tokenize stage), ``labels.txt`` and, for field samples only, ``vocab.txt``;
writes ``representative.npy`` (int32 token ids ``[N, sequence_length]``, tokenized
exactly as in training) and ``summary.json`` (what went in: counts per class,
sources, checksum). Without field samples it never imports TensorFlow: a new
calibration set costs the draw, not a tokenizer.

Calibration data decides the INT8 activation ranges: random ids instead of real
text cost about 12 points of accuracy in the seeds' trial, so the set is drawn
from real examples, and samples that tokenize to nothing are refused.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import random
import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from edge_build import cli, window
from edge_build.atomic import atomic_outputs
from edge_build.config.calibration import CalibrationConfig, load_calibration
from edge_build.errors import ConfigError, StageError
from edge_build.records import read_labels, read_rows
from edge_build.special_tokens import PAD_ID, UNK_ID
from edge_build.stage_files import add_files, parsed, stage_inputs
from edge_build.tfrecord import read_split

#: Fewer samples than this give activation ranges worth a warning.
SMALL_SET = 100
_EMPTY_IDS = (PAD_ID, UNK_ID)


def allocate(count: int, sizes: list[int]) -> list[int]:
    """Split ``count`` across classes of ``sizes`` in proportion (largest remainders), never above a class's size."""
    count = min(count, sum(sizes))
    exact = [count * size / sum(sizes) for size in sizes]
    shares = [int(e) for e in exact]
    by_remainder = sorted(range(len(sizes)), key=lambda i: (-(exact[i] - shares[i]), i))
    while sum(shares) < count:
        for i in by_remainder:
            if sum(shares) < count and shares[i] < sizes[i]:
                shares[i] += 1
    return shares


def draw_stratified(labels: np.ndarray, count: int, seed: int) -> list[int]:
    """Indices of ``count`` examples (or all there are), each class contributing in proportion to its size."""
    rng = random.Random(seed)
    classes = sorted(set(labels.tolist()))
    members = [[i for i, y in enumerate(labels.tolist()) if y == label] for label in classes]
    chosen: list[int] = []
    for group, share in zip(members, allocate(count, [len(g) for g in members])):
        chosen += rng.sample(group, share)
    return sorted(chosen)


def read_field_samples(path: Path) -> list[tuple[str, str]]:
    """``(source, text)`` for every non-blank line of the user's field-samples file."""
    if not path.is_file():
        raise ConfigError(f"{path}: field samples file not found")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    samples = [(f"{path}:{n}", line.strip()) for n, line in enumerate(lines, 1) if line.strip()]
    if not samples:
        raise ConfigError(f"{path}: the field samples file is empty")
    return samples


@dataclasses.dataclass(frozen=True)
class CalibrationInputs:
    """What the representative set is drawn from: the split the configuration names, its ids, the label names and the vocabulary."""

    split: Path
    split_ids: Path
    labels: Path
    vocab: Path
    lower_case: bool
    sequence_length: int


def build_calibration(config_path: Path, inputs: CalibrationInputs, out: Mapping[str, Path]) -> dict:
    """Write ``out`` (the stage's declared ``representative`` and ``summary``) and return the summary."""
    config: CalibrationConfig = load_calibration(config_path)
    names = read_labels(inputs.labels)
    sequence_length = inputs.sequence_length
    sources: list[str] = []
    rows: list[np.ndarray] = []
    per_class: dict[str, int] = {}
    if config.samples:
        _, split_labels = read_split(inputs.split)
        split_ids = read_rows(inputs.split_ids, len(split_labels))
        for index in draw_stratified(split_labels, config.samples, config.seed):
            rows.append(split_ids[index])
            sources.append(f"{config.split}[{index}]")
            per_class[names[split_labels[index]]] = per_class.get(names[split_labels[index]], 0) + 1
    field = read_field_samples(config_path.parent / config.field_samples) if config.field_samples else []
    if field:
        from edge_build.tokenizer import token_ids

        rows += list(token_ids(inputs.vocab, inputs.lower_case, [text.encode("utf-8") for _, text in field], sequence_length))
        sources += [source for source, _ in field]

    ids = np.stack(rows) if rows else np.zeros((0, sequence_length), dtype=np.int32)
    if ids.shape[1] != sequence_length:
        raise StageError(f"{inputs.split_ids}: ids of length {ids.shape[1]}, the tokenizer's sequence length is {sequence_length} (run scons again)")
    empty = np.isin(ids, _EMPTY_IDS).all(axis=1)  # rows of nothing but [PAD]/[UNK]
    if empty.any():
        first = sources[int(np.argmax(empty))]
        raise StageError(
            f"{first}: tokenizes to nothing but [UNK]/padding ({int(empty.sum())} of {len(ids)} samples do); "
            "calibration needs text in the vocabulary's language"
        )
    warnings = []
    if len(ids) < SMALL_SET:
        warnings.append(f"{config_path}: only {len(ids)} calibration samples (fewer than {SMALL_SET}); INT8 ranges may be poor")
    for warning in warnings:
        cli.warn(warning)

    unknown_share = float(np.sum(ids == _EMPTY_IDS[1]) / max(np.sum(ids != _EMPTY_IDS[0]), 1))
    ids = ids.astype(np.int32)
    summary = {
        "config": str(config_path),
        "samples": int(len(ids)),
        "drawn": {"split": config.split if config.samples else None, "seed": config.seed, "per_class": per_class},
        "field_samples": {
            "file": str(config_path.parent / config.field_samples) if field else None,
            "count": len(field),
            "mode": config.field_samples_mode,
        },
        "sequence_length": sequence_length,
        "unknown_token_share": round(unknown_share, 6),
        "ids_sha256": hashlib.sha256(ids.tobytes()).hexdigest(),
        "warnings": warnings,
    }
    with atomic_outputs(out["representative"], out["summary"]) as (ids_tmp, summary_tmp):
        with open(ids_tmp, "wb") as handle:
            np.save(handle, ids)
        summary_tmp.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.stages.calibrate", description=__doc__.splitlines()[0])
    add_files("calibrate", parser)
    parser.add_argument("--lower-case", action=argparse.BooleanOptionalAction, default=True)
    return parser


def drive(args: argparse.Namespace) -> None:
    inputs = stage_inputs("calibrate", CalibrationInputs, args, lower_case=args.lower_case, sequence_length=window.read(args.window))
    summary = build_calibration(args.config, inputs, parsed("calibrate", args))
    field = summary["field_samples"]["count"]
    print(f"calibrate: {summary['samples']} samples ({field} from field samples) -> {args.representative}")


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
