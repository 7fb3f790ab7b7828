"""This machine's CPU architecture, and whether a profile's runtimes need emulation here. Standard library only."""

from __future__ import annotations

import platform

ARCH_ALIASES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


def host_arch() -> str:
    return ARCH_ALIASES.get(platform.machine().lower(), platform.machine().lower())


def needs_emulation(arch: str) -> bool:
    """Whether runtimes built for ``arch`` cannot run in this machine's own Python."""
    return arch != host_arch()
