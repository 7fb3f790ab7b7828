"""Stage *data*: read a corpus, split it per class keeping duplicates together, write one TFRecord file per split.

Reads the corpus through ``edge_build.corpus`` (its formats and column options are described there).

Duplicates (the algorithms are in ``edge_build.duplicates``). Texts are grouped by their
normalized form: ``unicodedata.normalize("NFKC", text).casefold()``, then every run of
Unicode whitespace (``str.split()``) collapsed to one space, stripped. Each group goes wholly
into one split, so no val or test text equals a train text after normalization. A group whose
copies disagree on the label is a label conflict: ``--label-conflicts drop`` (default) removes
it from every split; ``train`` puts it in train only, each copy with its own label.
Near-duplicates are pairs of kept groups whose word 5-gram shingle sets have a Jaccard similarity
of at least 0.8 (``duplicates.NEAR_DUPLICATE_JACCARD``; MinHash and LSH find candidates, the exact
similarity decides; texts under 5 words only match exact copies and are skipped; each group
counts once). ``--near-duplicates report`` (default) lists the pairs that end up in different
splits; ``group`` joins near-duplicates with their groups before splitting, so they share a split.

Split, stratified per class and deterministic in (examples, fractions, seed); sources sort in
natural order (``d.csv:9`` before ``d.csv:10``). A unit is one group,
or under ``group`` a component of groups joined by near-duplicate pairs, whose class is the label
of its member with the smallest source; a unit holding a label conflict kept under ``train`` goes
to train and is not stratified. Within a class the units are sorted by their first member's
source and shuffled with ``random.Random(f"{seed}:{label}")``; test, then val, take units from the
end of that order: the first always, each later one only if taking it leaves the split's example
count no further from its share of the class than skipping it, and never so many that a split
still to fill gets none; train keeps the rest. A class needs at least 3 units. Each split's
examples are written sorted by source and shuffled with ``random.Random(f"{seed}:order:{split}")``,
so classes are mixed along every file whatever the training shuffle buffer.

Writes, into the output directory, ``train.tfrecord``, ``val.tfrecord``, ``test.tfrecord``
(``tf.train.Example`` with ``text`` bytes and ``label`` int64), ``labels.txt`` (one name per line,
line number = label id) and ``summary.json``: ``dataset``, ``sha256``, ``examples`` (read),
``labels``, ``fractions``, ``seed``, ``counts`` (per split and class), ``warnings``, ``format`` (how
the file was read), ``normalization``, ``duplicates`` (texts occurring more than once, their
extra copies, the largest groups; a conflicting group's ``label`` joins its labels with ``, ``),
``label_conflicts``, ``near_duplicates`` (pairs found, those across splits), ``used`` (examples
written), ``characters`` (text lengths per split) and ``class_imbalance`` (the largest class's
share of the written examples over the smallest's).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
from collections.abc import Mapping
from pathlib import Path

from edge_build import cli, duplicates
from edge_build.atomic import atomic_outputs
from edge_build.corpus import (
    DEFAULT_DATASET,
    LABEL_CONFLICT_RULES,
    NEAR_DUPLICATE_RULES,
    SPLITS,
    DataOptions,
    Example,
    parse_fractions,
    read_corpus,
    source_order,
)
from edge_build.errors import DatasetError
from edge_build.metrics import distribution
from edge_build.stage_files import add_files, parsed

# summary.json lists only this many entries, so a corpus full of copies still gives a readable file.
LARGEST_GROUPS_LISTED = 20
SOURCES_LISTED = 5
CONFLICTS_LISTED = 50
NEAR_PAIRS_LISTED = 50


def corpus_labels(dataset: str, examples: list[Example]) -> list[str]:
    labels = sorted({e.label for e in examples})
    if len(labels) < 2:
        raise DatasetError(f"{dataset}: found {len(labels)} class(es) ({', '.join(labels)}); a classifier needs at least 2")
    for label in labels:
        if "\n" in label or "\r" in label:
            raise DatasetError(f"{dataset}: label {label!r} contains a line break")
    return labels


@dataclasses.dataclass(frozen=True)
class Group:
    """The examples whose texts are equal after normalization, sorted by source."""

    normalized: str
    examples: tuple[Example, ...]

    @property
    def source(self) -> str:
        return self.examples[0].source

    @property
    def labels(self) -> list[str]:
        return sorted({e.label for e in self.examples})

    @property
    def conflicting(self) -> bool:
        return len(self.labels) > 1

    def listed_sources(self) -> list[str]:
        return [e.source for e in self.examples[:SOURCES_LISTED]]


@dataclasses.dataclass(frozen=True)
class Unit:
    """Groups that go into one split together: one group, or near-duplicate groups joined."""

    groups: tuple[Group, ...]  # sorted by source

    @property
    def first(self) -> Example:
        """The member with the smallest source: its label is the class the unit is stratified under."""
        return self.groups[0].examples[0]

    @property
    def examples(self) -> list[Example]:
        return [e for group in self.groups for e in group.examples]

    @property
    def size(self) -> int:
        return sum(len(group.examples) for group in self.groups)


def exact_groups(examples: list[Example], normalized: list[str], members: list[list[int]]) -> list[Group]:
    """``examples`` grouped (``members``: indices per group) with their ``normalized`` texts, sorted by source."""
    groups = [Group(normalized[indices[0]], tuple(sorted((examples[i] for i in indices), key=source_order))) for indices in members]
    return sorted(groups, key=lambda g: source_order(g.examples[0]))


def take_share(units: list[Unit], target: float, leave: int) -> tuple[list[Unit], list[Unit]]:
    """Units taken from the end of ``units`` towards ``target`` examples, and the others in order.

    The first is always taken; a later one when the count with it is no further from the
    target than without it; never so many that fewer than ``leave`` units remain.
    """
    taken, skipped, count = [], [], 0
    for unit in reversed(units):
        near_target = not taken or count + unit.size / 2 <= target
        if near_target and len(units) - len(taken) - 1 >= leave:
            taken.append(unit)
            count += unit.size
        else:
            skipped.append(unit)
    return taken, skipped[::-1]


def split_class(label: str, units: list[Unit], fractions: tuple[float, float, float], seed: int) -> dict[str, list[Unit]]:
    """One class's units shared out over the splits (see the module docstring)."""
    remaining = sorted(units, key=lambda u: source_order(u.first))
    if len(remaining) < len(SPLITS):
        spec = "/".join(f"{f * 100:g}" for f in fractions)
        sample = f", e.g. {remaining[0].first.source}" if remaining else ""
        raise DatasetError(
            f"class '{label}' has {len(remaining)} group(s) of distinct texts ({sum(u.size for u in remaining)} example(s){sample}); "
            f"a {spec} split needs at least {len(SPLITS)} per class (copies count once; texts with conflicting labels are not split)"
        )
    random.Random(f"{seed}:{label}").shuffle(remaining)
    total = sum(u.size for u in remaining)
    shares: dict[str, list[Unit]] = {}
    # Test fills first and leaves a unit each for val and train; val leaves one for train.
    for split, leave in (("test", 2), ("val", 1)):
        shares[split], remaining = take_share(remaining, total * fractions[SPLITS.index(split)], leave)
    shares["train"] = remaining
    return shares


