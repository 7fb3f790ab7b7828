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

A bundle with a raw-text model (its tokenizer inside) also reads the target's
``runtime_checks.json``: its README states what each runtime costs (installed size,
peak memory per model), and its manifest which runtimes run each model.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import math
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
from edge_build.board.runtime import RUNTIMES
from edge_build.board.wordpiece import WordPiece
from edge_build.config.profile import TargetProfile, read_profile
from edge_build.errors import StageError
from edge_build.layout import LAUNCHERS, Target, board_sources
from edge_build.provenance import sha256_file
from edge_build.records import read_json, read_rows
from edge_build.stacks import not_installable
from edge_build.stage_files import add_files
from edge_build.tfrecord import read_split
from edge_build.typed_records import RuntimeCheckRecord

#: A bundle's launcher: it checks the folder holds exactly its manifest (standard library only) before numpy, a
#: runtime or any other code of the bundle is imported, and no compiled bytecode is read from or written into it.
LAUNCHER = """import os
import sys

sys.dont_write_bytecode = True
sys.pycache_prefix = os.devnull  # not a folder: no __pycache__ is looked for, in the bundle or anywhere
folder = os.path.dirname(os.path.realpath(__file__))
# Until the folder is verified nothing is imported from it but board/ itself: not a planted numpy/ or json.py.
sys.path = [entry for entry in sys.path if os.path.realpath(entry or ".") != folder]

import importlib.util

spec = importlib.util.spec_from_file_location(
    "board", os.path.join(folder, "board", "__init__.py"), submodule_search_locations=[os.path.join(folder, "board")]
)
board = sys.modules["board"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(board)
from board.agent import BundleError, verify

try:
    verify(folder)
except BundleError as exc:
    sys.exit(board.fail(exc, board.EXIT_USAGE))
sys.path.insert(0, folder)

from board.launch import {function}

sys.exit({function}(sys.argv[1:]))
"""

#: How to read the board scripts' output: the end of every bundle's README.
USAGE = """`bench.py` prints load time, first invoke, p50/p90/p99 per invoke, examples/s and
peak memory, and with `--parity` the top-1 agreement and logit error against the
reference model's outputs stored in `golden.npz`; it exits 1 if they fall outside
the build's tolerances. `classify.py` prints the label and every class's
probability (`--json` for one JSON object per text). Both refuse to run if a
file differs from `manifest.json`.
"""

BOARD_README = (
    """# edge-build bundle for `{target}`

Checked on the {stack} stack: {arch}, CPython {python}, numpy {numpy}, {runtimes}.
The board needs exactly that, and no TensorFlow. Debian-based OSes keep pip out of
the system Python, so install into a virtual environment:

{system}    python3 -m venv ~/edge-build && . ~/edge-build/bin/activate
    python -m pip install {install}
{optional}
Benchmark the model the build recommends for the runtime (`default_models` in
manifest.json: the fastest that passed there; the target's report says why) and
re-check the golden set, then any other model of the bundle, by file or artifact name
(`classify.py` takes `--model` too):

    python3 bench.py --parity
    python3 bench.py --model tflite_fp32 --threads 2 --runs 500

Classify raw text:

    python3 classify.py "Shares rose after the bank beat its profit forecast"

"""
    + USAGE
)

