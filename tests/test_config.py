from pathlib import Path

import pytest

from edge_build import config
from edge_build.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_shipped_profiles_and_hyperparameters_are_valid():
    names = config.profile_names(REPO / "targets")
    assert "host" in names
    for name in names:
        profile = config.load_profile(REPO / "targets", name)
        assert profile.name == name and profile.artifacts
    hparams = config.load_hyperparameters(REPO / "model_src" / "hparams.toml")
    assert hparams.tokenizer.sequence_length > 0 and hparams.training.epochs > 0


def test_the_three_shipped_profiles():
    host, arm64, gpu = (config.load_profile(REPO / "targets", name) for name in ("host", "arm64", "gpu"))
    assert host.arch == "x86_64" and set(host.artifacts) == {"saved_model_cpu", "tflite_fp32", "tflite_int8"}
    assert arm64.arch == "aarch64" and set(arm64.artifacts) == {"tflite_fp32", "tflite_int8"}
    assert set(gpu.artifacts) == {"saved_model_cpu", "saved_model_xla"} and gpu.runtimes == ()
    for profile in (host, arm64):
        assert "tflite-runtime" in [r.name for r in profile.runtimes]
        assert not profile.per_channel_dense and not profile.flex_runtimes


BASE = 'description = "x"\narch = "x86_64"\nartifacts = ["saved_model_cpu"]\n'
TFLITE = 'description = "x"\narch = "x86_64"\nartifacts = ["tflite_int8"]\n[[runtimes]]\nname = "tflite-runtime"\n'


@pytest.mark.parametrize(
    "text, message",
    [
        (BASE + 'colour = "red"\n', "unknown key 'colour' (allowed: description, arch, artifacts, quantization, runtimes, tolerances, latency, device, xla)"),
        (BASE.replace("x86_64", "riscv"), "key 'arch' is 'riscv' (allowed: x86_64, aarch64)"),
        (BASE.replace("saved_model_cpu", "onnx"), "unknown artifact 'onnx' (allowed: saved_model_cpu, saved_model_xla, tflite_fp32, tflite_int8)"),
        (BASE.replace('["saved_model_cpu"]', "[]"), "key 'artifacts': must name at least one"),
        (BASE.replace('["saved_model_cpu"]', '"saved_model_cpu"'), "key 'artifacts' must be a list of str"),
        (BASE.replace('"x"', "3"), "key 'description' must be a string, not int 3"),
        ('arch = "x86_64"\nartifacts = ["saved_model_cpu"]\n', "missing key 'description'"),
        ('description = "x\narch = 1\n', "not valid TOML"),
        ('name = "other"\n' + BASE, "key 'name' is not allowed here"),
        (TFLITE.replace("tflite-runtime", "onnxruntime"), "key 'runtimes.name' is 'onnxruntime' (allowed: tflite-runtime, ai-edge-litert)"),
        (TFLITE + "flex_delegate = true\n", "key 'runtimes.flex_delegate': tflite-runtime's wheels have no Flex delegate (allowed: false)"),
        (TFLITE + '[[runtimes]]\nname = "tflite-runtime"\n', "key 'runtimes': lists a runtime twice"),
        (TFLITE.split("[[runtimes]]")[0], "key 'runtimes': tflite_int8 must be checked on at least one runtime"),
        (BASE + '[[runtimes]]\nname = "tflite-runtime"\n', "key 'runtimes': the profile lists no TF Lite artifact"),
        (BASE.replace('"saved_model_cpu"', '"saved_model_xla"'), "saved_model_xla is checked against saved_model_cpu, which must be listed too"),
        (TFLITE + '[quantization]\noutput_type = "uint8"\n', "key 'quantization.output_type' is 'uint8' (allowed: float32, int8)"),
        (TFLITE + "[tolerances]\nint8_min_top1_agreement = 1.5\n", "key 'tolerances.int8_min_top1_agreement': must be between 0 and 1"),
        (TFLITE + "[latency]\nint8_p50_ms = 0\n", "key 'latency.int8_p50_ms': must be greater than 0"),
        (TFLITE + "[device]\nruns = 0\n", "key 'device.runs': must be greater than 0"),
        (TFLITE + "[device]\nwarmup = -1\n", "key 'device.warmup': must be 0 or more"),
        (BASE + "[xla]\nwarmup_batch_sizes = [1, 1]\n", "key 'xla.warmup_batch_sizes': must list distinct batch sizes of 1 or more, not [1, 1]"),
        (BASE + "[xla]\nwarmup_batch_sizes = []\n", "key 'xla.warmup_batch_sizes': must list distinct batch sizes of 1 or more, not []"),
        (BASE + "[xla]\nsteady_runs = 0\n", "key 'xla.steady_runs': must be greater than 0"),
        (BASE + "[tolerances]\nxla_gpu_max_abs_logit = 0\n", "key 'tolerances.xla_gpu_max_abs_logit': must be greater than 0"),
    ],
)
def test_bad_profiles_fail_with_file_key_and_choices(tmp_path: Path, text: str, message: str):
    write(tmp_path / "board.toml", text)
    with pytest.raises(ConfigError) as caught:
        config.load_profile(tmp_path, "board")
    assert str(caught.value).startswith(f"{tmp_path / 'board.toml'}: ")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "text, message",
    [
        ('split = "test"\n', "key 'split' is 'test' (allowed: train, val)"),
        ("samples = -1\n", "key 'samples': must be 0 or more"),
        ('field_samples_mode = "only"\n', "key 'field_samples_mode': 'only' needs a 'field_samples' file"),
        ('samples = 0\n', "the representative set would be empty"),
        ('sample = 10\n', "unknown key 'sample' (allowed: samples, split, seed, field_samples, field_samples_mode)"),
    ],
)
def test_bad_calibration_settings_are_named(tmp_path: Path, text: str, message: str):
    path = write(tmp_path / "calibration.toml", text)
    with pytest.raises(ConfigError) as caught:
        config.load_calibration(path)
    assert str(caught.value).startswith(f"{path}: ") and message in str(caught.value)


