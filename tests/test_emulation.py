"""aarch64 runtimes under qemu user-mode emulation: the arm64 profiles' parity on real arm64 binaries.

Provisioning fetches a Debian release's own arm64 CPython and Debian 13's
statically linked qemu-user through a private apt configuration: no root and
nothing machine-wide, only the apt-get and dpkg-deb programs and Debian's
archive keyring. Where those are missing (or this machine is not x86_64) these
tests are skipped with the reason, except where EDGE_BUILD_REQUIRE_EMULATION=1
(CI sets it), where a missing prerequisite fails. Each environment is
provisioned once per session (about 30 s plus downloads).
"""

import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import (
    REPO,
    TINY_PROFILE,
    TINY_TRIXIE_PROFILE,
    debian_packages_unavailable,
    profile_runtime,
    with_litert,
    without_artifacts,
    write_profile,
)

from edge_build.config.profile import load_profile
from edge_build.errors import StageError
from edge_build.layout import Target
from edge_build.platforms import host_arch
from edge_build.runtime_envs import describe, launcher
from edge_build.stacks import EnvironmentSpec, RuntimeSpec, Stack
from edge_build.stages import runtime_check
from edge_build.stages.runtime_env import provision

pytestmark = [pytest.mark.emulation, pytest.mark.slow]
REQUIRED = os.environ.get("EDGE_BUILD_REQUIRE_EMULATION") == "1"
TRIXIE_SPEC = EnvironmentSpec(
    "aarch64", Stack("trixie", "3.13", "2.2.6"), (RuntimeSpec("ai-edge-litert", "2.3.0", True), RuntimeSpec("tflite-runtime", "2.14.0", False))
)


def unavailable() -> str | None:
    if host_arch() != "x86_64":
        return f"this machine is {host_arch()}: the arm64 profiles run natively here"
    return debian_packages_unavailable()


def skip_or_fail(reason: str):
    if REQUIRED:
        pytest.fail(f"EDGE_BUILD_REQUIRE_EMULATION=1 but {reason}")
    pytest.skip(reason)


def provisioned(spec: EnvironmentSpec, runtime_envs: Path) -> dict:
    """The environment ``spec`` describes, in the session's shared folder, as SConstruct names it."""
    reason = unavailable()
    if reason:
        skip_or_fail(reason)
    env_json = runtime_envs / spec.key() / "env.json"
    try:
        record = provision(spec, env_json, runtime_envs / "apt")
    except StageError as exc:
        skip_or_fail(f"provisioning failed: {exc}")
    return {**record, "env_json": str(env_json)}


@pytest.fixture(scope="module")
def arm64_env(runtime_envs: Path) -> dict:
    """The arm64 profile's environment: Debian 12's arm64 CPython 3.11, numpy 1.26.4, tflite-runtime (required) and ai-edge-litert (optional)."""
    return provisioned(load_profile(REPO / "targets", "arm64").runtime_environment(), runtime_envs)


@pytest.fixture(scope="module")
def trixie_env(runtime_envs: Path) -> dict:
    """A trixie board's: Debian 13's arm64 CPython 3.13, numpy 2.2.6, ai-edge-litert (required) and tflite-runtime (optional, not installable)."""
    return provisioned(TRIXIE_SPEC, runtime_envs)


def aarch64(profile_text: str) -> str:
    """A tiny profile for the arm64 boards: aarch64, the arm64 profiles' artifacts."""
    text = without_artifacts(profile_text.replace('arch = "x86_64"', 'arch = "aarch64"'), "saved_model_cpu", "saved_model_xla", "tflite_fp16")
    assert text.count("aarch64") == 1 and "saved_model" not in text
    return text


# The arm64 profile's artifacts (targets/arm64.toml) on the tiny model, with ai-edge-litert optional as there.
ARM64_PROFILE = aarch64(with_litert(TINY_PROFILE))
# arm64-trixie's: ai-edge-litert required, tflite-runtime listed but optional (it cannot install on CPython 3.13).
TRIXIE_PROFILE = aarch64(TINY_TRIXIE_PROFILE)


def test_the_arm64_profiles_list_the_arm64_artifacts(tmp_path: Path):
    profile = load_profile(write_profile(tmp_path / "targets", "board", ARM64_PROFILE).parent, "board")
    assert profile.arch == "aarch64" and profile.artifacts == ("tflite_fp32", "tflite_int8")
    assert [(r.name, r.required) for r in profile.runtimes] == [("tflite-runtime", True), ("ai-edge-litert", False)]
    shipped = load_profile(REPO / "targets", "arm64").runtime_environment()
    # The tiny arm64 profile checks on the shipped profile's environment, which also holds MediaPipe (the emulated Tasks check below).
    tiny = profile.runtime_environment()
    assert (tiny.arch, tiny.stack) == (shipped.arch, shipped.stack)
    assert tiny.runtimes == tuple(r for r in shipped.runtimes if r.name != "mediapipe")
    trixie = load_profile(write_profile(tmp_path / "targets", "trixie", TRIXIE_PROFILE).parent, "trixie")
    assert trixie.runtime_environment().key() == TRIXIE_SPEC.key() == load_profile(REPO / "targets", "arm64-trixie").runtime_environment().key()