def assign_units(units: list[Unit], labels: list[str], fractions: tuple[float, float, float], seed: int) -> dict[str, list[Unit]]:
    """Units per split: stratified by class, except those holding a label conflict, which train keeps."""
    assigned: dict[str, list[Unit]] = {split: [] for split in SPLITS}
    by_label: dict[str, list[Unit]] = {label: [] for label in labels}
    for unit in units:
        if any(group.conflicting for group in unit.groups):
            assigned["train"].append(unit)
        else:
            by_label[unit.first.label].append(unit)
    for label, members in by_label.items():
        for split, taken in split_class(label, members, fractions, seed).items():
            assigned[split] += taken
    return assigned


def written_order(examples: list[Example], seed: int, split: str) -> list[Example]:
    """``examples`` sorted by source, then shuffled with a seed of their own, so classes interleave in the file."""
    ordered = sorted(examples, key=source_order)
    random.Random(f"{seed}:order:{split}").shuffle(ordered)
    return ordered


def duplicates_summary(groups: list[Group]) -> dict:
    repeated = sorted((g for g in groups if len(g.examples) > 1), key=lambda g: (-len(g.examples), source_order(g.examples[0])))
    return {
        "groups": len(repeated),
        "copies": sum(len(g.examples) - 1 for g in repeated),
        "largest": [{"sources": g.listed_sources(), "size": len(g.examples), "label": ", ".join(g.labels)} for g in repeated[:LARGEST_GROUPS_LISTED]],
    }


