"""Starting a provisioned runtime environment's Python (``env.json`` from the runtime_env stage).

Shared by the conversion's preflight, the runtime checks and the benchmarks:
each runs board-side code in the environment that mirrors the board's software
stack, never in this project's own Python. Standard library only.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import stat
from collections.abc import Iterator
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


def lock_file(env_json: Path) -> Path:
    """The lock of one environment: beside its folder, which provisioning replaces whole."""
    folder = Path(env_json).parent
    return folder.with_name(f"{folder.name}.lock")


@contextlib.contextmanager
def locked(path: Path, exclusive: bool) -> Iterator[None]:
    """Hold ``path``'s advisory lock: exclusive (one holder) or shared (any number, no exclusive one) until the block ends.

    Builds that share a folder (``runtime_envs=``) wait on each other here; the
    kernel drops the lock when its process dies, so a killed build holds nothing.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(descriptor)


@contextlib.contextmanager
def environment_in_use(env_json: Path) -> Iterator[dict]:
    """The environment's record, read and held under a shared lock: no build replaces the environment while this one runs its Python."""
    with locked(lock_file(env_json), exclusive=False):
        yield read_environment(env_json)


def writable_by_others(folder: Path) -> str | None:
    """Why someone other than this user (or root) could change what ``folder``'s environments run, or ``None``.

    Whoever can write the folder, an environment's folder or its ``env.json`` can
    make every build that uses it run their code (``env.json`` names the Python).
    """
    me = os.geteuid()
    paths = [folder, *(p for child in sorted(folder.iterdir()) if child.is_dir() for p in (child, child / "env.json") if p.exists())]
    for path in paths:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            return f"{path} is a link"
        if info.st_uid not in (me, 0):
            return f"{path} belongs to user id {info.st_uid}"
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return f"{path} is writable by {'everyone' if info.st_mode & stat.S_IWOTH else 'its group'} (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


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
