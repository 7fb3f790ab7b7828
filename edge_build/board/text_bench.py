"""``bench.py --text``: text in, label out, timed on one raw text per run, the board's tokenizer included.

For a model that takes token ids, each timed run is what ``classify.py`` does for
one text: the bundle's pure-Python WordPiece tokenizer (``launch.text_encoder``:
the bundle's ``vocab.txt``, its manifest's ``lower_case`` and
``sequence_length``), the invoke and the argmax. The bundle's launcher
(``launch.bench_main``) hands that encoder in: the build's runtime checks run
bench without the bundle's checks and tokenizer. The tokenizer's part is timed
inside the same runs. A model that takes raw text (its tokenizer inside, or
MediaPipe's ``TextClassifier``) gets the UTF-8 text as it always does: its
tokenizer runs within the invoke and has no figure of its own.

Every run times the same text: by default the median-length one of the set (by
characters), the text the text -> label goal is stated on. From the second run
on, the tokenizer's chunk cache holds that text, as it does in a long-running
``classify.py``. The result's ``latency`` has the invoke benchmark's keys, each
figure (the first run's too) being text -> label. Imports only the standard
library and numpy.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from .parity import unpack_texts


class UsageError(Exception):
    """What ``--text`` cannot do with the options given (no texts, no bundle's tokenizer): bench refuses it with ``EXIT_USAGE``."""


@dataclasses.dataclass(frozen=True)
class TimedText:
    """The text every run times, and where it sits in its set."""

    index: int
    count: int
    text: str


def read_texts(text_file: str | None, golden: dict | None, golden_path: str | None) -> list[str]:
    """The texts of ``text_file`` (UTF-8, one per line, blank lines skipped), else the golden set's raw texts."""
    if text_file:
        try:
            with open(text_file, encoding="utf-8") as handle:
                texts = [line.rstrip("\r\n") for line in handle if line.strip()]
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{text_file}: cannot read the texts ({exc})") from exc
        if not texts:
            raise UsageError(f"{text_file}: no texts (UTF-8, one text per line)")
        return texts
    if golden is None:
        raise UsageError("--text needs texts: --text-file PATH (UTF-8, one text per line), or a --golden set that holds raw texts")
    try:
        return [text.decode("utf-8") for text in unpack_texts(golden)]
    except ValueError as exc:
        raise UsageError(f"--text needs texts: {golden_path} has {exc}; give --text-file PATH (UTF-8, one text per line)") from exc


def choose_text(texts: list[str], index: int | None) -> TimedText:
    """The text at ``index``; by default the median-length one, by characters (of an even count, the longer of the two middle ones)."""
    if index is None:
        # A stable sort: texts of equal length keep their order, so the same set always gives the same text.
        index = int(np.argsort([len(text) for text in texts], kind="stable")[len(texts) // 2])
    elif not 0 <= index < len(texts):
        raise UsageError(f"--text-index {index}: there are {len(texts)} texts (0 to {len(texts) - 1})")
    return TimedText(index, len(texts), texts[index])


def text_to_label(model, encode, text: str) -> tuple[int, int, int]:
    """One text to its label index; the nanoseconds the whole step took, and its encoding (the tokenizer, for an ids model)."""
    started = time.perf_counter_ns()
    inputs = encode(text)
    encoded = time.perf_counter_ns()
    label = int(np.argmax(model.run(inputs)[0]))
    return label, time.perf_counter_ns() - started, encoded - started


def benchmark_text(model, timed: TimedText, encode, warmup: int, runs: int) -> tuple[dict, float, list[float]]:
    """Text mode's own part of bench's result (the timed text, the tokenizer's p50: ``None`` where the model tokenizes inside
    its invoke), then the first run's milliseconds and each timed run's microseconds, text -> label; ``encode`` turns one text
    into the model's input."""
    label, first_ns, _ = text_to_label(model, encode, timed.text)
    for _ in range(warmup):
        text_to_label(model, encode, timed.text)
    steps = [text_to_label(model, encode, timed.text) for _ in range(runs)]
    step_us = [step_ns / 1e3 for _, step_ns, _ in steps]
    tokenizer_us = [encode_ns / 1e3 for _, _, encode_ns in steps]
    record = {
        "mode": "text",
        "timed_text": {"index": timed.index, "of": timed.count, "characters": len(timed.text), "label_index": label},
        "tokenizer_p50_us": None if model.takes_text else float(np.percentile(tokenizer_us, 50)),
    }
    return record, first_ns / 1e6, step_us
