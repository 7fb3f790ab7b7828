"""The board bundle: contents, manifest, tamper and path-traversal refusal, and a run without TensorFlow."""

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
from conftest import (
    REPO,
    TINY_GATEWAY_PROFILE,
    TINY_PROFILE,
    TINY_STACK_RECORD,
    TINY_TRIXIE_PROFILE,
    board_launcher,
    bundle_inputs,
    reported_copy,
    with_litert,
    write_profile,
)

from edge_build.artifacts import ARTIFACTS
from edge_build.board.launch import BundleError, choose_runtime, safe_extract, verify
from edge_build.config.profile import load_profile
from edge_build.errors import StageError
from edge_build.layout import Target
from edge_build.runtime_envs import read_environment
from edge_build.stages import bundle


def test_the_bundle_holds_exactly_what_the_build_declares(tiny_bundle):
    folder = tiny_bundle["folder"]
    assert folder == tiny_bundle["target"] / "bundle" and tiny_bundle["archive"] == tiny_bundle["target"] / "bundle-tiny.tar.gz"
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert files == Target(tiny_bundle["target"], "tiny").bundle_names(tiny_bundle["profile"].runtime_artifacts)
    assert {
        "model_int8.tflite",
        "model_fp16.tflite",
        "model_fp32.tflite",
        "vocab.txt",
        "labels.txt",
        "golden.npz",
        "bench.py",
        "classify.py",
        "README.md",
        "manifest.json",
        "board/wordpiece.py",
        "board/launch.py",
        "board/parity.py",
        "board/bench.py",
        "board/runtime.py",
    } <= set(files)
    assert not any(name.startswith("device/") for name in files)
    assert "from board.launch import bench_main" in (folder / "bench.py").read_text()
    assert "from board.launch import classify_main" in (folder / "classify.py").read_text()
    manifest = verify(str(folder))
    assert set(manifest["files"]) == set(files) - {"manifest.json"}
    assert manifest["default_model"] == "model_int8.tflite" and manifest["default_runtime"] == "tflite-runtime"
    assert manifest["versions"]["tensorflow"].startswith("2.21") and manifest["versions"]["tflite-runtime"] == "2.14.0"
    # The stack the bundle was checked on, and the pip line that gives a board exactly that.
    assert manifest["stack"] == TINY_STACK_RECORD
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert "Checked on the Debian 12 bookworm stack: x86_64, CPython 3.11, numpy 1.26.4, tflite-runtime 2.14.0." in readme
    assert "    python -m pip install numpy==1.26.4 tflite-runtime==2.14.0\n" in readme and "Optionally" not in readme
    assert manifest["metrics"]["tflite_int8"]["runtime_parity"]["tflite-runtime"]["top1_agreement"] >= 0.8
    # What bench.py --parity holds the golden set to: the artifact table's checks and the profile's tolerances.
    checks = {name: [list(check) for check in ARTIFACTS[name].parity] for name in ("tflite_fp32", "tflite_fp16", "tflite_int8")}
    assert manifest["parity_checks"] == checks
    assert manifest["tolerances"]["int8_max_accuracy_drop"] == 0.2 and manifest["tolerances"]["fp16_max_abs_logit"] == 1e-2
    assert tiny_bundle["record"]["tokenizer_checked_examples"] == 6
    target_record = json.loads((tiny_bundle["target"] / "manifest.json").read_text(encoding="utf-8"))
    assert {key: manifest[key] for key in target_record} == target_record, "the bundle's manifest is the target's record"


