"""A bundle is exactly its manifest (``board.agent.verify``), and an archive is unpacked within caps: hand-made folders, no model."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from edge_build.board import agent
from edge_build.board.agent import BundleError, safe_extract, verify
from edge_build.ssh import BOOTSTRAP


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


def receive(cache: Path, archive: bytes, size: int, sha256: str, bundle: str) -> subprocess.CompletedProcess:
    """The agent's ``receive``, run as ssh runs it on a board: the bootstrap, the agent's source, then the archive, on standard input."""
    source = Path(agent.__file__).read_bytes()
    command = [sys.executable, "-c", BOOTSTRAP, "receive", f"--cache={cache}", f"--bundle={bundle}", f"--size={size}", f"--archive-sha256={sha256}"]
    return subprocess.run(command, input=b"%d\n%s%s" % (len(source), source, archive), capture_output=True, timeout=60, cwd="/")


def bundle_archive(tmp_path: Path) -> tuple[bytes, str]:
    """A bundle's archive (one top folder, as the bundle stage packs it) and its manifest's SHA-256."""
    folder = make_bundle(tmp_path / "src" / "bundle-tiny", FILES)
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as tar:
        tar.add(folder, arcname="bundle-tiny")
    return data.getvalue(), hashlib.sha256((folder / "manifest.json").read_bytes()).hexdigest()


def test_a_bundle_received_on_standard_input_is_checked_then_installed(tmp_path: Path):
    archive, manifest_sha256 = bundle_archive(tmp_path)
    cache = tmp_path / "cache"
    done = receive(cache, archive, len(archive), hashlib.sha256(archive).hexdigest(), manifest_sha256)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"installed": str(cache / "bundles" / manifest_sha256)}
    assert verify(str(cache / "bundles" / manifest_sha256), manifest_sha256)["files"]
    assert sorted(p.name for p in cache.rglob("*") if "bundles/" not in p.as_posix()) == ["bundles", "runs", "uploads"]


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda a, size, digest: (a[: len(a) // 2], size, digest), "the archive ended after"),  # a connection that broke
        (lambda a, size, digest: (a + b"x", size, digest), "more than the"),
        (lambda a, size, digest: (a[:-1] + bytes([a[-1] ^ 1]), size, digest), "the archive's SHA-256 is not the one the build sent"),
        (lambda a, size, digest: (a, 5 * 2**30, digest), "more than the 4096 MiB a bundle may hold"),
    ],
)
def test_a_received_archive_that_is_not_what_was_sent_is_refused_and_removed(tmp_path: Path, change, message: str):
    archive, manifest_sha256 = bundle_archive(tmp_path)
    sent, size, digest = change(archive, len(archive), hashlib.sha256(archive).hexdigest())
    cache = tmp_path / "cache"
    done = receive(cache, sent, size, digest, manifest_sha256)
    assert done.returncode == 2 and done.stderr.decode().startswith("error: ") and message in done.stderr.decode(), done.stderr
    assert list((cache / "bundles").iterdir()) == [] and list((cache / "uploads").iterdir()) == []


def test_what_a_killed_receive_left_is_swept_by_the_next(tmp_path: Path):
    archive, manifest_sha256 = bundle_archive(tmp_path)
    cache = tmp_path / "cache"
    (cache / "uploads").mkdir(parents=True)
    (cache / "bundles" / f"{agent.STAGING}999999999-x").mkdir(parents=True)  # no such process
    (cache / "uploads" / "999999999-y.tar.gz").write_bytes(archive[:10])
    assert receive(cache, archive, len(archive), hashlib.sha256(archive).hexdigest(), manifest_sha256).returncode == 0
    assert [p.name for p in (cache / "bundles").iterdir()] == [manifest_sha256] and list((cache / "uploads").iterdir()) == []
