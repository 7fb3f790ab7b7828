"""``bench.py --text``: text in, label out on the board path, with stand-in models (no runtime, no TensorFlow, no trained model)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edge_build.board import EXIT_USAGE, bench, launch
from edge_build.board.parity import pack_texts
from edge_build.board.text_bench import choose_text

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "planet", "comet", "goal", "recipe", "the", "##s"]
SEQUENCE_LENGTH = 8
CLASSES = 3
#: Lengths 23, 12, 41, 20 and 10 characters: the median-length text is the fourth.
TEXTS = ["the planet and the goal", "recipe comet", "goal goal goal planet the comets the goal", "Comet planets recipe", "the recipe"]
MEDIAN_LENGTH_INDEX = 3


class StandInModel:
    """What ``bench.open_model`` gives, without a runtime: logits naming class ``first id (or first byte) % 3``; it keeps what it was given."""

    outputs_scores = False
    load_ms = 1.5
    batch = 1
    #: An interpreter's input detail, as far as bench's invoke benchmark reads it.
    input = {"shape": np.array([1, SEQUENCE_LENGTH])}

    def __init__(self, takes_text: bool):
        self.takes_text = takes_text
        self.inputs: list[np.ndarray] = []

    def run(self, inputs: np.ndarray) -> np.ndarray:
        self.inputs.append(inputs)
        first = inputs[0][0] if self.takes_text else int(inputs[0, 0])
        logits = np.zeros((len(inputs), CLASSES), np.float32)
        logits[:, first % CLASSES] = 1
        return logits

    def close(self) -> None:
        pass


def stand_in(monkeypatch, takes_text: bool = False) -> StandInModel:
    model = StandInModel(takes_text)
    monkeypatch.setattr(bench, "open_model", lambda runtime, path, threads, batch: model)
    return model


def write_bundle(folder: Path, files: dict[str, bytes], **record) -> Path:
    """A bundle folder that ``launch.verify`` accepts: ``files`` and a manifest listing them, with ``record``'s keys beside."""
    folder.mkdir(parents=True, exist_ok=True)
    listed = {}
    for name, content in files.items():
        (folder / name).write_bytes(content)
        listed[name] = {"size": len(content), "sha256": hashlib.sha256(content).hexdigest()}
    (folder / "manifest.json").write_text(json.dumps({"files": listed, **record}), encoding="utf-8")
    return folder


def ids_bundle(folder: Path, **record) -> Path:
    tokenizer = {"lower_case": True, "sequence_length": SEQUENCE_LENGTH}
    return write_bundle(
        folder,
        {"model_int8.tflite": b"TFL3 stand-in", "vocab.txt": "\n".join(VOCAB).encode() + b"\n", **record.pop("files", {})},
        tokenizer=tokenizer,
        **record,
    )


def text_file(tmp_path: Path, texts: list[str]) -> Path:
    path = tmp_path / "texts.txt"
    path.write_text("".join(f"{text}\n" for text in texts), encoding="utf-8")
    return path


def golden_bytes(path: Path, texts: list[str] | None) -> bytes:
    """A golden set of ``len(TEXTS)`` examples, with the raw texts when ``texts`` is given."""
    extra = pack_texts([t.encode() for t in texts]) if texts else {}
    count = len(TEXTS)
    np.savez(
        path,
        ids=np.zeros((count, SEQUENCE_LENGTH), np.int32),
        labels=np.zeros(count, np.int32),
        reference_logits=np.zeros((count, CLASSES), np.float32),
        **extra,
    )
    return path.read_bytes()


def error_lines(capsys) -> list[str]:
    return capsys.readouterr().err.splitlines()


def bundle_bench(folder: Path, argv: list[str]) -> int:
    """bench as a bundle's launcher runs it: text mode encodes with ``folder``'s tokenizer, as ``launch.bench_main`` hands it in."""
    manifest = launch.verify(str(folder))
    return bench.execute(bench.build_parser().parse_args(argv), lambda model: launch.text_encoder(model, str(folder), manifest))


