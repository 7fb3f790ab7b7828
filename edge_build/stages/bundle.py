"""Stage *bundle*: the folder and tarball a user copies to the board.

Reads the target's TF Lite models, ``golden.npz`` and ``manifest.json``, the
reference SavedModel (its vocabulary asset and metadata), ``labels.txt``, the
test split and its token ids, the profile and the ``board/`` package; writes
``bundle/`` and ``bundle-<target>.tar.gz`` into the target directory. The bundle
holds the models, ``vocab.txt``, ``labels.txt``, the golden set, the ``board/``
package, the ``bench.py`` and ``classify.py`` launchers, a README for the board
and ``manifest.json`` (the target's manifest record, the tolerances, each model's
parity checks and the SHA-256 and size of every bundled file). Before anything is
written, the pure-Python tokenizer the board uses must give tensorflow-text's ids
(the tokenize stage's) for every example of the test split.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import io
import json
import os
import shutil
import sys
import tarfile
from pathlib import Path

import numpy as np

from edge_build import cli
from edge_build.artifacts import ARTIFACTS
from edge_build.atomic import atomic_outputs
from edge_build.board import launch
from edge_build.board.wordpiece import WordPiece
from edge_build.config.profile import TargetProfile, read_profile
from edge_build.errors import StageError
from edge_build.layout import LAUNCHERS, Target, board_sources
from edge_build.provenance import sha256_file
from edge_build.records import read_json, read_rows
from edge_build.tfrecord import read_split

BOARD_README = """# edge-build bundle for `{target}`

Checked on the {stack} stack: {arch}, CPython {python}, numpy {numpy}, {runtimes}.
The board needs exactly that, and no TensorFlow. Debian-based OSes keep pip out of
the system Python, so install into a virtual environment:

    python3 -m venv ~/edge-build && . ~/edge-build/bin/activate
    python -m pip install {install}
{optional}
Benchmark the default model ({default_model}) and re-check the golden set:

    python3 bench.py --parity
    python3 bench.py model_fp32.tflite --threads 2 --runs 500

Classify raw text:

    python3 classify.py "Shares rose after the bank beat its profit forecast"

`bench.py` prints load time, first invoke, p50/p90/p99 per invoke, examples/s and
peak memory, and with `--parity` the top-1 agreement and logit error against the
reference model's outputs stored in `golden.npz`; it exits 1 if they fall outside
the build's tolerances. `classify.py` prints the label and every class's
probability (`--json` for one JSON object per text). Both refuse to run if a
file differs from `manifest.json`.
"""


def check_tokenizer(reference: Path, test_records: Path, test_ids: Path) -> int:
    """The board's tokenizer must match tensorflow-text on every test example; returns how many were checked."""
    meta = read_json(reference / "assets.extra" / "metadata.json")
    texts, _ = read_split(test_records)
    expected = read_rows(test_ids, len(texts))
    actual = WordPiece.from_file(str(reference / "assets" / "vocab.txt"), meta["lower_case"]).encode(
        [t.decode("utf-8") for t in texts], meta["sequence_length"]
    )
    mismatched = [i for i in range(len(texts)) if not np.array_equal(expected[i], actual[i])]
    if mismatched:
        raise StageError(f"the pure-Python tokenizer differs from tensorflow-text on {len(mismatched)} test example(s), first: #{mismatched[0]}")
    return len(texts)


def write_tarball(folder: Path, archive: Path, top: str) -> None:
    """A reproducible tar.gz: sorted members, fixed owner, modes and times."""
    mtime = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    with open(archive, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=mtime) as zipped:
        with tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path in sorted(folder.rglob("*")):
                info = tarfile.TarInfo(f"{top}/{path.relative_to(folder).as_posix()}")
                info.mtime, info.uid, info.gid, info.uname, info.gname = mtime, 0, 0, "", ""
                if path.is_dir():
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
                else:
                    data = path.read_bytes()
                    info.size, info.mode = len(data), 0o755 if path.relative_to(folder).as_posix() in LAUNCHERS else 0o644
                    tar.addfile(info, io.BytesIO(data))


def default_model(profile: TargetProfile) -> str:
    """What the board scripts run unless told otherwise: the smallest weights, INT8 where there is one."""
    order = ("int8", "fp16", "fp32")
    return ARTIFACTS[min(profile.tflite_artifacts, key=lambda name: order.index(ARTIFACTS[name].precision))].path


