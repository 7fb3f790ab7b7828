"""Board software stacks as data: ``[stack]``, which runtimes a stack can install, and the runtime environments' specs.

Standard library only, no TensorFlow and no provisioning: these run in a second.
"""

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from edge_build.board.runtime import DEFAULT_VERSIONS, RUNTIMES
from edge_build.config.profile import BoardStack, load_profile
from edge_build.errors import ConfigError
from edge_build.runtime_envs import PROJECT_ROOT, describe, disk_mb, launcher, unavailable
from edge_build.stacks import OS_RELEASES, EnvironmentSpec, RuntimeSpec, Stack, not_installable, writer_environment

REPO = Path(__file__).resolve().parents[1]
TFLITE = 'description = "x"\narch = "x86_64"\nartifacts = ["tflite_int8"]\n'
TRIXIE = '[stack]\nrelease = "trixie"\npython = "3.13"\nnumpy = "2.2.6"\n'


def load(tmp_path: Path, text: str):
    (tmp_path / "board.toml").write_text(text, encoding="utf-8")
    return load_profile(tmp_path, "board")


def refusal(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, text)
    message = str(caught.value)
    assert "\n" not in message, "configuration errors are one line"
    return message


def test_the_os_releases_and_their_cpythons():
    assert {name: release.python for name, release in OS_RELEASES.items()} == {"bookworm": "3.11", "trixie": "3.13"}
    assert Stack("trixie", "3.13", "2.2.6").describe() == "Debian 13 trixie (CPython 3.13, numpy 2.2.6)"
    assert Stack("bookworm", "3.11", "1.26.4").numpy_major == 1


def test_the_default_stack_is_bookworm_with_numpy_1(tmp_path: Path):
    profile = load(tmp_path, TFLITE + '[[runtimes]]\nname = "tflite-runtime"\n')
    assert profile.stack == BoardStack() == BoardStack("bookworm", "3.11", "1.26.4")
    assert profile.runtimes[0].version == DEFAULT_VERSIONS["tflite-runtime"] == "2.14.0"
    assert profile.runtimes[0].row == RUNTIMES["tflite-runtime"]["2.14.0"]


@pytest.mark.parametrize(
    "stack, message",
    [
        ('release = "buster"\n', "key 'stack.release': unknown OS release 'buster' (allowed: bookworm, trixie)"),
        ('python = "3.12"\n', "key 'stack.python': Debian 12 bookworm ships CPython 3.11, not 3.12 (allowed: 3.11)"),
        # A release alone keeps the default CPython, which is bookworm's: the stack names both, or is refused.
        ('release = "trixie"\nnumpy = "2.2.6"\n', "key 'stack.python': Debian 13 trixie ships CPython 3.13, not 3.11 (allowed: 3.13)"),
        ('numpy = "2.2"\n', "key 'stack.numpy': expected an exact numpy version such as 1.26.4 or 2.2.6, not '2.2'"),
        ('numpy = ">=1.26,<2"\n', "key 'stack.numpy': expected an exact numpy version such as 1.26.4 or 2.2.6, not '>=1.26,<2'"),
        ('numpy = "3.0.0"\n', "key 'stack.numpy': expected an exact numpy version such as 1.26.4 or 2.2.6, not '3.0.0'"),
        ("numpy = 2\n", "key 'stack.numpy' must be a string, not int 2"),
        ('os = "trixie"\n', "unknown key 'stack.os' (allowed: release, python, numpy)"),
    ],
    ids=[
        "unknown-release",
        "python-not-the-releases",
        "release-without-python",
        "numpy-not-exact",
        "numpy-a-range",
        "numpy-3",
        "numpy-int",
        "unknown-key",
    ],
)
def test_a_bad_stack_is_refused_with_file_key_and_choices(tmp_path: Path, stack: str, message: str):
    text = TFLITE + "[stack]\n" + stack + '[[runtimes]]\nname = "ai-edge-litert"\n'
    assert refusal(tmp_path, text) == f"{tmp_path / 'board.toml'}: {message}"