#: A bundle with a raw-text model: its runtime is full TensorFlow, so each runtime gets its own install lines and its price.
TEXT_BOARD_README = (
    """# edge-build bundle for `{target}`

Checked on the {stack} stack: {arch}, CPython {python}, numpy {numpy}, {runtimes}.
Each model runs on the runtimes named with it below; the board needs one of them, in
exactly that version. Debian-based OSes keep pip out of the system Python, so install
into a virtual environment:

{system}    python3 -m venv ~/edge-build && . ~/edge-build/bin/activate
{installs}
What each runtime costs on this stack, as the build's runtime checks measured it: its
installed size, and the peak memory of `bench.py` running each model on the golden set
(rounded up; `report.md` has the exact figures).
A raw-text model needs the Flex delegate and tensorflow-text's kernels, which come only
with full TensorFlow:

{footprint}
Benchmark the default model ({default_model}) and re-check the golden set:

    python3 bench.py --parity
{bench_others}
Classify raw text: {default_model} takes it as it is (its tokenizer is inside the
model). `--model` picks another model; one that takes token ids gets them from the
pure-Python tokenizer in `board/wordpiece.py`. Unless `--runtime` names another, both
scripts run {defaults}:

    python3 classify.py {sentence}
{classify_others}
"""
    + USAGE
)

SENTENCE = '"Shares rose after the bank beat its profit forecast"'


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


def text_models(profile: TargetProfile) -> tuple[str, ...]:
    """The profile's raw-text models (their tokenizer inside)."""
    return tuple(name for name in profile.runtime_artifacts if ARTIFACTS[name].interface_row.tokenizer_inside)


def text_in_models(profile: TargetProfile) -> tuple[str, ...]:
    """The profile's models a runtime gives raw text: raw-text models, and Tasks-ready ones (MediaPipe tokenizes for them)."""
    return tuple(name for name in profile.runtime_artifacts if ARTIFACTS[name].interface_row.given_text)


def default_artifact(profile: TargetProfile) -> str:
    """What the board scripts run unless told otherwise: the model of the first interface by its bundle rank (a raw-text
    model where there is one), then the smallest weights, INT8 where there is one; a model of an interface without a rank
    (a Tasks-ready one) only on a runtime that runs nothing else, never by default."""
    order = ("int8", "fp16", "fp32")

    def rank(name: str) -> tuple[float, int]:
        row = ARTIFACTS[name]
        default_rank = row.interface_row.default_rank
        return (float("inf") if default_rank is None else default_rank, order.index(row.precision))

    return min(profile.runtime_artifacts, key=rank)


def default_models(profile: TargetProfile, recommended: dict) -> dict[str, str]:
    """Per runtime, the model ``classify.py`` and ``bench.py`` run there unless given ``--model``: a raw-text model where the
    runtime runs one (it takes text as an app would), else the model the build recommends for the runtime (``edge_build.recommend``),
    else the bundle's default model."""
    runtimes, fallback = model_runtimes(profile), ARTIFACTS[default_artifact(profile)].path
    chosen = {}
    for runtime in dict.fromkeys(name for able in runtimes.values() for name in able):
        text = [name for name in text_in_models(profile) if runtime in runtimes[name]]
        chosen[runtime] = ARTIFACTS[text[0]].path if text else recommended.get(runtime, {}).get("model", fallback)
    return chosen


def model_runtimes(profile: TargetProfile) -> dict[str, list[str]]:
    """Per model, the runtimes that run it and install on the stack, required ones first: the board scripts' default for it is the first."""
    runtimes = {}
    for name in profile.runtime_artifacts:
        able = [r.name for r in sorted(profile.runtimes_for(name), key=lambda r: not r.required) if not_installable(r, profile.stack) is None]
        if not able:
            raise StageError(f"{profile.source}: no runtime of the profile runs {name} and installs on {profile.stack.describe()}")
        runtimes[name] = able
    return runtimes


def stack_fields(profile: TargetProfile, stack: dict) -> dict:
    """What both READMEs say about the stack the bundle was checked on."""
    runtimes = ", ".join(f"{name} {r['version']}" + ("" if r["required"] else " (optional)") for name, r in stack["runtimes"].items())
    return {
        "target": profile.name,
        "stack": stack["title"],
        "arch": stack["arch"],
        "python": stack["python"],
        "numpy": stack["numpy"],
        "runtimes": runtimes,
    }


