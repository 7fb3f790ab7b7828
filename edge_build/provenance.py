"""Where an artifact came from: versions, git revision, build time, checksums."""

from __future__ import annotations

import datetime
import hashlib
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path


def sha256_file(path: Path | str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def size_of(path: Path | str) -> int:
    """Bytes in a file, or in every file under a directory."""
    path = Path(path)
    return path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def package_versions(*names: str) -> dict[str, str | None]:
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_revision(directory: Path | str = ".") -> str | None:
    """``HEAD``'s hash, with ``-dirty`` when tracked files differ from it; None outside a checkout.

    ``EDGE_BUILD_GIT_REVISION``, when set, is recorded instead: builds of two
    revisions can then be compared byte for byte (as ``SOURCE_DATE_EPOCH`` pins the time).
    """
    if os.environ.get("EDGE_BUILD_GIT_REVISION"):
        return os.environ["EDGE_BUILD_GIT_REVISION"]

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(directory), *args], capture_output=True, text=True)

    try:
        head = git("rev-parse", "HEAD")
    except OSError:
        return None
    if head.returncode != 0:
        return None
    dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    return head.stdout.strip() + ("-dirty" if dirty else "")


def commit_epoch(directory: Path | str = ".") -> int | None:
    """``HEAD``'s commit time in seconds since the epoch; None outside a checkout."""
    try:
        done = subprocess.run(["git", "-C", str(directory), "log", "-1", "--format=%ct"], capture_output=True, text=True)
    except OSError:
        return None
    return int(done.stdout) if done.returncode == 0 and done.stdout.strip().isdigit() else None


def build_timestamp() -> str:
    """Now in UTC, or ``SOURCE_DATE_EPOCH`` when set (reproducible builds)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    moment = datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc) if epoch else datetime.datetime.now(datetime.timezone.utc)
    return moment.replace(microsecond=0).isoformat()


def cpu_model() -> str:
    """The CPU's model name (Linux's ``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
