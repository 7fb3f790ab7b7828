"""What ``SConstruct`` needs to know about files, without importing anything heavy.

Kept apart from the stage modules so that parsing the build graph costs
milliseconds: a no-op ``scons`` must not pay for TensorFlow, or even numpy.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import json
import os
import re
import shlex
import subprocess
from pathlib import Path

from edge_build.corpus import EMBEDDED, EMBEDDED_PREFIX

PACKAGE_DIR = Path(__file__).resolve().parent
_MODULE_STRING = re.compile(r"edge_build(?:\.\w+)+")


def dataset_root(dataset: str) -> Path | None:
    """The file or folder a dataset names (None when it is missing).

    The embedded corpus is located without importing its package, which would load it all.
    """
    if dataset.startswith(EMBEDDED_PREFIX):
        name = dataset[len(EMBEDDED_PREFIX) :]
        if name not in EMBEDDED:
            return None
        package, folder = EMBEDDED[name]
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            return None
        return Path(list(spec.submodule_search_locations)[0]) / folder
    return Path(dataset)


def dataset_files(root: Path | None) -> list[Path]:
    """The files whose content decides the data stage's output (empty when the dataset is missing)."""
    if root is not None and root.is_file():
        return [root]
    if root is None or not root.is_dir():
        return []
    return sorted(p for p in root.rglob("*") if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts))


def dataset_digest(dataset: str, memo: Path) -> str:
    """SHA-256 of the dataset's file names (relative to it) and contents: the data stage's one source.

    One value instead of a node per file: BBC News's 2,225 files were most of the nodes a
    no-op ``scons`` visits. ``memo`` keeps the last digest with each file's size and mtime,
    so an untouched dataset is only listed and stat'ed; anything else about it (or a memo
    that is missing or unreadable) reads every file again.
    """
    root = dataset_root(dataset)
    files = dataset_files(root)
    stats = [[p.relative_to(root).as_posix() if p != root else p.name, *_size_and_mtime(p)] for p in files]
    try:
        remembered = json.loads(memo.read_text(encoding="utf-8"))
        if remembered["dataset"] == dataset and remembered["files"] == stats and isinstance(remembered["sha256"], str):
            return remembered["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    digest = hashlib.sha256()
    for (name, *_), path in zip(stats, files):
        for part in (name.encode("utf-8"), path.read_bytes()):
            digest.update(len(part).to_bytes(8, "big") + part)
    memo.parent.mkdir(parents=True, exist_ok=True)
    temporary = memo.with_name(f"{memo.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps({"dataset": dataset, "files": stats, "sha256": digest.hexdigest()}), encoding="utf-8")
    os.replace(temporary, memo)
    return digest.hexdigest()


def _size_and_mtime(path: Path) -> tuple[int, int]:
    status = path.stat()
    return status.st_size, status.st_mtime_ns


def module_file(module: str) -> Path | None:
    """``edge_build.x.y`` -> its file (a module, or a package's ``__init__.py``); None outside this package."""
    parts = module.split(".")
    if parts[0] != "edge_build":
        return None
    base = PACKAGE_DIR.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE_DIR).with_suffix("")
    parts = ["edge_build", *relative.parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# One parse per module per run: the stages share most of their modules, and parsing them again
# for each stage was half of a no-op ``scons`` (316 parses of ~60 files).
@functools.cache
def imported_modules(path: Path) -> frozenset[str]:
    """The edge_build modules ``path`` imports (absolute or relative, at any depth) or runs (``-m edge_build.x`` strings,
    and every module of a package a string names)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    inside = path.resolve().is_relative_to(PACKAGE_DIR)
    name = _module_name(path) if inside else ""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.add(base)
            # ``from package import name``: the name may be a submodule.
            found.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_STRING.fullmatch(node.value):
            found.update(run_by_name(node.value))
    return frozenset(module for module in found if module_file(module) is not None)


def run_by_name(module: str) -> list[str]:
    """What a module named in a string may run: the module itself; for a package (the tflite stage's conversion wing,
    whose modules it runs by their names in a table), every module of it."""
    path = module_file(module)
    if path is None or path.name != "__init__.py":
        return [module]
    return [module, *(f"{module}.{child.stem}" for child in sorted(path.parent.glob("*.py")) if child.name != "__init__.py")]


def stage_code(stage: str) -> list[Path]:
    """``edge_build/stages/<stage>.py`` and every edge_build module it imports or runs, transitively.

    A stage's outputs depend on exactly the code it runs: editing a module reruns
    the stages that import it (and the packages' ``__init__`` they pass through),
    and nothing else.
    """
    seen: set[Path] = set()
    pending = [f"edge_build.stages.{stage}"]
    while pending:
        module = pending.pop()
        parts = module.split(".")
        # Importing a.b.c runs a/__init__.py and a/b/__init__.py first.
        for depth in range(1, len(parts) + 1):
            path = module_file(".".join(parts[:depth]))
            if path is not None and path not in seen:
                seen.add(path)
                pending.extend(imported_modules(path))
    return sorted(seen)


def calibration_files(directory: Path) -> list[Path]:
    """Everything under ``calibration/``: editing any of it rebuilds the representative set."""
    return sorted(p for p in Path(directory).rglob("*") if p.is_file() and not p.name.startswith("."))


#: Characters no build variable may hold: they end or split a line wherever a value is written down.
FORBIDDEN_IN_VARIABLES = {"\0": "NUL", "\r": "CR", "\n": "LF"}


def refuse_control_characters(arguments: dict[str, str]) -> None:
    """A ``key=value`` of the command line holding NUL, CR or LF is refused, naming the key."""
    for key, value in arguments.items():
        found = [name for character, name in FORBIDDEN_IN_VARIABLES.items() if character in value]
        if found:
            raise ValueError(f"{key}=: holds {' and '.join(found)}, which no build variable may hold")


def run_argv(target, source, env) -> int:
    """A SCons function action: run ``env["ARGV"]`` as a list of words, with no shell and no SCons substitution
    between a value and the program (a user's ``$``, backtick, ``;`` or ``${...}`` stays data); its exit status."""
    return subprocess.run(list(env["ARGV"]), env=env["ENV"], check=False).returncode


def show_argv(target, source, env) -> str:
    """What SCons prints for ``run_argv``: the words as a shell would need them typed."""
    return shlex.join(env["ARGV"])


def argv_signature(words: list[str]) -> str:
    """What SCons compares to decide whether a command reruns: a digest of its words (hex, nothing to substitute)."""
    return hashlib.sha256(json.dumps(words).encode("utf-8")).hexdigest()
