import dataclasses
from pathlib import Path

import pytest
from conftest import REPO, write_profile

from edge_build.config.calibration import load_calibration
from edge_build.config.hparams import Hyperparameters, load_hyperparameters
from edge_build.config.profile import load_profile, profile_names, read_profile
from edge_build.errors import ConfigError


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_shipped_profiles_and_hyperparameters_are_valid():
    names = profile_names(REPO / "targets")
    assert "host" in names
    for name in names:
        profile = load_profile(REPO / "targets", name)
        assert profile.name == name and profile.artifacts
    hparams = load_hyperparameters(REPO / "model_src" / "hparams.toml")
    assert hparams.tokenizer.sequence_length == "auto" and hparams.training.epochs > 0


def test_the_shipped_profiles():
    assert profile_names(REPO / "targets") == ["arm64", "arm64-trixie", "gateway", "gpu", "host"]
    host, arm64, trixie, gpu = (load_profile(REPO / "targets", name) for name in ("host", "arm64", "arm64-trixie", "gpu"))
    assert host.arch == "x86_64" and set(host.artifacts) == {"saved_model_cpu", "tflite_fp32", "tflite_fp16", "tflite_int8", "tflite_tasks_int8"}
    # Float logit errors are scaled by the reference's logits (board.parity): no absolute bound is set.
    assert host.tolerances.fp16_max_abs_logit is None and host.tolerances.fp16_logit_rtol == 2**-10 and host.latency.fp16_p50_ms == 1.0
    assert arm64.arch == "aarch64" and set(arm64.artifacts) == {"tflite_fp32", "tflite_int8", "tflite_tasks_int8"}
    assert trixie.arch == "aarch64" and set(trixie.artifacts) == {"tflite_fp32", "tflite_int8"}
    assert set(gpu.artifacts) == {"saved_model_cpu", "saved_model_xla"} and gpu.runtimes == ()
    for profile, mediapipe_required in ((host, True), (arm64, False)):
        assert [(r.name, r.required) for r in profile.runtimes] == [
            ("tflite-runtime", True),
            ("ai-edge-litert", False),
            ("mediapipe", mediapipe_required),
        ]
        assert not profile.per_channel_dense
        # MediaPipe runs only the Tasks-ready model, and only MediaPipe runs it.
        assert [r.name for r in profile.runtimes_for("tflite_tasks_int8")] == ["mediapipe"]
        assert "mediapipe" not in [r.name for r in profile.runtimes_for("tflite_int8")]
    # On trixie tflite-runtime cannot install: ai-edge-litert gates, and the INT8 model may use per-channel dense layers.
    assert [(r.name, r.required) for r in trixie.runtimes] == [("ai-edge-litert", True), ("tflite-runtime", False)]
    assert trixie.per_channel_dense
    # The gateway serves raw text: the Flex model runs only on tensorflow-cpu, the ids model on both runtimes.
    gateway = load_profile(REPO / "targets", "gateway")
    assert set(gateway.artifacts) == {"tflite_int8", "tflite_text_int8"} and gateway.quantization.select_tf_ops
    assert [r.name for r in gateway.runtimes_for("tflite_text_int8")] == ["tensorflow-cpu"]
    assert [r.name for r in gateway.runtimes_for("tflite_int8")] == ["tflite-runtime", "tensorflow-cpu"]
    assert not gateway.per_channel_dense


BASE = 'description = "x"\narch = "x86_64"\nartifacts = ["saved_model_cpu"]\n'
TFLITE = 'description = "x"\narch = "x86_64"\nartifacts = ["tflite_int8"]\n[[runtimes]]\nname = "tflite-runtime"\n'


