"""The model's window: how many token ids a text becomes (``[tokenizer] sequence_length``).

``sequence_length = "auto"`` (the default) lets the data decide: the data_report
stage measures every training text's WordPiece tokens before truncation and
takes the smallest power of two from ``SMALLEST`` to ``LARGEST`` that holds at
least ``COVERAGE`` of them whole. A number in the hyperparameters is taken as it
is. Either way the stage writes ``data/window.json``, and every stage that
tokenizes, builds or converts the model reads the length from it, so all of them
agree and a fixed setting and "auto" go through one path.

Why: a model pays for every position of its window, padding included (the
lookups, the sums, the ids on disk and on the board). Tweets have a median of
about 31 tokens, and a fixed 512 made each of them cost sixteen times what it
needs; BBC News articles are longer than 512 tokens, so they keep 512.

Why 95%, not 99%: the INT8 model sums a text's embeddings into one int8 tensor
whose scale is set by the longest calibration texts, so the shortest texts keep
the fewest levels, and a long tail of long texts costs the short ones precision.
On Chinese reviews (median 46 tokens, 95% within 188, 99% within 324) the trained
model's INT8 top-1 agreement on validation was 0.987 at 512 tokens (99%), 0.991
at 256 (95%) and 0.996 at 128, while its float accuracy moved by 0.06 points from
512 to 256.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from edge_build.errors import StageError

AUTO = "auto"
SMALLEST, LARGEST = 16, 512
#: The share of training texts whose every token fits in the window "auto" picks.
COVERAGE = 0.95


def choose(setting: int | str, train_lengths: list[int]) -> dict:
    """The window for ``setting`` (a number, or ``"auto"``) and the training texts' token counts, as ``window.json`` records it."""
    lengths = sorted(train_lengths)
    if setting == AUTO:
        # The length at the COVERAGE quantile, rounded up to a power of two within the bounds.
        needed = lengths[max(math.ceil(COVERAGE * len(lengths)) - 1, 0)] if lengths else 1
        sequence_length = min(max(SMALLEST, 1 << max(needed - 1, 0).bit_length()), LARGEST)
        rule = {"setting": AUTO, "coverage": COVERAGE, "bounds": [SMALLEST, LARGEST]}
    else:
        sequence_length, rule = int(setting), {"setting": int(setting)}
    covered = sum(1 for n in lengths if n <= sequence_length)
    return {"sequence_length": sequence_length, **rule, "train_texts": len(lengths), "train_share_whole": round(covered / max(len(lengths), 1), 4)}


def write(path: Path, record: dict) -> None:
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def read(path: Path | str) -> int:
    """The window's length from ``window.json``; anything else is one line naming the file."""
    try:
        length = json.loads(Path(path).read_text(encoding="utf-8"))["sequence_length"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StageError(f"{path}: not the data report's window record ({exc.__class__.__name__}: {exc}); run scons again") from None
    return checked_length(length, path)


def checked_length(length, source: Path | str) -> int:
    """``length`` as read from ``source`` (a window record, a train log), if it is a whole number above 0."""
    if not isinstance(length, int) or isinstance(length, bool) or length <= 0:
        raise StageError(f"{source}: sequence_length must be a whole number above 0, not {length!r}")
    return length
