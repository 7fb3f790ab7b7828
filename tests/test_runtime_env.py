"""The runtime_env stage: environments that mirror a board's software stack, whatever Python this project runs on.

The host environment (``host_runtime_env``, shared with the stage tests) comes from
this machine's CPython 3.11 in a venv of its own. The Debian route takes the
release's own CPython from its packages with a private apt configuration: it
needs apt-get, dpkg-deb and Debian's archive keyring, no root, and changes
nothing machine-wide (checked here).
"""

import contextlib
import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, TINY_PROFILE, debian_packages_unavailable, profile_runtime, with_litert, write_profile

from edge_build.board.runtime import RUNTIMES
from edge_build.config.profile import load_profile
from edge_build.convert import gates
from edge_build.errors import StageError
from edge_build.platforms import host_arch
from edge_build.runtime_envs import describe, environment_in_use, launcher, lock_file, locked, read_environment, unavailable, writable_by_others
from edge_build.stacks import EnvironmentSpec, RuntimeSpec, Stack
from edge_build.stages import runtime_check, runtime_env
from edge_build.stages.runtime_env import DEBIAN_ARCH, install, pip_wheels, provision, reusable, runtime_spec

BOOKWORM = Stack("bookworm", "3.11", "1.26.4")
TRIXIE = Stack("trixie", "3.13", "2.2.6")


def run_python(environment: dict, code: str) -> subprocess.CompletedProcess:
    prefix, variables = launcher(environment)
    return subprocess.run([*prefix, "-c", code], env=variables, capture_output=True, text=True, timeout=300)


def test_the_host_environment_holds_exactly_the_stack(host_runtime_env: Path):
    environment = read_environment(host_runtime_env)
    assert environment["arch"] == host_arch() and not environment["emulated"] and environment["emulator"] is None
    assert environment["stack"] == {"release": "bookworm", "python": "3.11", "numpy": "1.26.4", "title": "Debian 12 bookworm"}
    assert environment["python_version"].startswith("3.11.") and environment["numpy_version"] == "1.26.4"
    runtimes = {name: dict(entry) for name, entry in environment["runtimes"].items()}
    disk = runtimes["tflite-runtime"].pop("disk_mb")
    assert runtimes == {"tflite-runtime": {"version": "2.14.0", "required": True, "checkable": True, "reason": None}}
    # Its own Python, under the environment's folder: never this project's interpreter.
    assert Path(environment["python"][0]).is_relative_to(host_runtime_env.parent)
    assert describe(environment).startswith(f"Debian 12 bookworm: CPython {environment['python_version']} (")
    probe = (
        "import importlib.util, numpy, platform, tflite_runtime.interpreter\n"
        "from importlib.metadata import version\n"
        "print(platform.python_version(), numpy.__version__, version('tflite-runtime'), importlib.util.find_spec('tensorflow') is None)\n"
    )
    done = run_python(environment, probe)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [environment["python_version"], "1.26.4", "2.14.0", "True"]
    # Its size was measured in the environment itself: tflite-runtime alone, its only dependency being the stack's numpy.
    measured = run_python(environment, "from edge_build.runtime_envs import disk_mb; print(disk_mb(['tflite-runtime']))")
    assert measured.returncode == 0, measured.stderr
    assert float(measured.stdout) == disk > 1


def test_an_environment_recorded_before_sizes_were_measured_is_still_reused(host_runtime_env: Path, runtime_envs: Path, tmp_path: Path):
    spec = load_profile(runtime_envs.parent / "host-profile", "tiny").runtime_environment()
    older = read_environment(host_runtime_env)
    for entry in older["runtimes"].values():
        entry.pop("disk_mb", None)
    (tmp_path / "env.json").write_text(json.dumps(older), encoding="utf-8")
    assert reusable(spec, tmp_path / "env.json") == older
    assert (
        "on disk" not in describe(older)
        and runtime_env.describe_runtime("tflite-runtime", older["runtimes"]["tflite-runtime"]) == "tflite-runtime 2.14.0"
    )