@pytest.mark.parametrize(
    "text, message",
    [
        (
            BASE + 'colour = "red"\n',
            "unknown key 'colour' (allowed: description, arch, artifacts, quantization, stack, runtimes, tolerances, latency, checks, deploy, xla)",
        ),
        (BASE.replace("x86_64", "riscv"), "key 'arch' is 'riscv' (allowed: x86_64, aarch64)"),
        (
            BASE.replace("saved_model_cpu", "onnx"),
            "unknown artifact 'onnx' (allowed: saved_model_cpu, saved_model_xla, tflite_fp32, tflite_fp16, tflite_int8, tflite_text_int8, tflite_tasks_int8, tflite_scores_fp32)",
        ),
        (BASE.replace('["saved_model_cpu"]', "[]"), "key 'artifacts': must name at least one"),
        (BASE.replace('["saved_model_cpu"]', '"saved_model_cpu"'), "key 'artifacts' must be a list of str"),
        (BASE.replace('"x"', "3"), "key 'description' must be a string, not int 3"),
        ('arch = "x86_64"\nartifacts = ["saved_model_cpu"]\n', "missing key 'description'"),
        ('description = "x\narch = 1\n', "not valid TOML"),
        ('name = "other"\n' + BASE, "key 'name' is not allowed here"),
        (
            TFLITE.replace("tflite-runtime", "onnxruntime"),
            "key 'runtimes.name': unknown runtime 'onnxruntime' (allowed: tflite-runtime, ai-edge-litert, tensorflow-cpu, mediapipe)",
        ),
        (TFLITE + "flex_delegate = true\n", "unknown key 'runtimes.flex_delegate' (allowed: name, version, required)"),
        (TFLITE + '[[runtimes]]\nname = "tflite-runtime"\n', "key 'runtimes': lists a runtime twice"),
        (TFLITE.split("[[runtimes]]")[0], "key 'runtimes': tflite_int8 must be checked on at least one runtime"),
        (BASE + '[[runtimes]]\nname = "tflite-runtime"\n', "key 'runtimes': the profile lists no TF Lite artifact"),
        (BASE.replace('"saved_model_cpu"', '"saved_model_xla"'), "saved_model_xla is checked against saved_model_cpu, which must be listed too"),
        (TFLITE + '[quantization]\noutput_type = "uint8"\n', "key 'quantization.output_type' is 'uint8' (allowed: float32, int8)"),
        (
            TFLITE + '[quantization]\nrecipes = ["int8", "int4"]\n',
            "key 'quantization.recipes': unknown recipe 'int4' (allowed: int8, int8_per_channel, int8_float_worst, int16x8, dynamic_range)",
        ),
        (TFLITE + '[quantization]\nrecipes = ["int8", "int8"]\n', "key 'quantization.recipes': lists a recipe twice"),
        (TFLITE + "[quantization]\nrecipes = []\n", "key 'quantization.recipes': must list at least one recipe"),
        (TFLITE + '[quantization]\nrecipes = "int8"\n', "key 'quantization.recipes' must be a list of str"),
        (
            TFLITE.replace("tflite_int8", "tflite_fp32") + '[quantization]\nrecipes = ["int8"]\n',
            "key 'quantization.recipes': read only by tflite_int8, tflite_tasks_int8, which artifacts does not list",
        ),
        (TFLITE + "[tolerances]\nint8_min_top1_agreement = 1.5\n", "key 'tolerances.int8_min_top1_agreement': must be between 0 and 1"),
        (TFLITE + "[latency]\nint8_p50_ms = 0\n", "key 'latency.int8_p50_ms': must be greater than 0"),
        (TFLITE + "[checks]\nruns = 0\n", "key 'checks.runs': must be greater than 0"),
        (TFLITE + "[checks]\nwarmup = -1\n", "key 'checks.warmup': must be 0 or more"),
        # The runtime checks' table was [device] before it was [checks]: the old name is refused, not ignored.
        (
            TFLITE + "[device]\nruns = 5\n",
            "unknown key 'device' (allowed: description, arch, artifacts, quantization, stack, runtimes, tolerances, latency, checks, deploy, xla)",
        ),
        ('source = "elsewhere.toml"\n' + BASE, "key 'source' is not allowed here"),
        (TFLITE + "[tolerances]\nfp16_max_abs_logit = 0\n", "key 'tolerances.fp16_max_abs_logit': must be greater than 0"),
        (TFLITE + "[latency]\nfp16_p50_ms = -1\n", "key 'latency.fp16_p50_ms': must be greater than 0"),
        (BASE + "[xla]\nwarmup_batch_sizes = [1, 1]\n", "key 'xla.warmup_batch_sizes': must list distinct batch sizes of 1 or more, not [1, 1]"),
        (BASE + "[xla]\nwarmup_batch_sizes = []\n", "key 'xla.warmup_batch_sizes': must list distinct batch sizes of 1 or more, not []"),
        (BASE + "[xla]\nsteady_runs = 0\n", "key 'xla.steady_runs': must be greater than 0"),
        (BASE + "[tolerances]\nxla_gpu_max_abs_logit = 0\n", "key 'tolerances.xla_gpu_max_abs_logit': must be greater than 0"),
        # Settings no listed artifact reads would be ignored without a word.
        (
            BASE + '[quantization]\noutput_type = "int8"\n',
            "key 'quantization.output_type': read only by tflite_int8, which artifacts does not list (allowed: remove the key, or list tflite_int8)",
        ),
        (TFLITE + "[xla]\nsteady_runs = 5\n", "key 'xla.steady_runs': read only by saved_model_xla, which"),
        (BASE + "[tolerances]\nfp16_max_abs_logit = 1e-3\n", "key 'tolerances.fp16_max_abs_logit': read only by tflite_fp16, which"),
        (TFLITE + "[tolerances]\nfp16_logit_rtol = 0\n", "key 'tolerances.fp16_logit_rtol': must be greater than 0"),
        (TFLITE + "[tolerances]\nlogit_atol = 1e-6\n", "key 'tolerances.logit_atol': read only by saved_model_xla, tflite_fp32, tflite_fp16, which"),
        (
            TFLITE + '[checks]\ngolden_examples = "all"\n',
            "key 'checks.golden_examples': must be \"auto\" or a whole number greater than 0, not 'all'",
        ),
        (TFLITE + "[checks]\ngolden_examples = 0\n", "key 'checks.golden_examples': must be \"auto\" or a whole number greater than 0, not 0"),
        (TFLITE + "[latency]\nfp32_p50_ms = 2.0\n", "key 'latency.fp32_p50_ms': read only by tflite_fp32, tflite_scores_fp32, which"),
        (
            TFLITE + "[tolerances]\nint8_min_top1_agreement = 0.9\nxla_max_abs_logit = 1e-4\n",
            "key 'tolerances.xla_max_abs_logit': read only by saved_model_xla, which",
        ),
        (
            BASE + '[stack]\nrelease = "bookworm"\n',
            "key 'stack.release': read only by tflite_fp32, tflite_fp16, tflite_int8, tflite_text_int8, tflite_tasks_int8, tflite_scores_fp32, "
            "which artifacts does not list (allowed: remove the key, or list one of them)",
        ),
        (
            BASE + "[checks]\nruns = 5\n",
            "key 'checks.runs': read only by tflite_fp32, tflite_fp16, tflite_int8, tflite_text_int8, tflite_tasks_int8, tflite_scores_fp32, which",
        ),
    ],
)
def test_bad_profiles_fail_with_file_key_and_choices(tmp_path: Path, text: str, message: str):
    write(tmp_path / "board.toml", text)
    with pytest.raises(ConfigError) as caught:
        load_profile(tmp_path, "board")
    assert str(caught.value).startswith(f"{tmp_path / 'board.toml'}: ")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "text, message",
    [
        ('split = "test"\n', "key 'split' is 'test' (allowed: train, val)"),
        ("samples = -1\n", "key 'samples': must be 0 or more"),
        ('field_samples_mode = "only"\n', "key 'field_samples_mode': 'only' needs a 'field_samples' file"),
        ("samples = 0\n", "the representative set would be empty"),
        ('samples = 5\nfield_samples = "f.txt"\nfield_samples_mode = "only"\n', "key 'samples': must be 0 when field_samples_mode is 'only'"),
        ("sample = 10\n", "unknown key 'sample' (allowed: samples, split, seed, field_samples, field_samples_mode)"),
    ],
)
def test_bad_calibration_settings_are_named(tmp_path: Path, text: str, message: str):
    path = write(tmp_path / "calibration.toml", text)
    with pytest.raises(ConfigError) as caught:
        load_calibration(path)
    assert str(caught.value).startswith(f"{path}: ") and message in str(caught.value)


