"""A bundle on the board: checking it against its manifest, unpacking it safely, and what a build machine runs there over ssh.

Standard library only, and one file: a build machine streams it to the board's
Python over ssh's standard input (``edge_build/ssh.py``: its length, then its
source, then for ``receive`` the bundle's archive), where edge-build is not
installed, and ``launch.py`` imports its bundle checks. Each command prints one
JSON object on standard output; a command that cannot do its job prints
``error: ...`` on standard error and exits 2.

    probe    the board (hostname, machine, CPU, Python, numpy, each runtime) and whether the bundle is in the cache
    receive  read the bundle's archive from standard input (its size and SHA-256 checked), unpack it into the cache
             under its manifest's SHA-256, and remove the archive
    run      ``bench.py --parity`` for each model and runtime, in a temporary folder that is always removed

The bundle travels inside the ssh session: no scp, no SFTP server, and no path
through the board's shell. The cache (``--cache``, ``~/.cache/edge-build`` by
default on the build side) holds ``bundles/<sha256 of manifest.json>/`` (kept: an
unchanged bundle is not uploaded again), ``uploads/`` (an archive while it is
received) and ``runs/`` (one folder per run, removed when it ends). What a
process killed mid-way left there is named by its process id, and removed by the
next command that uses that folder.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import platform
import posixpath
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile

MANIFEST = "manifest.json"
#: What an archive may unpack to: a bundle is a few dozen files, its models tens of MB.
MAX_MEMBERS = 1000
MAX_UNPACKED_BYTES = 4 * 2**30
#: What a bundle is unpacked into, beside the cached ones, until it is verified.
STAGING = ".partial-"
#: A runtime that takes longer than this to import is reported as not importing.
IMPORT_TIMEOUT_S = 120


class BundleError(Exception):
    """The bundle is incomplete, tampered with, or unsafe to unpack."""


def sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def listed_names(manifest: dict, path: str) -> set[str]:
    """The files a manifest lists: plain relative names inside the bundle, or the manifest is refused."""
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or not files:
        raise BundleError(f"{path}: lists no files")
    for name in files:
        if not isinstance(name, str) or name.startswith("/") or "\\" in name or posixpath.normpath(name) != name or name.split("/")[0] == "..":
            raise BundleError(f"{path}: lists {name!r}, which is not a plain relative name inside the bundle")
    return set(files)


def unlisted(folder: str, listed: set[str]) -> str | None:
    """The first thing in ``folder`` that is neither a listed file, a folder of one, nor the manifest; links count as unlisted."""
    folders = set()
    for name in listed:
        parent = posixpath.dirname(name)
        while parent:
            folders.add(parent)
            parent = posixpath.dirname(parent)
    for top, dirs, files in os.walk(folder):
        dirs.sort()  # walked in order: the same bundle names the same first stranger
        for entry in [*dirs, *sorted(files)]:
            path = os.path.join(top, entry)
            name = os.path.relpath(path, folder).replace(os.sep, "/")
            expected = folders if entry in dirs else {*listed, MANIFEST}
            if os.path.islink(path) or name not in expected:
                return path
    return None


def verify(folder: str, manifest_sha256: str | None = None) -> dict:
    """The manifest, once the folder holds exactly the files it lists (with their recorded size and SHA-256) and nothing else.

    ``manifest_sha256``, when given, is checked first: the manifest must be the one the build sent.
    Standard library only: the launchers run this before they import numpy or a runtime.
    """
    path = os.path.join(folder, MANIFEST)
    if manifest_sha256 is not None and (not os.path.isfile(path) or sha256_of(path) != manifest_sha256):
        raise BundleError(f"{path}: not the manifest the build sent (SHA-256 differs)")
    try:
        with open(path, encoding="utf-8") as handle:
            manifest = json.load(handle)
    except (OSError, ValueError) as exc:
        raise BundleError(f"{path}: cannot read the manifest ({exc})") from exc
    listed = listed_names(manifest, path)
    extra = unlisted(folder, listed)
    if extra is not None:
        kind = "a link" if os.path.islink(extra) else "not listed in the manifest"
        raise BundleError(f"{extra}: {kind}; a bundle holds exactly the files its manifest lists")
    for name, expected in manifest["files"].items():
        file = os.path.join(folder, name)
        if not os.path.isfile(file):
            raise BundleError(f"{file}: listed in the manifest but missing")
        size = os.path.getsize(file)
        if size != expected["size"]:
            raise BundleError(f"{file}: {size} bytes, the manifest says {expected['size']} (truncated or replaced)")
        if sha256_of(file) != expected["sha256"]:
            raise BundleError(f"{file}: SHA-256 does not match the manifest (modified after the build)")
    return manifest


def safe_extract(archive: str, destination: str) -> list[str]:
    """Unpack ``archive`` into ``destination``, refusing any member that would land outside it, and archives past the caps."""
    root = os.path.realpath(destination)
    with tarfile.open(archive, "r:*") as tar:
        members = []
        for member in tar:  # one at a time: a million members are refused at the first past the cap, not listed first
            members.append(member)
            if len(members) > MAX_MEMBERS:
                raise BundleError(f"{archive}: more than {MAX_MEMBERS} members (a bundle holds a few dozen)")
        total = sum(member.size for member in members)
        if total > MAX_UNPACKED_BYTES:
            raise BundleError(f"{archive}: unpacks to {total} bytes, more than the {MAX_UNPACKED_BYTES / 2**20:g} MiB a bundle may hold")
        for member in members:
            target = os.path.realpath(os.path.join(root, member.name))
            if os.path.isabs(member.name) or ".." in member.name.split("/") or not (target == root or target.startswith(root + os.sep)):
                raise BundleError(f"{archive}: member {member.name!r} would be written outside {destination}")
            if not (member.isfile() or member.isdir()):
                raise BundleError(f"{archive}: member {member.name!r} is not a plain file or folder")
        os.makedirs(root, exist_ok=True)
        # Python 3.12 and 3.13 warn when no extraction filter is named, and 3.14 applies "data" by default;
        # the checks above already refuse what it refuses. A board's Python from before the filters (PEP 706)
        # has no such argument.
        options = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        for member in members:
            tar.extract(member, root, set_attrs=False, **options)
    return [m.name for m in members]


def cache_folders(cache: str) -> dict[str, str]:
    """The cache's folders, created if need be (only once the board was found fit: a refused board keeps nothing)."""
    folders = {name: os.path.join(os.path.expanduser(cache), name) for name in ("bundles", "uploads", "runs")}
    for folder in folders.values():
        os.makedirs(folder, exist_ok=True)
    return folders


