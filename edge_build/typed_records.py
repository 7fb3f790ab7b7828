"""Records that more than one stage reads, each with one reader.

- ``eval.json`` (the evaluate stage): ``Evaluation``, read by the report and the manifest.
- ``runtime_checks.json`` (the runtime_check stage): ``RuntimeCheckRecord``, read by the report,
  the bundle and the board report. Its ``checks`` table, per artifact and per runtime one
  outcome whose ``status`` is "ok" or says why it did not run, is the same in a board's
  ``result.json`` (the board_check stage): ``CheckTable`` walks both.
- ``recommended.json`` (the runtime_check stage): ``Recommended``, read by the report.

A reader refuses a file that is not such a record in one line that names it.
Standard library only.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from edge_build.errors import StageError

Record = TypeVar("Record")


def read_record(kind: type[Record], path: Path, what: str, stage: str) -> Record:
    """``kind`` built from the JSON object at ``path``, one field per top-level key (other keys are left alone)."""
    return parse_record(path, what, stage, lambda record: kind(**{field.name: record[field.name] for field in dataclasses.fields(kind)}))


def parse_record(path: Path, what: str, stage: str, make: Callable[[Any], Record]) -> Record:
    """``make`` applied to the JSON at ``path``; a missing file, or one ``make`` refuses, is one line that names it."""
    try:
        return make(json.loads(Path(path).read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise StageError(f"{path}: not found (run the {stage} stage first: scons)") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StageError(f"{path}: not {what} ({type(exc).__name__}: {exc}); run scons again") from None


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """``eval.json``: the reference's and every artifact's figures on the test split, and the INT8 model's McNemar test."""

    target: str
    labels: list[str]
    reference: Mapping[str, Any]
    artifacts: Mapping[str, Mapping[str, Any]]
    int8_vs_float: Mapping[str, Any] | None

    @classmethod
    def read(cls, path: Path) -> Evaluation:
        return read_record(cls, path, "an evaluation record", "evaluate")


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One artifact on one runtime: its figures (``record``) when it ran, or the reason it did not."""

    artifact: str
    runtime: str
    record: Mapping[str, Any]

    @property
    def ran(self) -> bool:
        return self.record["status"] == "ok"


@dataclasses.dataclass(frozen=True)
class CheckTable:
    """``{artifact: {runtime: outcome}}``, in the order the checks ran."""

    checks: Mapping[str, Mapping[str, Mapping[str, Any]]]

    @property
    def artifacts(self) -> list[str]:
        return list(self.checks)

    def outcomes(self) -> list[Outcome]:
        return [Outcome(artifact, runtime, record) for artifact, per in self.checks.items() for runtime, record in per.items()]

    def ran(self) -> list[Outcome]:
        """The outcomes with figures: the runtimes that loaded and ran the artifact."""
        return [outcome for outcome in self.outcomes() if outcome.ran]

    def outcome(self, artifact: str, runtime: str) -> Outcome | None:
        record = self.checks.get(artifact, {}).get(runtime)
        return None if record is None else Outcome(artifact, runtime, record)


@dataclasses.dataclass(frozen=True)
class RuntimeCheckRecord(CheckTable):
    """``runtime_checks.json``: the runtime environment (and ``stack``, its one-line description), the check settings, and the table.

    ``golden_examples_to_decide`` is the size at which a perfect result decides every parity gate (``board.decision``;
    ``None``: no size does), ``test_examples`` the test split's size, which caps the golden set.
    """

    target: str
    environment: Mapping[str, Any]
    stack: str
    golden_examples: int
    golden_examples_to_decide: int | None
    test_examples: int
    settings: Mapping[str, Any]

    @classmethod
    def read(cls, path: Path) -> RuntimeCheckRecord:
        return read_record(cls, path, "a runtime checks record", "runtime_check")

    def installed(self, runtime: str) -> Mapping[str, Any]:
        """The runtime as the environment the checks ran in has it: version, whether it is required and checkable, disk size."""
        return self.environment["runtimes"][runtime]


#: How a recommendation was decided: by the checks' timings, or (emulated timings) by the runtime table.
BY_TIMING, BY_RUNTIME_TABLE = "timing", "runtime table"
DECIDED_BY = (BY_TIMING, BY_RUNTIME_TABLE)


@dataclasses.dataclass(frozen=True)
class Recommended:
    """``recommended.json``: per runtime, the model to deploy (``artifact``, ``model``) and what decided it
    (``decided_by``: one of ``DECIDED_BY``), in the order the runtimes were decided (``edge_build.recommend``)."""

    runtimes: Mapping[str, Mapping[str, str]]

    @classmethod
    def read(cls, path: Path) -> Recommended:
        return parse_record(path, "a recommendation record", "runtime_check", cls.of)

    @classmethod
    def of(cls, record: Mapping[str, Mapping[str, str]]) -> Recommended:
        """The record's choices, each checked for its three keys and a known ``decided_by``."""
        runtimes = {runtime: {key: choice[key] for key in ("artifact", "model", "decided_by")} for runtime, choice in record.items()}
        for runtime, choice in runtimes.items():
            if choice["decided_by"] not in DECIDED_BY:
                raise ValueError(f"{runtime}: decided_by {choice['decided_by']!r}, not one of {', '.join(DECIDED_BY)}")
        return cls(runtimes)