def test_the_tarball_unpacks_into_one_folder_and_is_reproducible(tiny_bundle, tmp_path: Path):
    with tarfile.open(tiny_bundle["archive"]) as tar:
        names = tar.getnames()
        assert all(name == "bundle-tiny" or name.startswith("bundle-tiny/") for name in names)
        assert {m.mtime for m in tar.getmembers()} == {0} and {m.uid for m in tar.getmembers()} == {0}
    again = tmp_path / "again.tar.gz"
    bundle.write_tarball(tiny_bundle["folder"], again, "bundle-tiny")
    assert again.read_bytes() == tiny_bundle["archive"].read_bytes()
    extracted = safe_extract(str(tiny_bundle["archive"]), str(tmp_path / "board"))
    assert "bundle-tiny/manifest.json" in extracted
    verify(str(tmp_path / "board" / "bundle-tiny"))


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage, message",
    [
        (
            lambda folder: flip_a_byte(folder / "model_int8.tflite"),
            "model_int8.tflite: SHA-256 does not match the manifest (modified after the build)",
        ),
        (lambda folder: (folder / "model_int8.tflite").write_bytes(b"TFL3" * 25), "model_int8.tflite: 100 bytes, the manifest says"),
        (lambda folder: (folder / "vocab.txt").unlink(), "vocab.txt: listed in the manifest but missing"),
    ],
    ids=["tampered", "replaced", "missing"],
)
def test_a_tampered_or_truncated_file_is_refused(tiny_bundle, tmp_path: Path, damage, message: str):
    folder = tmp_path / "copy"
    shutil.copytree(tiny_bundle["folder"], folder)
    damage(folder)
    result = subprocess.run([sys.executable, "-m", "edge_build.board.launch", "verify", str(folder)], capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {folder}/") and result.stderr.count("\n") == 1 and message in result.stderr


def run_bench(environment: dict, folder: Path, *args: str) -> subprocess.CompletedProcess:
    """``python3 bench.py ARGS`` in a bundle folder, as on the board: the stack's Python with numpy and the runtime, no edge-build."""
    python, variables = board_launcher(environment)
    return subprocess.run([*python, "bench.py", *args], cwd=folder, env=variables, capture_output=True, text=True)


def test_the_board_refuses_an_accuracy_drop_the_build_refuses(tiny_artifacts, tiny_bundle, tmp_path: Path):
    from edge_build.artifacts import ARTIFACTS
    from edge_build.board.decision import messages, verdicts

    # INT8 by name: the bundle's default model on a runtime is whichever the checks' timings favoured.
    quick = ("--model", "tflite_int8", "--runs", "1", "--warmup", "0")
    # As built, the bundle passes on the board; this also gives the INT8 model's logits on the golden set, as the board computes them.
    accepted = run_bench(
        tiny_bundle["runtime_env"],
        tiny_bundle["folder"],
        "--parity",
        *quick,
        "--out",
        str(tmp_path / "accepted.json"),
        "--outputs",
        str(tmp_path / "int8.npy"),
    )
    assert accepted.returncode == 0, accepted.stderr
    assert "parity: within the build's tolerances" in accepted.stdout.splitlines()
    with np.load(tiny_bundle["folder"] / "golden.npz") as stored:
        golden = dict(stored)
    logits = np.load(tmp_path / "int8.npy")
    # An accuracy drop is at most the share of examples the model and the reference disagree on, so a top-1
    # agreement >= 0.8 keeps it <= 0.2: the profile here allows a drop of 0.1 only. A golden set of 200 rows
    # whose reference logits put another class on top in 30 of them, labelled as the reference predicts:
    # top-1 agreement 170/200 (>= 0.8, passes), reference accuracy 1, the model's 170/200: a drop of 0.15 (> 0.1),
    # and on 200 examples its 95% bound (0.12) shows the limit broken, so it fails here as in the build's checks.
    rows = np.arange(200) % len(golden["ids"])
    reference = logits[rows].copy()
    reference[:30] = np.roll(reference[:30], 1, axis=-1)
    assert int(np.sum(reference.argmax(-1) != logits[rows].argmax(-1))) == 30
    crafted = {
        "ids": golden["ids"][rows],
        "labels": reference.argmax(-1).astype(np.int32),
        "reference_logits": reference.astype(np.float32),
        "label_names": golden["label_names"],
        "test_indices": golden["test_indices"][rows],
    }
    strict = TINY_PROFILE.replace("int8_max_accuracy_drop = 0.2", "int8_max_accuracy_drop = 0.1")
    assert strict != TINY_PROFILE
    profile = load_profile(write_profile(tmp_path / "targets", "tiny", strict).parent, "tiny")
    # The bundle stage packs this golden set with the profile's tolerances (and lists its new SHA-256 in the manifest).
    target = Target(tmp_path / "tiny", "tiny")
    shutil.copytree(tiny_bundle["target"], target.dir, ignore=shutil.ignore_patterns("bundle", "bundle-*.tar.gz"))
    with open(target.golden, "wb") as handle:
        np.savez(handle, **crafted)
    bundle.build_bundle(profile, *bundle_inputs(tiny_artifacts), target)
    assert verify(str(target.bundle_dir))["tolerances"]["int8_max_accuracy_drop"] == 0.1

    refused = run_bench(tiny_bundle["runtime_env"], target.bundle_dir, "--parity", *quick, "--out", str(tmp_path / "refused.json"))
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "parity: OUTSIDE the build's tolerances: accuracy drop 0.15 (allowed <= 0.1, int8_max_accuracy_drop)" in refused.stdout.splitlines()
    figures = json.loads((tmp_path / "refused.json").read_text(encoding="utf-8"))["parity"]
    assert figures["top1_agreement"] == pytest.approx(170 / 200) and figures["accuracy"] == pytest.approx(170 / 200)
    assert figures["reference_accuracy"] == 1.0
    # The build's runtime checks, on the same figures, break on exactly the same check.
    assert messages(verdicts(ARTIFACTS["tflite_int8"].parity, figures, profile.tolerances.limits()), "fail") == [
        "accuracy drop 0.15 (allowed <= 0.1, int8_max_accuracy_drop)"
    ]


def test_a_model_is_named_by_artifact_or_file_name_positionally_or_with_model(tiny_bundle, tmp_path: Path):
    environment, folder, quick = tiny_bundle["runtime_env"], tiny_bundle["folder"], ("--runs", "1", "--warmup", "0")
    # classify.py takes --model; bench.py takes it too, beside its MODEL argument, and both know the bundle's artifact names.
    for named in (("--model", "tflite_int8"), ("tflite_int8",), ("model_int8.tflite",)):
        result = run_bench(environment, folder, *named, *quick, "--out", str(tmp_path / "result.json"))
        assert result.returncode == 0, result.stderr
        assert json.loads((tmp_path / "result.json").read_text())["model"] == str(folder / "model_int8.tflite")
    twice = run_bench(environment, folder, "model_fp32.tflite", "--model", "tflite_int8", *quick)
    assert (twice.returncode, twice.stderr) == (2, "error: give the model once: MODEL or --model MODEL\n")
    unknown = run_bench(environment, folder, "--model", "int4", *quick)
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1
    assert unknown.stderr.startswith("error: int4: no such model (this bundle's: tflite_fp32 (model_fp32.tflite), tflite_fp16 (model_fp16.tflite), ")
    python, variables = board_launcher(environment)
    named = subprocess.run(
        [*python, "classify.py", "--model", "tflite_fp16", "--json", "a comet"], cwd=folder, env=variables, capture_output=True, text=True
    )
    assert named.returncode == 0 and set(json.loads(named.stdout)["probabilities"]) == set(verify(str(folder))["labels"]), named.stderr


def test_bench_options_are_honoured_as_written_and_never_abbreviated(tiny_bundle, tmp_path: Path):
    quick = ("--runs", "1", "--warmup", "0")
    # An abbreviation would compute parity but skip the build's checks: refused instead.
    abbreviated = run_bench(tiny_bundle["runtime_env"], tiny_bundle["folder"], "--par", *quick)
    assert abbreviated.returncode == 2 and "unrecognized arguments: --par" in abbreviated.stderr
    # --option=value is the user's choice, not overridden by the bundle's defaults.
    result = run_bench(
        tiny_bundle["runtime_env"],
        tiny_bundle["folder"],
        "model_fp32.tflite",
        f"--golden={tiny_bundle['folder'] / 'golden.npz'}",
        "--runtime=tflite-runtime",
        "--parity",
        *quick,
        "--out",
        str(tmp_path / "fp32.json"),
    )
    assert result.returncode == 0, result.stderr
    record = json.loads((tmp_path / "fp32.json").read_text(encoding="utf-8"))
    assert record["model"].endswith("model_fp32.tflite") and record["runtime"] == "tflite-runtime"
    assert "parity: within the build's tolerances" in result.stdout.splitlines()


def make_tar(path: Path, name: str, kind=tarfile.REGTYPE, linkname: str = "") -> Path:
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo(name)
        info.type, info.linkname, info.size = kind, linkname, 0 if kind != tarfile.REGTYPE else 5
        tar.addfile(info, io.BytesIO(b"hello") if kind == tarfile.REGTYPE else None)
    return path


@pytest.mark.parametrize(
    "name, kind, linkname",
    [
        ("../escape.txt", tarfile.REGTYPE, ""),
        ("/etc/evil", tarfile.REGTYPE, ""),
        ("bundle/../../x", tarfile.REGTYPE, ""),
        ("bundle/link", tarfile.SYMTYPE, "/etc/passwd"),
    ],
)
def test_extraction_never_writes_outside_its_folder(tmp_path: Path, name, kind, linkname):
    archive = make_tar(tmp_path / "evil.tar.gz", name, kind, linkname)
    with pytest.raises(BundleError, match="evil.tar.gz: member"):
        safe_extract(str(archive), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists() and not (tmp_path / "escape.txt").exists()


@pytest.fixture(scope="module")
def trixie_bundle(tiny_artifacts, tmp_path_factory) -> dict:
    """The tiny target bundled for a trixie-like board: CPython 3.13, numpy 2.2.6, ai-edge-litert."""
    assert TINY_TRIXIE_PROFILE != TINY_PROFILE
    reported = reported_copy(tiny_artifacts, tmp_path_factory.mktemp("trixie-bundle") / "tiny", TINY_TRIXIE_PROFILE)
    target, profile = Target(reported["target"], "tiny"), reported["profile"]
    bundle.build_bundle(profile, *bundle_inputs(tiny_artifacts), target)
    return {"target": target.dir, "folder": target.bundle_dir, "archive": target.bundle_archive, "profile": profile}


def test_a_trixie_bundle_names_its_stack_and_its_install_line(trixie_bundle):
    manifest = verify(str(trixie_bundle["folder"]))
    assert manifest["default_runtime"] == "ai-edge-litert", "the first required runtime, not the first listed"
    assert manifest["stack"] == {
        "title": "Debian 13 trixie",
        "release": "trixie",
        "arch": "x86_64",
        "python": "3.13",
        "numpy": "2.2.6",
        "runtimes": {"ai-edge-litert": {"version": "2.3.0", "required": True}},
        "install": ["numpy==2.2.6", "ai-edge-litert==2.3.0"],
        "optional_install": [],
    }
    # tflite-runtime cannot install on this stack: the manifest records no version of it, and no pip line offers it.
    assert manifest["versions"]["ai-edge-litert"] == "2.3.0" and "tflite-runtime" not in manifest["versions"]
    readme = (trixie_bundle["folder"] / "README.md").read_text(encoding="utf-8")
    assert "Checked on the Debian 13 trixie stack: x86_64, CPython 3.13, numpy 2.2.6, ai-edge-litert 2.3.0." in readme
    assert "    python -m pip install numpy==2.2.6 ai-edge-litert==2.3.0\n" in readme
    assert "tflite-runtime" not in readme and "numpy<2" not in readme


def test_a_bookworm_bundle_offers_its_optional_runtime_on_a_line_of_its_own(tiny_artifacts, tmp_path: Path):
    profile = load_profile(write_profile(tmp_path / "targets", "tiny", with_litert(TINY_PROFILE)).parent, "tiny")
    stack = profile.runtime_environment().record()
    assert stack["install"] == ["numpy==1.26.4", "tflite-runtime==2.14.0"] and stack["optional_install"] == ["ai-edge-litert==2.3.0"]
    assert stack["runtimes"] == {"tflite-runtime": {"version": "2.14.0", "required": True}, "ai-edge-litert": {"version": "2.3.0", "required": False}}
    readme = bundle.board_readme(profile)
    assert (
        "Checked on the Debian 12 bookworm stack: x86_64, CPython 3.11, numpy 1.26.4, tflite-runtime 2.14.0, ai-edge-litert 2.3.0 (optional)."
        in readme
    )
    assert "    python -m pip install numpy==1.26.4 tflite-runtime==2.14.0\n" in readme
    assert "\nOptionally, to compare runtimes: `python -m pip install ai-edge-litert==2.3.0`\n" in readme


@pytest.mark.slow
@pytest.mark.parametrize("which", ["bookworm", "trixie"])
def test_the_bundle_runs_in_a_virtual_environment_with_only_the_stacks_packages(tiny_bundle, trixie_bundle, which: str, tmp_path: Path):
    """As a board installs it, from the bundle's own README: a venv of the stack's CPython with numpy and the runtime, and no TensorFlow."""
    from edge_build.stages.runtime_env import machine_python

    built = {"bookworm": tiny_bundle, "trixie": trixie_bundle}[which]
    spec = built["profile"].runtime_environment()
    interpreter = machine_python(spec.stack.python)
    if interpreter is None:
        pytest.skip(f"no CPython {spec.stack.python} on this machine (python{spec.stack.python} on PATH or pyenv's)")
    subprocess.run([str(interpreter), "-m", "venv", str(tmp_path / "board-venv")], check=True)
    python = str(tmp_path / "board-venv" / "bin" / "python")
    requirements = spec.requirements()
    assert requirements == {"bookworm": ["numpy==1.26.4", "tflite-runtime==2.14.0"], "trixie": ["numpy==2.2.6", "ai-edge-litert==2.3.0"]}[which]
    assert f"python -m pip install {' '.join(requirements)}\n" in (built["folder"] / "README.md").read_text(encoding="utf-8")
    subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *requirements], check=True, capture_output=True)
    installed = dict(
        line.split("==", 1)
        for line in subprocess.run([python, "-m", "pip", "list", "--format=freeze"], check=True, capture_output=True, text=True).stdout.split()
    )
    assert installed["numpy"] == spec.stack.numpy and not any(name.lower().startswith(("tensorflow", "keras", "edge")) for name in installed)
    assert ("tflite-runtime" in installed) == (which == "bookworm") and ("ai-edge-litert" in installed) == (which == "trixie")
    safe_extract(str(built["archive"]), str(tmp_path / "board"))
    folder = tmp_path / "board" / "bundle-tiny"
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    bench = subprocess.run([python, "bench.py", "--parity", "--runs", "20"], cwd=folder, env=environment, capture_output=True, text=True)
    assert bench.returncode == 0, bench.stderr
    assert "p50" in bench.stdout and "parity: within the build's tolerances" in bench.stdout
    classify = subprocess.run(
        [python, "classify.py", "--json", "The telescope saw a comet near the planet orbit"],
        cwd=folder,
        env=environment,
        capture_output=True,
        text=True,
    )
    assert classify.returncode == 0, classify.stderr
    answer = json.loads(classify.stdout)
    assert answer["label"] == "astronomy" and sum(answer["probabilities"].values()) == pytest.approx(1.0, abs=1e-5)
    (folder / "labels.txt").write_text("tampered\n")
    refused = subprocess.run([python, "classify.py", "hello"], cwd=folder, env=environment, capture_output=True, text=True)
    assert refused.returncode == 2 and "labels.txt" in refused.stderr and "manifest" in refused.stderr


