"""The floor plan holds: nothing imports a stage, SConstruct loads nothing heavy, and each stage depends on exactly the code it runs."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from conftest import REPO

from edge_build import scons_support
from edge_build.ssh import BOOTSTRAP

STAGES = sorted(p.stem for p in (REPO / "edge_build" / "stages").glob("*.py") if p.stem != "__init__")


def python_files() -> list[Path]:
    return sorted([*(REPO / "edge_build").rglob("*.py"), *(REPO / "benchmarks").glob("*.py")])


def test_no_module_imports_a_stage():
    importers = {}
    for path in python_files():
        if path.parent.name == "stages" and path.stem == "__init__":
            continue
        stages = {m for m in scons_support.imported_modules(path) if m.startswith("edge_build.stages.")}
        if stages:
            importers[str(path.relative_to(REPO))] = sorted(stages)
    assert importers == {}


def test_sconstruct_imports_only_the_layout_the_configuration_and_the_scons_helpers():
    tree = ast.parse((REPO / "SConstruct").read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("edge_build")}
    assert imported == {
        "edge_build.artifacts",
        "edge_build.build_cache",
        "edge_build.config.boards",
        "edge_build.config.calibration",
        "edge_build.config.hparams",
        "edge_build.config.profile",
        "edge_build.corpus",
        "edge_build.errors",
        "edge_build.layout",
        "edge_build.provenance",
        "edge_build.runtime_envs",
        "edge_build.scons_support",
        "edge_build.stacks",
        "edge_build.stage_files",
    }
    heavy = "sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'tensorflow') or m.startswith('edge_build.stages'))"
    probe = f"import sys; {'; '.join(f'import {m}' for m in sorted(imported))}; print({heavy})"
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_each_stage_depends_on_the_code_it_runs_and_no_more():
    code = {stage: {p.relative_to(REPO / "edge_build").as_posix() for p in scons_support.stage_code(stage)} for stage in STAGES}
    # The board's tokenizer ships in the bundle and is checked there; the models never see it.
    assert [s for s in STAGES if "board/wordpiece.py" in code[s]] == ["bundle"]
    # Training reads hyperparameters, never what only the checks read.
    assert "config/profile.py" not in code["train"] and "artifacts.py" not in code["train"]
    # A stage that runs board code in another process depends on it (``-m edge_build.board.bench``).
    assert {"board/bench.py", "board/parity.py", "board/runtime.py"} <= code["runtime_check"]
    # The runtime table names each runtime's runner, which only the checks run: reading a profile (the table) is not running it.
    assert sorted(s for s in STAGES if "board/bench.py" in code[s]) == ["board_check", "bundle", "runtime_check", "tflite"]
    assert "board/preflight.py" in code["tflite"]
    # Both start board code in the stack's runtime environment; the environment's spec and its provisioning share the stack table.
    assert {"runtime_envs.py", "stacks.py"} <= code["tflite"] & code["runtime_check"]
    assert {"stacks.py", "board/runtime.py", "platforms.py"} <= code["runtime_env"]
    # The vocabulary learner and the tokenizer share only the special tokens.
    assert "stages/vocab.py" not in code["tokenize"] and "special_tokens.py" in code["tokenize"]


def test_relative_and_package_imports_are_followed(tmp_path: Path):
    found = scons_support.imported_modules(REPO / "edge_build" / "board" / "launch.py")
    assert {"edge_build.board.decision", "edge_build.board.bench", "edge_build.board.runtime", "edge_build.board.wordpiece"} <= found


def test_the_board_agent_is_one_standalone_file():
    # ssh streams agent.py alone to the board's Python (`python3 -c BOOTSTRAP COMMAND`): a relative or edge_build import would fail there.
    source = (REPO / "edge_build" / "board" / "agent.py").read_bytes()
    tree = ast.parse(source)
    imports = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("edge_build"))]
    assert imports == []
    result = subprocess.run(
        [sys.executable, "-c", BOOTSTRAP, "probe", "--help"],
        input=b"%d\n%s" % (len(source), source),
        capture_output=True,
        cwd="/",
        timeout=60,
    )
    assert result.returncode == 0 and result.stdout.startswith(b"usage: agent probe"), result.stderr
