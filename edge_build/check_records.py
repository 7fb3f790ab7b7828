"""The runtime checks' records, read and walked in one place.

``runtime_checks.json`` (the runtime_check stage) and a board's ``result.json``
(the board_check stage) hold the same table under ``checks``: per artifact, per
runtime, one outcome whose ``status`` is "ok" or says why it did not run. The
report, the bundle, the board report and the stages that write them walk it
through ``CheckTable``; ``RuntimeChecks.read`` is the one reader of
``runtime_checks.json``. Standard library only.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from edge_build.errors import StageError


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
class RuntimeChecks(CheckTable):
    """``runtime_checks.json``: the runtime environment (and ``stack``, its one-line description), the check settings, and the table."""

    target: str
    environment: Mapping[str, Any]
    stack: str
    golden_examples: int
    settings: Mapping[str, Any]

    @classmethod
    def read(cls, path: Path) -> RuntimeChecks:
        try:
            record = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls(record["checks"], record["target"], record["environment"], record["stack"], record["golden_examples"], record["settings"])
        except FileNotFoundError:
            raise StageError(f"{path}: not found (run the runtime checks first: scons check)") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise StageError(f"{path}: not a runtime checks record ({type(exc).__name__}: {exc}); run scons again") from None

    def installed(self, runtime: str) -> Mapping[str, Any]:
        """The runtime as the environment the checks ran in has it: version, whether it is required and checkable, disk size."""
        return self.environment["runtimes"][runtime]
