"""The board bundle: contents, manifest, tamper and path-traversal refusal, and a run without TensorFlow."""

import io
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from edge_build import bundle
from edge_build.device.bundle import BundleError, safe_extract, verify

from conftest import reported_copy


@pytest.fixture(scope="module")
def tiny_bundle(tiny_artifacts, tmp_path_factory) -> dict:
    reported = reported_copy(tiny_artifacts, tmp_path_factory.mktemp("bundle") / "tiny")
    target, profile = reported["target"], reported["profile"]
    record = bundle.build_bundle(profile, tiny_artifacts["saved_model"], target, tiny_artifacts["data"])
    return {"target": target, "folder": target / "bundle", "archive": target / "bundle-tiny.tar.gz", "record": record, "profile": profile}


def test_the_bundle_holds_exactly_what_the_build_declares(tiny_bundle):
    folder = tiny_bundle["folder"]
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert files == bundle.bundle_names(tiny_bundle["profile"])
    assert {"model_int8.tflite", "model_fp32.tflite", "vocab.txt", "labels.txt", "golden.npz", "bench.py", "classify.py", "README.md", "manifest.json", "device/wordpiece.py"} <= set(files)
    manifest = verify(str(folder))
    assert set(manifest["files"]) == set(files) - {"manifest.json"}
    assert manifest["default_model"] == "model_int8.tflite" and manifest["default_runtime"] == "tflite-runtime"
    assert manifest["versions"]["tensorflow"].startswith("2.21") and manifest["versions"]["tflite-runtime"] == "2.14.0"
    assert manifest["metrics"]["tflite_int8"]["device_parity"]["tflite-runtime"]["top1_agreement"] >= 0.8
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
        (lambda folder: flip_a_byte(folder / "model_int8.tflite"), "model_int8.tflite: SHA-256 does not match the manifest (modified after the build)"),
        (lambda folder: (folder / "model_int8.tflite").write_bytes(b"TFL3" * 25), "model_int8.tflite: 100 bytes, the manifest says"),
        (lambda folder: (folder / "vocab.txt").unlink(), "vocab.txt: listed in the manifest but missing"),
    ],
    ids=["tampered", "replaced", "missing"],
)
def test_a_tampered_or_truncated_file_is_refused(tiny_bundle, tmp_path: Path, damage, message: str):
    folder = tmp_path / "copy"
    shutil.copytree(tiny_bundle["folder"], folder)
    damage(folder)
    result = subprocess.run([sys.executable, "-m", "edge_build.device.bundle", "verify", str(folder)], capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {folder}/") and result.stderr.count("\n") == 1 and message in result.stderr


def make_tar(path: Path, name: str, kind=tarfile.REGTYPE, linkname: str = "") -> Path:
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo(name)
        info.type, info.linkname, info.size = kind, linkname, 0 if kind != tarfile.REGTYPE else 5
        tar.addfile(info, io.BytesIO(b"hello") if kind == tarfile.REGTYPE else None)
    return path


@pytest.mark.parametrize(
    "name, kind, linkname",
    [("../escape.txt", tarfile.REGTYPE, ""), ("/etc/evil", tarfile.REGTYPE, ""), ("bundle/../../x", tarfile.REGTYPE, ""), ("bundle/link", tarfile.SYMTYPE, "/etc/passwd")],
)
def test_extraction_never_writes_outside_its_folder(tmp_path: Path, name, kind, linkname):
    archive = make_tar(tmp_path / "evil.tar.gz", name, kind, linkname)
    with pytest.raises(BundleError, match="evil.tar.gz: member"):
        safe_extract(str(archive), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists() and not (tmp_path / "escape.txt").exists()


@pytest.mark.slow
def test_the_bundle_runs_in_a_virtual_environment_with_only_numpy_and_tflite_runtime(tiny_bundle, tmp_path: Path):
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "board-venv")], check=True)
    python = str(tmp_path / "board-venv" / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "-q", "numpy>=1.26,<2", "tflite-runtime>=2.14,<2.15"], check=True, capture_output=True)
    installed = subprocess.run([python, "-m", "pip", "list", "--format=freeze"], check=True, capture_output=True, text=True).stdout
    assert "tensorflow" not in installed.lower().replace("tflite", "")
    safe_extract(str(tiny_bundle["archive"]), str(tmp_path / "board"))
    folder = tmp_path / "board" / "bundle-tiny"
    bench = subprocess.run([python, "bench.py", "--parity", "--runs", "20"], cwd=folder, capture_output=True, text=True)
    assert bench.returncode == 0, bench.stderr
    assert "p50" in bench.stdout and "parity: within the build's tolerances" in bench.stdout
    classify = subprocess.run([python, "classify.py", "--json", "The telescope saw a comet near the planet orbit"], cwd=folder, capture_output=True, text=True)
    assert classify.returncode == 0, classify.stderr
    answer = json.loads(classify.stdout)
    assert answer["label"] == "astronomy" and sum(answer["probabilities"].values()) == pytest.approx(1.0, abs=1e-5)
    (folder / "labels.txt").write_text("tampered\n")
    refused = subprocess.run([python, "classify.py", "hello"], cwd=folder, capture_output=True, text=True)
    assert refused.returncode == 2 and "labels.txt" in refused.stderr and "manifest" in refused.stderr