def conflicts_summary(conflicts: list[Group], rule: str) -> dict:
    return {
        "rule": rule,
        "groups": len(conflicts),
        "examples": sum(len(g.examples) for g in conflicts),
        "list": [{"sources": g.listed_sources(), "labels": g.labels} for g in conflicts[:CONFLICTS_LISTED]],
    }


def cross_split_pairs(pairs: list, groups: list[Group], split_of: dict[str, str]) -> dict:
    """The near-duplicate ``pairs`` (``duplicates.NearPair``, indexing ``groups``) whose groups landed in different splits."""
    crossing = [(groups[p.a].source, groups[p.b].source, p.jaccard) for p in pairs if split_of[groups[p.a].source] != split_of[groups[p.b].source]]
    return {
        "pairs": len(pairs),
        "cross_split_pairs": len(crossing),
        "list": [{"a": a, "b": b, "splits": [split_of[a], split_of[b]], "jaccard": round(j, 4)} for a, b, j in crossing[:NEAR_PAIRS_LISTED]],
    }


def split_corpus(
    examples: list[Example], labels: list[str], fractions: tuple[float, float, float], seed: int, options: DataOptions
) -> tuple[dict[str, list[Example]], dict]:
    """Each split's examples in written order, and the summary's sections on duplicates."""
    normalized = [duplicates.normalize(e.text) for e in examples]
    groups = exact_groups(examples, normalized, duplicates.group_indices(normalized))
    conflicts = [g for g in groups if g.conflicting]
    kept = groups if options.label_conflicts == "train" else [g for g in groups if not g.conflicting]
    pairs = duplicates.near_duplicate_pairs([g.normalized for g in kept])
    joined = [(p.a, p.b) for p in pairs] if options.near_duplicates == "group" else []
    units = [Unit(tuple(kept[i] for i in component)) for component in duplicates.connected_components(len(kept), joined)]
    assigned = assign_units(units, labels, fractions, seed)
    split_of = {group.source: split for split, members in assigned.items() for unit in members for group in unit.groups}
    splits = {split: written_order([e for unit in members for e in unit.examples], seed, split) for split, members in assigned.items()}
    findings = {
        "normalization": duplicates.NORMALIZATION,
        "duplicates": duplicates_summary(groups),
        "label_conflicts": conflicts_summary(conflicts, options.label_conflicts),
        "near_duplicates": {
            "rule": options.near_duplicates,
            "threshold": duplicates.NEAR_DUPLICATE_JACCARD,
            "shingle": duplicates.SHINGLE,
            **cross_split_pairs(pairs, kept, split_of),
        },
    }
    return splits, findings


def class_imbalance(counts: dict[str, dict[str, int]], labels: list[str]) -> float:
    totals = [sum(per_split[label] for per_split in counts.values()) for label in labels]
    return round(max(totals) / min(totals), 3)


def write_tfrecord(path: Path, examples: list[Example], label_ids: dict[str, int]) -> None:
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path)) as writer:
        for example in examples:
            features = tf.train.Features(
                feature={
                    "text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[example.text.encode("utf-8")])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label_ids[example.label]])),
                }
            )
            # A protobuf map has no fixed order; deterministic=True sorts it, so the bytes repeat.
            writer.write(tf.train.Example(features=features).SerializeToString(deterministic=True))


