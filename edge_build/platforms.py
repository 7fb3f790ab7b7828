"""This machine's CPU architecture, under one name per architecture. Standard library only."""

from __future__ import annotations

import platform

ARCH_ALIASES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


def host_arch() -> str:
    return ARCH_ALIASES.get(platform.machine().lower(), platform.machine().lower())
