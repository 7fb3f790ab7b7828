"""Stage *runtime_env*: the environment a profile's TF Lite runtimes run in, mirroring the board's software stack, provisioned once.

The stack (``targets/<name>.toml`` ``[stack]``) names the board's OS release,
its CPython version and the exact numpy; the runtimes add their wheel versions.
The environment holds exactly that, whatever Python this project itself runs on:

- **Another architecture** (aarch64 on x86_64): the release's own CPython, from
  its arm64 packages, run under qemu user-mode emulation; qemu is the statically
  linked ``qemu-user`` of Debian 13 (10.0, which ai-edge-litert needs). The wheels
  are downloaded for the board's platform and unpacked beside it.
- **This machine's architecture**: a CPython of the stack's version already on
  the machine (``python3.11`` on ``PATH``, or a pyenv one) in a virtual
  environment of its own; without one, the release's own CPython from its
  packages, started through that release's dynamic loader.

Debian packages come through a private apt configuration under ``--apt-dir``
(its own sources, package lists, cache and an empty dpkg status), so the
machine's apt sources, dpkg database and installed packages stay as they are,
and no root is needed. A runtime version's companions (its row's ``companions``)
are installed after it without their dependencies. A runtime that cannot
install on the stack, or whose wheels (its companions' included) fail to
install, is recorded with the reason: a required one fails this stage, an
optional one is reported by the checks.

Writes ``env.json``: the stack, where its CPython came from, how to start it
(the command prefix and its ``PYTHONPATH``), whether it is emulated, the
emulator's version, and for each runtime its version, whether it can be
checked here (and why not) and, once installed, ``disk_mb``: what it adds to
the stack on disk (``runtime_envs.disk_mb``, measured in the environment).
"""

from __future__ import annotations

import argparse
import dataclasses
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
from edge_build.runtime_envs import launcher, lock_file, locked
from edge_build.stacks import OS_RELEASES, EnvironmentSpec, RuntimeSpec, Stack, not_installable
from edge_build.stage_files import add_files

DEBIAN_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}
#: Where Debian's packages come from; a local mirror may stand in for it.
DEBIAN_MIRROR = os.environ.get("EDGE_BUILD_DEBIAN_MIRROR", "http://deb.debian.org/debian")
KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
#: The release whose statically linked qemu-user runs every runtime (ai-edge-litert's aarch64 build needs qemu >= 8).
QEMU_RELEASE = "trixie"
# Inside the release's libc6, not /lib64/ld-linux-x86-64.so.2, which Debian 12 ships as a link to the machine's own loader.
DYNAMIC_LOADERS = {"x86_64": "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "aarch64": "lib/aarch64-linux-gnu/ld-linux-aarch64.so.1"}


def wheel_platforms(release: str, arch: str) -> list[str]:
    """Every manylinux tag a board of ``release`` accepts: pip does not widen an explicit ``--platform`` to older glibcs by itself."""
    newest = OS_RELEASES[release].glibc[1]
    return [f"manylinux_2_{minor}_{arch}" for minor in range(newest, 16, -1)] + [f"manylinux2014_{arch}"]


def run(command: list[str], what: str, fix: str, env: dict | None = None, cwd: Path | None = None) -> str:
    print("$ " + " ".join(map(str, command)), file=sys.stderr, flush=True)  # the stage's log, not its result lines
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd)
    except FileNotFoundError:
        raise StageError(f"{what}: {command[0]} not found ({fix})") from None
    if done.returncode != 0:
        last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or [f"exit {done.returncode}"]
        raise StageError(f"{what} failed: {last[0]} ({fix})")
    return done.stdout


