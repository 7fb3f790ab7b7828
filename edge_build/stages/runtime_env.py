"""Stage *runtime_env*: the Python a target's TF Lite runtimes run in (its runtime environment), provisioned once.

For a profile whose architecture is this machine's, a virtual environment with
numpy and the profile's runtimes. For an aarch64 profile on an x86_64 machine,
user-mode emulation: qemu-user (from the Debian release's backports, qemu >= 8,
which ai-edge-litert needs), an aarch64 CPython assembled from Debian's arm64
packages with ``dpkg -x`` (no root filesystem, no binfmt registration) and the
runtimes' aarch64 wheels from the registry, unpacked beside it. Everything lands
under the output directory; the machine itself only gains the arm64 foreign
architecture and a backports apt source (``edge-build-backports.sources``),
which this stage says when it adds them.

Writes ``env.json``: how to start that Python (the command prefix and its
``PYTHONPATH``), whether it is emulated, the emulator's version, and for each
runtime its version and whether it can be checked here (and why not).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from edge_build import cli
from edge_build.atomic import atomic_output
from edge_build.board.runtime import RUNTIMES
from edge_build.errors import StageError
from edge_build.platforms import ARCH_ALIASES, host_arch

PYTHON_VERSION = "3.11"
DEBIAN_PACKAGES = (
    f"python{PYTHON_VERSION}-minimal",
    f"libpython{PYTHON_VERSION}-minimal",
    f"libpython{PYTHON_VERSION}-stdlib",
    "libc6",
    "zlib1g",
    "libexpat1",
    "libffi8",
    "libssl3",
    "libgcc-s1",
    "libstdc++6",
)
WHEEL_PLATFORMS = ("manylinux_2_34_aarch64", "manylinux_2_28_aarch64", "manylinux_2_27_aarch64", "manylinux2014_aarch64", "manylinux_2_17_aarch64")
BASE_REQUIREMENTS = ("numpy>=1.26,<2", "ml-dtypes<0.6")
BACKPORTS_SOURCE = Path("/etc/apt/sources.list.d/edge-build-backports.sources")


def run(command: list[str], what: str, fix: str) -> str:
    print("runtime-env: " + " ".join(command), flush=True)
    try:
        done = subprocess.run(command, capture_output=True, text=True)
    except FileNotFoundError:
        raise StageError(f"{what}: {command[0]} not found ({fix})") from None
    if done.returncode != 0:
        last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or [f"exit {done.returncode}"]
        raise StageError(f"{what} failed: {last[0]} ({fix})")
    return done.stdout


def debian_source() -> tuple[str, str, str]:
    """``(URIs, Signed-By, codename)`` of this machine's main Debian apt source."""
    codename = re.search(r"^VERSION_CODENAME=(\w+)", Path("/etc/os-release").read_text(), re.MULTILINE)
    if codename is None:
        raise StageError("/etc/os-release: no VERSION_CODENAME; emulation is provisioned with Debian's apt only")
    codename = codename.group(1)
    for path in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        for stanza in path.read_text().split("\n\n"):
            fields = dict(re.findall(r"^([\w-]+):\s*(.+)$", stanza, re.MULTILINE))
            if codename in fields.get("Suites", "").split() and "URIs" in fields:
                return fields["URIs"].split()[0], fields.get("Signed-By", "/usr/share/keyrings/debian-archive-keyring.gpg"), codename
    sources_list = Path("/etc/apt/sources.list")
    if sources_list.is_file():
        for line in sources_list.read_text().splitlines():
            match = re.match(r"deb\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+" + codename + r"\s", line)
            if match:
                signed = re.search(r"signed-by=(\S+)", match.group(1) or "")
                return match.group(2), signed.group(1) if signed else "/usr/share/keyrings/debian-archive-keyring.gpg", codename
    raise StageError(f"no apt source for Debian {codename} in /etc/apt/sources.list(.d): cannot add its backports")


def prepare_apt() -> None:
    """Add the arm64 architecture and the backports source if they are missing (the only machine-wide changes)."""
    if os.geteuid() != 0:
        raise StageError("provisioning emulation installs qemu-user with apt-get and needs root (run: sudo scons target=arm64 runtime-env)")
    if "arm64" not in run(["dpkg", "--print-foreign-architectures"], "dpkg", "install dpkg").split():
        print("runtime-env: adding the arm64 foreign architecture to dpkg (machine-wide)")
        run(["dpkg", "--add-architecture", "arm64"], "dpkg --add-architecture arm64", "run it as root")
    uris, signed_by, codename = debian_source()
    entry = f"Types: deb\nURIs: {uris}\nSuites: {codename}-backports\nComponents: main\nSigned-By: {signed_by}\n"
    if not BACKPORTS_SOURCE.is_file() or BACKPORTS_SOURCE.read_text() != entry:
        print(f"runtime-env: adding {BACKPORTS_SOURCE} ({codename}-backports from {uris}; machine-wide)")
        BACKPORTS_SOURCE.write_text(entry)
    run(["apt-get", "update", "-qq"], "apt-get update", "check the network and /etc/apt/sources.list.d")
    run(
        ["apt-get", "install", "-y", "-qq", "-t", f"{codename}-backports", "qemu-user"],
        "apt-get install qemu-user",
        f"apt-get install -t {codename}-backports qemu-user",
    )


def qemu_version(qemu: str) -> tuple[int, int]:
    text = run([qemu, "--version"], "qemu-aarch64 --version", "apt-get install qemu-user")
    major, minor = re.search(r"version (\d+)\.(\d+)", text).groups()
    return int(major), int(minor)


