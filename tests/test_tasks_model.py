"""The Tasks-ready model in MediaPipe's own TextClassifier, the metadata every TF Lite model carries, and what MediaPipe cannot follow."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
from conftest import REPO, TINY_HPARAMS, TINY_TASKS_PROFILE, conversion_inputs, write_profile

from edge_build.board.launch import model_labels
from edge_build.board.wordpiece import WordPiece
from edge_build.config.profile import load_profile, tokenizer_refusal
from edge_build.convert.tasks import ASCII_LOWER, word_aliases
from edge_build.layout import Target
from edge_build.records import read_labels
from edge_build.tokenizer import token_ids


def test_the_tasks_model_classifies_raw_text_in_mediapipe_within_the_int8_gates(tasks_target):
    record, checks, layout = tasks_target["record"], tasks_target["checks"], tasks_target["layout"]
    # Validation parity on TensorFlow's interpreter, fed as MediaPipe feeds it, against the Keras model on the tokenize stage's ids.
    # A pass the tiny validation split is too small to decide is "undecided", never a failure.
    assert [g["verdict"] for g in record["validation_gates"]] in (["pass", "pass"], ["undecided", "pass"])
    assert record["runtimes"]["mediapipe"]["ok"] and record["runtimes"]["mediapipe"]["version"] == "1.2.2"
    # Three int32 inputs, the int8 graph, float32 scores out (MediaPipe refuses an int8 output).
    assert {"FULLY_CONNECTED", "SOFTMAX", "DEQUANTIZE"} <= {op["op"] for op in record["operators"]}
    assert record["tensor_types"]["INT8"] > 0 and record["converter"]["inference_output_type"] == "float32"
    outcome = checks["checks"]["tflite_tasks_int8"]["mediapipe"]
    assert outcome["status"] == "ok" and outcome["problems"] == [] and outcome["runtime_version"] == "1.2.2"
    parity = outcome["parity"]
    assert parity["examples"] == checks["golden_examples"] and parity["top1_agreement"] >= 0.8
    assert parity["accuracy"] >= parity["reference_accuracy"] - 0.2
    # MediaPipe's scores are TensorFlow's interpreter's on the same ids, but for int8 rounding (1/256 steps).
    assert outcome["runtime_vs_tf_lite"]["top1_agreement"] >= 0.95 and outcome["runtime_vs_tf_lite"]["max_abs_logit_error"] <= 2 / 256
    assert 0 < outcome["latency"]["p50_us"] < 1e6 and outcome["latency"]["load_ms"] > 0
    # What MediaPipe read: its BertTokenizer over the build's vocabulary, and the labels, both inside the model.
    (subgraph,) = record["metadata"]["subgraph_metadata"]
    (unit,) = subgraph["input_process_units"]
    assert unit["options_type"] == "BertTokenizerOptions" and unit["options"]["vocab_file"][0]["name"] == "vocab.txt"
    assert [t["name"] for t in subgraph["input_tensor_metadata"]] == ["ids", "segment_ids", "mask"]
    model = tasks_target["target"].artifact("tflite_tasks_int8")
    with zipfile.ZipFile(model) as packed:
        vocab = packed.read("vocab.txt").decode("utf-8")
    # The training vocabulary, then the aliases: the marks MediaPipe does not normalize, which the model maps back.
    training = layout.vocab.read_text(encoding="utf-8")
    aliases = vocab.removeprefix(training).splitlines()
    assert vocab.startswith(training) and len(aliases) == record["tasks_model"]["aliases"] > 0
    assert "，" in aliases or "," not in training.splitlines()
    assert model_labels(str(model), {}) == read_labels(layout.data.labels)


def test_the_tasks_model_and_its_metadata_are_byte_reproducible(tasks_target, tiny_artifacts, tmp_path: Path, monkeypatch):
    from edge_build.stages import tflite

    # The metadata's version holds the build time: SConstruct pins it to the last commit's, as here.
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764720000")
    models = []
    for name in ("first", "second"):
        target = Target(tmp_path / name, "tiny-tasks")
        record = tflite.convert(
            "tflite_tasks_int8",
            conversion_inputs(tiny_artifacts),
            tasks_target["profile"],
            target.converted_files("tflite_tasks_int8"),
            tasks_target["runtime_env"],
            tiny_artifacts["writer_env"],
        )
        assert record["metadata"]["version"].endswith(", built 2025-12-03T00:00:00+00:00")
        models.append(target.artifact("tflite_tasks_int8").read_bytes())
    assert models[0] == models[1]


def test_every_tflite_model_carries_its_vocabulary_labels_and_provenance(tiny_artifacts):
    import datetime
    import os

    layout, target = tiny_artifacts["layout"], Target(tiny_artifacts["target"], "tiny")
    labels = read_labels(layout.data.labels)
    # What the version must start with, asked of git here: the checkout's HEAD (or the pinned revision, or none outside a checkout).
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True)
    commit = os.environ.get("EDGE_BUILD_GIT_REVISION") or (head.stdout.strip() if head.returncode == 0 else "no git revision")
    for name in ("tflite_fp32", "tflite_fp16", "tflite_int8"):
        record = json.loads(target.conversion_record(name).read_text(encoding="utf-8"))
        shown = record["metadata"]
        assert shown["name"] == f"{name} (tiny)" and shown["author"] == "edge-build"
        # The version is the checkout's commit, then the conversion's time: after training, before the file was written.
        revision, built = shown["version"].split(", built ")
        assert revision.removesuffix("-dirty") == commit
        built_at = datetime.datetime.fromisoformat(built)
        assert built_at.utcoffset() == datetime.timedelta(0)
        if "SOURCE_DATE_EPOCH" in os.environ:
            assert built_at.timestamp() == int(os.environ["SOURCE_DATE_EPOCH"])
        else:
            assert int(layout.weights.stat().st_mtime) <= built_at.timestamp() <= target.artifact(name).stat().st_mtime
        (subgraph,) = shown["subgraph_metadata"]
        assert [f["type"] for t in subgraph["input_tensor_metadata"] for f in t["associated_files"]] == ["VOCABULARY"]
        assert [f["type"] for t in subgraph["output_tensor_metadata"] for f in t["associated_files"]] == ["TENSOR_AXIS_LABELS"]
        with zipfile.ZipFile(target.artifact(name)) as packed:
            assert packed.read("vocab.txt") == layout.vocab.read_bytes()
            # Pinned member times: the metadata keeps the file byte-reproducible.
            assert {info.date_time for info in packed.infolist()} == {(1980, 1, 1, 0, 0, 0)}
        assert model_labels(str(target.artifact(name)), {}) == labels


def test_a_cased_tokenizer_refuses_the_tasks_model_naming_the_key(tmp_path: Path):
    write_profile(tmp_path, "tasks", TINY_TASKS_PROFILE)
    profile = load_profile(tmp_path, "tasks")
    hparams = tmp_path / "hparams.toml"
    assert tokenizer_refusal(profile, True, hparams) is None
    assert tokenizer_refusal(profile, False, hparams) == (
        f"{hparams}: key 'tokenizer.lower_case': false, which MediaPipe's BertTokenizer cannot follow (it always lowercases), "
        f"and {profile.source} lists tflite_tasks_int8 (allowed: lower_case = true, or drop tflite_tasks_int8 from 'artifacts')"
    )
    # From the command line: one line, exit 2, nothing built.
    hparams.write_text(TINY_HPARAMS.replace("lower_case = true", "lower_case = false"), encoding="utf-8")
    command = [
        sys.executable,
        "-m",
        "SCons",
        "-Q",
        f"targets_dir={tmp_path}",
        "target=tasks",
        f"hparams={hparams}",
        f"build_dir={tmp_path / 'build'}",
    ]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr == f"scons: *** {tokenizer_refusal(profile, False, hparams)}\n"
    assert not (tmp_path / "build").exists()


def test_the_training_texts_non_ascii_words_get_mediapipe_spellings_that_tokenize_as_in_training(tmp_path: Path):
    """MediaPipe lowercases ASCII only and strips no accent: each WordPiece of a training word, spelled as MediaPipe reads
    it, maps to the training token, and WordPiece's greedy match then cuts MediaPipe's word where training cuts it."""
    tokens = ["[PAD]", "[UNK]", "ult", "##imo", "la", "##stima", "el", "garcia", "!", ",", "ss", "stra", "##sse", "u", "##n", "##ico"]
    # Every letter alone, as the vocabulary learner keeps them.
    tokens += [*"abcegilmorst", *(f"##{char}" for char in "abcegilmorstu")]
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(f"{token}\n" for token in tokens), encoding="utf-8")
    text = "El Último, Lástima! García"
    aliases = word_aliases(vocab, [text.encode(), "Straße".encode()])
    # "Ú" is not ASCII: MediaPipe keeps it upper-case. ß reads as two characters: its word gets none.
    assert aliases == {"Últ": tokens.index("ult"), "lá": tokens.index("la"), "garcía": tokens.index("garcia")}
    remap = np.array([*range(len(tokens)), *aliases.values()])
    mediapipe = WordPiece([*tokens, *aliases], lower_case=False)

    def as_mediapipe(text: str) -> list[int]:
        return [int(remap[i]) for i in mediapipe.tokenize(text.translate(ASCII_LOWER))]

    training = token_ids(vocab, True, [text.encode()], 12)[0].tolist()
    assert as_mediapipe(text) == [i for i in training if i] == [6, 2, 3, 9, 4, 5, 8, 7]
    # A word no training text holds may still differ: "único" is [UNK] to MediaPipe, u ##n ##ico to training.
    assert as_mediapipe("único") == [1] and token_ids(vocab, True, ["único".encode()], 4)[0].tolist() == [13, 14, 15, 0]