def board_readme(profile: TargetProfile) -> str:
    stack = profile.runtime_environment().record()
    runtimes = ", ".join(f"{name} {r['version']}" + ("" if r["required"] else " (optional)") for name, r in stack["runtimes"].items())
    optional = stack["optional_install"]
    return BOARD_README.format(
        target=profile.name,
        default_model=default_model(profile),
        stack=stack["title"],
        arch=stack["arch"],
        python=stack["python"],
        numpy=stack["numpy"],
        runtimes=runtimes,
        install=" ".join(stack["install"]),
        optional=f"\nOptionally, to compare runtimes: `python -m pip install {' '.join(optional)}`\n" if optional else "",
    )


def manifest(profile: TargetProfile, folder: Path, reference: Path, target: Target) -> dict:
    """The target's ``manifest.json`` record, plus what the board scripts need and every bundled file."""
    record = read_json(target.manifest)
    meta = read_json(reference / "assets.extra" / "metadata.json")
    return {
        **record,
        "labels": meta["labels"],
        "tokenizer": {"lower_case": meta["lower_case"], "sequence_length": meta["sequence_length"], "vocab_sha256": meta["vocab_sha256"]},
        "models": {name: ARTIFACTS[name].path for name in profile.tflite_artifacts},
        "default_model": default_model(profile),
        "default_runtime": next(r.name for r in profile.runtimes if r.required),
        "tolerances": dataclasses.asdict(profile.tolerances),
        # The artifact table's checks, applied on the board by bench.py --parity exactly as in the build.
        "parity_checks": {name: [list(check) for check in ARTIFACTS[name].parity] for name in profile.tflite_artifacts},
        "files": {
            path.relative_to(folder).as_posix(): {"sha256": sha256_file(path), "size": path.stat().st_size}
            for path in sorted(folder.rglob("*"))
            if path.is_file()
        },
    }


def build_bundle(profile: TargetProfile, reference: Path, test: tuple[Path, Path], labels: Path, target: Target) -> dict:
    """Check the board's tokenizer on the test split (``test``: its records and token ids), then write the bundle folder and tarball."""
    checked = check_tokenizer(reference, *test)
    folder, archive = target.bundle_dir, target.bundle_archive
    with atomic_outputs(folder, archive) as (staging, archive_tmp):
        (staging / "board").mkdir(parents=True)
        for name in profile.tflite_artifacts:
            shutil.copyfile(target.artifact(name), staging / ARTIFACTS[name].path)
        shutil.copyfile(reference / "assets" / "vocab.txt", staging / "vocab.txt")
        shutil.copyfile(labels, staging / "labels.txt")
        shutil.copyfile(target.golden, staging / "golden.npz")
        for source in board_sources():
            shutil.copyfile(source, staging / "board" / source.name)
        for launcher, function in LAUNCHERS.items():
            (staging / launcher).write_text(
                f"import sys\n\nfrom board.launch import {function}\n\nsys.exit({function}(sys.argv[1:]))\n", encoding="utf-8"
            )
            (staging / launcher).chmod(0o755)
        (staging / "README.md").write_text(board_readme(profile), encoding="utf-8")
        record = manifest(profile, staging, reference, target)
        (staging / launch.MANIFEST).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        launch.verify(str(staging))
        written = sorted(p.relative_to(staging).as_posix() for p in staging.rglob("*") if p.is_file())
        if written != target.bundle_names(profile.tflite_artifacts):
            raise StageError(f"{folder}: wrote {written}, the build expects {target.bundle_names(profile.tflite_artifacts)}")
        write_tarball(staging, archive_tmp, f"bundle-{profile.name}")
    record["tokenizer_checked_examples"] = checked
    return record


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.stages.bundle", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", type=Path, required=True, help="the target profile (.toml)")
    parser.add_argument(
        "--target-dir", type=Path, required=True, help="the target's models, golden set and manifest; the bundle goes here (layout.Target)"
    )
    parser.add_argument(
        "--reference", type=Path, required=True, help="the reference CPU SavedModel's version directory (vocabulary and tokenizer settings)"
    )
    parser.add_argument("--test", type=Path, required=True, help="test.tfrecord")
    parser.add_argument("--test-ids", type=Path, required=True, help="the test split's token ids (.npy from the tokenize stage)")
    parser.add_argument("--labels", type=Path, required=True, help="labels.txt")
    return parser


def drive(args: argparse.Namespace) -> None:
    profile = read_profile(args.profile)
    target = Target(args.target_dir, profile.name)
    record = build_bundle(profile, args.reference, (args.test, args.test_ids), args.labels, target)
    archive = target.bundle_archive
    print(
        f"bundle: {len(record['files']) + 1} files, tokenizer matches tensorflow-text on {record['tokenizer_checked_examples']} test examples -> {archive} ({archive.stat().st_size / 1e6:.2f} MB)"
    )


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