def test_a_runtime_version_must_be_an_exact_wheel_version(tmp_path: Path):
    message = refusal(tmp_path, TFLITE + '[[runtimes]]\nname = "tflite-runtime"\nversion = ">=2.14"\n')
    assert message == f"{tmp_path / 'board.toml'}: key 'runtimes.version': expected an exact wheel version such as 2.14.0, not '>=2.14'"
    assert load(tmp_path, TFLITE + '[[runtimes]]\nname = "ai-edge-litert"\nversion = "2.3.0"\n').runtimes[0].version == "2.3.0"


def test_a_runtime_version_without_a_row_in_the_runtime_table_is_refused(tmp_path: Path):
    message = refusal(tmp_path, TFLITE + '[[runtimes]]\nname = "ai-edge-litert"\nversion = "2.2.1"\n')
    assert message == (
        f"{tmp_path / 'board.toml'}: key 'runtimes.version': ai-edge-litert 2.2.1 has no row in the runtime table, so what it can run is "
        "unknown (allowed: 2.3.0, or add a row for it to edge_build/board/runtime.py)"
    )


def test_a_required_runtime_the_stack_cannot_install_is_refused_in_one_line(tmp_path: Path):
    message = refusal(tmp_path, TFLITE + TRIXIE + '[[runtimes]]\nname = "tflite-runtime"\n')
    assert message == (
        f"{tmp_path / 'board.toml'}: key 'runtimes': required runtime tflite-runtime cannot be installed on the stack "
        "Debian 13 trixie (CPython 3.13, numpy 2.2.6): tflite-runtime has wheels for CPython 3.8-3.11 only, and the trixie stack "
        "has CPython 3.13 (allowed: another stack, or required = false to report it)"
    )


def test_numpy_2_on_bookworm_refuses_a_required_tflite_runtime(tmp_path: Path):
    message = refusal(tmp_path, TFLITE + '[stack]\nnumpy = "2.2.6"\n[[runtimes]]\nname = "tflite-runtime"\n')
    assert "required runtime tflite-runtime cannot be installed on the stack Debian 12 bookworm (CPython 3.11, numpy 2.2.6)" in message
    assert "tflite-runtime needs numpy<2, and the bookworm stack has numpy 2.2.6" in message


def test_an_optional_runtime_the_stack_cannot_install_is_accepted_and_ignored_for_quantization(tmp_path: Path):
    runtimes = '[[runtimes]]\nname = "ai-edge-litert"\n[[runtimes]]\nname = "tflite-runtime"\nrequired = false\n'
    profile = load(tmp_path, TFLITE + TRIXIE + runtimes)
    assert [(r.name, r.version, r.required) for r in profile.runtimes] == [("ai-edge-litert", "2.3.0", True), ("tflite-runtime", "2.14.0", False)]
    # tflite-runtime cannot load per-channel dense layers, but it cannot install on this stack either: per-channel it is.
    assert profile.per_channel_dense
    # The same runtimes on bookworm, where tflite-runtime installs: per-tensor, so that it can run the model.
    assert not load(tmp_path, TFLITE + runtimes).per_channel_dense


def test_not_installable_says_why():
    bookworm, trixie = Stack("bookworm", "3.11", "1.26.4"), Stack("trixie", "3.13", "2.2.6")
    tflite_runtime, litert = RuntimeSpec("tflite-runtime"), RuntimeSpec("ai-edge-litert")
    assert not_installable(tflite_runtime, bookworm) is None and not_installable(litert, bookworm) is None
    assert not_installable(litert, trixie) is None
    assert not_installable(tflite_runtime, trixie) == "tflite-runtime has wheels for CPython 3.8-3.11 only, and the trixie stack has CPython 3.13"
    assert (
        not_installable(tflite_runtime, Stack("bookworm", "3.11", "2.0.0")) == "tflite-runtime needs numpy<2, and the bookworm stack has numpy 2.0.0"
    )