def gateway_runtime_checks(path: Path, disk_mb: dict) -> Path:
    """A ``runtime_checks.json`` for the gateway profile: each runtime's installed size, and peak memory where the checks ran a model."""
    runtimes = {name: {"version": "0", "required": True, "checkable": True, "reason": None, **size} for name, size in disk_mb.items()}
    checks = {
        "tflite_int8": {"tflite-runtime": {"status": "ok", "peak_rss_mb": 45.3}, "tensorflow-cpu": {"status": "ok", "peak_rss_mb": 438.1}},
        "tflite_text_int8": {"tensorflow-cpu": {"status": "ok", "peak_rss_mb": 439.7}},
    }
    record = {
        "target": "gateway",
        "environment": {"runtimes": runtimes},
        "stack": "Debian 12",
        "golden_examples": 8,
        "golden_examples_to_decide": 299,
        "test_examples": 8,
        "settings": {},
        "checks": checks,
    }
    path.write_text(json.dumps(record), encoding="utf-8")
    return path


def test_a_raw_text_bundle_states_each_runtimes_install_lines_and_price(tmp_path: Path):
    profile = load_profile(REPO / "targets", "gateway")
    assert bundle.model_runtimes(profile) == {"tflite_int8": ["tflite-runtime", "tensorflow-cpu"], "tflite_text_int8": ["tensorflow-cpu"]}
    assert bundle.default_artifact(profile) == "tflite_text_int8"
    checks = gateway_runtime_checks(tmp_path / "runtime_checks.json", {"tflite-runtime": {"disk_mb": 7.2}, "tensorflow-cpu": {"disk_mb": 1234.5}})
    readme = bundle.text_board_readme(profile, checks)
    # tensorflow-text's metadata asks for the full tensorflow: it goes in without its dependencies, after tensorflow-cpu.
    assert (
        "tensorflow-cpu 2.15.1 runs model_int8.tflite, model_text_int8.tflite:\n\n"
        "    python -m pip install numpy==1.26.4 tensorflow-cpu==2.15.1\n"
        "    python -m pip install --no-deps tensorflow-text==2.15.0 tensorflow-hub==0.15.0\n"
    ) in readme
    assert "tflite-runtime 2.14.0 runs model_int8.tflite:\n\n    python -m pip install numpy==1.26.4 tflite-runtime==2.14.0\n\n" in readme
    # Peak memory rounded up to a coarse step: a megabyte of run-to-run jitter leaves the bundle's bytes alone.
    assert "| tflite-runtime 2.14.0 | 7.2 MB | ≤ 50 MB | cannot run it |\n" in readme
    assert "| tensorflow-cpu 2.15.1 | 1200 MB | ≤ 500 MB | ≤ 500 MB |\n" in readme
    assert {bundle.at_most(mb) for mb in (44.6, 45.3, 45.8, 46.9)} == {"≤ 50 MB"} and bundle.at_most(51) == "≤ 75 MB"
    assert "both\nscripts run model_text_int8.tflite on tensorflow-cpu, model_int8.tflite on tflite-runtime:" in readme
    assert "python3 classify.py --model model_int8.tflite " in readme and "no TensorFlow" not in readme


