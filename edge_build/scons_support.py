"""What ``SConstruct`` needs to know about files, without importing anything heavy.

Kept apart from the stage modules so that parsing the build graph costs
milliseconds: a no-op ``scons`` must not pay for TensorFlow, or even numpy.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from edge_build.corpus import EMBEDDED, EMBEDDED_PREFIX

PACKAGE_DIR = Path(__file__).resolve().parent
_IMPORT = re.compile(r"^\s*from edge_build(?:\.(\w+))? import ([\w, ()]+)", re.MULTILINE)
_DEVICE = re.compile(r"edge_build\.device\b")


def dataset_files(dataset: str) -> list[Path]:
    """The files whose content decides the data stage's output (empty when the dataset is missing).

    The embedded corpus is located without importing its package, which would load it all.
    """
    if dataset.startswith(EMBEDDED_PREFIX):
        name = dataset[len(EMBEDDED_PREFIX):]
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


def stage_code(stage: str) -> list[Path]:
    """``edge_build/<stage>.py`` and every edge_build module it imports, transitively.

    A stage's outputs depend on its code: editing it reruns that stage (and only the
    stages that use what changed). A stage that imports or runs anything in
    ``edge_build/device/`` (``-m edge_build.device.bench``) depends on all of it.
    """
    seen: set[str] = set()
    pending = [stage]
    while pending:
        module = pending.pop()
        if module in seen or not (PACKAGE_DIR / f"{module}.py").is_file():
            continue
        seen.add(module)
        source = (PACKAGE_DIR / f"{module}.py").read_text(encoding="utf-8")
        for submodule, names in _IMPORT.findall(source):
            if submodule:
                pending.append(submodule)
            else:
                pending.extend(name.strip(" ()") for name in names.split(","))
        if _DEVICE.search(source):
            seen.update(f"device/{p.stem}" for p in (PACKAGE_DIR / "device").glob("*.py"))
    return sorted(PACKAGE_DIR / f"{module}.py" for module in seen)


def calibration_files(directory: Path) -> list[Path]:
    """Everything under ``calibration/``: editing any of it rebuilds the representative set."""
    return sorted(p for p in Path(directory).rglob("*") if p.is_file() and not p.name.startswith("."))