def system_packages(profile: TargetProfile) -> str:
    """The README's apt line for the system libraries the runtimes' wheels load (``Runtime.debian_packages``), if any."""
    packages = profile.runtime_environment().debian_packages
    return f"    sudo apt-get install {' '.join(packages)}   # libraries the runtimes' wheels load\n" if packages else ""


def board_readme(profile: TargetProfile) -> str:
    stack = profile.runtime_environment().record()
    optional = stack["optional_install"]
    return BOARD_README.format(
        **stack_fields(profile, stack),
        system=system_packages(profile),
        install=" ".join(stack["install"]),
        optional=f"\nOptionally, to compare runtimes: `python -m pip install {' '.join(optional)}`\n" if optional else "",
    )


def install_lines(runtime: str, version: str, numpy: str) -> list[str]:
    """The pip lines that give a board ``runtime``: its wheel (or the dependencies its row chooses) with the stack's numpy,
    then what installs without dependencies (``Runtime.no_deps_requirements``: tensorflow-text's metadata asks for the
    full ``tensorflow``, which tensorflow-cpu already is)."""
    row = RUNTIMES[runtime][version]
    return [
        f"python -m pip install numpy=={numpy} {' '.join(row.requirements)}",
        *([f"python -m pip install --no-deps {' '.join(row.no_deps_requirements)}"] if row.no_deps_requirements else []),
    ]


def megabytes(value: float) -> str:
    # Two significant figures: the price of a runtime, not its last byte.
    return f"{float(f'{value:.2g}'):g} MB"


#: Steps of each decade that a peak-memory figure is rounded up to.
MEMORY_STEPS = (1, 1.5, 2, 3, 5, 7.5, 10)


def at_most(value: float) -> str:
    """A peak-memory figure rounded up to a coarse step (45.8 MB: "≤ 50 MB").

    Peak memory moves by about a megabyte from run to run; rounded to significant
    figures it would change the bundle's bytes between two identical builds. The
    exact figures are in the report.
    """
    decade = 10 ** math.floor(math.log10(value)) if value > 0 else 1
    return f"≤ {next(step * decade for step in MEMORY_STEPS if step * decade >= value):g} MB"


def installed_size(checks: RuntimeCheckRecord, runtime: str, path: Path) -> str:
    """The runtime's installed size in the environment its checks ran in."""
    entry = checks.installed(runtime)
    if "disk_mb" in entry:
        return megabytes(entry["disk_mb"])
    if entry["checkable"]:
        raise StageError(
            f"{path}: no installed size (disk_mb) for {runtime} in environment; rerun the runtime checks in an environment that records it"
        )
    return "not measured"


def peak_memory(checks: RuntimeCheckRecord, model: str, runtime: str, able: list[str]) -> str:
    if runtime not in able:
        return "cannot run it"
    outcome = checks.outcome(model, runtime)
    return at_most(outcome.record["peak_rss_mb"]) if outcome and outcome.ran else "not measured"