def test_the_facts_are_those_of_the_version_the_profile_pins(monkeypatch, tmp_path: Path):
    """Each runtime version has its own row: a pinned version is judged by what that version can do, not the default's."""
    older = dataclasses.replace(RUNTIMES["tflite-runtime"]["2.14.0"], version="2.13.0", pythons=("3.8", "3.9", "3.10"))
    monkeypatch.setitem(RUNTIMES, "tflite-runtime", {"2.13.0": older, **RUNTIMES["tflite-runtime"]})
    bookworm = Stack("bookworm", "3.11", "1.26.4")
    assert not_installable(RuntimeSpec("tflite-runtime", "2.14.0"), bookworm) is None
    assert not_installable(RuntimeSpec("tflite-runtime", "2.13.0"), bookworm) == (
        "tflite-runtime has wheels for CPython 3.8-3.10 only, and the bookworm stack has CPython 3.11"
    )
    message = refusal(tmp_path, TFLITE + '[[runtimes]]\nname = "tflite-runtime"\nversion = "2.13.0"\n')
    assert message.endswith("required runtime tflite-runtime cannot be installed on the stack Debian 12 bookworm (CPython 3.11, numpy 1.26.4): "
                            "tflite-runtime has wheels for CPython 3.8-3.10 only, and the bookworm stack has CPython 3.11 "
                            "(allowed: another stack, or required = false to report it)")  # fmt: skip


def test_the_shipped_profiles_name_their_stacks():
    host, arm64, trixie = (load_profile(REPO / "targets", name) for name in ("host", "arm64", "arm64-trixie"))
    for profile, mediapipe_required in ((host, True), (arm64, False)):
        assert profile.stack == BoardStack("bookworm", "3.11", "1.26.4")
        assert [(r.name, r.version, r.required) for r in profile.runtimes] == [
            ("tflite-runtime", "2.14.0", True),
            ("ai-edge-litert", "2.3.0", False),
            ("mediapipe", "1.2.2", mediapipe_required),
        ]
        assert not profile.per_channel_dense
    assert trixie.arch == "aarch64" and set(trixie.artifacts) == {"tflite_int8", "tflite_fp32"}
    assert trixie.stack == BoardStack("trixie", "3.13", "2.2.6")
    assert [(r.name, r.version, r.required) for r in trixie.runtimes] == [("ai-edge-litert", "2.3.0", True), ("tflite-runtime", "2.14.0", False)]
    assert trixie.per_channel_dense


def test_a_profile_gives_its_environment_spec():
    trixie = load_profile(REPO / "targets", "arm64-trixie")
    spec = trixie.runtime_environment()
    expected = EnvironmentSpec(
        "aarch64",
        Stack("trixie", "3.13", "2.2.6"),
        (RuntimeSpec("ai-edge-litert", "2.3.0", True), RuntimeSpec("tflite-runtime", "2.14.0", False)),
    )
    # (The profile's stack is a BoardStack, a Stack with defaults: the same content, the same environment.)
    assert dataclasses.asdict(spec) == dataclasses.asdict(expected) and spec.key() == expected.key()
    assert spec.arguments() == [
        "--arch",
        "aarch64",
        "--release",
        "trixie",
        "--python",
        "3.13",
        "--numpy",
        "2.2.6",
        "--runtime",
        "ai-edge-litert==2.3.0",
        "--optional-runtime",
        "tflite-runtime==2.14.0",
    ]


HOST_SPEC = EnvironmentSpec(
    "x86_64",
    Stack("bookworm", "3.11", "1.26.4"),
    (RuntimeSpec("tflite-runtime", "2.14.0", True), RuntimeSpec("ai-edge-litert", "2.3.0", False)),
)