def read_test_split(tiny_artifacts) -> runtime_check.TestSplit:
    layout = tiny_artifacts["layout"]
    return runtime_check.TestSplit.read(layout.data.split("test"), layout.token_ids("test"), layout.reference_logits, layout.data.labels)


def test_the_environment_is_debian_12s_aarch64_python_under_qemu(arm64_env):
    assert arm64_env["emulated"] and arm64_env["arch"] == "aarch64"
    assert tuple(int(x) for x in arm64_env["emulator"]["version"].split(".")[:1]) >= (8,)
    assert arm64_env["python_version"].startswith("3.11.") and arm64_env["numpy_version"] == "1.26.4"
    assert arm64_env["python_source"].startswith("Debian 12 bookworm's own arm64 package python3.11-minimal ")
    runtimes = {name: dict(entry) for name, entry in arm64_env["runtimes"].items()}
    assert all(runtimes[name].pop("disk_mb") > 1 for name in runtimes)  # measured in the environment
    assert runtimes["tflite-runtime"] == {"version": "2.14.0", "required": True, "checkable": True, "reason": None}
    assert runtimes["ai-edge-litert"] == {"version": "2.3.0", "required": False, "checkable": True, "reason": None}
    assert runtimes["mediapipe"] == {"version": "1.2.2", "required": False, "checkable": True, "reason": None}
    assert f"numpy 1.26.4; emulated aarch64 under qemu {arm64_env['emulator']['version']}" in describe(arm64_env)


def test_emulated_parity_matches_the_x86_64_figures(tiny_artifacts, arm64_env, tmp_path: Path):
    profile = load_profile(write_profile(tmp_path / "targets", "board", ARM64_PROFILE).parent, "board")
    golden = tiny_artifacts["target"] / "golden.npz"
    x86 = json.loads((tiny_artifacts["target"] / "runtime_checks.json").read_text())["checks"]
    for artifact in ("tflite_fp32", "tflite_int8"):
        for runtime in ("tflite-runtime", "ai-edge-litert"):
            outcome = runtime_check.run_in_environment(
                tiny_artifacts[artifact], profile_runtime(profile, runtime), golden, profile, tmp_path, arm64_env
            )
            assert outcome["status"] == "ok", (artifact, runtime, outcome["status"])
            assert outcome["machine"] == "aarch64" and outcome["emulated"] and outcome["python"] == arm64_env["python_version"]
            native = x86[artifact]["tflite-runtime"]["parity"]
            assert outcome["parity"]["top1_agreement"] == native["top1_agreement"]
            assert outcome["parity"]["max_abs_logit_error"] == pytest.approx(native["max_abs_logit_error"], abs=1e-5)


def test_mediapipe_classifies_raw_text_on_aarch64_under_emulation(tasks_target, arm64_env, tmp_path: Path):
    # MediaPipe's aarch64 wheel, with the EGL, GLES and GL libraries its row names unpacked into the sysroot.
    profile, target = tasks_target["profile"], tasks_target["target"]
    model = target.artifact("tflite_tasks_int8")
    outcome = runtime_check.run_in_environment(model, profile_runtime(profile, "mediapipe"), target.golden, profile, tmp_path, arm64_env)
    assert outcome["status"] == "ok", outcome["status"]
    assert outcome["machine"] == "aarch64" and outcome["emulated"] and outcome["runtime_version"] == "1.2.2"
    native = tasks_target["checks"]["checks"]["tflite_tasks_int8"]["mediapipe"]["parity"]
    assert outcome["parity"]["top1_agreement"] == native["top1_agreement"]
    assert outcome["parity"]["max_abs_logit_error"] == pytest.approx(native["max_abs_logit_error"], abs=2 / 256)


def test_a_crash_of_the_aarch64_runtime_is_reported_and_stops_the_build(tiny_artifacts, arm64_env, tmp_path: Path, capsys, monkeypatch):
    # A segfault in the emulated aarch64 process reaches us as the same signal, which the runner reports.
    python, environment = launcher(arm64_env)
    script = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
    assert subprocess.run([*python, "-c", script], env=environment, capture_output=True).returncode == -signal.SIGSEGV
    profile = load_profile(write_profile(tmp_path / "targets", "board", ARM64_PROFILE).parent, "board")
    crashed = {"status": "crashed (signal 11)"}
    # A required runtime that crashes stops the build with the table (the file itself is intact here).
    monkeypatch.setattr(runtime_check, "run_in_environment", lambda *args, **kwargs: dict(crashed))
    target = tmp_path / "target"
    shutil.copytree(tiny_artifacts["target"], target)
    with pytest.raises(StageError, match=re.escape(f"runtime checks failed for {profile.source} (table above)")):
        runtime_check.runtime_checks(profile, read_test_split(tiny_artifacts), Target(target, "board"), _env_file(arm64_env, tmp_path))
    assert f"tflite_int8  tflite-runtime               {crashed['status']}" in capsys.readouterr().err