class PrivateApt:
    """apt with its own configuration, sources, lists, cache and an empty dpkg status, for one Debian release and architecture.

    Nothing of the machine's apt is read or written: ``Dir::Etc::main`` is
    /dev/null and every other directory lies under ``root``.
    """

    def __init__(self, root: Path, release: str, arch: str):
        self.root, self.release, self.arch = root.resolve(), release, arch

    def _configure(self) -> Path:
        root = self.root
        for folder in (
            "etc/apt.conf.d",
            "etc/preferences.d",
            "etc/sources.list.d",
            "etc/trusted.gpg.d",
            "state/lists/partial",
            "cache/archives/partial",
            "log",
        ):
            (root / folder).mkdir(parents=True, exist_ok=True)
        for folder in (root.parent, root):  # the packages it keeps are unpacked into environments: only their owner writes them
            if folder.stat().st_uid == os.geteuid():  # a trusted shared folder (trust_runtime_envs=yes) may be another's
                folder.chmod(folder.stat().st_mode & 0o755)
        (root / "state" / "status").write_text("")  # nothing is installed: apt fetches the whole dependency closure
        security = DEBIAN_MIRROR.rstrip("/") + "-security"
        (root / "etc" / "sources.list.d" / "debian.sources").write_text(
            f"Types: deb\nURIs: {DEBIAN_MIRROR}\nSuites: {self.release} {self.release}-updates\nComponents: main\n"
            f"Architectures: {self.arch}\nSigned-By: {KEYRING}\n\n"
            f"Types: deb\nURIs: {security}\nSuites: {self.release}-security\nComponents: main\n"
            f"Architectures: {self.arch}\nSigned-By: {KEYRING}\n"
        )
        settings = {
            "Dir": "/",
            "Dir::Etc": f"{root}/etc/",
            "Dir::Etc::main": "/dev/null",
            "Dir::Etc::parts": f"{root}/etc/apt.conf.d/",
            "Dir::Etc::sourcelist": f"{root}/etc/sources.list",
            "Dir::Etc::sourceparts": f"{root}/etc/sources.list.d/",
            "Dir::Etc::preferences": f"{root}/etc/preferences",
            "Dir::Etc::preferencesparts": f"{root}/etc/preferences.d/",
            "Dir::Etc::trusted": f"{root}/etc/trusted.gpg",
            "Dir::Etc::trustedparts": f"{root}/etc/trusted.gpg.d/",
            "Dir::State": f"{root}/state/",
            "Dir::State::lists": f"{root}/state/lists/",
            "Dir::State::status": f"{root}/state/status",
            "Dir::State::extended_states": f"{root}/state/extended_states",
            "Dir::Cache": f"{root}/cache/",
            "Dir::Cache::archives": f"{root}/cache/archives/",
            "Dir::Cache::pkgcache": "",
            "Dir::Cache::srcpkgcache": "",
            "Dir::Log": f"{root}/log/",
            "APT::Architecture": self.arch,
            "APT::Install-Recommends": "false",
            "APT::Install-Suggests": "false",
            # apt drops to the _apt user to download unless told otherwise; that user cannot write here.
            "APT::Sandbox::User": os.environ.get("USER") or ("root" if os.geteuid() == 0 else str(os.geteuid())),
            "Acquire::Languages": "none",
            "Binary::apt::APT::Keep-Downloaded-Packages": "true",
        }
        config = root / "etc" / "apt.conf"
        config.write_text("".join(f'{key} "{value}";\n' for key, value in settings.items()) + f'APT::Architectures {{ "{self.arch}"; }};\n')
        return config

    def fetch(self, packages: list[str], into: Path) -> list[Path]:
        """The ``.deb`` files of ``packages`` and everything they depend on, downloaded into the empty folder ``into``."""
        if not KEYRING.is_file():
            raise StageError(
                f"{KEYRING} not found: Debian's archive keyring verifies the {self.release} packages (apt-get install debian-archive-keyring)"
            )
        # One apt at a time in this folder: two builds provisioning at once would fight over its lists' lock and fail.
        with locked(self.root.with_name(f"{self.root.name}.lock"), exclusive=True):
            environment = {**os.environ, "APT_CONFIG": str(self._configure()), "DEBIAN_FRONTEND": "noninteractive"}
            what = f"apt ({self.release} {self.arch}, private configuration under {self.root})"
            run(["apt-get", "update", "-qq"], what, f"check access to {DEBIAN_MIRROR}", environment)
            (into / "partial").mkdir(parents=True)
            command = ["apt-get", "install", "-qq", "-y", "--download-only", "-o", f"Dir::Cache::archives={into.resolve()}/", *packages]
            run(command, what, f"check that {self.release} has {', '.join(packages)}", environment)
        return sorted(into.glob("*.deb"))


