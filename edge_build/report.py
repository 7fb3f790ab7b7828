"""Stage *report*: evaluate the target's artifacts on the test split; write ``eval.json`` and ``report.md``.

Reads the exported SavedModel (loaded in this process, as a user would load it),
``test.tfrecord``, ``labels.txt``, the data ``summary.json`` and ``train_log.json``.
The SavedModel is fed raw text through ``serving_default``, so the evaluation
covers the tokenizer inside it too.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from edge_build import cli, saved_model
from edge_build.atomic import atomic_outputs
from edge_build.metrics import classification_metrics
from edge_build.records import read_labels, read_split


def directory_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def evaluate_saved_model(saved_model_dir: Path, texts: list[bytes], y_true: np.ndarray, labels: list[str]) -> dict:
    outputs = saved_model.classify_texts(saved_model.load(saved_model_dir), texts)
    y_pred = np.argmax(outputs["logits"], axis=-1)
    named = [label.decode("utf-8") for label in outputs["label"]]
    if named != [labels[i] for i in y_pred]:
        raise AssertionError("serving_default's label output disagrees with the argmax of its logits")
    return {
        "path": str(saved_model_dir),
        "size_bytes": directory_size(saved_model_dir),
        **classification_metrics(y_true, y_pred, labels),
    }


def render_markdown(target: str, evaluation: dict, data_summary: dict, train_log: dict) -> str:
    labels = evaluation["labels"]
    lines = [f"# edge-build report: target `{target}`", ""]
    lines += ["## Data", "", f"Dataset `{data_summary['dataset']}` (sha256 `{data_summary['sha256'][:16]}…`), {data_summary['examples']} examples.", ""]
    lines += ["| split | " + " | ".join(labels) + " | total |", "|---" * (len(labels) + 2) + "|"]
    for split, counts in data_summary["counts"].items():
        lines.append(f"| {split} | " + " | ".join(str(counts[label]) for label in labels) + f" | {sum(counts.values())} |")
    for warning in data_summary.get("warnings", []):
        lines.append(f"\n- warning: {warning}")
    epochs = train_log["epochs"]
    rate = np.median([e["examples_per_second"] for e in epochs])
    lines += [
        "",
        "## Training",
        "",
        f"{len(epochs)} epochs, best validation epoch {train_log['best_epoch']} "
        f"(val accuracy {train_log['best_val_accuracy']:.4f}, val loss {train_log['best_val_loss']:.4f}); "
        f"median {rate:.0f} examples/s.",
        "",
        "## Test split",
        "",
        "| artifact | accuracy | macro F1 | correct | size |",
        "|---|---|---|---|---|",
    ]
    for name, result in evaluation["artifacts"].items():
        lines.append(f"| {name} | {result['accuracy']:.4f} | {result['macro_f1']:.4f} | {result['correct']}/{result['examples']} | {result['size_bytes'] / 1e6:.2f} MB |")
    for name, result in evaluation["artifacts"].items():
        lines += ["", f"### {name}: per class", "", "| class | precision | recall | F1 | support |", "|---|---|---|---|---|"]
        for label, figures in result["per_class"].items():
            lines.append(f"| {label} | {figures['precision']:.3f} | {figures['recall']:.3f} | {figures['f1']:.3f} | {figures['support']} |")
        lines += ["", f"### {name}: confusion matrix (rows: true, columns: predicted)", "", "| | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
        for label, row in zip(labels, result["confusion_matrix"]):
            lines.append(f"| **{label}** | " + " | ".join(map(str, row)) + " |")
    return "\n".join(lines) + "\n"


def build_report(target: str, data_dir: Path, train_log_path: Path, saved_model_dir: Path, out_dir: Path) -> dict:
    labels = read_labels(data_dir / "labels.txt")
    texts, y_true = read_split(data_dir / "test.tfrecord")
    evaluation = {
        "target": target,
        "split": "test",
        "labels": labels,
        "artifacts": {"saved_model_cpu": evaluate_saved_model(saved_model_dir, texts, y_true, labels)},
    }
    data_summary = json.loads((data_dir / "summary.json").read_text(encoding="utf-8"))
    train_log = json.loads(train_log_path.read_text(encoding="utf-8"))
    with atomic_outputs(out_dir / "eval.json", out_dir / "report.md") as (eval_tmp, report_tmp):
        eval_tmp.write_text(json.dumps(evaluation, indent=2) + "\n", encoding="utf-8")
        report_tmp.write_text(render_markdown(target, evaluation, data_summary, train_log), encoding="utf-8")
    return evaluation


def headline(evaluation: dict, report_path: Path) -> str:
    lines = [f"== {evaluation['target']}: test split, {len(evaluation['labels'])} classes =="]
    for name, result in evaluation["artifacts"].items():
        lines.append(
            f"   {name:<16} accuracy {result['accuracy']:.4f} ({result['correct']}/{result['examples']})"
            f"  macro F1 {result['macro_f1']:.4f}  {result['size_bytes'] / 1e6:.2f} MB"
        )
    lines.append(f"   report: {report_path}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.report", description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="the target profile's name (for the report's title)")
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--train-log", type=Path, required=True)
    parser.add_argument("--saved-model", type=Path, required=True, help="the CPU SavedModel's version directory")
    parser.add_argument("--out-dir", type=Path, required=True, help="where eval.json and report.md go")
    return parser


def drive(args: argparse.Namespace) -> None:
    evaluation = build_report(args.target, args.data_dir, args.train_log, args.saved_model, args.out_dir)
    print(headline(evaluation, args.out_dir / "report.md"))


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