def test_the_shipped_calibration_settings_draw_from_the_training_split():
    settings = load_calibration(REPO / "calibration" / "calibration.toml")
    assert settings.split == "train" and settings.samples >= 100


def test_a_profile_knows_its_file_and_the_fp16_limits(tmp_path: Path):
    path = write(
        tmp_path / "board.toml",
        TFLITE.replace('"tflite_int8"', '"tflite_fp16", "tflite_int8"') + "[tolerances]\nfp16_max_abs_logit = 5e-3\n[latency]\nfp16_p50_ms = 2.5\n",
    )
    loaded = load_profile(tmp_path, "board")
    assert loaded.source == path and loaded.name == "board"
    assert loaded.runtime_artifacts == ("tflite_fp16", "tflite_int8")
    assert loaded.latency_budget_ms("tflite_fp16") == 2.5 and loaded.latency_budget_ms("tflite_int8") == 1.0
    limits = loaded.tolerances.limits()
    # fp16's absolute bound overrides its scaled one; the others scale with the reference's logits.
    assert limits == {
        "xla_max_abs_logit": {"rtol": 2**-17, "atol": 1e-6},
        "xla_gpu_max_abs_logit": {"rtol": 2**-9, "atol": 1e-6},
        "fp32_max_abs_logit": {"rtol": 2**-17, "atol": 1e-6},
        "fp16_max_abs_logit": 5e-3,
        "int8_min_top1_agreement": 0.99,
        "int8_max_accuracy_drop": 0.01,
    }
    # On a GPU, xla_max_abs_logit holds the GPU's bound.
    assert loaded.tolerances.limits(on_gpu=True)["xla_max_abs_logit"] == {"rtol": 2**-9, "atol": 1e-6}