def cached_bundle(cache: str, sha256: str) -> str | None:
    """The cached bundle of that manifest checksum, if it is there and every file matches; a damaged copy is removed."""
    folder = os.path.join(os.path.expanduser(cache), "bundles", sha256)
    if not os.path.isdir(folder):
        return None
    try:
        verify(folder, sha256)
    except BundleError:
        shutil.rmtree(folder, ignore_errors=True)
        return None
    return folder


def cpu_model() -> str:
    """The CPU as /proc/cpuinfo names it (x86: ``model name``; Arm boards: ``Model`` or ``Hardware``)."""
    fields = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    cores = os.cpu_count()
    name = next((fields[k] for k in ("model name", "Model", "Hardware", "cpu model") if fields.get(k)), platform.processor() or "unknown CPU")
    return f"{name} ({cores} cores)" if cores else name


def runtime_status(distribution: str, module: str) -> dict:
    """The runtime's installed version and whether its interpreter module imports (in a process of its own: a bad wheel may crash)."""
    from importlib import metadata

    try:
        version = metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return {"version": None, "problem": f"{distribution} is not installed for {sys.executable}"}
    try:
        done = subprocess.run(
            [sys.executable, "-c", "import importlib, sys; importlib.import_module(sys.argv[1])", module],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=IMPORT_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return {"version": version, "problem": f"{distribution} {version}: importing {module} took over {IMPORT_TIMEOUT_S} s"}
    if done.returncode != 0:
        why = f"signal {-done.returncode}" if done.returncode < 0 else (done.stderr.strip().splitlines() or ["no message"])[-1]
        return {"version": version, "problem": f"{distribution} {version} is installed but {module} does not import ({why})"}
    return {"version": version, "problem": None}


def probe(args: argparse.Namespace) -> dict:
    try:
        import numpy

        numpy_version = numpy.__version__
    except ImportError:
        numpy_version = None
    runtimes = dict(pair.split("=", 1) for pair in args.runtime)
    return {
        "hostname": socket.gethostname(),
        "machine": platform.machine(),
        "system": f"{platform.system()} {platform.release()}",
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "numpy": numpy_version,
        "runtimes": {name: runtime_status(name, module) for name, module in runtimes.items()},
        "cached": cached_bundle(args.cache, args.bundle) is not None,
    }


def receive_archive(source, size: int, sha256: str, uploads: str) -> str:
    """Exactly ``size`` bytes of ``source`` into a file under ``uploads``, refused unless they are all there and hash to ``sha256``."""
    if size > MAX_UNPACKED_BYTES:
        raise BundleError(f"an archive of {size} bytes, more than the {MAX_UNPACKED_BYTES / 2**20:g} MiB a bundle may hold")
    handle, path = tempfile.mkstemp(prefix=f"{os.getpid()}-", suffix=".tar.gz", dir=uploads)
    try:
        digest, left = hashlib.sha256(), size
        with os.fdopen(handle, "wb") as archive:
            while left:
                block = source.read(min(left, 1 << 20))
                if not block:
                    raise BundleError(f"the archive ended after {size - left} of its {size} bytes (the connection broke)")
                digest.update(block)
                archive.write(block)
                left -= len(block)
        if source.read(1):
            raise BundleError(f"more than the {size} bytes announced arrived")
        if digest.hexdigest() != sha256:
            raise BundleError("the archive's SHA-256 is not the one the build sent (damaged on the way)")
    except BaseException:
        os.unlink(path)
        raise
    return path


def receive(args: argparse.Namespace) -> dict:
    """Unpack the archive read from standard input beside the cache, check it is the bundle asked for, then move it in whole."""
    folders = cache_folders(args.cache)
    sweep_dead(folders["uploads"])
    sweep_dead(folders["bundles"], STAGING)
    upload = receive_archive(sys.stdin.buffer, args.size, args.archive_sha256, folders["uploads"])
    staging = tempfile.mkdtemp(prefix=f"{STAGING}{os.getpid()}-", dir=folders["bundles"])
    try:
        safe_extract(upload, staging)
        tops = os.listdir(staging)
        if len(tops) != 1:
            raise BundleError(f"the archive holds {sorted(tops)}, expected one bundle folder")
        unpacked = os.path.join(staging, tops[0])
        verify(unpacked, args.bundle)
        final = os.path.join(folders["bundles"], args.bundle)
        if not os.path.isdir(final):  # another run may have installed the same bundle meanwhile
            os.rename(unpacked, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        os.unlink(upload)
    return {"installed": final}


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_dead(folder: str, prefix: str = "") -> None:
    """Remove what a process left in ``folder`` (named ``PREFIX<pid>-...``) once that process is gone (killed with its ssh session, say)."""
    for name in os.listdir(folder):
        pid = name[len(prefix) :].split("-", 1)[0] if name.startswith(prefix) else ""
        if pid.isdigit() and len(pid) < 10 and not process_alive(int(pid)):
            path = os.path.join(folder, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)


def tail(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].removeprefix("error: ") if lines else ""


def bench_one(python: str, bundle: str, model: str, runtime: str, bench_options: list[str], scratch: str, timeout_s: float) -> dict:
    """``bench.py MODEL --runtime RUNTIME --parity`` in its own process: its figures and logits, or how it ended."""
    out, outputs = os.path.join(scratch, "result.json"), os.path.join(scratch, "logits.npy")
    command = [python, os.path.join(bundle, "bench.py"), model, "--runtime", runtime, "--parity", "--out", out, "--outputs", outputs, *bench_options]
    try:
        done = subprocess.run(command, cwd=bundle, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"status": f"timed out after {timeout_s:g} s"}
    if done.returncode < 0:
        return {"status": f"crashed (signal {-done.returncode})"}
    # Exit 1 is bench.py's verdict on parity: the figures are there, and the build machine gates them itself.
    if done.returncode not in (0, 1) or not os.path.isfile(out):
        return {"status": f"failed (exit {done.returncode}): {tail(done.stderr) or tail(done.stdout)}"}
    with open(out, encoding="utf-8") as handle:
        result = json.load(handle)
    with open(outputs, "rb") as handle:
        result["logits_npy"] = base64.b64encode(handle.read()).decode("ascii")
    return {"status": "ok", **result}


def run(args: argparse.Namespace) -> dict:
    folders = cache_folders(args.cache)
    bundle = os.path.join(folders["bundles"], args.bundle)
    sweep_dead(folders["runs"])
    scratch = tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=folders["runs"])
    try:
        verify(bundle)
        results = []
        for check in args.check:
            model, runtime = check.split(":", 1)
            for leftover in os.listdir(scratch):
                os.unlink(os.path.join(scratch, leftover))
            # The check's own names last: the build matches each answer to what it asked for.
            results.append(
                {**bench_one(sys.executable, bundle, model, runtime, args.bench, scratch, args.timeout), "model": model, "runtime": runtime}
            )
        return {"checks": results}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agent", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("probe", "receive", "run"):
        command = commands.add_parser(name)
        command.add_argument("--cache", required=True, help="the board's bundle cache")
        command.add_argument("--bundle", required=True, help="SHA-256 of the bundle's manifest.json")
    commands.choices["probe"].add_argument("--runtime", action="append", default=[], help="DISTRIBUTION=INTERPRETER_MODULE, once per runtime")
    commands.choices["receive"].add_argument("--size", type=int, required=True, help="bytes of bundle-<target>.tar.gz on standard input")
    commands.choices["receive"].add_argument("--archive-sha256", required=True, help="their SHA-256")
    run_parser = commands.choices["run"]
    run_parser.add_argument("--check", action="append", default=[], help="MODEL:RUNTIME, once per check, run in that order")
    run_parser.add_argument("--timeout", type=float, required=True, help="seconds each check may take")
    run_parser.add_argument("bench", nargs=argparse.REMAINDER, help="after --: bench.py's options for every check")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "bench", None) and args.bench[0] == "--":
        args.bench = args.bench[1:]
    try:
        result = {"probe": probe, "receive": receive, "run": run}[args.command](args)
    except (BundleError, OSError, tarfile.TarError) as exc:
        # One file, streamed alone to the board: it cannot import the package, so it repeats the line and the code
        # of edge_build/board/__init__.py's fail(..., EXIT_USAGE); tests/test_structure.py keeps it standalone.
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