def test_a_raw_text_bundle_refuses_runtime_checks_without_an_installed_size(tmp_path: Path):
    profile = load_profile(REPO / "targets", "gateway")
    checks = gateway_runtime_checks(tmp_path / "runtime_checks.json", {"tflite-runtime": {"disk_mb": 7.2}, "tensorflow-cpu": {}})
    with pytest.raises(StageError, match="^" + re.escape(f"{checks}: no installed size (disk_mb) for tensorflow-cpu")):
        bundle.text_board_readme(profile, checks)


def test_the_board_scripts_pick_each_models_runtime_from_the_manifest():
    gateway = {
        "models": {"tflite_int8": "model_int8.tflite", "tflite_text_int8": "model_text_int8.tflite"},
        "model_runtimes": {"tflite_int8": ["tflite-runtime", "tensorflow-cpu"], "tflite_text_int8": ["tensorflow-cpu"]},
        "default_runtime": "tensorflow-cpu",
    }
    assert choose_runtime(gateway, "tflite_int8", None, "model_int8.tflite") == "tflite-runtime"
    assert choose_runtime(gateway, "tflite_int8", "tensorflow-cpu", "model_int8.tflite") == "tensorflow-cpu"
    assert choose_runtime(gateway, "tflite_text_int8", None, "model_text_int8.tflite") == "tensorflow-cpu"
    assert choose_runtime(gateway, None, None, "/elsewhere/model.tflite") == "tensorflow-cpu"
    with pytest.raises(BundleError, match=r"^model_text_int8.tflite: runs on tensorflow-cpu only, not tflite-runtime \(manifest.json\)$"):
        choose_runtime(gateway, "tflite_text_int8", "tflite-runtime", "model_text_int8.tflite")
    # A bundle without a raw-text model names no runtimes per model: every runtime runs every model.
    host = {"models": {"tflite_int8": "model_int8.tflite"}, "default_runtime": "tflite-runtime"}
    assert choose_runtime(host, "tflite_int8", None, "model_int8.tflite") == "tflite-runtime"
    assert choose_runtime(host, "tflite_int8", "ai-edge-litert", "model_int8.tflite") == "ai-edge-litert"