def test_the_environment_key_is_stable_and_names_the_stack():
    key = HOST_SPEC.key()
    assert key.startswith("x86_64-bookworm-py3.11-") and len(key.rsplit("-", 1)[1]) == 10
    assert key == HOST_SPEC.key()
    host = load_profile(REPO / "targets", "host")
    assert host.runtime_environment() == EnvironmentSpec(
        HOST_SPEC.arch, HOST_SPEC.stack, (*HOST_SPEC.runtimes, RuntimeSpec("mediapipe", "1.2.2", True))
    )
    # arm64 has the host's stack and runtimes on another architecture: an environment of its own.
    assert load_profile(REPO / "targets", "arm64").runtime_environment().key().startswith("aarch64-bookworm-py3.11-")
    # The same in another process, whatever its string hashing: SConstruct and the tests name one folder alike.
    probe = (
        "from edge_build.stacks import *\n"
        "print(EnvironmentSpec('x86_64', Stack('bookworm', '3.11', '1.26.4'), "
        "(RuntimeSpec('tflite-runtime', '2.14.0', True), RuntimeSpec('ai-edge-litert', '2.3.0', False))).key())"
    )
    environment = {**os.environ, "PYTHONHASHSEED": "12345"}
    assert subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=environment, capture_output=True, text=True, check=True).stdout.strip() == key


@pytest.mark.parametrize(
    "other",
    [
        EnvironmentSpec("aarch64", HOST_SPEC.stack, HOST_SPEC.runtimes),
        EnvironmentSpec("x86_64", Stack("bookworm", "3.11", "1.26.3"), HOST_SPEC.runtimes),
        EnvironmentSpec("x86_64", Stack("trixie", "3.13", "2.2.6"), HOST_SPEC.runtimes),
        EnvironmentSpec("x86_64", HOST_SPEC.stack, (RuntimeSpec("tflite-runtime", "2.14.0", True),)),
        EnvironmentSpec("x86_64", HOST_SPEC.stack, (RuntimeSpec("tflite-runtime", "2.14.0", True), RuntimeSpec("ai-edge-litert", "2.3.0", True))),
    ],
    ids=["arch", "numpy", "release", "runtimes", "required"],
)
def test_a_different_spec_gets_a_different_environment(other: EnvironmentSpec):
    assert other.key() != HOST_SPEC.key()
    assert other.key().startswith(f"{other.arch}-{other.stack.release}-py{other.stack.python}-")


def test_another_runtime_version_gets_a_different_environment(monkeypatch):
    older = dataclasses.replace(RUNTIMES["ai-edge-litert"]["2.3.0"], version="2.2.0")
    monkeypatch.setitem(RUNTIMES, "ai-edge-litert", {"2.2.0": older, **RUNTIMES["ai-edge-litert"]})
    other = EnvironmentSpec("x86_64", HOST_SPEC.stack, (RuntimeSpec("tflite-runtime", "2.14.0", True), RuntimeSpec("ai-edge-litert", "2.2.0", False)))
    assert other.key() != HOST_SPEC.key()


def test_the_requirements_of_a_stack():
    assert HOST_SPEC.requirements() == ["numpy==1.26.4", "tflite-runtime==2.14.0"]
    assert HOST_SPEC.requirements(required=False) == ["ai-edge-litert==2.3.0"]
    trixie = load_profile(REPO / "targets", "arm64-trixie").runtime_environment()
    assert trixie.requirements() == ["numpy==2.2.6", "ai-edge-litert==2.3.0"]
    assert trixie.requirements(required=False) == [], "tflite-runtime cannot install on trixie: no pip line offers it"


GATEWAY_SPEC = EnvironmentSpec(
    "x86_64",
    Stack("bookworm", "3.11", "1.26.4"),
    (RuntimeSpec("tflite-runtime", "2.14.0", True), RuntimeSpec("tensorflow-cpu", "2.15.1", True)),
)


def test_existing_environment_keys_do_not_change():
    """Companions are hashed only where a runtime has some: environments already provisioned keep their folders."""
    # The keys these specs had before companions existed.
    assert HOST_SPEC.key() == "x86_64-bookworm-py3.11-595cf1e89e"
    assert EnvironmentSpec("aarch64", HOST_SPEC.stack, HOST_SPEC.runtimes).key() == "aarch64-bookworm-py3.11-4b68635c64"
    assert load_profile(REPO / "targets", "arm64-trixie").runtime_environment().key() == "aarch64-trixie-py3.13-1d087d8de9"


