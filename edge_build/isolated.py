"""Device code in a process of its own, where a crash or a hang is a result, not an exception.

TF Lite runtimes cannot share a process with TensorFlow, and a runtime that
meets a model it cannot handle may die of a signal; both the conversion
preflight and the runtime checks start them through here.
"""

from __future__ import annotations

import subprocess


def failure_line(done: subprocess.CompletedProcess) -> str:
    """What a process that exited non-zero said last (its ``error:`` prefix dropped), or its exit code."""
    return (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1].removeprefix("error: ")


def run_isolated(command: list[str], timeout_s: float, env: dict | None = None) -> tuple[subprocess.CompletedProcess | None, str | None]:
    """The finished process (``None`` if it hung) and, when it did not exit by itself, why."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout_s:g} s"
    if done.returncode < 0:
        return done, f"crashed (signal {-done.returncode})"
    return done, None