def test_the_module_refuses_text_mode_outside_a_bundle_and_loads_no_tokenizer(tmp_path: Path):
    # As the build starts it: the module as __main__, whose refusal must still be the usage one.
    texts = str(text_file(tmp_path, TEXTS))
    refused = subprocess.run(
        [sys.executable, "-m", "edge_build.board.bench", str(tmp_path / "model.tflite"), "--text", "--text-file", texts],
        capture_output=True,
        text=True,
    )
    assert refused.returncode == EXIT_USAGE and refused.stderr.splitlines() == [f"error: {bench.TEXT_NEEDS_BUNDLE}"]
    # The runtime checks time invokes alone: the bundle's checks and its tokenizer stay out of that process.
    probe = "import sys, edge_build.board.bench; print(sorted(m for m in sys.modules if m.endswith(('.launch', '.wordpiece', '.agent'))))"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip() == "[]"


def test_without_texts_text_mode_is_refused_in_one_line_before_the_model_loads(monkeypatch, tmp_path: Path, capsys):
    monkeypatch.setattr(bench, "open_model", lambda *args: pytest.fail("the model was loaded for a refused run"))
    folder = ids_bundle(tmp_path / "bundle")
    model = str(folder / "model_int8.tflite")

    def main(argv: list[str]) -> int:
        return bundle_bench(folder, argv)

    assert main([model, "--text"]) == EXIT_USAGE
    assert error_lines(capsys) == ["error: --text needs texts: --text-file PATH (UTF-8, one text per line), or a --golden set that holds raw texts"]
    # A golden set of an ids-only target holds no raw texts: the same refusal, naming the file.
    golden_bytes(tmp_path / "golden.npz", None)
    assert main([model, "--text", "--golden", str(tmp_path / "golden.npz")]) == EXIT_USAGE
    (line,) = error_lines(capsys)
    assert line.startswith(f"error: --text needs texts: {tmp_path / 'golden.npz'} has no raw texts here") and line.endswith(
        "give --text-file PATH (UTF-8, one text per line)"
    )
    # A missing file, an empty one, a position past the end, and a batch: each one line and the usage code.
    assert main([model, "--text", "--text-file", str(tmp_path / "missing.txt")]) == EXIT_USAGE
    (line,) = error_lines(capsys)
    assert line.startswith(f"error: {tmp_path / 'missing.txt'}: cannot read the texts ([Errno 2] No such file or directory")
    assert main([model, "--text", "--text-file", str(text_file(tmp_path, []))]) == EXIT_USAGE
    assert error_lines(capsys) == [f"error: {tmp_path / 'texts.txt'}: no texts (UTF-8, one text per line)"]
    assert main([model, "--text", "--text-file", str(text_file(tmp_path, TEXTS)), "--text-index", "5"]) == EXIT_USAGE
    assert error_lines(capsys) == ["error: --text-index 5: there are 5 texts (0 to 4)"]
    assert main([model, "--text", "--text-file", str(tmp_path / "texts.txt"), "--batch", "2"]) == EXIT_USAGE
    assert error_lines(capsys) == ["error: --text times one text per run: --batch 1, not 2"]


def test_the_median_length_text_is_chosen_unless_an_index_is_given():
    assert [len(text) for text in TEXTS] == [23, 12, 41, 20, 10]
    assert choose_text(TEXTS, None).index == MEDIAN_LENGTH_INDEX
    # Of an even count, the longer middle one; of equal lengths, the first in the set.
    assert choose_text(["bb", "a", "dddd", "ccc"], None).index == 3
    assert choose_text(["aa", "bb", "c"], None).index == 0
    chosen = choose_text(TEXTS, 2)
    assert (chosen.index, chosen.count, chosen.text) == (2, len(TEXTS), TEXTS[2])


