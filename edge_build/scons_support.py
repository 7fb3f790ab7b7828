"""What ``SConstruct`` needs to know about files, without importing anything heavy.

Kept apart from the stage modules so that parsing the build graph costs
milliseconds: a no-op ``scons`` must not pay for TensorFlow, or even numpy.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

from edge_build.corpus import EMBEDDED, EMBEDDED_PREFIX

PACKAGE_DIR = Path(__file__).resolve().parent
_MODULE_STRING = re.compile(r"edge_build(?:\.\w+)+")


def dataset_files(dataset: str) -> list[Path]:
    """The files whose content decides the data stage's output (empty when the dataset is missing).

    The embedded corpus is located without importing its package, which would load it all.
    """
    if dataset.startswith(EMBEDDED_PREFIX):
        name = dataset[len(EMBEDDED_PREFIX) :]
        if name not in EMBEDDED:
            return []
        package, folder = EMBEDDED[name]
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            return []
        root = Path(list(spec.submodule_search_locations)[0]) / folder
    else:
        root = Path(dataset)
    if root.is_file():
        return [root]
    if not root.is_dir():
        return []
    return sorted(p for p in root.rglob("*") if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts))


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


def imported_modules(path: Path) -> set[str]:
    """The edge_build modules ``path`` imports (absolute or relative, at any depth) or runs (``-m edge_build.x`` strings)."""
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
            found.add(node.value)
    return {module for module in found if module_file(module) is not None}


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
