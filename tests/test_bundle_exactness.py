"""A bundle is exactly its manifest (``board.agent.verify``), and an archive is unpacked within caps: hand-made folders, no model."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from edge_build.board import agent
from edge_build.board.agent import BundleError, safe_extract, verify


def make_bundle(folder: Path, files: dict[str, bytes], listed: dict | None = None) -> Path:
    """``files`` written under ``folder``, and a manifest listing them (or ``listed`` as its files table)."""
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    table = listed if listed is not None else {n: {"size": len(d), "sha256": hashlib.sha256(d).hexdigest()} for n, d in files.items()}
    (folder / "manifest.json").write_text(json.dumps({"files": table}), encoding="utf-8")
    return folder


FILES = {"model.tflite": b"TFL3 model", "board/launch.py": b"print('hi')\n", "bench.py": b"import sys\n"}


def test_a_bundle_that_is_exactly_its_manifest_verifies(tmp_path: Path):
    folder = make_bundle(tmp_path / "bundle", FILES)
    assert set(verify(str(folder))["files"]) == set(FILES)
    sha256 = hashlib.sha256((folder / "manifest.json").read_bytes()).hexdigest()
    assert verify(str(folder), sha256)["files"]


@pytest.mark.parametrize(
    "plant, message",
    [
        (lambda f: (f / "numpy").mkdir() or (f / "numpy" / "__init__.py").write_text("raise SystemExit('planted')"), "numpy: not listed"),
        (lambda f: (f / "json.py").write_text("planted = True"), "json.py: not listed in the manifest"),
        (lambda f: (f / "board" / "__pycache__").mkdir(), "board/__pycache__: not listed in the manifest"),
        (lambda f: (f / "notes.txt").symlink_to("/etc/hostname"), "notes.txt: a link"),
        (lambda f: (f / "model.tflite").unlink() or (f / "model.tflite").symlink_to(f / "bench.py"), "model.tflite: a link"),
    ],
    ids=["package", "module", "pycache", "link", "listed-link"],
)
def test_anything_the_manifest_does_not_list_is_refused(tmp_path: Path, plant, message: str):
    folder = make_bundle(tmp_path / "bundle", FILES)
    plant(folder)
    with pytest.raises(BundleError, match=f"^{folder}/{message}.*a bundle holds exactly the files its manifest lists$"):
        verify(str(folder))


@pytest.mark.parametrize("name", ["/etc/hostname", "../outside.txt", "board/../../x", "a/./b", "a\\\\b"])
def test_a_manifest_naming_a_file_outside_the_bundle_is_refused_before_reading_it(tmp_path: Path, name: str):
    # Before, an /etc/hostname entry leaked that file's size in the error message.
    folder = make_bundle(tmp_path / "bundle", FILES, {**{n: {"size": 1, "sha256": "0"} for n in FILES}, name: {"size": 1, "sha256": "0"}})
    with pytest.raises(BundleError) as caught:
        verify(str(folder))
    assert str(caught.value) == f"{folder}/manifest.json: lists {name!r}, which is not a plain relative name inside the bundle"


def test_the_manifest_checksum_is_compared_first(tmp_path: Path):
    folder = make_bundle(tmp_path / "bundle", FILES)
    (folder / "model.tflite").write_bytes(b"changed")
    with pytest.raises(BundleError, match=r"manifest.json: not the manifest the build sent \(SHA-256 differs\)$"):
        verify(str(folder), "0" * 64)


def tar_of(path: Path, members: int, size: int = 0) -> Path:
    with tarfile.open(path, "w") as tar:
        for i in range(members):
            info = tarfile.TarInfo(f"bundle/{i}.txt")
            info.size = size
            tar.addfile(info, io.BytesIO(b"x" * size))
    return path


def test_an_archive_past_the_caps_is_refused_before_anything_is_written(tmp_path: Path, monkeypatch):
    with pytest.raises(BundleError, match=f"more than {agent.MAX_MEMBERS} members"):
        safe_extract(str(tar_of(tmp_path / "many.tar", agent.MAX_MEMBERS + 1)), str(tmp_path / "out"))
    monkeypatch.setattr(agent, "MAX_UNPACKED_BYTES", 2**20)  # an archive of 4 GiB is too slow to make in a test
    with pytest.raises(BundleError, match=r"unpacks to 1048580 bytes, more than the 1 MiB a bundle may hold"):
        safe_extract(str(tar_of(tmp_path / "big.tar", 4, 2**18 + 1)), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()