def build_data(
    dataset: str, outputs: Mapping[str, Path], fractions: tuple[float, float, float], seed: int, options: DataOptions = DataOptions()
) -> dict:
    """Read ``dataset``, split it and write ``outputs`` (the stage's declared files: each split's TFRecord, ``labels``,
    ``summary``); return the summary."""
    corpus = read_corpus(dataset, options)
    labels = corpus_labels(dataset, corpus.examples)
    splits, findings = split_corpus(corpus.examples, labels, fractions, seed, options)
    label_ids = {label: i for i, label in enumerate(labels)}
    counts = {split: {label: sum(e.label == label for e in members) for label in labels} for split, members in splits.items()}
    summary = {
        "dataset": dataset,
        "sha256": corpus.sha256,
        "examples": len(corpus.examples),
        "labels": labels,
        "fractions": dict(zip(SPLITS, fractions)),
        "seed": seed,
        "counts": counts,
        "warnings": corpus.warnings,
        "format": corpus.format,
        **findings,
        "used": sum(len(members) for members in splits.values()),
        "characters": {split: distribution([len(e.text) for e in members]) for split, members in splits.items()},
        "class_imbalance": class_imbalance(counts, labels),
    }
    for warning in corpus.warnings:
        cli.warn(warning)
    with atomic_outputs(*outputs.values()) as temporaries:
        written = dict(zip(outputs, temporaries))
        for split in SPLITS:
            write_tfrecord(written[split], splits[split], label_ids)
        written["labels"].write_text("".join(f"{label}\n" for label in labels), encoding="utf-8")
        written["summary"].write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.stages.data", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dataset", default=DEFAULT_DATASET, help="a directory, a .csv, .tsv or .jsonl file, or embedded:<name> (default: %(default)s)"
    )
    add_files("data", parser)
    parser.add_argument("--split", default="80/10/10", help="train/val/test shares (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=1234, help="seed of the split (default: %(default)s)")
    parser.add_argument("--text-column", default="text", help="column (.csv, .tsv) or key (.jsonl) of the text (default: %(default)s)")
    parser.add_argument("--label-column", default="label", help="column (.csv, .tsv) or key (.jsonl) of the label (default: %(default)s)")
    parser.add_argument(
        "--delimiter",
        default="",
        help=r"delimiter of a .csv or .tsv file: one character, or \t, tab, comma, semicolon, pipe (default: , for .csv, tab for .tsv)",
    )
    parser.add_argument(
        "--label-conflicts",
        choices=LABEL_CONFLICT_RULES,
        default="drop",
        help="identical texts with different labels: drop them, or keep them in train only (default: %(default)s)",
    )
    parser.add_argument(
        "--near-duplicates",
        choices=NEAR_DUPLICATE_RULES,
        default="report",
        help="near-duplicate texts: report those in different splits, or keep them in one split (default: %(default)s)",
    )
    return parser


def drive(args: argparse.Namespace) -> None:
    options = DataOptions(args.text_column, args.label_column, args.delimiter, args.label_conflicts, args.near_duplicates)
    outputs = parsed("data", args)
    summary = build_data(args.dataset, outputs, parse_fractions(args.split), args.seed, options)
    sizes = ", ".join(f"{split} {sum(counts.values())}" for split, counts in summary["counts"].items())
    print(f"data: {summary['examples']} examples, {summary['used']} used, {len(summary['labels'])} classes ({sizes}) -> {outputs['train'].parent}")
    copies, conflicts, near = summary["duplicates"], summary["label_conflicts"], summary["near_duplicates"]
    print(
        f"data: {copies['groups']} text(s) occur more than once ({copies['copies']} extra copies, each text in one split); "
        f"{conflicts['groups']} with conflicting labels ({conflicts['examples']} examples, {conflicts['rule']}); "
        f"{near['pairs']} near-duplicate pair(s), {near['cross_split_pairs']} across splits ({near['rule']}); see summary.json"
    )


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
