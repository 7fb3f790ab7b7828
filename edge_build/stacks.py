"""Board software stacks: the OS release, CPython and numpy a board runs, and the runtime environments that mirror them.

A profile's ``[stack]`` names the board's OS release (whose own packages give
its CPython), the CPython version and the exact numpy; each ``[[runtimes]]`` row
adds a runtime wheel version. Every runtime a profile checks runs in an
environment built from exactly that (``stages/runtime_env.py``), so what passes
here is what the board can install. Standard library only: ``SConstruct`` reads
this to name each environment, the configuration to refuse a profile whose
required runtime cannot install on its stack, and the bundle to write its install line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re

from edge_build.board.runtime import DEFAULT_VERSIONS, RUNTIMES, Runtime
from edge_build.platforms import host_arch


@dataclasses.dataclass(frozen=True)
class OsRelease:
    """A Debian release a board OS follows, and the CPython its own packages carry."""

    title: str
    python: str
    glibc: tuple[int, int]
    boards: str


OS_RELEASES = {
    "bookworm": OsRelease("Debian 12 bookworm", "3.11", (2, 36), "Raspberry Pi OS bookworm, Debian 12 boards"),
    "trixie": OsRelease("Debian 13 trixie", "3.13", (2, 41), "Raspberry Pi OS trixie, Debian 13 boards"),
}


@dataclasses.dataclass(frozen=True)
class Stack:
    """A board's software stack: OS release, CPython minor version, exact numpy version."""

    release: str
    python: str
    numpy: str

    def describe(self) -> str:
        return f"{OS_RELEASES[self.release].title} (CPython {self.python}, numpy {self.numpy})"

    @property
    def numpy_major(self) -> int:
        return int(self.numpy.split(".")[0])


def not_installable(runtime: RuntimeSpec, stack: Stack) -> str | None:
    """Why ``runtime``'s wheels cannot install on ``stack``, or ``None`` when they can."""
    row, what = runtime.row, runtime.name
    if stack.python not in row.pythons:
        return f"{what} has wheels for CPython {row.pythons[0]}-{row.pythons[-1]} only, and the {stack.release} stack has CPython {stack.python}"
    if row.numpy_below is not None and stack.numpy_major >= row.numpy_below:
        return f"{what} needs numpy<{row.numpy_below}, and the {stack.release} stack has numpy {stack.numpy}"
    return None


@dataclasses.dataclass(frozen=True)
class RuntimeSpec:
    """A runtime a profile checks its TF Lite artifacts on (a ``[[runtimes]]`` row): which one, which version, whether required.

    What that version can do is its row in the runtime table (``row``, from ``board.runtime.RUNTIMES``).

    Attributes:
      name: ``tflite-runtime``, ``ai-edge-litert`` or ``tensorflow-cpu`` (full TF Lite: Flex and tensorflow-text's kernels).
      version: the exact wheel version the board installs (default: the table's last version of it).
      required: whether its runtime checks gate the build; an optional runtime is checked and
        reported where it can run, and only a parity or latency breach on it fails the build.
    """

    name: str
    version: str = ""
    required: bool = True

    def __post_init__(self) -> None:
        if self.name not in RUNTIMES:
            raise ValueError(f"key 'name': unknown runtime '{self.name}' (allowed: {', '.join(RUNTIMES)})")
        if not self.version:
            object.__setattr__(self, "version", DEFAULT_VERSIONS[self.name])
        known = ", ".join(RUNTIMES[self.name])
        if not re.fullmatch(r"\d+(\.\d+)*", self.version):
            raise ValueError(f"key 'version': expected an exact wheel version such as {DEFAULT_VERSIONS[self.name]}, not '{self.version}'")
        if self.version not in RUNTIMES[self.name]:
            raise ValueError(
                f"key 'version': {self.name} {self.version} has no row in the runtime table, so what it can run is unknown "
                f"(allowed: {known}, or add a row for it to edge_build/board/runtime.py)"
            )

    @property
    def row(self) -> Runtime:
        return RUNTIMES[self.name][self.version]