def unpack(debs: list[Path], sysroot: Path) -> None:
    for deb in debs:
        run(["dpkg-deb", "-x", str(deb), str(sysroot)], f"dpkg-deb -x {deb.name}", "install dpkg")


def debian_python(stack: Stack, arch: str, apt_dir: Path, sysroot: Path, libraries: tuple[str, ...] = ()) -> str:
    """Unpack the release's own CPython for ``arch`` into ``sysroot``, with the packages ``libraries`` that the runtimes' wheels
    load; return its Debian package version."""
    apt = PrivateApt(apt_dir / f"{stack.release}-{DEBIAN_ARCH[arch]}", stack.release, DEBIAN_ARCH[arch])
    # libstdc++6 is on every board OS, and the runtimes' C++ extensions need it; Python itself does not depend on it.
    packages = [f"python{stack.python}-minimal", f"libpython{stack.python}-stdlib", "libstdc++6", *libraries]
    debs = apt.fetch(packages, sysroot.parent / "debs")
    unpack(debs, sysroot)
    shutil.rmtree(sysroot.parent / "debs")
    # Debian 13 is merged-/usr: base-files (not a dependency of Python) links /lib and /lib64 into /usr, where the loader lies.
    for folder in ("lib", "lib64", "bin", "sbin"):
        if (sysroot / "usr" / folder).is_dir() and not (sysroot / folder).exists():
            (sysroot / folder).symlink_to(f"usr/{folder}")
    package = next(d.name for d in debs if d.name.startswith(f"python{stack.python}-minimal_"))
    return package.split("_")[1].replace("%3a", ":")


def debian_qemu(apt_dir: Path, folder: Path) -> Path:
    """Debian's statically linked ``qemu-aarch64`` (from ``qemu-user``), alone in ``folder``."""
    apt = PrivateApt(apt_dir / f"{QEMU_RELEASE}-amd64", QEMU_RELEASE, "amd64")
    debs = [d for d in apt.fetch(["qemu-user"], folder / "debs") if d.name.startswith("qemu-user_")]
    unpack(debs, folder / "unpacked")
    qemu = folder / "qemu-aarch64"
    shutil.move(str(folder / "unpacked" / "usr" / "bin" / "qemu-aarch64"), qemu)
    shutil.rmtree(folder / "unpacked")
    shutil.rmtree(folder / "debs")
    return qemu


