"""Tiny datasets and a tiny trained model shared by the stage tests (seconds, not minutes)."""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import random
import shutil
from pathlib import Path

import pytest

from edge_build.config.loading import tomllib

REPO = Path(__file__).resolve().parents[1]

# Each class has its own words, so even a two-epoch model separates them.
CLASS_WORDS = {
    "astronomy": "planet comet orbit telescope galaxy nebula star moon",
    "cooking": "recipe flour oven butter simmer garlic pepper onion",
    "football": "goal striker referee penalty league match keeper pitch",
}
SHARED_WORDS = "the a of and in with today new report said"

TINY_HPARAMS = """
[tokenizer]
vocab_size = 200
lower_case = true
sequence_length = 24

[model]
embedding_dim = 8
dropout = 0.0

[training]
epochs = 3
batch_size = 8
learning_rate = 0.05
clip_norm = 1.0
seed = 7
shuffle_buffer = 64
"""

#: Fixtures that train, convert, provision a runtime environment, start a server or run the real build:
#: a test that uses one (directly or through another fixture) belongs to the full suite only.
FULL_SUITE_FIXTURES = frozenset({"tiny_build", "runtime_envs", "ssh_server", "project", "resumed_build"})
FULL_SUITE_MARKERS = ("slow", "emulation")


def pytest_addoption(parser):
    parser.addoption(
        "--full", action="store_true", help="run the full suite: also the tests marked slow or emulation (trained models, conversions, runtimes)"
    )
    parser.addoption("--update-goldens", action="store_true", help="rewrite the expected files under tests/testdata/ from what the code renders now")


def golden_difference(text: str, path: Path) -> str | None:
    """What a golden test says when ``text`` is not the file at ``path``: a unified diff a reviewer can read; None when equal."""
    expected = path.read_text(encoding="utf-8") if path.is_file() else ""
    if text == expected:
        return None
    diff = difflib.unified_diff(expected.splitlines(keepends=True), text.splitlines(keepends=True), str(path), "rendered now")
    return f"{path.relative_to(REPO)} differs from what is rendered now (pytest --update-goldens rewrites it on purpose):\n{''.join(diff)}"


@pytest.fixture
def golden(request):
    """``golden(text, path)``: ``text`` must equal the file at ``path``; with --update-goldens it becomes that file."""

    def check(text: str, path: Path) -> None:
        if request.config.getoption("--update-goldens"):
            path.write_text(text, encoding="utf-8")
            return
        difference = golden_difference(text, path)
        if difference:
            pytest.fail(difference, pytrace=False)

    return check


@pytest.hookimpl(tryfirst=True)  # before -m selects: `pytest --full -m "slow or emulation"` runs what plain pytest leaves out
def pytest_collection_modifyitems(config, items):
    for item in items:
        if FULL_SUITE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    if config.getoption("--full"):
        return
    full_only = [item for item in items if any(item.get_closest_marker(name) for name in FULL_SUITE_MARKERS)]
    if full_only:
        config.hook.pytest_deselected(items=full_only)
        leaving = set(full_only)
        items[:] = [item for item in items if item not in leaving]


def pytest_report_header(config):
    if not config.getoption("--full"):
        return "fast suite: tests marked slow or emulation are deselected (run them with --full)"


def make_text(label: str, rng: random.Random) -> str:
    words = CLASS_WORDS[label].split() * 2 + SHARED_WORDS.split()
    return " ".join(rng.choice(words) for _ in range(rng.randint(8, 30))).capitalize() + "."


def write_tiny_dataset(root: Path, per_class: int = 12, seed: int = 0) -> Path:
    rng = random.Random(seed)
    for label in CLASS_WORDS:
        (root / label).mkdir(parents=True)
        for i in range(per_class):
            (root / label / f"{i:03d}.txt").write_text(make_text(label, rng), encoding="utf-8")
    return root


@pytest.fixture
def tiny_dataset(tmp_path: Path) -> Path:
    return write_tiny_dataset(tmp_path / "dataset")


