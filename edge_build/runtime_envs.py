"""Starting a provisioned runtime environment's Python (``env.json`` from the runtime_env stage).

Shared by the conversion's preflight, the runtime checks and the benchmarks:
each runs board-side code in the environment that mirrors the board's software
stack, never in this project's own Python. Standard library only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def read_environment(path: Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def launcher(environment: dict) -> tuple[list[str], dict[str, str]]:
    """The command prefix that starts the environment's Python, and the process environment it needs.

    Emulated environments get ``EDGE_BUILD_EMULATED=1``, which the board-side
    benchmark records so that its timings are flagged as emulated.
    """
    variables = {**os.environ, "PYTHONPATH": os.pathsep.join(environment["pythonpath"])}
    # A numpy or runtime from the user's site-packages would defeat the point of a stack.
    variables["PYTHONNOUSERSITE"] = "1"
    if environment["emulated"]:
        variables["EDGE_BUILD_EMULATED"] = "1"
    return list(environment["python"]), variables


def unavailable(environment: dict, runtime: str) -> str | None:
    """Why ``runtime`` cannot run in this environment (not installable on its stack, not provisioned, not runnable here), or ``None``."""
    entry = environment["runtimes"][runtime]
    return None if entry["checkable"] else entry["reason"]


def describe(environment: dict) -> str:
    """One line: the stack, where its Python came from, and how it runs here."""
    stack = environment["stack"]
    how = (
        f"emulated {environment['arch']} under qemu {environment['emulator']['version']}"
        if environment["emulated"]
        else f"native {environment['arch']}"
    )
    return f"{stack['title']}: CPython {environment['python_version']} ({environment['python_source']}), numpy {environment['numpy_version']}; {how}"