@dataclasses.dataclass(frozen=True)
class EnvironmentSpec:
    """What one runtime environment holds: the board's architecture, its stack and the runtimes to install.

    Profiles with the same spec share one environment; its directory is named by
    the spec's content, so a changed stack provisions a new one beside the old.
    """

    arch: str
    stack: Stack
    runtimes: tuple[RuntimeSpec, ...]

    def key(self) -> str:
        content = dataclasses.asdict(self)
        companions = {r.name: list(r.row.companions) for r in self.runtimes if r.row.companions}
        # Companions are pinned in the runtime table, not the profile: a new pin must provision a new environment.
        # Hashed only where there are some, so that the environments of runtimes without any keep their keys.
        if companions:
            content["companions"] = companions
        # And the dependencies a runtime's row chooses for it: hashed only where a row does.
        dependencies = {r.name: list(r.row.dependencies) for r in self.runtimes if r.row.dependencies is not None}
        if dependencies:
            content["dependencies"] = dependencies
        # The same for the Debian packages a runtime's wheels need in a sysroot.
        if self.debian_packages:
            content["debian_packages"] = list(self.debian_packages)
        digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:10]
        return f"{self.arch}-{self.stack.release}-py{self.stack.python}-{digest}"

    @property
    def debian_packages(self) -> tuple[str, ...]:
        """The Debian packages the runtimes' wheels need beside the release's CPython (``Runtime.debian_packages``), sorted."""
        return tuple(sorted({package for r in self.runtimes for package in r.row.debian_packages}))

    def arguments(self) -> list[str]:
        """The runtime_env stage's command line for this spec."""
        runtimes = [a for r in self.runtimes for a in ("--runtime" if r.required else "--optional-runtime", f"{r.name}=={r.version}")]
        return ["--arch", self.arch, "--release", self.stack.release, "--python", self.stack.python, "--numpy", self.stack.numpy, *runtimes]

    def to_install(self, required: bool = True) -> list[RuntimeSpec]:
        """The required runtimes, or the optional runtimes that can install on the stack."""
        if required:
            return [r for r in self.runtimes if r.required]
        return [r for r in self.runtimes if not r.required and not_installable(r, self.stack) is None]

    def requirements(self, required: bool = True) -> list[str]:
        """pip requirements of the stack: numpy and the required runtimes, or the optional runtimes that can install on it
        (each runtime's ``Runtime.requirements``: its wheel, or the dependencies its row chooses)."""
        runtimes = [requirement for r in self.to_install(required) for requirement in r.row.requirements]
        return [f"numpy=={self.stack.numpy}", *runtimes] if required else runtimes

    def no_deps_requirements(self, required: bool = True) -> list[str]:
        """pip requirements installed with ``--no-deps`` after ``requirements(required)``: those runtimes'
        ``Runtime.no_deps_requirements`` (companions, and wheels whose dependencies their rows choose)."""
        return [requirement for r in self.to_install(required) for requirement in r.row.no_deps_requirements]

    def record(self) -> dict:
        """The stack as the target's and the bundle's manifests record it: what was checked, and the pip requirements that give a board exactly that.

        ``install_no_deps`` (``optional_install_no_deps``) are installed with
        ``pip install --no-deps`` after ``install`` (``optional_install``).
        """
        record = {
            "title": OS_RELEASES[self.stack.release].title,
            "release": self.stack.release,
            "arch": self.arch,
            "python": self.stack.python,
            "numpy": self.stack.numpy,
            "runtimes": {r.name: {"version": r.version, "required": r.required} for r in self.runtimes if not_installable(r, self.stack) is None},
            "install": self.requirements(),
            "optional_install": self.requirements(required=False),
        }
        # Only where there are some: the manifests of stacks without them keep their bytes.
        for key, required in (("install_no_deps", True), ("optional_install_no_deps", False)):
            if self.no_deps_requirements(required):
                record[key] = self.no_deps_requirements(required)
        return record


def writer_environment() -> EnvironmentSpec:
    """The environment the tflite stage writes model metadata in: MediaPipe 0.10.21, the last release whose Python
    metadata writer imports, on this machine's architecture (``edge_build.convert.metadata_writer``)."""
    return EnvironmentSpec(host_arch(), Stack("bookworm", "3.11", "1.26.4"), (RuntimeSpec("mediapipe", "0.10.21"),))