def assemble_python(root: Path) -> Path:
    """An aarch64 CPython under ``root/sysroot`` from Debian's arm64 packages."""
    debs, sysroot = root / "debs", root / "sysroot"
    debs.mkdir(parents=True)
    print(f"runtime-env: fetching {', '.join(p + ':arm64' for p in DEBIAN_PACKAGES)}")
    subprocess_cwd = os.getcwd()
    os.chdir(debs)
    try:
        run(
            ["apt-get", "download", "-qq", *(f"{p}:arm64" for p in DEBIAN_PACKAGES)],
            "apt-get download (arm64 packages)",
            "apt-get update, and dpkg --add-architecture arm64",
        )
    finally:
        os.chdir(subprocess_cwd)
    for deb in sorted(debs.glob("*.deb")):
        run(["dpkg", "-x", str(deb), str(sysroot)], f"dpkg -x {deb.name}", "install dpkg")
    shutil.rmtree(debs)
    return sysroot


def install_wheels(site: Path, runtimes: list[str], platforms: tuple[str, ...] | None) -> None:
    """Download the runtimes' wheels (for ``platforms``, or this machine) and unpack them into ``site``."""
    wheels = site.parent / "wheels"
    requirements = [*BASE_REQUIREMENTS, *(RUNTIMES[r].requirement for r in runtimes)]
    command = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", str(wheels)]
    if platforms:
        command += ["--python-version", PYTHON_VERSION, *(arg for p in platforms for arg in ("--platform", p))]
    run([*command, *requirements], "pip download (runtime wheels)", "check access to the package registry")
    for wheel in sorted(wheels.glob("*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(site)
    shutil.rmtree(wheels)


def provision(arch: str, runtimes: list[str], env_json: Path, project_root: Path) -> dict:
    """Provision the runtime environment for ``arch`` with ``runtimes`` in ``env_json``'s folder; return the record written there."""
    out_dir = env_json.parent
    with atomic_output(out_dir) as staging:
        staging.mkdir()
        site = staging / "site-packages"
        if arch != host_arch():
            if arch != "aarch64":
                raise StageError(f"no emulation for {arch} on {host_arch()} (allowed: aarch64)")
            prepare_apt()
            qemu = shutil.which("qemu-aarch64") or "/usr/bin/qemu-aarch64"
            version = qemu_version(qemu)
            assemble_python(staging)
            install_wheels(site, runtimes, WHEEL_PLATFORMS)
            final_sysroot = out_dir.resolve() / "sysroot"
            prefix = [qemu, "-L", str(final_sysroot), str(final_sysroot / "usr" / "bin" / f"python{PYTHON_VERSION}")]
            emulator = {"path": qemu, "version": ".".join(map(str, version))}
            checkable = {name: RUNTIMES[name].min_qemu is None or version >= RUNTIMES[name].min_qemu for name in runtimes}
        else:
            install_wheels(site, runtimes, None)
            prefix, emulator = [sys.executable], None
            checkable = {name: True for name in runtimes}
        record = {
            "arch": arch,
            "emulated": emulator is not None,
            "emulator": emulator,
            "python": prefix,
            "pythonpath": [str(out_dir.resolve() / "site-packages"), str(project_root.resolve())],
            "runtimes": {
                name: {
                    "version": wheel_version(site, name),
                    "checkable": checkable[name],
                    "reason": None
                    if checkable[name]
                    else f"{name}'s aarch64 build crashes under qemu {emulator['version']}; it needs qemu >= {'.'.join(map(str, RUNTIMES[name].min_qemu))} (qemu-user from backports)",
                }
                for name in runtimes
            },
        }
        (staging / env_json.name).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    probe(record)
    return record


def wheel_version(site: Path, runtime: str) -> str | None:
    prefix = runtime.replace("-", "_") + "-"
    for info in site.glob(f"{prefix}*.dist-info"):
        return info.name[len(prefix) :].removesuffix(".dist-info")
    return None


def probe(record: dict) -> None:
    """Start the provisioned Python once and import numpy in it: a broken environment fails here, not in the checks."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(record["pythonpath"])}
    done = subprocess.run(
        [*record["python"], "-c", "import platform, numpy; print(platform.machine(), numpy.__version__)"],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )
    if done.returncode != 0:
        raise StageError(
            f"the provisioned {record['arch']} Python does not start: {(done.stderr.strip().splitlines() or ['exit ' + str(done.returncode)])[-1]}"
        )
    print(
        f"runtime-env: the {record['arch']} Python runs ({done.stdout.strip()}){' under qemu ' + record['emulator']['version'] if record['emulated'] else ''}"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.stages.runtime_env", description=__doc__.splitlines()[0])
    parser.add_argument("--arch", choices=sorted(set(ARCH_ALIASES.values())), required=True)
    parser.add_argument("--runtime", action="append", choices=sorted(RUNTIMES), required=True, help="repeat for each runtime")
    parser.add_argument("--out", type=Path, required=True, help="the env.json to write; the environment goes beside it")
    return parser


def drive(args: argparse.Namespace) -> None:
    record = provision(args.arch, args.runtime, args.out, Path.cwd())
    runtimes = ", ".join(f"{n} {r['version']}" + ("" if r["checkable"] else " (not checkable here)") for n, r in record["runtimes"].items())
    print(f"runtime-env: {args.out} ready: {'emulated' if record['emulated'] else 'native'} {record['arch']}; {runtimes}")


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