@pytest.fixture(scope="module")
def gateway_bundle(gateway_artifacts, tmp_path_factory) -> dict:
    """The tiny model bundled for the gateway-like profile: INT8 ids on tflite-runtime, raw text in on tensorflow-cpu."""
    reported = reported_copy(gateway_artifacts, tmp_path_factory.mktemp("gateway-bundle") / "tiny", TINY_GATEWAY_PROFILE)
    target, profile = Target(reported["target"], "tiny"), reported["profile"]
    record = bundle.build_bundle(profile, *bundle_inputs(gateway_artifacts), target)
    return {"folder": target.bundle_dir, "archive": target.bundle_archive, "record": record}


def test_the_gateway_bundle_classifies_a_raw_sentence_with_only_its_runtime(gateway_bundle, gateway_runtime_env, tmp_path: Path):
    manifest = verify(str(gateway_bundle["folder"]))
    assert manifest["models"] == {"tflite_int8": "model_int8.tflite", "tflite_text_int8": "model_text_int8.tflite"}
    assert manifest["model_runtimes"] == {"tflite_int8": ["tflite-runtime", "tensorflow-cpu"], "tflite_text_int8": ["tensorflow-cpu"]}
    assert manifest["default_model"] == "model_text_int8.tflite" and manifest["default_runtime"] == "tensorflow-cpu"
    # The ids model still ships, so the pure-Python tokenizer is still checked against tensorflow-text on the whole test split.
    assert gateway_bundle["record"]["tokenizer_checked_examples"] == 6
    readme = (gateway_bundle["folder"] / "README.md").read_text(encoding="utf-8")
    assert "    python -m pip install --no-deps tensorflow-text==2.15.0 tensorflow-hub==0.15.0\n" in readme
    assert "| tensorflow-cpu 2.15.1 | " in readme and "| tflite-runtime 2.14.0 | " in readme
    safe_extract(str(gateway_bundle["archive"]), str(tmp_path / "board"))
    folder = tmp_path / "board" / "bundle-tiny"
    # The runtime environment's Python: the stack's numpy and runtimes, no edge-build.
    python, variables = board_launcher(read_environment(gateway_runtime_env))

    def classify(*args: str, without: str | None = None) -> dict:
        # ``without``: a package made unimportable first, as if the board had never installed it.
        script = f"import runpy, sys; sys.modules[{without!r}] = None; sys.argv = ['classify.py', *sys.argv[1:]]; runpy.run_path('classify.py', run_name='__main__')"
        command = [*python, "-c", script] if without else [*python, "classify.py"]
        done = subprocess.run([*command, "--json", *args], cwd=folder, env=variables, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    sentence = "The telescope saw a comet near the planet orbit"
    # The raw-text model on tensorflow-cpu, the tokenizer inside the model: tflite-runtime is not needed.
    raw = classify(sentence, without="tflite_runtime")
    ids = classify("--model", "model_int8.tflite", sentence)  # the pure-Python tokenizer, then the ids model on tflite-runtime
    assert raw["label"] == ids["label"] == "astronomy"
    assert sum(raw["probabilities"].values()) == pytest.approx(1.0, abs=1e-5)
    bench = subprocess.run(
        [*python, "bench.py", "--parity", "--runs", "1", "--warmup", "0"], cwd=folder, env=variables, capture_output=True, text=True
    )
    assert bench.returncode == 0, bench.stderr
    assert "model_text_int8.tflite on tensorflow-cpu" in bench.stdout and "parity: within the build's tolerances" in bench.stdout


@pytest.mark.parametrize("planted", ["numpy/__init__.py", "json.py", "board/__pycache__/launch.cpython-311.pyc"])
def test_a_planted_module_never_runs_the_launcher_refuses_the_bundle_first(tiny_bundle, tmp_path: Path, planted: str):
    # Before, bench.py imported numpy (a planted one first) before it verified anything, and trusted __pycache__.
    folder = tmp_path / "copy"
    shutil.copytree(tiny_bundle["folder"], folder)
    marker = tmp_path / "ran"
    (folder / planted).parent.mkdir(parents=True, exist_ok=True)
    (folder / planted).write_text(f"open({str(marker)!r}, 'w').close()\n", encoding="utf-8")
    python, variables = board_launcher(tiny_bundle["runtime_env"])
    unlisted = "board/__pycache__" if planted.startswith("board/") else planted.split("/")[0]
    for command in (["bench.py"], ["classify.py", "hello"]):
        result = subprocess.run([*python, *command], cwd=folder, env=variables, capture_output=True, text=True)
        assert result.returncode == 2, result.stdout + result.stderr
        assert result.stderr == f"error: {folder}/{unlisted}: not listed in the manifest; a bundle holds exactly the files its manifest lists\n"
    assert not marker.exists()
    assert [p.relative_to(folder).as_posix() for p in folder.rglob("__pycache__")] == (["board/__pycache__"] if planted.startswith("board/") else [])