def test_the_shipped_calibration_settings_draw_from_the_training_split():
    settings = config.load_calibration(REPO / "calibration" / "calibration.toml")
    assert settings.split == "train" and settings.samples >= 100


def test_an_unknown_target_lists_the_profiles(tmp_path: Path):
    write(tmp_path / "a.toml", "")
    write(tmp_path / "b.toml", "")
    with pytest.raises(ConfigError, match=r"unknown target 'c'.*\(available: a, b\)"):
        config.load_profile(tmp_path, "c")


@pytest.mark.parametrize(
    "text, message",
    [
        ("[training]\nepoch = 3\n", "unknown key 'training.epoch' (allowed: epochs, batch_size"),
        ("[training]\nepochs = 0\n", "key 'training.epochs': must be greater than 0, not 0"),
        ("[training]\nepochs = true\n", "key 'training.epochs' must be an integer, not bool True"),
        ("[training]\nlearning_rate = \"fast\"\n", "key 'training.learning_rate' must be a number"),
        ("[training]\nstrategy = \"tpu\"\n", "key 'training.strategy' is 'tpu' (allowed: default, mirrored, multi_worker_mirrored)"),
        ("[tokenizer]\nlower_case = 1\n", "key 'tokenizer.lower_case' must be true or false"),
        ("[tokenizer]\nvocab_size = 8\n", "key 'tokenizer.vocab_size': must be at least 16"),
        ("[model]\nlayers = [1, 2]\n", "key 'model.layers': must be a number, a boolean or a string"),
        ("training = 3\n", "key 'training' must be a table"),
        ("[training]\npatience = -1\n", "key 'training.patience': must be 0 (never stop early) or more, not -1"),
        ("[data]\nlabel_conflicts = \"keep\"\n", "key 'data.label_conflicts' is 'keep' (allowed: drop, train)"),
        ("[data]\nnear_duplicates = \"merge\"\n", "key 'data.near_duplicates' is 'merge' (allowed: report, group)"),
        ("[optimizer]\n", "unknown key 'optimizer' (allowed: data, tokenizer, model, training)"),
    ],
)
def test_bad_hyperparameters_fail_with_file_and_key(tmp_path: Path, text: str, message: str):
    path = write(tmp_path / "hparams.toml", text)
    with pytest.raises(ConfigError) as caught:
        config.load_hyperparameters(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert message in str(caught.value)


def test_integers_are_accepted_where_numbers_are_expected(tmp_path: Path):
    hparams = config.load_hyperparameters(write(tmp_path / "h.toml", "[training]\nlearning_rate = 1\n"))
    assert hparams.training.learning_rate == 1.0 and isinstance(hparams.training.learning_rate, float)


def test_command_line_overrides_are_validated_too():
    hparams = config.Hyperparameters()
    assert hparams.with_training(epochs=3, seed=None).training.epochs == 3
    with pytest.raises(ConfigError, match="training override: key 'epochs': must be greater than 0"):
        hparams.with_training(epochs=0)


def test_a_missing_file_is_named(tmp_path: Path):
    with pytest.raises(ConfigError, match="nope.toml: file not found"):
        config.load_hyperparameters(tmp_path / "nope.toml")