def footprint_table(profile: TargetProfile, stack: dict, runtimes: dict[str, list[str]], path: Path) -> str:
    """A Markdown table: per runtime, its installed size and each model's peak memory, from the runtime checks' record ``path``."""
    checks = RuntimeCheckRecord.read(path)
    models = profile.runtime_artifacts
    lines = [
        "| runtime | installed | " + " | ".join(f"peak memory, {ARTIFACTS[m].path}" for m in models) + " |",
        "|---|---:|" + "---:|" * len(models),
    ]
    for name, r in stack["runtimes"].items():
        cells = [installed_size(checks, name, path), *(peak_memory(checks, m, name, runtimes[m]) for m in models)]
        lines.append(f"| {name} {r['version']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def text_board_readme(profile: TargetProfile, runtime_checks: Path) -> str:
    """The README of a bundle with a raw-text model: install lines and measured footprint per runtime."""
    stack = profile.runtime_environment().record()
    runtimes = model_runtimes(profile)
    default = default_artifact(profile)
    installs = []
    for name, r in stack["runtimes"].items():
        files = ", ".join(ARTIFACTS[m].path for m in profile.runtime_artifacts if name in runtimes[m])
        lines = "".join(f"    {line}\n" for line in install_lines(name, r["version"], stack["numpy"]))
        installs.append(f"\n{name} {r['version']}{'' if r['required'] else ' (optional)'} runs {files}:\n\n{lines}")
    others = [ARTIFACTS[m].path for m in profile.runtime_artifacts if m != default]
    return TEXT_BOARD_README.format(
        **stack_fields(profile, stack),
        installs="".join(installs),
        system=system_packages(profile),
        footprint=footprint_table(profile, stack, runtimes, runtime_checks),
        default_model=ARTIFACTS[default].path,
        defaults=", ".join(f"{ARTIFACTS[m].path} on {runtimes[m][0]}" for m in sorted(profile.runtime_artifacts, key=lambda m: m != default)),
        bench_others="".join(f"    python3 bench.py {file} --parity\n" for file in others),
        sentence=SENTENCE,
        classify_others="".join(f"    python3 classify.py --model {file} {SENTENCE}\n" for file in others),
    )


def manifest(profile: TargetProfile, folder: Path, reference: Path, target: Target) -> dict:
    """The target's ``manifest.json`` record, plus what the board scripts need and every bundled file."""
    record = read_json(target.manifest)
    meta = read_json(reference / "assets.extra" / "metadata.json")
    runtimes = model_runtimes(profile)
    default = default_artifact(profile)
    return {
        **record,
        "labels": meta["labels"],
        "tokenizer": {"lower_case": meta["lower_case"], "sequence_length": meta["sequence_length"], "vocab_sha256": meta["vocab_sha256"]},
        "models": {name: ARTIFACTS[name].path for name in profile.runtime_artifacts},
        # Only a model that takes raw text leaves out runtimes (a raw-text model those without tensorflow-text's kernels and Flex,
        # a Tasks-ready one all but MediaPipe, which runs nothing else); otherwise every runtime runs every model.
        **({"model_runtimes": runtimes} if text_in_models(profile) else {}),
        "default_model": ARTIFACTS[default].path,
        "default_runtime": runtimes[default][0],
        "default_models": default_models(profile, record.get("recommended", {})),
        "tolerances": profile.tolerances.limits(),
        # The artifact table's checks, applied on the board by bench.py --parity exactly as in the build.
        "parity_checks": {name: [list(check) for check in ARTIFACTS[name].parity] for name in profile.runtime_artifacts},
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
        for name in profile.runtime_artifacts:
            shutil.copyfile(target.artifact(name), staging / ARTIFACTS[name].path)
        shutil.copyfile(reference / "assets" / "vocab.txt", staging / "vocab.txt")
        shutil.copyfile(labels, staging / "labels.txt")
        shutil.copyfile(target.golden, staging / "golden.npz")
        for source in board_sources():
            shutil.copyfile(source, staging / "board" / source.name)
        for launcher, function in LAUNCHERS.items():
            (staging / launcher).write_text(LAUNCHER.format(function=function), encoding="utf-8")
            (staging / launcher).chmod(0o755)
        readme = text_board_readme(profile, target.runtime_checks) if text_models(profile) else board_readme(profile)
        (staging / "README.md").write_text(readme, encoding="utf-8")
        record = manifest(profile, staging, reference, target)
        (staging / launch.MANIFEST).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        launch.verify(str(staging))
        written = sorted(p.relative_to(staging).as_posix() for p in staging.rglob("*") if p.is_file())
        if written != target.bundle_names(profile.runtime_artifacts):
            raise StageError(f"{folder}: wrote {written}, the build expects {target.bundle_names(profile.runtime_artifacts)}")
        write_tarball(staging, archive_tmp, f"bundle-{profile.name}")
    record["tokenizer_checked_examples"] = checked
    return record


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.stages.bundle", description=__doc__.splitlines()[0])
    add_files("bundle", parser)
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