def test_a_runtimes_companions_are_part_of_its_environments_key(monkeypatch):
    before = GATEWAY_SPEC.key()
    repinned = dataclasses.replace(RUNTIMES["tensorflow-cpu"]["2.15.1"], companions=("tensorflow-text==2.15.1", "tensorflow-hub==0.15.0"))
    monkeypatch.setitem(RUNTIMES, "tensorflow-cpu", {"2.15.1": repinned})
    assert GATEWAY_SPEC.key() != before and GATEWAY_SPEC.key().startswith("x86_64-bookworm-py3.11-")


def test_companions_are_installed_without_dependencies_after_their_runtime():
    assert GATEWAY_SPEC.requirements() == ["numpy==1.26.4", "tflite-runtime==2.14.0", "tensorflow-cpu==2.15.1"]
    assert GATEWAY_SPEC.no_deps_requirements() == ["tensorflow-text==2.15.0", "tensorflow-hub==0.15.0"]
    assert GATEWAY_SPEC.no_deps_requirements(required=False) == [] and HOST_SPEC.no_deps_requirements() == []
    stack = GATEWAY_SPEC.record()
    assert stack["install_no_deps"] == ["tensorflow-text==2.15.0", "tensorflow-hub==0.15.0"] and "optional_install_no_deps" not in stack
    optional = EnvironmentSpec(
        "x86_64", HOST_SPEC.stack, (RuntimeSpec("tflite-runtime", "2.14.0", True), RuntimeSpec("tensorflow-cpu", "2.15.1", False))
    )
    assert optional.record()["optional_install"] == ["tensorflow-cpu==2.15.1"]
    assert optional.record()["optional_install_no_deps"] == ["tensorflow-text==2.15.0", "tensorflow-hub==0.15.0"]
    assert "install_no_deps" not in optional.record()
    # tensorflow-cpu has no wheels for trixie's CPython 3.13: an optional one there offers neither line.
    trixie = EnvironmentSpec("x86_64", Stack("trixie", "3.13", "2.2.6"), (RuntimeSpec("tensorflow-cpu", "2.15.1", False),))
    assert trixie.record()["optional_install"] == [] and "optional_install_no_deps" not in trixie.record()