@pytest.fixture
def tiny_hparams(tmp_path: Path) -> Path:
    path = tmp_path / "hparams.toml"
    path.write_text(TINY_HPARAMS, encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def tiny_build(tmp_path_factory) -> dict[str, Path]:
    """data -> vocab -> data report -> tokenize -> train -> export -> reference logits -> baseline -> quality on the tiny dataset, run once for the whole session."""
    from edge_build.config.hparams import load_hyperparameters
    from edge_build.corpus import SPLITS
    from edge_build.layout import Layout
    from edge_build.stages import baseline, data, data_report, export, quality, reference_logits, tokenize, vocab
    from edge_build.training import TrainInputs, train

    root = tmp_path_factory.mktemp("tiny_build")
    layout = Layout(root / "build")
    dataset = write_tiny_dataset(root / "dataset")
    hparams_path = root / "hparams.toml"
    hparams_path.write_text(TINY_HPARAMS, encoding="utf-8")
    hparams = load_hyperparameters(hparams_path)
    files = layout.data
    splits = [files.split(s) for s in SPLITS]
    paths = {
        "root": root,
        "layout": layout,
        "dataset": dataset,
        "hparams": hparams_path,
        "data": files.dir,
        "vocab": layout.vocab,
        "model": layout.weights.parent,
        "weights": layout.weights,
        "train_log": layout.train_log,
        "test": files.split("test"),
        "labels": files.labels,
    }
    data.build_data(str(dataset), files.outputs, (0.6, 0.2, 0.2), seed=3)
    vocab.build_vocab(files.split("train"), layout.vocab, hparams.tokenizer.vocab_size, lower_case=True)
    data_report.build_data_report(dict(zip(SPLITS, splits)), files.summary, layout.vocab, True, hparams.tokenizer.sequence_length, files.report)
    tokenize.tokenize_splits({files.split(s): layout.token_ids(s) for s in SPLITS}, layout.vocab, True, hparams.tokenizer.sequence_length)
    train(
        TrainInputs(
            files.split("train"),
            files.split("val"),
            files.labels,
            layout.vocab,
            hparams_path,
            REPO / "model_src" / "model.py",
            layout.token_ids("train"),
        ),
        hparams,
        layout.weights,
        layout.train_log,
    )
    paths["saved_model"] = export.export(
        files.split("val"),
        files.labels,
        layout.vocab,
        layout.weights,
        layout.train_log,
        hparams_path,
        REPO / "model_src" / "model.py",
        layout.token_ids("train"),
        layout.reference.parent,
    )
    reference_logits.reference_logits(layout.reference, files.split("test"), files.labels, layout.reference_logits)
    paths["baseline"], paths["quality"] = layout.baseline, layout.quality
    baseline.build_baseline(dict(zip(SPLITS, splits)), files.labels, layout.baseline)
    quality.gate_quality(layout.reference_logits, files.split("test"), files.labels, layout.baseline, 3.0, layout.quality)
    return paths


TINY_PROFILE = """
description = "tests: every artifact, checked on tflite-runtime"
arch = "x86_64"
artifacts = ["saved_model_cpu", "saved_model_xla", "tflite_fp32", "tflite_fp16", "tflite_int8"]

[quantization]
output_type = "float32"
select_tf_ops = false

[[runtimes]]
name = "tflite-runtime"

[tolerances]
xla_max_abs_logit = 1e-4
fp32_max_abs_logit = 1e-4
fp16_max_abs_logit = 1e-2
int8_min_top1_agreement = 0.8
int8_max_accuracy_drop = 0.2

[latency]
fp32_p50_ms = 1000.0
fp16_p50_ms = 1000.0
int8_p50_ms = 1000.0

[xla]
warmup_batch_sizes = [1, 8]
steady_runs = 3

[checks]
warmup = 2
runs = 20
"""


def without_artifacts(profile_text: str, *names: str) -> str:
    """The profile without ``names`` and without the settings only they read (a profile may not keep those)."""
    from edge_build.artifacts import settings_taken

    kept = [name for name in tomllib.loads(profile_text)["artifacts"] if name not in names]
    orphaned = set().union(*(settings_taken(name) for name in names)) - set().union(*(settings_taken(name) for name in kept))
    lines, section = [], ""
    for line in profile_text.split("\n"):
        if line.startswith("["):
            section = line.strip("[]")
        key = line.split("=")[0].strip()
        if line.startswith("artifacts = "):
            line = "artifacts = " + json.dumps(kept)
        elif section in orphaned or (line.strip() and f"{section}.{key}" in orphaned):
            continue
        lines.append(line)
    return "\n".join(lines)


# The tiny profile on a trixie-like stack (CPython 3.13, numpy 2): ai-edge-litert gates, tflite-runtime cannot install.
TINY_TRIXIE_PROFILE = TINY_PROFILE.replace(
    '[[runtimes]]\nname = "tflite-runtime"\n',
    '[stack]\nrelease = "trixie"\npython = "3.13"\nnumpy = "2.2.6"\n\n'
    '[[runtimes]]\nname = "ai-edge-litert"\n\n[[runtimes]]\nname = "tflite-runtime"\nrequired = false\n',
)


# A gateway serving raw text: the ids INT8 model on tflite-runtime, the raw-text model on tensorflow-cpu (Flex, tensorflow-text).
TINY_GATEWAY_PROFILE = """
description = "tests: raw text in on full TF Lite"
arch = "x86_64"
artifacts = ["tflite_int8", "tflite_text_int8"]

[quantization]
output_type = "float32"
select_tf_ops = true

[[runtimes]]
name = "tflite-runtime"

[[runtimes]]
name = "tensorflow-cpu"

[tolerances]
int8_min_top1_agreement = 0.8
int8_max_accuracy_drop = 0.2

[latency]
int8_p50_ms = 1000.0
text_int8_p50_ms = 1000.0

[checks]
warmup = 2
runs = 20
"""


def with_litert(profile_text: str, required: bool = False, version: str | None = None) -> str:
    """``profile_text`` with ai-edge-litert as a second runtime after its tflite-runtime row."""
    row = '[[runtimes]]\nname = "ai-edge-litert"\n' + (f'version = "{version}"\n' if version else "") + f"required = {str(required).lower()}\n"
    text = profile_text.replace('name = "tflite-runtime"\n', f'name = "tflite-runtime"\n\n{row}', 1)
    assert text != profile_text
    return text


def environment_with(env_json: Path, destination: Path, runtime: str, reason: str, required: bool = False) -> Path:
    """A copy of ``env.json`` at ``destination`` where ``runtime`` could not be provisioned (as ``runtime_env`` records it)."""
    import json

    record = json.loads(env_json.read_text(encoding="utf-8"))
    record["runtimes"][runtime] = {"version": None, "required": required, "checkable": False, "reason": reason}
    destination.write_text(json.dumps(record), encoding="utf-8")
    return destination


#: The stack record ``TINY_PROFILE`` gives the target's and the bundle's manifests (``EnvironmentSpec.record``).
TINY_STACK_RECORD = {
    "title": "Debian 12 bookworm",
    "release": "bookworm",
    "arch": "x86_64",
    "python": "3.11",
    "numpy": "1.26.4",
    "runtimes": {"tflite-runtime": {"version": "2.14.0", "required": True}},
    "install": ["numpy==1.26.4", "tflite-runtime==2.14.0"],
    "optional_install": [],
}


def write_profile(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def varint(value: int) -> bytes:
    """A protobuf varint; a negative value as protobuf writes an int64 (ten bytes)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        out.append(value & 0x7F | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


def profile_runtime(profile, name: str):
    """The profile's runtime named ``name``, as the runtime checks take it."""
    (spec,) = [runtime for runtime in profile.runtimes if runtime.name == name]
    return spec


def evaluate_and_report(profile, tiny_artifacts: dict, xla_checks: Path | None, target) -> dict:
    """The evaluate and report stages on the tiny build's records, for ``target``; the evaluation."""
    from edge_build.evaluation import EvaluationInputs
    from edge_build.stages import evaluate, report

    layout = tiny_artifacts["layout"]
    inputs = EvaluationInputs(layout.reference, layout.reference_logits, layout.data.split("test"), layout.data.labels)
    evaluation = evaluate.build_evaluation(profile, inputs, target)
    records = report.ReportInputs(
        target.evaluation,
        layout.data.summary,
        layout.data.report_json,
        layout.quality,
        layout.train_log,
        layout.calibration_summary,
        xla_checks,
    )
    report.build_report(profile, records, target)
    return evaluation


def reported_copy(tiny_artifacts: dict, destination: Path, profile_text: str | None = None) -> dict:
    """A copy of the tiny target after the report and manifest stages, as the bundle stage finds it.

    ``profile_text`` replaces ``TINY_PROFILE`` for the report, manifest and what follows (another stack, say).
    """
    from edge_build.config.profile import load_profile, read_profile
    from edge_build.layout import Target
    from edge_build.stages import manifest

    shutil.copytree(tiny_artifacts["target"], destination)
    if profile_text is None:
        profile = load_profile(tiny_artifacts["profile"].parent, "tiny")
    else:
        profile = read_profile(write_profile(destination.parent / "targets", "tiny", profile_text))
    target = Target(destination, "tiny")
    xla_checks = target.xla_checks if "saved_model_xla" in profile.artifacts else None
    evaluate_and_report(profile, tiny_artifacts, xla_checks, target)
    layout = tiny_artifacts["layout"]
    args = (
        profile,
        manifest.ManifestInputs(layout.data.summary, layout.data.window, layout.train_log, layout.weights, layout.vocab, layout.calibration_summary),
        target,
    )
    return {"target": destination, "profile": profile, "manifest_args": args, "record": manifest.build_manifest(*args)}


def debian_packages_unavailable() -> str | None:
    """Why this machine cannot fetch Debian's packages with a private apt configuration (a release's own CPython, qemu-user), or ``None``.

    Provisioning needs no root and changes nothing machine-wide: only the apt-get
    and dpkg-deb programs and Debian's archive keyring, to verify what it fetches.
    """
    from edge_build.stages.runtime_env import KEYRING

    for program in ("apt-get", "dpkg-deb"):
        if not shutil.which(program):
            return f"no {program}: a stack's CPython comes from its Debian release's own packages"
    if not KEYRING.is_file():
        return f"no {KEYRING} (package debian-archive-keyring): the Debian packages cannot be verified"
    return None


def board_launcher(environment: dict) -> tuple[list[str], dict[str, str]]:
    """``runtime_envs.launcher`` without this project on ``PYTHONPATH``: a board has the bundle, numpy and a runtime, not edge-build."""
    from edge_build.runtime_envs import launcher

    prefix, variables = launcher(environment)
    kept = [entry for entry in variables["PYTHONPATH"].split(os.pathsep) if Path(entry).resolve() != REPO]
    variables["PYTHONPATH"] = os.pathsep.join(kept)
    if not kept:
        del variables["PYTHONPATH"]
    return prefix, variables


@pytest.fixture(scope="session")
def runtime_envs(tmp_path_factory) -> Path:
    """One folder of runtime environments for the whole session: stage tests and SCons builds (``runtime_envs=``) share them."""
    return tmp_path_factory.mktemp("runtime-envs")


@pytest.fixture(scope="session")
def host_runtime_env(runtime_envs: Path) -> Path:
    """``env.json`` of the tiny profile's runtime environment (the Debian 12 stack: CPython 3.11, numpy 1.26.4, tflite-runtime), provisioned once."""
    return provisioned(runtime_envs, write_profile(runtime_envs.parent / "host-profile", "tiny", TINY_PROFILE))


@pytest.fixture(scope="session")
def writer_env(runtime_envs: Path) -> Path:
    """``env.json`` of the metadata writer's environment (MediaPipe 0.10.21), provisioned once."""
    from edge_build.stacks import writer_environment

    return provisioned_spec(runtime_envs, writer_environment())


def provisioned(runtime_envs: Path, profile_path: Path) -> Path:
    """``env.json`` of the profile's runtime environment, provisioned once per session."""
    from edge_build.config.profile import read_profile

    return provisioned_spec(runtime_envs, read_profile(profile_path).runtime_environment())


def provisioned_spec(runtime_envs: Path, spec) -> Path:
    """``env.json`` of the environment ``spec`` describes, provisioned once per session."""
    from edge_build.layout import Layout
    from edge_build.stages.runtime_env import provision

    layout = Layout(runtime_envs.parent, runtime_envs)
    env_json = layout.runtime_env(spec.key())
    if not env_json.is_file():
        provision(spec, env_json, layout.apt)
    return env_json


@pytest.fixture(scope="session")
def gateway_runtime_env(runtime_envs: Path) -> Path:
    """``env.json`` of the tiny gateway's environment: the Debian 12 stack with tflite-runtime and tensorflow-cpu 2.15.1 + tensorflow-text."""
    return provisioned(runtime_envs, write_profile(runtime_envs.parent / "gateway-profile", "tiny-gateway", TINY_GATEWAY_PROFILE))


def conversion_inputs(tiny_build: dict, **changes) -> object:
    """The tflite stage's inputs for the tiny model (its representative set comes from ``tiny_artifacts``)."""
    from edge_build.stages import tflite

    layout, files = tiny_build["layout"], tiny_build["layout"].data
    inputs = tflite.ConversionInputs(
        model_source=REPO / "model_src" / "model.py",
        hparams=tiny_build["hparams"],
        vocab=layout.vocab,
        weights=layout.weights,
        train_log=layout.train_log,
        labels=files.labels,
        val=files.split("val"),
        val_ids=layout.token_ids("val"),
        test_ids=layout.token_ids("test"),
        train_ids=layout.token_ids("train"),
        representative=layout.representative,
        test=files.split("test"),
        train=files.split("train"),
    )
    return dataclasses.replace(inputs, **changes)


@pytest.fixture(scope="session")
def gateway_artifacts(tiny_artifacts, gateway_runtime_env) -> dict[str, Path]:
    """The tiny model for ``TINY_GATEWAY_PROFILE``: ``tflite_int8`` and the raw-text ``tflite_text_int8``, with their runtime checks."""
    from edge_build.config.profile import load_profile
    from edge_build.stages import runtime_check, tflite

    layout, files = tiny_artifacts["layout"], tiny_artifacts["layout"].data
    paths = dict(tiny_artifacts)
    paths["profile"] = write_profile(tiny_artifacts["root"] / "targets", "tiny-gateway", TINY_GATEWAY_PROFILE)
    profile = load_profile(tiny_artifacts["root"] / "targets", "tiny-gateway")
    target = layout.target("tiny-gateway")
    for name in profile.runtime_artifacts:
        paths[name] = target.artifact(name)
        tflite.convert(
            name, conversion_inputs(tiny_artifacts), profile, target.converted_files(name), gateway_runtime_env, tiny_artifacts["writer_env"]
        )
    paths["target"], paths["runtime_env"] = target.dir, gateway_runtime_env
    test = runtime_check.TestSplit.read(files.split("test"), layout.token_ids("test"), layout.reference_logits, files.labels)
    runtime_check.runtime_checks(profile, test, target, gateway_runtime_env)
    return paths


@pytest.fixture(scope="session")
def tiny_artifacts(tiny_build, host_runtime_env, writer_env) -> dict[str, Path]:
    """The tiny model compiled for ``TINY_PROFILE``: calibration set, the TF Lite models, XLA SavedModel, runtime and XLA checks."""
    from edge_build.config.profile import load_profile
    from edge_build.stages import calibrate, export, runtime_check, tflite, xla_check

    root, layout = tiny_build["root"], tiny_build["layout"]
    files = layout.data
    calibration_dir = root / "calibration_src"
    calibration_dir.mkdir()
    (calibration_dir / "calibration.toml").write_text('samples = 20\nsplit = "train"\nseed = 0\n', encoding="utf-8")
    paths = dict(tiny_build)
    paths["profile"] = write_profile(root / "targets", "tiny", TINY_PROFILE)
    profile = load_profile(root / "targets", "tiny")
    paths["calibration"] = layout.representative.parent
    calibrate.build_calibration(
        calibration_dir / "calibration.toml",
        calibrate.CalibrationInputs(files.split("train"), layout.token_ids("train"), files.labels, layout.vocab, True, 24),
        {"representative": layout.representative, "summary": layout.calibration_summary},
    )
    inputs = conversion_inputs(tiny_build)
    target = layout.target("tiny")
    for name in profile.runtime_artifacts:
        paths[name] = target.artifact(name)
        tflite.convert(name, inputs, profile, target.converted_files(name), host_runtime_env, writer_env)
    paths["saved_model_xla"] = export.export(
        files.split("val"),
        files.labels,
        layout.vocab,
        layout.weights,
        layout.train_log,
        tiny_build["hparams"],
        REPO / "model_src" / "model.py",
        layout.token_ids("train"),
        target.artifact("saved_model_xla").parent,
        warmup_batch_sizes=profile.xla.warmup_batch_sizes,
    )
    # As SCons does: the target's saved_model_cpu is a copy of the reference export.
    shutil.copytree(tiny_build["saved_model"], target.artifact("saved_model_cpu"))
    paths["target"] = target.dir
    paths["runtime_env"], paths["writer_env"] = host_runtime_env, writer_env
    test = runtime_check.TestSplit.read(files.split("test"), layout.token_ids("test"), layout.reference_logits, files.labels)
    runtime_check.runtime_checks(profile, test, target, host_runtime_env)
    paths["xla_checks"] = target.xla_checks
    xla_check.xla_checks(profile, tiny_build["saved_model"], paths["saved_model_xla"], files.split("test"), paths["xla_checks"])
    return paths


TINY_TASKS_PROFILE = """
description = "tests: the Tasks-ready model, checked in MediaPipe's TextClassifier"
arch = "x86_64"
artifacts = ["tflite_tasks_int8"]

[quantization]
select_tf_ops = false

[[runtimes]]
name = "mediapipe"

[tolerances]
int8_min_top1_agreement = 0.8
int8_max_accuracy_drop = 0.2

[latency]
tasks_int8_p50_ms = 1000.0

[checks]
warmup = 2
runs = 20
"""


@pytest.fixture(scope="session")
def tasks_target(tiny_artifacts, runtime_envs) -> dict:
    """``tflite_tasks_int8`` of the tiny model, converted and run through MediaPipe 1.2.2's TextClassifier by the runtime checks."""
    from edge_build.config.profile import load_profile
    from edge_build.stages import runtime_check, tflite

    layout = tiny_artifacts["layout"]
    write_profile(tiny_artifacts["root"] / "targets", "tiny-tasks", TINY_TASKS_PROFILE)
    profile = load_profile(tiny_artifacts["root"] / "targets", "tiny-tasks")
    runtime_env = provisioned(runtime_envs, profile.source)
    target = layout.target("tiny-tasks")
    record = tflite.convert(
        "tflite_tasks_int8",
        conversion_inputs(tiny_artifacts),
        profile,
        target.converted_files("tflite_tasks_int8"),
        runtime_env,
        tiny_artifacts["writer_env"],
    )
    test = runtime_check.TestSplit.read(layout.data.split("test"), layout.token_ids("test"), layout.reference_logits, layout.data.labels)
    checks = runtime_check.runtime_checks(profile, test, target, runtime_env)
    return {"record": record, "checks": checks, "target": target, "profile": profile, "runtime_env": runtime_env, "layout": layout}


def bundle_inputs(tiny_artifacts) -> tuple:
    """The bundle stage's shared inputs after the profile: reference, (test records, test ids), labels."""
    layout = tiny_artifacts["layout"]
    return tiny_artifacts["saved_model"], (layout.data.split("test"), layout.token_ids("test")), layout.data.labels


@pytest.fixture(scope="session")
def tiny_bundle(tiny_artifacts, tmp_path_factory) -> dict:
    """The tiny target's bundle, after its report and manifest (the bundle and board tests share it)."""
    from edge_build.layout import Target
    from edge_build.runtime_envs import read_environment
    from edge_build.stages import bundle

    reported = reported_copy(tiny_artifacts, tmp_path_factory.mktemp("bundle") / "tiny")
    target, profile = Target(reported["target"], "tiny"), reported["profile"]
    record = bundle.build_bundle(profile, *bundle_inputs(tiny_artifacts), target)
    return {
        "target": target.dir,
        "folder": target.bundle_dir,
        "archive": target.bundle_archive,
        "record": record,
        "profile": profile,
        "runtime_env": read_environment(tiny_artifacts["runtime_env"]),
    }


@pytest.fixture(scope="session")
def ssh_server(tmp_path_factory):
    """A real OpenSSH server on 127.0.0.1 (``tests/sshd.py``), for the whole session; skipped without one, except in CI."""
    import sshd

    if sshd.sshd_binary() is None:
        reason = "no OpenSSH server here (apt-get install openssh-server)"
        if os.environ.get("EDGE_BUILD_REQUIRE_SSHD") == "1":
            pytest.fail(f"EDGE_BUILD_REQUIRE_SSHD=1 but {reason}")
        pytest.skip(reason)
    server = sshd.start(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def board_python(runtime_envs: Path) -> str:
    """The board's Python: a virtual environment of CPython 3.11 with numpy 1.26.4 and tflite-runtime 2.14.0, and nothing else."""
    from edge_build.layout import Layout
    from edge_build.stacks import EnvironmentSpec, RuntimeSpec, Stack
    from edge_build.stages.runtime_env import provision

    spec = EnvironmentSpec("x86_64", Stack("bookworm", "3.11", "1.26.4"), (RuntimeSpec("tflite-runtime", "2.14.0", True),))
    layout = Layout(runtime_envs.parent, runtime_envs)
    env_json = layout.runtime_env(spec.key())
    record = provision(spec, env_json, layout.apt) if not env_json.is_file() else json.loads(env_json.read_text())
    (python,) = record["python"]
    return python