def test_text_mode_times_the_tokenizer_invoke_and_argmax_in_the_same_layout(monkeypatch, tmp_path: Path, capsys):
    model = stand_in(monkeypatch)
    path = str(ids_bundle(tmp_path / "bundle") / "model_int8.tflite")
    texts = str(text_file(tmp_path, TEXTS))
    assert bench.main([path, "--warmup", "2", "--runs", "7", "--out", str(tmp_path / "invoke.json")]) == 0
    text_argv = [path, "--text", "--text-file", texts, "--warmup", "2", "--runs", "7", "--out", str(tmp_path / "text.json")]
    assert bundle_bench(tmp_path / "bundle", text_argv) == 0
    invoke, text = (json.loads((tmp_path / name).read_text()) for name in ("invoke.json", "text.json"))
    assert "mode" not in invoke and text["mode"] == "text"
    assert text["latency"].keys() == invoke["latency"].keys() and len(text["latency"]["invoke_us"]) == 7
    assert 0 < text["tokenizer_p50_us"] <= text["latency"]["p50_us"]
    # "Comet planets recipe": lower-cased, then WordPiece ("planet" "##s") from the bundle's vocab.txt, zero-padded to its window.
    expected_ids = [VOCAB.index(token) for token in ("comet", "planet", "##s", "recipe")]
    assert all(inputs.tolist() == [expected_ids + [0] * (SEQUENCE_LENGTH - 4)] for inputs in model.inputs[-10:])
    assert text["timed_text"] == {"index": MEDIAN_LENGTH_INDEX, "of": 5, "characters": 20, "label_index": VOCAB.index("comet") % CLASSES}
    assert "text -> label on text #3 of 5 (20 characters), label 2: tokenizer p50" in capsys.readouterr().out


def test_a_raw_text_model_gets_the_golden_sets_text_untokenized(monkeypatch, tmp_path: Path):
    model = stand_in(monkeypatch, takes_text=True)
    golden_bytes(tmp_path / "golden.npz", TEXTS)
    argv = [str(tmp_path / "model_text_int8.tflite"), "--text", "--golden", str(tmp_path / "golden.npz"), "--text-index", "1", "--runs", "3"]
    assert bundle_bench(ids_bundle(tmp_path / "bundle"), [*argv, "--out", str(tmp_path / "result.json")]) == 0
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["mode"] == "text" and result["tokenizer_p50_us"] is None
    assert result["timed_text"] == {"index": 1, "of": 5, "characters": 12, "label_index": ord("r") % CLASSES}
    assert model.inputs[-1].dtype == object and model.inputs[-1].tolist() == [b"recipe comet"]


def test_outside_a_bundle_text_mode_is_refused_in_one_line_before_the_model_loads(monkeypatch, tmp_path: Path, capsys):
    monkeypatch.setattr(bench, "open_model", lambda *args: pytest.fail("the model was loaded for a refused run"))
    texts = str(text_file(tmp_path, TEXTS))
    # Even beside a bundle's files: bench's own entry has no tokenizer, whatever the model takes.
    model = str(ids_bundle(tmp_path / "bundle") / "model_int8.tflite")
    assert bench.main([model, "--text", "--text-file", texts]) == EXIT_USAGE
    assert error_lines(capsys) == [f"error: {bench.TEXT_NEEDS_BUNDLE}"]


def test_the_bundles_bench_py_takes_text_mode(monkeypatch, tmp_path: Path, capsys):
    # As on a board: the launcher verifies the bundle, defaults the model and the golden set (one without raw texts here).
    folder = tmp_path / "bundle"
    golden = golden_bytes(tmp_path / "golden.npz", None)
    record = {"models": {"tflite_int8": "model_int8.tflite"}, "default_model": "tflite_int8", "default_runtime": "tflite-runtime"}
    ids_bundle(folder, files={"golden.npz": golden}, **record)
    monkeypatch.setattr(launch, "_folder", lambda: str(folder))
    stand_in(monkeypatch)
    assert launch.bench_main(["--text"]) == EXIT_USAGE
    assert "has no raw texts here" in capsys.readouterr().err
    texts = str(text_file(tmp_path, TEXTS))
    assert launch.bench_main(["--text", "--text-file", texts, "--runs", "3", "--out", str(tmp_path / "result.json")]) == 0
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["model"] == str(folder / "model_int8.tflite") and result["mode"] == "text" and result["timed_text"]["index"] == MEDIAN_LENGTH_INDEX
