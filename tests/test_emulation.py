"""aarch64 runtimes under qemu user-mode emulation: the arm64 profile's parity on real arm64 binaries.

Provisioning installs qemu-user with apt, so it needs root and Debian's apt.
Elsewhere these tests are skipped with the reason, except where
EDGE_BUILD_REQUIRE_EMULATION=1 (CI sets it), where a missing prerequisite fails.
"""

import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, TINY_PROFILE, write_profile

from edge_build.config.profile import load_profile
from edge_build.errors import StageError
from edge_build.layout import Target
from edge_build.platforms import host_arch
from edge_build.stages import runtime_check
from edge_build.stages.runtime_env import provision

pytestmark = [pytest.mark.emulation, pytest.mark.slow]
REQUIRED = os.environ.get("EDGE_BUILD_REQUIRE_EMULATION") == "1"


def unavailable() -> str | None:
    if host_arch() != "x86_64":
        return f"this machine is {host_arch()}: the arm64 profile runs natively here"
    if not shutil.which("apt-get") or not shutil.which("dpkg"):
        return "no apt-get/dpkg: emulation is provisioned from Debian's packages"
    if os.geteuid() != 0:
        return "provisioning installs qemu-user with apt-get and needs root"
    return None


def skip_or_fail(reason: str):
    if REQUIRED:
        pytest.fail(f"EDGE_BUILD_REQUIRE_EMULATION=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def arm64_env(tmp_path_factory) -> dict:
    reason = unavailable()
    if reason:
        skip_or_fail(reason)
    try:
        return provision("aarch64", ["tflite-runtime", "ai-edge-litert"], tmp_path_factory.mktemp("runtime-envs") / "arm64" / "env.json", REPO)
    except StageError as exc:
        skip_or_fail(f"provisioning failed: {exc}")


# The arm64 profile's artifacts (targets/arm64.toml) on the tiny model, with ai-edge-litert optional as there.
ARM64_PROFILE = (
    TINY_PROFILE.replace('arch = "x86_64"', 'arch = "aarch64"').replace(
        'artifacts = ["saved_model_cpu", "saved_model_xla", "tflite_fp32", "tflite_fp16", "tflite_int8"]',
        'artifacts = ["tflite_fp32", "tflite_int8"]',
    )
    + '\n[[runtimes]]\nname = "ai-edge-litert"\nrequired = false\n'
)


def test_the_arm64_profile_lists_the_arm64_artifacts(tmp_path: Path):
    profile = load_profile(write_profile(tmp_path / "targets", "board", ARM64_PROFILE).parent, "board")
    assert profile.arch == "aarch64" and profile.artifacts == ("tflite_fp32", "tflite_int8")
    assert [(r.name, r.required) for r in profile.runtimes] == [("tflite-runtime", True), ("ai-edge-litert", False)]


def read_test_split(tiny_artifacts) -> runtime_check.TestSplit:
    layout = tiny_artifacts["layout"]
    return runtime_check.TestSplit.read(layout.data.split("test"), layout.token_ids("test"), layout.reference_logits, layout.data.labels)


def test_the_environment_is_an_emulated_aarch64_python(arm64_env):
    assert arm64_env["emulated"] and arm64_env["arch"] == "aarch64"
    assert tuple(int(x) for x in arm64_env["emulator"]["version"].split(".")[:1]) >= (8,)
    assert arm64_env["runtimes"]["tflite-runtime"] == {"version": "2.14.0", "checkable": True, "reason": None}
    assert arm64_env["runtimes"]["ai-edge-litert"]["checkable"]


def test_emulated_parity_matches_the_x86_64_figures(tiny_artifacts, arm64_env, tmp_path: Path):
    profile = load_profile(write_profile(tmp_path / "targets", "board", ARM64_PROFILE).parent, "board")
    golden = tiny_artifacts["target"] / "golden.npz"
    x86 = json.loads((tiny_artifacts["target"] / "device_checks.json").read_text())["checks"]
    for artifact in ("tflite_fp32", "tflite_int8"):
        for runtime in ("tflite-runtime", "ai-edge-litert"):
            outcome = runtime_check.run_in_environment(tiny_artifacts[artifact], runtime, golden, profile, tmp_path, arm64_env)
            assert outcome["status"] == "ok", (artifact, runtime, outcome["status"])
            assert outcome["machine"] == "aarch64" and outcome["emulated"]
            native = x86[artifact]["tflite-runtime"]["parity"]
            assert outcome["parity"]["top1_agreement"] == native["top1_agreement"]
            assert outcome["parity"]["max_abs_logit_error"] == pytest.approx(native["max_abs_logit_error"], abs=1e-5)


def test_a_crash_of_the_aarch64_runtime_is_reported_and_stops_the_build(tiny_artifacts, arm64_env, tmp_path: Path, capsys, monkeypatch):
    # A segfault in the emulated aarch64 process reaches us as the same signal, which the runner reports.
    python, environment = runtime_check.runner(arm64_env)
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
    assert litert["status"].startswith("not checkable here: ai-edge-litert's aarch64 build crashes under qemu 7.2") and litert["problems"] == []
    assert summary["checks"]["tflite_int8"]["tflite-runtime"]["status"] == "ok"
