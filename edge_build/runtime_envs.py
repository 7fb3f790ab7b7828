"""Starting a provisioned runtime environment's Python (``env.json`` from the runtime_env stage).

Shared by the conversion's preflight, the runtime checks and the benchmarks:
each runs board-side code in the environment that mirrors the board's software
stack, never in this project's own Python. Standard library only.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

#: The checkout of edge-build running now: its board code is what an environment's Python runs.
PROJECT_ROOT = Path(__file__).resolve().parents[1]

#: What a runtime shares with the stack rather than adds to it: the stack's own numpy.
SHARED_DISTRIBUTIONS = ("numpy",)
#: The distribution name a requirement line (``Requires-Dist``) starts with.
_REQUIREMENT_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
#: A requirement of an extra, which pip leaves out unless the extra is asked for.
_EXTRA_MARKER = re.compile(r";.*\bextra\s*==")


def read_environment(path: Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def launcher(environment: dict) -> tuple[list[str], dict[str, str]]:
    """The command prefix that starts the environment's Python, and the process environment it needs.

    Emulated environments get ``EDGE_BUILD_EMULATED=1``, which the board-side
    benchmark records so that its timings are flagged as emulated. The board code
    comes from this checkout, not from the one that provisioned the environment:
    environments are shared between build directories and clones (``runtime_envs=``).
    """
    # Environments provisioned before did record their checkout: left out, so that another clone's code never runs.
    paths = [p for p in environment["pythonpath"] if not (Path(p) / "edge_build").is_dir()]
    variables = {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, str(PROJECT_ROOT)])}
    # A numpy or runtime from the user's site-packages would defeat the point of a stack.
    variables["PYTHONNOUSERSITE"] = "1"
    if environment["emulated"]:
        variables["EDGE_BUILD_EMULATED"] = "1"
    return list(environment["python"]), variables


def unavailable(environment: dict, runtime: str) -> str | None:
    """Why ``runtime`` cannot run in this environment (not installable on its stack, not provisioned, not runnable here), or ``None``."""
    entry = environment["runtimes"][runtime]
    return None if entry["checkable"] else entry["reason"]


def normalized(name: str) -> str:
    """A distribution name as pip compares them (PEP 503): ``tensorflow_text`` is ``tensorflow-text``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def disk_mb(names: list[str], shared: tuple[str, ...] = SHARED_DISTRIBUTIONS) -> float:
    """Megabytes (10^6 bytes) on disk of the distributions ``names`` and their dependency closure, less ``shared`` ones.

    Run in the environment's own Python: what a runtime and its companions add to a
    board that already has the stack. Sizes are those of the files each
    distribution's RECORD lists (bytecode compiled at install included). A
    dependency that is not installed is not counted: its marker excluded it here
    (another platform or Python), or it belongs to a companion installed without
    dependencies on purpose. Raises ``LookupError`` if one of ``names`` is not installed.
    """
    from importlib import metadata

    installed = {}
    for distribution in metadata.distributions():  # in sys.path order: the first one found is the one imported
        installed.setdefault(normalized(distribution.metadata["Name"] or ""), distribution)
    missing = [name for name in names if normalized(name) not in installed]
    if missing:
        raise LookupError(f"not installed here: {', '.join(missing)}")
    counted, pending, total = {normalized(name) for name in shared}, [normalized(name) for name in names], 0
    while pending:
        name = pending.pop()
        if name in counted or name not in installed:
            continue
        counted.add(name)
        distribution = installed[name]
        files = (Path(distribution.locate_file(file)) for file in distribution.files or ())
        total += sum(path.stat().st_size for path in files if path.is_file())
        pending += [normalized(_REQUIREMENT_NAME.match(r).group(1)) for r in distribution.requires or () if not _EXTRA_MARKER.search(r)]
    return round(total / 1e6, 1)


def describe(environment: dict) -> str:
    """One line: the stack, where its Python came from, how it runs here, and what each runtime takes on disk where that was measured."""
    stack = environment["stack"]
    how = (
        f"emulated {environment['arch']} under qemu {environment['emulator']['version']}"
        if environment["emulated"]
        else f"native {environment['arch']}"
    )
    sizes = ", ".join(f"{name} {entry['disk_mb']} MB" for name, entry in environment["runtimes"].items() if "disk_mb" in entry)
    on_disk = f"; on disk: {sizes}" if sizes else ""
    return f"{stack['title']}: CPython {environment['python_version']} ({environment['python_source']}), numpy {environment['numpy_version']}; {how}{on_disk}"