def _env_file(record: dict, tmp_path: Path) -> Path:
    path = tmp_path / "env.json"
    path.write_text(json.dumps(record))
    return path


def test_an_optional_runtime_the_emulator_cannot_run_is_reported_not_gated(tiny_artifacts, arm64_env, tmp_path: Path):
    old_qemu = {
        **arm64_env,
        "runtimes": {
            **arm64_env["runtimes"],
            "ai-edge-litert": {
                "version": "2.3.0",
                "required": False,
                "checkable": False,
                "reason": "ai-edge-litert's aarch64 build crashes under qemu 7.2; it needs qemu >= 8",
            },
        },
    }
    profile = load_profile(write_profile(tmp_path / "targets", "board", ARM64_PROFILE).parent, "board")
    target = tmp_path / "target"
    shutil.copytree(tiny_artifacts["target"], target)
    summary = runtime_check.runtime_checks(profile, read_test_split(tiny_artifacts), Target(target, "board"), _env_file(old_qemu, tmp_path))
    litert = summary["checks"]["tflite_int8"]["ai-edge-litert"]
    assert litert == {"status": "not checked: ai-edge-litert's aarch64 build crashes under qemu 7.2; it needs qemu >= 8", "problems": []}
    assert summary["checks"]["tflite_int8"]["tflite-runtime"]["status"] == "ok"


def test_the_trixie_environment_is_debian_13s_aarch64_python_with_numpy_2(trixie_env):
    assert trixie_env["emulated"] and trixie_env["arch"] == "aarch64"
    assert trixie_env["python_version"].startswith("3.13.") and trixie_env["numpy_version"] == "2.2.6"
    assert trixie_env["python_source"].startswith("Debian 13 trixie's own arm64 package python3.13-minimal ")
    assert {k: v for k, v in trixie_env["runtimes"]["ai-edge-litert"].items() if k != "disk_mb"} == {
        "version": "2.3.0",
        "required": True,
        "checkable": True,
        "reason": None,
    }
    assert trixie_env["runtimes"]["tflite-runtime"] == {
        "version": None,
        "required": False,
        "checkable": False,
        "reason": "not installable: tflite-runtime has wheels for CPython 3.8-3.11 only, and the trixie stack has CPython 3.13",
    }
    python, environment = launcher(trixie_env)
    probe = "import platform, numpy; from importlib.metadata import version; print(platform.machine(), numpy.__version__, version('ai-edge-litert'))"
    done = subprocess.run([*python, "-c", probe], env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["aarch64", "2.2.6", "2.3.0"]


def test_the_tiny_models_pass_on_ai_edge_litert_on_the_trixie_stack(tiny_artifacts, trixie_env, tmp_path: Path):
    profile = load_profile(write_profile(tmp_path / "targets", "board", TRIXIE_PROFILE).parent, "board")
    golden = tiny_artifacts["target"] / "golden.npz"
    x86 = json.loads((tiny_artifacts["target"] / "runtime_checks.json").read_text())["checks"]
    for artifact in ("tflite_fp32", "tflite_int8"):
        outcome = runtime_check.run_in_environment(
            tiny_artifacts[artifact], profile_runtime(profile, "ai-edge-litert"), golden, profile, tmp_path, trixie_env
        )
        assert outcome["status"] == "ok", (artifact, outcome["status"])
        assert outcome["machine"] == "aarch64" and outcome["emulated"] and outcome["runtime_version"] == "2.3.0"
        assert outcome["python"] == trixie_env["python_version"] and outcome["python"].startswith("3.13.")
        native = x86[artifact]["tflite-runtime"]["parity"]
        assert outcome["parity"]["top1_agreement"] == native["top1_agreement"]
        assert outcome["parity"]["max_abs_logit_error"] == pytest.approx(native["max_abs_logit_error"], abs=1e-5)


def test_tflite_runtime_on_the_trixie_stack_is_reported_not_checked_and_never_gates(tiny_artifacts, trixie_env, tmp_path: Path):
    profile = load_profile(write_profile(tmp_path / "targets", "board", TRIXIE_PROFILE).parent, "board")
    target = tmp_path / "target"
    shutil.copytree(tiny_artifacts["target"], target)
    summary = runtime_check.runtime_checks(profile, read_test_split(tiny_artifacts), Target(target, "board"), Path(trixie_env["env_json"]))
    reason = "not installable: tflite-runtime has wheels for CPython 3.8-3.11 only, and the trixie stack has CPython 3.13"
    for artifact in ("tflite_fp32", "tflite_int8"):
        assert summary["checks"][artifact]["tflite-runtime"] == {"status": f"not checked: {reason}", "problems": []}
        assert summary["checks"][artifact]["ai-edge-litert"]["status"] == "ok"
        assert summary["checks"][artifact]["ai-edge-litert"]["problems"] == []
    assert summary["stack"].startswith("Debian 13 trixie: CPython 3.13.") and "numpy 2.2.6; emulated aarch64 under qemu" in summary["stack"]
    runtime_parity = json.loads((target / "runtime_parity.json").read_text())
    assert {runtime for per in runtime_parity.values() for runtime in per} == {"ai-edge-litert"}