TENSORFLOW_CPU = RuntimeSpec("tensorflow-cpu", "2.15.1", True)
COMPANIONS = ["tensorflow-text==2.15.0", "tensorflow-hub==0.15.0"]


def test_a_runtimes_companions_are_installed_after_it_without_their_dependencies():
    calls = []
    entry = install(TENSORFLOW_CPU, lambda requirements, no_deps=False: calls.append((requirements, no_deps)))
    assert calls == [(["tensorflow-cpu==2.15.1"], False), (COMPANIONS, True)]
    assert entry == {"version": "2.15.1", "required": True, "checkable": True, "reason": None}
    calls.clear()
    install(RuntimeSpec("tflite-runtime", "2.14.0", True), lambda requirements, no_deps=False: calls.append((requirements, no_deps)))
    assert calls == [(["tflite-runtime==2.14.0"], False)], "a runtime without companions installs alone"
    calls.clear()
    install(RuntimeSpec("mediapipe", "0.10.21", True), lambda requirements, no_deps=False: calls.append((requirements, no_deps)))
    assert calls == [(list(RUNTIMES["mediapipe"]["0.10.21"].dependencies), False), (["mediapipe==0.10.21"], True)], (
        "chosen dependencies, then the wheel alone"
    )


def test_a_companion_that_fails_is_its_runtime_failing():
    def companions_fail(requirements: list[str], no_deps: bool = False) -> None:
        if no_deps:
            raise StageError("pip install failed: no tensorflow-text 2.15.0 here")

    with pytest.raises(StageError, match="no tensorflow-text 2.15.0 here"):
        install(TENSORFLOW_CPU, companions_fail)
    optional = install(RuntimeSpec("tensorflow-cpu", "2.15.1", False), companions_fail)
    assert optional == {
        "version": None,
        "required": False,
        "checkable": False,
        "reason": "not provisioned: pip install failed: no tensorflow-text 2.15.0 here",
    }


def test_companion_wheels_for_the_board_are_downloaded_without_their_dependencies(monkeypatch, tmp_path: Path):
    commands = []
    monkeypatch.setattr(runtime_env, "run", lambda command, *args, **kwargs: commands.append(command))
    pip_wheels(tmp_path / "site-packages", COMPANIONS, BOOKWORM, "aarch64", no_deps=True)
    pip_wheels(tmp_path / "site-packages", ["numpy==1.26.4", "tensorflow-cpu==2.15.1"], BOOKWORM, "aarch64")
    assert commands[0][-3:] == ["--no-deps", *COMPANIONS] and "--platform" in commands[0]
    assert "--no-deps" not in commands[1]


def test_a_runtime_argument_names_a_known_runtime_and_a_version():
    assert runtime_spec("ai-edge-litert==2.3.0", False) == RuntimeSpec("ai-edge-litert", "2.3.0", False)
    for bad in ("tensorrt==10.0", "tflite-runtime", "tflite-runtime=="):
        with pytest.raises(StageError, match=r"expected NAME==VERSION with NAME one of tflite-runtime, ai-edge-litert"):
            runtime_spec(bad, True)


def machine_wide_apt_state() -> dict:
    """What provisioning must leave as it is: the machine's architectures, apt sources and settings, package lists, cache and dpkg database."""

    def listing(folder: str) -> list:
        path = Path(folder)
        return sorted((p.name, p.stat().st_size) for p in path.iterdir()) if path.is_dir() else []

    def digest(file: str) -> str | None:
        path = Path(file)
        return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None

    foreign = subprocess.run(["dpkg", "--print-foreign-architectures"], capture_output=True, text=True) if shutil.which("dpkg") else None
    return {
        "foreign architectures": foreign.stdout if foreign else None,
        **{folder: listing(folder) for folder in ("/etc/apt/sources.list.d", "/etc/apt/apt.conf.d", "/etc/apt/trusted.gpg.d", "/var/lib/apt/lists")},
        "/var/cache/apt/archives": listing("/var/cache/apt/archives"),
        **{file: digest(file) for file in ("/etc/apt/sources.list", "/var/lib/dpkg/status")},
    }


