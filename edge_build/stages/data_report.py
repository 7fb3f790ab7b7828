"""Stage *data_report*: what the data holds, in the tokens the model will see.

Reads the data stage's ``summary.json`` and split files and the learned ``vocab.txt``;
writes ``report.md`` (examples per class and split, lengths in characters and
tokens, the share truncated at ``sequence_length``, the ``[UNK]`` rate, duplicate
groups, label conflicts, near-duplicates, class imbalance) and ``report.json`` (the
token figures and a one-line headline that every target's report quotes), and
``window.json``: the model's window, ``[tokenizer] sequence_length`` as set or,
for ``"auto"``, sized from the training texts' token counts (``edge_build.window``).
The tokenize, calibrate, train, export and tflite stages read the length there.
Runs after the vocabulary, so a change of tokenizer settings rereads it and
nothing upstream.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from edge_build import cli, window
from edge_build.atomic import atomic_outputs
from edge_build.corpus import SPLITS
from edge_build.markdown import table
from edge_build.metrics import distribution
from edge_build.records import read_json
from edge_build.special_tokens import UNK
from edge_build.stage_files import add_files, parsed
from edge_build.tfrecord import read_split
from edge_build.tokenizer import load_tokenizer

_BATCH = 256


def token_counts(tokenizer, unk_id: int, texts: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Per text: its WordPiece tokens before truncation, and how many of them are ``[UNK]``."""
    import tensorflow as tf

    lengths, unknown = [], []
    for start in range(0, len(texts), _BATCH):
        ids = tokenizer.tokenize(tf.constant(texts[start : start + _BATCH])).merge_dims(-2, -1)
        lengths.append(ids.row_lengths().numpy())
        unknown.append(tf.reduce_sum(tf.cast(tf.equal(ids, unk_id), tf.int64), axis=1).numpy())
    return np.concatenate(lengths), np.concatenate(unknown)


def token_figures(split_files: dict[str, Path], vocab: Path, lower_case: bool, sequence_length: int | str) -> dict:
    """Each split's token figures, truncated at the window ``sequence_length`` (a number, or "auto") gives, and that window."""
    tokens = vocab.read_text(encoding="utf-8").splitlines()
    tokenizer = load_tokenizer(vocab, lower_case)
    counts = {split: token_counts(tokenizer, tokens.index(UNK), read_split(path)[0]) for split, path in split_files.items()}
    chosen = window.choose(sequence_length, counts["train"][0].tolist())
    figures = {
        split: {
            "tokens": distribution(lengths),
            "truncated_share": round(float(np.mean(lengths > chosen["sequence_length"])), 4),
            "unk_rate": round(float(unknown.sum() / max(lengths.sum(), 1)), 5),
        }
        for split, (lengths, unknown) in counts.items()
    }
    return {"sequence_length": chosen["sequence_length"], "window": chosen, "lower_case": lower_case, "vocab_size": len(tokens), "splits": figures}


def headline(summary: dict, tokens: dict) -> str:
    """One line on the data, for the top of every target's report."""
    train = tokens["splits"]["train"]
    return (
        f"{summary['examples']} examples read, {summary['used']} used in {len(summary['labels'])} classes "
        f"(largest/smallest {summary['class_imbalance']:.2f}x); {summary['duplicates']['groups']} duplicate groups, each kept in one split; "
        f"{summary['label_conflicts']['groups']} label conflicts ({summary['label_conflicts']['rule']}); "
        f"{summary['near_duplicates']['cross_split_pairs']} near-duplicate pairs across splits; "
        f"train texts {train['tokens']['median']:.0f} tokens (median), {train['truncated_share']:.1%} truncated at {tokens['sequence_length']}, "
        f"[UNK] {train['unk_rate']:.2%}"
    )


def window_sentence(chosen: dict) -> str:
    whole = f"{chosen['train_share_whole']:.1%} of the {chosen['train_texts']} training texts fit in it whole"
    if chosen["setting"] == window.AUTO:
        low, high = chosen["bounds"]
        return f'The window was sized from the data (`"auto"`: the smallest power of two from {low} to {high} that holds {chosen["coverage"]:.0%}); {whole}.'
    return f"The window is set in the hyperparameters; {whole}."