def machine_python(version: str) -> Path | None:
    """A CPython ``version`` on this machine (``pythonX.Y`` on PATH, then pyenv's), as its real executable."""
    name = f"python{version}"
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = [shutil.which(name), *sorted(str(p) for p in pyenv.glob(f"{version}.*/bin/{name}"))]
    for candidate in filter(None, candidates):
        probe = subprocess.run(
            [candidate, "-c", "import sys, venv, ensurepip; print(sys.executable); print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
        )
        lines = probe.stdout.split()
        if probe.returncode == 0 and lines[-1:] == [version]:
            return Path(lines[0])
    return None


def pip_wheels(site: Path, requirements: list[str], stack: Stack, arch: str, no_deps: bool = False) -> None:
    """Download ``requirements``' wheels (without their dependencies if ``no_deps``) for the board (its platform and CPython), unpack them into ``site``."""
    wheels = site.parent / "wheels"
    platforms = [arg for p in wheel_platforms(stack.release, arch) for arg in ("--platform", p)]
    command = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--python-version", stack.python, *platforms, "-d", str(wheels)]
    if no_deps:
        command.append("--no-deps")
    try:
        run([*command, *requirements], "pip download", "check access to the package registry")
        for wheel in sorted(wheels.glob("*.whl")):
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(site)
    finally:
        shutil.rmtree(wheels, ignore_errors=True)


def install(runtime: RuntimeSpec, install_one) -> dict:
    """Install one runtime (or the dependencies its row chooses), then its companions (and its own wheel, where its
    dependencies are chosen) without their dependencies, with ``install_one(requirements, no_deps)``.

    An optional runtime that fails (itself or a companion) is recorded, a required one stops the stage.
    """
    no_deps = list(runtime.row.no_deps_requirements)
    try:
        install_one(list(runtime.row.requirements))
        if no_deps:
            # Without their dependencies: tensorflow-text's metadata asks for the full tensorflow (a second TensorFlow), mediapipe 0.10.21's for jax.
            install_one(no_deps, no_deps=True)
    except StageError as exc:
        if runtime.required:
            raise
        return {"version": None, "required": False, "checkable": False, "reason": f"not provisioned: {exc}"}
    return {"version": runtime.version, "required": runtime.required, "checkable": True, "reason": None}


def provision(spec: EnvironmentSpec, env_json: Path, apt_dir: Path, machine_pythons: bool = True) -> dict:
    """Provision the environment ``spec`` describes in ``env_json``'s folder; return the record written there.

    With ``machine_pythons=False`` a native environment takes the release's own CPython even where the machine has one.
    """
    out_dir = env_json.parent.resolve()
    stack = spec.stack
    with atomic_output(out_dir) as staging:
        # Only its owner may change what the environment runs, whatever the umask (runtime_envs.writable_by_others).
        staging.mkdir(mode=0o755)
        emulated = spec.arch != host_arch()
        if emulated and (spec.arch, host_arch()) != ("aarch64", "x86_64"):
            raise StageError(f"no emulation for {spec.arch} on {host_arch()} (allowed: aarch64 on x86_64)")
        machine = machine_python(stack.python) if machine_pythons and not emulated else None
        emulator = None
        if machine is not None:
            # A CPython of the stack's version is already here: a venv of its own, with the stack's exact numpy and wheels.
            run([str(machine), "-m", "venv", str(staging / "venv")], "python -m venv", f"check {machine}'s venv module")
            pip = [str(staging / "venv" / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--only-binary=:all:"]

            def install_one(requirements: list[str], no_deps: bool = False) -> None:
                # numpy pinned in every resolution, so that no runtime's dependencies move the stack's numpy.
                pinned = ["--no-deps"] if no_deps else [f"numpy=={stack.numpy}"]
                run([*pip, *pinned, *requirements], "pip install", "check access to the package registry")

            python = [str(out_dir / "venv" / "bin" / "python")]
            pythonpath = []
            source = f"this machine's {machine}, in a virtual environment of its own"
        else:
            package = debian_python(stack, spec.arch, apt_dir, staging / "sysroot", spec.debian_packages)
            site = staging / "site-packages"

            def install_one(requirements: list[str], no_deps: bool = False) -> None:
                pip_wheels(site, requirements if no_deps else [f"numpy=={stack.numpy}", *requirements], stack, spec.arch, no_deps)

            sysroot = out_dir / "sysroot"
            interpreter = str(sysroot / "usr" / "bin" / f"python{stack.python}")
            if emulated:
                qemu = debian_qemu(apt_dir, staging / "qemu")
                emulator = {"path": str(out_dir / "qemu" / "qemu-aarch64"), "version": qemu_version(qemu)}
                python = [emulator["path"], "-L", str(sysroot), interpreter]
            else:
                # The release's loader and libraries, not the machine's: the interpreter runs as it would on the board.
                libraries = ":".join(str(sysroot / d) for d in (f"lib/{spec.arch}-linux-gnu", f"usr/lib/{spec.arch}-linux-gnu"))
                python = [str(sysroot / DYNAMIC_LOADERS[spec.arch]), "--library-path", libraries, interpreter]
            pythonpath = [str(out_dir / "site-packages")]
            source = f"{OS_RELEASES[stack.release].title}'s own {DEBIAN_ARCH[spec.arch]} package python{stack.python}-minimal {package}"
        install_one([])
        runtimes = {}
        for runtime in spec.runtimes:
            reason = not_installable(runtime, stack)
            if reason:
                runtimes[runtime.name] = {"version": None, "required": runtime.required, "checkable": False, "reason": f"not installable: {reason}"}
                continue
            runtimes[runtime.name] = install(runtime, install_one)
            minimum = runtime.row.min_qemu
            if emulator and minimum and tuple(int(n) for n in emulator["version"].split(".")[:2]) < minimum:
                runtimes[runtime.name].update(
                    checkable=False,
                    reason=f"{runtime.name}'s aarch64 build crashes under qemu {emulator['version']}; it needs qemu >= {'.'.join(map(str, minimum))}",
                )
        record = {
            "key": spec.key(),
            "arch": spec.arch,
            "stack": {**dataclasses.asdict(stack), "title": OS_RELEASES[stack.release].title},
            "python_source": source,
            "emulated": emulated,
            "emulator": emulator,
            "python": python,
            "pythonpath": pythonpath,
            "runtimes": runtimes,
        }
        record.update(probe(record, staging, out_dir))
        for name, megabytes in measure_disk(record, staging, out_dir).items():
            record["runtimes"][name]["disk_mb"] = megabytes
        (staging / env_json.name).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        (staging / env_json.name).chmod((staging / env_json.name).stat().st_mode & 0o755)
    return record


def qemu_version(qemu: Path) -> str:
    text = run([str(qemu), "--version"], "qemu-aarch64 --version", "the qemu-user package's binary does not run here")
    return re.search(r"version (\d+\.\d+(?:\.\d+)?)", text).group(1)


def run_python(record: dict, staging: Path, out_dir: Path, arguments: list[str], what: str) -> str:
    """Run the environment's Python (from the staging folder, where it still is) with ``arguments``; return its output."""
    staged = {**record, **{key: [part.replace(str(out_dir), str(staging)) for part in record[key]] for key in ("python", "pythonpath")}}
    prefix, variables = launcher(staged)
    done = subprocess.run([*prefix, *arguments], capture_output=True, text=True, env=variables, timeout=300)
    if done.returncode != 0:
        raise StageError(f"{what}: {(done.stderr.strip().splitlines() or ['exit ' + str(done.returncode)])[-1]}")
    return done.stdout


def probe(record: dict, staging: Path, out_dir: Path) -> dict:
    """Start the environment's Python once and read its CPython and numpy versions."""
    code = "import platform, numpy; print(platform.machine(), platform.python_version(), numpy.__version__)"
    output = run_python(record, staging, out_dir, ["-c", code], f"the provisioned {record['arch']} Python does not start")
    machine, python_version, numpy_version = output.split()
    if machine != record["arch"] or numpy_version != record["stack"]["numpy"]:
        raise StageError(f"the provisioned Python reports {machine} with numpy {numpy_version}, not {record['arch']} with {record['stack']['numpy']}")
    return {"python_version": python_version, "numpy_version": numpy_version}


#: Run in the environment's Python: ``runtime_envs.disk_mb`` of each runtime's distributions, read from and written as JSON.
DISK_PROBE = (
    "import json, sys; from edge_build.runtime_envs import disk_mb; print(json.dumps({n: disk_mb(d) for n, d in json.loads(sys.argv[1]).items()}))"
)


def measure_disk(record: dict, staging: Path, out_dir: Path) -> dict[str, float]:
    """Megabytes on disk each installed runtime adds to the stack: its distribution, its companions and their dependencies but numpy."""
    distributions = {
        name: [name, *(companion.partition("==")[0] for companion in RUNTIMES[name][entry["version"]].companions)]
        for name, entry in record["runtimes"].items()
        if entry["version"] is not None
    }
    if not distributions:
        return {}
    output = run_python(record, staging, out_dir, ["-c", DISK_PROBE, json.dumps(distributions)], "measuring the runtimes' size on disk failed")
    return json.loads(output)


def reusable(spec: EnvironmentSpec, env_json: Path) -> dict | None:
    """The environment already at ``env_json`` if it was provisioned for ``spec`` and still starts, else ``None``.

    Another build directory sharing ``runtime_envs=`` (or verify-reproducible's
    builds) has no record of it in its own SCons database: it is reused, not replaced.
    """
    try:
        record = json.loads(env_json.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("key") != spec.key():
        return None
    try:
        probe(record, env_json.parent.resolve(), env_json.parent.resolve())
    except (StageError, OSError, KeyError, subprocess.TimeoutExpired):
        return None
    return record


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.stages.runtime_env", description=__doc__.splitlines()[0])
    parser.add_argument("--arch", choices=sorted(set(ARCH_ALIASES.values())), required=True)
    parser.add_argument("--release", choices=sorted(OS_RELEASES), required=True, help="the Debian release the board's OS follows")
    parser.add_argument("--python", required=True, help="the stack's CPython version (X.Y)")
    parser.add_argument("--numpy", required=True, help="the stack's exact numpy version")
    parser.add_argument("--runtime", action="append", default=[], metavar="NAME==VERSION", help="a required runtime; repeat for each")
    parser.add_argument("--optional-runtime", action="append", default=[], metavar="NAME==VERSION", help="an optional runtime; repeat for each")
    add_files("runtime_env", parser)
    return parser


def runtime_spec(requirement: str, required: bool) -> RuntimeSpec:
    name, _, version = requirement.partition("==")
    if name not in RUNTIMES or not version:
        raise StageError(f"--runtime {requirement}: expected NAME==VERSION with NAME one of {', '.join(RUNTIMES)}")
    try:
        return RuntimeSpec(name, version, required)
    except ValueError as exc:
        raise StageError(f"--runtime {requirement}: {exc}") from None


def describe_runtime(name: str, entry: dict) -> str:
    """One runtime in the stage's last line: its version and size on disk, or why it cannot be checked."""
    if not entry["checkable"]:
        return f"{name} ({entry['reason']})"
    # An environment provisioned before sizes were measured has none.
    return f"{name} {entry['version']}" + (f" ({entry['disk_mb']} MB on disk)" if "disk_mb" in entry else "")


def drive(args: argparse.Namespace) -> None:
    runtimes = tuple(runtime_spec(r, True) for r in args.runtime) + tuple(runtime_spec(r, False) for r in args.optional_runtime)
    spec = EnvironmentSpec(args.arch, Stack(args.release, args.python, args.numpy), runtimes)
    # Builds sharing runtime_envs= take turns: the first provisions, the others then reuse. A stage running the
    # environment's Python holds the lock shared (runtime_envs.environment_in_use), so an environment in use is never replaced.
    with locked(lock_file(args.out), exclusive=True):
        record = reusable(spec, args.out)
        if record is not None:
            print(f"runtime-env: reusing {args.out}, provisioned earlier for the same stack")
        else:
            record = provision(spec, args.out, args.apt_dir)
    described = ", ".join(describe_runtime(name, entry) for name, entry in record["runtimes"].items())
    how = f"emulated under qemu {record['emulator']['version']}" if record["emulated"] else "native"
    print(
        f"runtime-env: {args.out} ready: {record['stack']['title']} {record['arch']} ({how}), "
        f"CPython {record['python_version']}, numpy {record['numpy_version']}; {described or 'no runtimes'}"
    )


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