@pytest.fixture(scope="module")
def trixie_native(runtime_envs: Path) -> dict:
    """Debian 13's own CPython 3.13 for this machine, numpy 2.2.6 and ai-edge-litert: the Debian route, even where a python3.13 is installed."""
    reason = debian_packages_unavailable()
    if reason:
        pytest.skip(reason)
    spec = EnvironmentSpec(host_arch(), TRIXIE, (RuntimeSpec("ai-edge-litert", "2.3.0", True),))
    env_json = runtime_envs / f"debian-{spec.key()}" / "env.json"
    before = machine_wide_apt_state()
    record = provision(spec, env_json, runtime_envs / "apt", machine_pythons=False)
    return {"record": record, "env_json": env_json, "before": before, "after": machine_wide_apt_state()}


@pytest.mark.slow
def test_a_trixie_stack_runs_debians_own_cpython_with_numpy_2(trixie_native):
    record, env_json = trixie_native["record"], trixie_native["env_json"]
    assert read_environment(env_json) == record
    assert record["arch"] == host_arch() and not record["emulated"]
    assert record["python_version"].startswith("3.13.") and record["numpy_version"] == "2.2.6"
    assert record["python_source"].startswith(f"Debian 13 trixie's own {DEBIAN_ARCH[host_arch()]} package python3.13-minimal ")
    runtimes = {name: dict(entry) for name, entry in record["runtimes"].items()}
    assert runtimes["ai-edge-litert"].pop("disk_mb") > 1, "measured in the unpacked wheels, through Debian's own CPython"
    assert runtimes == {"ai-edge-litert": {"version": "2.3.0", "required": True, "checkable": True, "reason": None}}
    # The release's loader and interpreter from the environment's own sysroot, not the machine's.
    assert all(Path(part).is_relative_to(env_json.parent) for part in record["python"] if part.startswith("/"))
    probe = (
        "import importlib.util, numpy, platform, sys, ai_edge_litert.interpreter\n"
        "from importlib.metadata import version\n"
        "print(platform.python_version(), numpy.__version__, version('ai-edge-litert'), importlib.util.find_spec('tensorflow') is None)\n"
    )
    done = run_python(record, probe)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [record["python_version"], "2.2.6", "2.3.0", "True"]


@pytest.mark.slow
def test_provisioning_changes_nothing_machine_wide(trixie_native):
    assert trixie_native["after"] == trixie_native["before"]


@pytest.mark.slow
def test_the_tiny_models_run_on_ai_edge_litert_with_numpy_2(tiny_artifacts, trixie_native, tmp_path: Path):
    profile = load_profile(write_profile(tmp_path / "targets", "tiny", with_litert(TINY_PROFILE)).parent, "tiny")
    golden = tiny_artifacts["target"] / "golden.npz"
    native = json.loads((tiny_artifacts["target"] / "runtime_checks.json").read_text())["checks"]
    for artifact in ("tflite_fp32", "tflite_int8"):
        outcome = runtime_check.run_in_environment(
            tiny_artifacts[artifact], profile_runtime(profile, "ai-edge-litert"), golden, profile, tmp_path, trixie_native["record"]
        )
        assert outcome["status"] == "ok", (artifact, outcome["status"])
        assert outcome["python"] == trixie_native["record"]["python_version"] and outcome["runtime_version"] == "2.3.0"
        figures = native[artifact]["tflite-runtime"]["parity"]
        assert outcome["parity"]["top1_agreement"] == figures["top1_agreement"]
        assert outcome["parity"]["max_abs_logit_error"] == pytest.approx(figures["max_abs_logit_error"], abs=1e-5)


