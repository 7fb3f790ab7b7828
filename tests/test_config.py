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


def test_host_profile_builds_the_cpu_saved_model():
    profile = config.load_profile(REPO / "targets", "host")
    assert profile.arch == "x86_64"
    assert "saved_model_cpu" in profile.artifacts


@pytest.mark.parametrize(
    "text, message",
    [
        ('description = "x"\narch = "x86_64"\nartifacts = ["saved_model_cpu"]\ncolour = "red"\n', "unknown key 'colour' (allowed: description, arch, artifacts)"),
        ('description = "x"\narch = "riscv"\nartifacts = ["saved_model_cpu"]\n', "key 'arch' is 'riscv' (allowed: x86_64, aarch64)"),
        ('description = "x"\narch = "x86_64"\nartifacts = ["onnx"]\n', "unknown artifact 'onnx' (allowed: saved_model_cpu)"),
        ('description = "x"\narch = "x86_64"\nartifacts = []\n', "key 'artifacts': must name at least one"),
        ('description = "x"\narch = "x86_64"\nartifacts = "saved_model_cpu"\n', "key 'artifacts' must be a list of str"),
        ('description = 3\narch = "x86_64"\nartifacts = ["saved_model_cpu"]\n', "key 'description' must be a string, not int 3"),
        ('arch = "x86_64"\nartifacts = ["saved_model_cpu"]\n', "missing key 'description'"),
        ('description = "x\narch = 1\n', "not valid TOML"),
        ('name = "other"\ndescription = "x"\narch = "x86_64"\nartifacts = ["saved_model_cpu"]\n', "key 'name' is not allowed"),
    ],
)
def test_bad_profiles_fail_with_file_key_and_choices(tmp_path: Path, text: str, message: str):
    write(tmp_path / "board.toml", text)
    with pytest.raises(ConfigError) as caught:
        config.load_profile(tmp_path, "board")
    assert str(tmp_path / "board.toml") in str(caught.value)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


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
        ("[tokenizer]\nlower_case = 1\n", "key 'tokenizer.lower_case' must be true or false"),
        ("[tokenizer]\nvocab_size = 8\n", "key 'tokenizer.vocab_size': must be at least 16"),
        ("[model]\nlayers = [1, 2]\n", "key 'model.layers': must be a number, a boolean or a string"),
        ("training = 3\n", "key 'training' must be a table"),
        ("[optimizer]\n", "unknown key 'optimizer' (allowed: tokenizer, model, training)"),
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