def test_an_unknown_target_lists_the_profiles(tmp_path: Path):
    write(tmp_path / "a.toml", "")
    write(tmp_path / "b.toml", "")
    with pytest.raises(ConfigError, match=r"unknown target 'c'.*\(available: a, b\)"):
        load_profile(tmp_path, "c")


@pytest.mark.parametrize(
    "text, message",
    [
        ("[training]\nepoch = 3\n", "unknown key 'training.epoch' (allowed: epochs, batch_size"),
        ("[training]\nepochs = 0\n", "key 'training.epochs': must be greater than 0, not 0"),
        ("[training]\nepochs = true\n", "key 'training.epochs' must be an integer, not bool True"),
        ('[training]\nlearning_rate = "fast"\n', "key 'training.learning_rate' must be a number"),
        ('[training]\nstrategy = "tpu"\n', "key 'training.strategy' is 'tpu' (allowed: default, mirrored, multi_worker_mirrored)"),
        ("[tokenizer]\nlower_case = 1\n", "key 'tokenizer.lower_case' must be true or false"),
        ("[tokenizer]\nvocab_size = 8\n", "key 'tokenizer.vocab_size': must be at least 16"),
        ("[model]\nlayers = [1, 2]\n", "key 'model.layers': must be a number, a boolean or a string"),
        ("training = 3\n", "key 'training' must be a table"),
        ("[training]\npatience = -1\n", "key 'training.patience': must be 0 (never stop early) or more, not -1"),
        ('[data]\nlabel_conflicts = "keep"\n', "key 'data.label_conflicts' is 'keep' (allowed: drop, train)"),
        ('[data]\nnear_duplicates = "merge"\n', "key 'data.near_duplicates' is 'merge' (allowed: report, group)"),
        ("[optimizer]\n", "unknown key 'optimizer' (allowed: data, tokenizer, model, training)"),
    ],
)
def test_bad_hyperparameters_fail_with_file_and_key(tmp_path: Path, text: str, message: str):
    path = write(tmp_path / "hparams.toml", text)
    with pytest.raises(ConfigError) as caught:
        load_hyperparameters(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert message in str(caught.value)


def test_integers_are_accepted_where_numbers_are_expected(tmp_path: Path):
    hparams = load_hyperparameters(write(tmp_path / "h.toml", "[training]\nlearning_rate = 1\n"))
    assert hparams.training.learning_rate == 1.0 and isinstance(hparams.training.learning_rate, float)


def test_command_line_overrides_are_validated_too():
    hparams = Hyperparameters()
    assert hparams.with_training(epochs=3, seed=None).training.epochs == 3
    with pytest.raises(ConfigError, match="training override: key 'epochs': must be greater than 0"):
        hparams.with_training(epochs=0)


def test_a_missing_file_is_named(tmp_path: Path):
    with pytest.raises(ConfigError, match="nope.toml: file not found"):
        load_hyperparameters(tmp_path / "nope.toml")


def test_a_deploy_budget_is_a_positive_number_and_needs_a_model_on_runtimes(tmp_path: Path):
    host = (REPO / "targets" / "host.toml").read_text(encoding="utf-8")
    assert read_profile(write_profile(tmp_path, "budget", host + "\n[deploy]\nmax_model_mb = 3\n")).deploy.max_bytes == 3_000_000
    with pytest.raises(ConfigError, match=r"budget\.toml: key 'deploy\.max_model_mb': must be greater than 0, not 0\.0"):
        read_profile(write_profile(tmp_path, "budget", host + "\n[deploy]\nmax_model_mb = 0\n"))
    gpu = (REPO / "targets" / "gpu.toml").read_text(encoding="utf-8")
    with pytest.raises(ConfigError, match=r"key 'deploy\.max_model_mb': read only by tflite_fp32, .*which artifacts does not list"):
        read_profile(write_profile(tmp_path, "gpu-budget", gpu + "\n[deploy]\nmax_model_mb = 3\n"))


def test_the_quantization_ladder_is_every_recipe_unless_a_profile_narrows_or_reorders_it(tmp_path: Path):
    from edge_build.recipes import LADDER, RECIPES

    assert load_profile(REPO / "targets", "host").quantization.recipes == LADDER == tuple(RECIPES)
    write(tmp_path / "board.toml", TFLITE + '[quantization]\nrecipes = ["dynamic_range", "int8"]\n')
    assert load_profile(tmp_path, "board").quantization.recipes == ("dynamic_range", "int8")


def test_a_conversion_depends_on_the_keys_its_artifact_reads_not_on_whole_tables(tmp_path: Path):
    base = load_profile(REPO / "targets", "host")
    changed = {
        "recipes": dataclasses.replace(base, quantization=dataclasses.replace(base.quantization, recipes=("dynamic_range",))),
        "int8 tolerance": dataclasses.replace(base, tolerances=dataclasses.replace(base.tolerances, int8_min_top1_agreement=0.95)),
        "fp32 tolerance": dataclasses.replace(base, tolerances=dataclasses.replace(base.tolerances, fp32_logit_rtol=1e-3)),
        "runtimes": dataclasses.replace(base, runtimes=(base.runtimes[0], base.runtimes[2])),
    }

    def reruns(artifact: str) -> list[str]:
        sections = ("quantization", "stack", "runtimes", "tolerances")
        before = base.sections(*sections, artifact=artifact)
        return [what for what, profile in changed.items() if profile.sections(*sections, artifact=artifact) != before]

    assert reruns("tflite_int8") == ["recipes", "int8 tolerance", "runtimes"]
    assert reruns("tflite_fp32") == ["fp32 tolerance", "runtimes"]
    assert reruns("tflite_fp16") == ["runtimes"]
    assert reruns("tflite_tasks_int8") == ["recipes", "int8 tolerance", "runtimes"]
    # Without an artifact, a section is whole.
    assert base.sections("tolerances") != changed["int8 tolerance"].sections("tolerances")