def test_a_runtime_whose_row_chooses_its_dependencies_installs_its_wheel_without_them():
    """mediapipe 0.10.21 declares jax and jaxlib, which nothing it runs here imports: its row names what pip resolves instead."""
    writer = writer_environment()
    row = RUNTIMES["mediapipe"]["0.10.21"]
    assert writer.requirements() == ["numpy==1.26.4", *row.dependencies]
    assert not any(name.startswith(("jax", "mediapipe")) for name in writer.requirements())
    assert writer.no_deps_requirements() == ["mediapipe==0.10.21"] and writer.record()["install_no_deps"] == ["mediapipe==0.10.21"]
    # The chosen dependencies are part of the key: changing them provisions a new environment.
    before = writer.key()
    widened = dataclasses.replace(row, dependencies=(*row.dependencies, "jax"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(RUNTIMES, "mediapipe", {**RUNTIMES["mediapipe"], "0.10.21": widened})
        assert writer.key() != before


def test_a_stack_without_companions_keeps_its_record():
    assert HOST_SPEC.record() == {
        "title": "Debian 12 bookworm",
        "release": "bookworm",
        "arch": "x86_64",
        "python": "3.11",
        "numpy": "1.26.4",
        "runtimes": {"tflite-runtime": {"version": "2.14.0", "required": True}, "ai-edge-litert": {"version": "2.3.0", "required": False}},
        "install": ["numpy==1.26.4", "tflite-runtime==2.14.0"],
        "optional_install": ["ai-edge-litert==2.3.0"],
    }


def test_disk_mb_counts_a_distribution_and_its_dependencies_but_the_shared_ones():
    """Measured on this project's own Python: pluggy has no dependencies, pytest depends on pluggy (and on a Windows-only colorama)."""
    from importlib import metadata

    def recorded_mb(name: str) -> float:
        files = [Path(metadata.distribution(name).locate_file(f)) for f in metadata.distribution(name).files]
        return sum(f.stat().st_size for f in files if f.is_file()) / 1e6

    assert disk_mb(["pluggy"]) == round(recorded_mb("pluggy"), 1) > 0
    assert disk_mb(["Pluggy"]) == disk_mb(["pluggy"]), "distribution names compare as pip compares them"
    assert disk_mb(["pytest"]) > disk_mb(["pytest"], shared=("pluggy", "pygments")) > disk_mb(["pytest"], shared=("pluggy", "pygments", "packaging"))
    assert disk_mb(["pytest"], shared=("pytest",)) == 0
    with pytest.raises(LookupError, match="not installed here: no-such-distribution"):
        disk_mb(["pluggy", "no-such-distribution"])


def record(**changes) -> dict:
    """An ``env.json`` record as the runtime_env stage writes it (native bookworm, tflite-runtime, ai-edge-litert not provisioned)."""
    return {
        "arch": "x86_64",
        "stack": {"release": "bookworm", "python": "3.11", "numpy": "1.26.4", "title": "Debian 12 bookworm"},
        "python_source": "this machine's /usr/bin/python3.11, in a virtual environment of its own",
        "emulated": False,
        "emulator": None,
        "python": ["/envs/x/venv/bin/python"],
        "pythonpath": [],
        "runtimes": {
            "tflite-runtime": {"version": "2.14.0", "required": True, "checkable": True, "reason": None},
            "ai-edge-litert": {"version": None, "required": False, "checkable": False, "reason": "not provisioned: pip install failed"},
        },
        "python_version": "3.11.7",
        "numpy_version": "1.26.4",
        **changes,
    }


def test_starting_an_environment_and_what_cannot_run_there(monkeypatch):
    monkeypatch.delenv("EDGE_BUILD_EMULATED", raising=False)
    native = record()
    prefix, variables = launcher(native)
    assert prefix == ["/envs/x/venv/bin/python"] and variables["PYTHONPATH"] == str(PROJECT_ROOT)
    assert variables["PYTHONNOUSERSITE"] == "1" and "EDGE_BUILD_EMULATED" not in variables
    assert unavailable(native, "tflite-runtime") is None
    assert unavailable(native, "ai-edge-litert") == "not provisioned: pip install failed"
    assert describe(native) == (
        "Debian 12 bookworm: CPython 3.11.7 (this machine's /usr/bin/python3.11, in a virtual environment of its own), numpy 1.26.4; native x86_64"
    )
    emulated = record(
        arch="aarch64",
        emulated=True,
        emulator={"path": "/envs/y/qemu/qemu-aarch64", "version": "10.0.2"},
        python=["/envs/y/qemu/qemu-aarch64", "-L", "/envs/y/sysroot", "/envs/y/sysroot/usr/bin/python3.11"],
        pythonpath=["/envs/y/site-packages"],
    )
    prefix, variables = launcher(emulated)
    assert prefix == emulated["python"] and variables["PYTHONPATH"] == os.pathsep.join(["/envs/y/site-packages", str(PROJECT_ROOT)])
    assert variables["EDGE_BUILD_EMULATED"] == "1"
    assert describe(emulated).endswith("numpy 1.26.4; emulated aarch64 under qemu 10.0.2")


def test_describe_gives_each_runtimes_size_on_disk_where_it_was_measured():
    measured = record()
    measured["runtimes"]["tflite-runtime"]["disk_mb"] = 12.3
    assert describe(measured).endswith("numpy 1.26.4; native x86_64; on disk: tflite-runtime 12.3 MB")