def render(summary: dict, tokens: dict) -> str:
    labels, counts = summary["labels"], summary["counts"]
    used = {label: sum(counts[split][label] for split in SPLITS) for label in labels}
    lines = [f"# Data report: `{summary['dataset']}`", "", headline(summary, tokens) + ".", "", "## Examples per class and split", ""]
    lines += table(
        ["class", *SPLITS, "total", "share"],
        [[label, *(counts[split][label] for split in SPLITS), used[label], f"{used[label] / summary['used']:.1%}"] for label in labels]
        + [["**all**", *(sum(counts[split].values()) for split in SPLITS), summary["used"], "100%"]],
    )
    lines += [
        "",
        f"Largest class / smallest class: {summary['class_imbalance']:.2f}.",
        "",
        "## Lengths",
        "",
        f"Characters, and WordPiece tokens before truncation at `sequence_length` = {tokens['sequence_length']} "
        f"(vocabulary of {tokens['vocab_size']}, lower_case = {str(tokens['lower_case']).lower()}). {window_sentence(tokens['window'])}",
        "",
    ]
    rows = []
    for split in SPLITS:
        c, t = summary["characters"][split], tokens["splits"][split]
        rows.append(
            [
                split,
                *(f"{c[k]:.0f}" for k in ("median", "p95", "max")),
                *(f"{t['tokens'][k]:.0f}" for k in ("median", "p95", "max")),
                f"{t['truncated_share']:.1%}",
                f"{t['unk_rate']:.2%}",
            ]
        )
    lines += table(["split", "chars median", "chars p95", "chars max", "tokens median", "tokens p95", "tokens max", "truncated", "[UNK] rate"], rows)
    duplicates, conflicts, near = summary["duplicates"], summary["label_conflicts"], summary["near_duplicates"]
    lines += [
        "",
        "## Duplicates",
        "",
        f"Texts count as the same when they are equal after {summary['normalization']}.",
        "",
        f"{duplicates['groups']} texts occur more than once ({duplicates['copies']} extra copies); each group went wholly into one split, "
        "so no validation or test text equals a training text.",
        "",
    ]
    if duplicates["largest"]:
        lines += table(
            ["copies", "label", "sources"], [[g["size"], g["label"], ", ".join(f"`{s}`" for s in g["sources"])] for g in duplicates["largest"]]
        )
    rule = {"drop": "dropped from every split", "train": "kept in the training split only"}[conflicts["rule"]]
    lines += [
        "",
        "## Label conflicts",
        "",
        f'{conflicts["groups"]} texts ({conflicts["examples"]} examples) carry more than one label: {rule} (`[data] label_conflicts = "{conflicts["rule"]}"`).',
        "",
    ]
    if conflicts["list"]:
        lines += table(["labels", "sources"], [[", ".join(c["labels"]), ", ".join(f"`{s}`" for s in c["sources"])] for c in conflicts["list"]])
    lines += [
        "",
        "## Near-duplicates",
        "",
        f"Pairs of texts whose {near['shingle']} have a Jaccard similarity of at least {near['threshold']:g} (MinHash candidates, checked exactly): "
        f'{near["pairs"]} pairs, {near["cross_split_pairs"]} of them across splits (`[data] near_duplicates = "{near["rule"]}"`).',
        "",
    ]
    if near["list"]:
        lines += table(
            ["a", "b", "splits", "Jaccard"], [[f"`{p['a']}`", f"`{p['b']}`", " / ".join(p["splits"]), f"{p['jaccard']:.2f}"] for p in near["list"]]
        )
    lines += [f"\n- warning: {w}" for w in summary.get("warnings", [])]
    return "\n".join(lines) + "\n"


def build_data_report(
    split_files: dict[str, Path], summary_path: Path, vocab: Path, lower_case: bool, sequence_length: int | str, out: Mapping[str, Path]
) -> dict:
    """Write ``out`` (the stage's declared ``page``, ``record`` and ``window``) from the splits (``{split: path}``), the data
    summary and the vocabulary."""
    summary = read_json(summary_path)
    tokens = token_figures(split_files, vocab, lower_case, sequence_length)
    record = {**tokens, "headline": headline(summary, tokens)}
    with atomic_outputs(*out.values()) as temporaries:
        written = dict(zip(out, temporaries))
        written["page"].write_text(render(summary, tokens), encoding="utf-8")
        written["record"].write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        window.write(written["window"], tokens["window"])
    return record


def window_setting(value: str) -> int | str:
    if value == window.AUTO or (value.isdigit() and int(value) > 0):
        return value if value == window.AUTO else int(value)
    raise argparse.ArgumentTypeError(f"{value!r}: expected a whole number above 0 or {window.AUTO!r}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.stages.data_report", description=__doc__.splitlines()[0])
    add_files("data_report", parser)
    parser.add_argument("--sequence-length", type=window_setting, required=True, help=f"a number of token ids, or {window.AUTO!r}")
    parser.add_argument("--lower-case", action=argparse.BooleanOptionalAction, required=True)
    return parser


def drive(args: argparse.Namespace) -> None:
    splits = {split: getattr(args, split) for split in SPLITS}
    record = build_data_report(splits, args.summary, args.vocab, args.lower_case, args.sequence_length, parsed("data_report", args))
    print(f"data report: {record['headline']} -> {args.page}")


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