def unmeetable_constraint(folder: Path) -> Path:
    """A pip constraints file no ai-edge-litert wheel meets: pip then fails to install it, as with no wheel for the board."""
    path = folder / "constraints.txt"
    path.write_text("ai-edge-litert==0.0.1\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def optional_missing(runtime_envs: Path, tmp_path_factory) -> dict:
    """``python -m edge_build.stages.runtime_env`` as SConstruct runs it, for a stack whose optional runtime has no such wheel."""
    from edge_build import cli

    spec = EnvironmentSpec(host_arch(), BOOKWORM, (RuntimeSpec("ai-edge-litert", "2.3.0", False),))
    folder = tmp_path_factory.mktemp("optional-missing")
    env_json = folder / spec.key() / "env.json"
    argv = [*spec.arguments(), "--apt-dir", str(runtime_envs / "apt"), "--out", str(env_json)]
    previous = os.getcwd()
    os.chdir(REPO)  # the stage puts the project it runs from on the environment's PYTHONPATH
    try:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.MonkeyPatch.context() as patch:
            patch.setenv("PIP_CONSTRAINT", str(unmeetable_constraint(folder)))
            status = cli.run(runtime_env.build_parser, runtime_env.drive, argv)
    finally:
        os.chdir(previous)
    return {"argv": argv, "status": status, "out": out.getvalue(), "env_json": env_json}


def test_an_optional_runtime_whose_wheel_cannot_install_is_recorded_and_the_environment_written(optional_missing, tmp_path: Path):
    assert optional_missing["status"] == 0
    env_json = optional_missing["env_json"]
    record = read_environment(env_json)
    assert record["numpy_version"] == "1.26.4" and record["pythonpath"] == []  # the checkout comes from the launcher
    entry = record["runtimes"]["ai-edge-litert"]
    assert {key: entry[key] for key in ("version", "required", "checkable")} == {"version": None, "required": False, "checkable": False}
    assert entry["reason"].startswith("not provisioned: pip install failed: ")
    assert unavailable(record, "ai-edge-litert") == entry["reason"]
    # One line says what is ready and what is not, besides the commands it ran.
    (line,) = [line for line in optional_missing["out"].splitlines() if " ready: " in line]
    assert line.startswith(f"runtime-env: {env_json} ready: Debian 12 bookworm {host_arch()} (native), CPython 3.11.")
    assert f"numpy 1.26.4; ai-edge-litert ({entry['reason']})" in line
    # The preflight and the runtime checks report it without starting anything.
    profile = load_profile(write_profile(tmp_path / "targets", "tiny", with_litert(TINY_PROFILE)).parent, "tiny")
    model = tmp_path / "never-loaded.tflite"
    assert gates.preflight(model, "ai-edge-litert", record) == {
        "runtime": "ai-edge-litert",
        "ok": False,
        "checked": False,
        "version": None,
        "error": f"not checked: {entry['reason']}",
    }
    assert runtime_check.run_in_environment(
        model, profile_runtime(profile, "ai-edge-litert"), tmp_path / "golden.npz", profile, tmp_path, record
    ) == {"status": f"not checked: {entry['reason']}"}


def test_a_required_runtime_whose_wheel_cannot_install_stops_the_stage_and_leaves_nothing(runtime_envs: Path, tmp_path: Path, monkeypatch):
    spec = EnvironmentSpec(host_arch(), BOOKWORM, (RuntimeSpec("ai-edge-litert", "2.3.0", True),))
    env_json = runtime_envs / f"required-{spec.key()}" / "env.json"
    monkeypatch.setenv("PIP_CONSTRAINT", str(unmeetable_constraint(tmp_path)))
    with pytest.raises(StageError, match=r"pip install failed: "):
        provision(spec, env_json, runtime_envs / "apt")
    assert not env_json.parent.exists()
    assert not [p for p in runtime_envs.iterdir() if p.name.startswith(".tmp-")], "the staging folder outlived the failure"


def test_an_environment_provisioned_for_the_same_spec_is_reused_not_replaced(host_runtime_env: Path, runtime_envs: Path, capsys):
    """A second build directory sharing ``runtime_envs=`` runs the stage again (its SCons database has no record): nothing is reprovisioned."""
    from edge_build import cli

    spec = load_profile(runtime_envs.parent / "host-profile", "tiny").runtime_environment()
    before = (host_runtime_env.stat().st_mtime_ns, host_runtime_env.read_bytes())
    argv = [*spec.arguments(), "--apt-dir", str(runtime_envs / "apt"), "--out", str(host_runtime_env)]
    assert cli.run(runtime_env.build_parser, runtime_env.drive, argv) == 0
    assert f"runtime-env: reusing {host_runtime_env}" in capsys.readouterr().out
    assert (host_runtime_env.stat().st_mtime_ns, host_runtime_env.read_bytes()) == before


def test_a_runtime_version_without_a_row_is_refused_before_anything_is_provisioned(tmp_path: Path, capsys):
    from edge_build import cli

    argv = ["--arch", "x86_64", "--release", "bookworm", "--python", "3.11", "--numpy", "1.26.4", "--runtime", "ai-edge-litert==0.0.1"]
    argv += ["--apt-dir", str(tmp_path / "apt"), "--out", str(tmp_path / "env" / "env.json")]
    assert cli.run(runtime_env.build_parser, runtime_env.drive, argv) == cli.EXIT_USER_ERROR
    assert capsys.readouterr().err == (
        "error: --runtime ai-edge-litert==0.0.1: key 'version': ai-edge-litert 0.0.1 has no row in the runtime table, so what it can "
        "run is unknown (allowed: 2.3.0, or add a row for it to edge_build/board/runtime.py)\n"
    )
    assert not (tmp_path / "env").exists() and not (tmp_path / "apt").exists()


#: Another process trying the lock without waiting: exit 0 if it got it, 1 if it is held.
TRY_LOCK = (
    "import fcntl, os, sys; d = os.open(sys.argv[1], os.O_RDWR); sys.exit(0 if fcntl.flock(d, int(sys.argv[2]) | fcntl.LOCK_NB) is None else 1)"
)


def lock_taken(path: Path, exclusive: bool) -> bool:
    """Whether another process could take ``path``'s lock now, without waiting."""
    import fcntl

    mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    done = subprocess.run([sys.executable, "-c", TRY_LOCK, str(path), str(mode)], capture_output=True, text=True, timeout=60)
    assert done.returncode in (0, 1) and ("BlockingIOError" in done.stderr) == (done.returncode == 1), done.stderr
    return done.returncode == 0


def test_provisioning_excludes_every_other_user_of_the_environment_and_users_exclude_provisioning(tmp_path: Path):
    env_json = tmp_path / "envs" / "bookworm-x86_64" / "env.json"
    lock = lock_file(env_json)
    assert lock == tmp_path / "envs" / "bookworm-x86_64.lock"  # beside the folder that provisioning replaces whole
    with locked(lock, exclusive=True):
        assert not lock_taken(lock, exclusive=False) and not lock_taken(lock, exclusive=True)
    env_json.parent.mkdir()
    env_json.write_text('{"key": "bookworm-x86_64"}')
    with environment_in_use(env_json) as record:
        assert record == {"key": "bookworm-x86_64"}
        assert lock_taken(lock, exclusive=False) and not lock_taken(lock, exclusive=True)  # other checks run; no one re-provisions
    assert lock_taken(lock, exclusive=True)


def test_a_runtime_envs_folder_others_can_write_is_refused_unless_trusted(tmp_path: Path):
    shared = tmp_path / "envs"
    (shared / "bookworm-x86_64").mkdir(parents=True, mode=0o755)
    (shared / "bookworm-x86_64" / "env.json").write_text("{}")
    for path in (shared, shared / "bookworm-x86_64"):
        path.chmod(0o755)
    (shared / "bookworm-x86_64" / "env.json").chmod(0o644)
    assert writable_by_others(shared) is None
    for path, mode, why in (
        (shared, 0o775, f"{shared} is writable by its group (mode 0775)"),
        (shared, 0o777, f"{shared} is writable by everyone (mode 0777)"),
        (shared / "bookworm-x86_64", 0o775, f"{shared}/bookworm-x86_64 is writable by its group (mode 0775)"),
        (shared / "bookworm-x86_64" / "env.json", 0o666, f"{shared}/bookworm-x86_64/env.json is writable by everyone (mode 0666)"),
    ):
        before = stat.S_IMODE(path.stat().st_mode)
        path.chmod(mode)
        assert writable_by_others(shared) == why
        path.chmod(before)
    if os.geteuid() == 0:  # only root can give a file away
        os.chown(shared / "bookworm-x86_64" / "env.json", 65534, 65534)
        assert writable_by_others(shared) == f"{shared}/bookworm-x86_64/env.json belongs to user id 65534"
        os.chown(shared / "bookworm-x86_64" / "env.json", 0, 0)
    # Through scons, before anything is scheduled; trust_runtime_envs=yes accepts the folder.
    shared.chmod(0o777)
    scons = [sys.executable, "-m", "SCons", "-Q", "-n", f"build_dir={tmp_path / 'build'}", f"runtime_envs={shared}"]
    refused = subprocess.run(scons, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and refused.stdout == "", refused.stdout
    assert refused.stderr.strip() == (
        f"scons: *** runtime_envs={shared}: {shared} is writable by everyone (mode 0777), and whoever can write there runs code in every "
        "build that uses it (allowed: a folder only you can write, or trust_runtime_envs=yes if you trust its writers)"
    )
    trusted = subprocess.run([*scons, "trust_runtime_envs=yes"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert trusted.returncode == 0 and "edge_build.stages.runtime_env" in trusted.stdout, trusted.stderr
    # A fresh folder is made by scons itself, for its owner only whatever the umask.
    fresh = tmp_path / "fresh" / "envs"
    previous = os.umask(0o002)
    try:
        made = subprocess.run([*scons[:-1], f"runtime_envs={fresh}"], cwd=REPO, capture_output=True, text=True, timeout=120)
    finally:
        os.umask(previous)
    assert made.returncode == 0 and stat.S_IMODE(fresh.stat().st_mode) == 0o755, made.stderr


@pytest.mark.slow
def test_two_builds_sharing_a_fresh_runtime_envs_folder_provision_it_once(tmp_path: Path):
    shared = tmp_path / "envs"
    builds = [
        subprocess.Popen(
            [sys.executable, "-m", "SCons", "-Q", "-j2", f"build_dir={tmp_path / name}", f"runtime_envs={shared}", "verbose=yes", "runtime-env"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("first", "second")
    ]
    outputs = [build.communicate(timeout=1800) for build in builds]
    assert [build.returncode for build in builds] == [0, 0], [err[-2000:] for _, err in outputs]
    said = [line for out, _ in outputs for line in out.splitlines() if line.startswith("runtime-env: ")]
    # Each environment (the host stack's, the metadata writer's) is provisioned by one build while the other waits on its
    # lock, then reuses what the first made.
    assert sum(" reusing " in line for line in said) == 2 and sum(" ready: " in line for line in said) == 4, said
    keys = sorted(p.name for p in shared.iterdir() if p.is_dir() and p.name != "apt")
    assert len(keys) == 2
    assert sorted(p.name for p in shared.iterdir() if p.name != "apt") == sorted([*keys, *(f"{key}.lock" for key in keys)])  # no staging folder left
    assert writable_by_others(shared) is None
