import json
import re
import shutil
from pathlib import Path

import h5py
import pytest
from conftest import REPO, TINY_PROFILE, write_profile

from edge_build import saved_model
from edge_build.config.profile import load_profile
from edge_build.errors import StageError
from edge_build.stages import export, xla_check


def test_the_xla_checks_record_parity_compilation_and_warm_up(tiny_artifacts):
    record = json.loads(tiny_artifacts["xla_checks"].read_text())
    assert record["device"]["backend"] == "cpu" and record["device"]["device"] == "/CPU:0"
    parity = record["parity"]
    assert parity["examples"] == 6 and parity["tolerance"] == {"key": "xla_max_abs_logit", "bound": 1e-4}
    for signature in ("classify_ids", "serving_default"):
        assert parity["signatures"][signature]["max_abs_logit_error"] <= 1e-4 and parity["signatures"][signature]["top1_agreement"] == 1.0
        calls = record["compilation"][signature]
        assert [c["batch"] for c in calls] == [1, 8]
        assert all(c["modules_compiled"] >= 1 and c["recompiled_in_steady_calls"] == 0 and c["steady_runs"] == 3 for c in calls)
        assert all(c["first_call_ms"] > c["steady_p50_ms"] > 0 for c in calls)
    assert parity["signatures"]["serving_default"]["labels_differing"] == 0
    assert all(call["modules_compiled"] == 0 for call in record["warmup"]["real_calls_after"])
    assert record["control"] == {"artifact": "saved_model_cpu", "signature": "serving_default", "batch": 1, "modules_compiled": 0}


def perturbed_weights(weights: Path, out: Path, delta: float) -> Path:
    """The trained weights with ``delta`` added to the output layer's bias: every logit moves by ``delta``."""
    shutil.copyfile(weights, out)
    with h5py.File(out, "r+") as handle:
        biases = []
        handle.visititems(lambda name, item: biases.append(name) if isinstance(item, h5py.Dataset) and item.ndim == 1 and "dense" in name else None)
        (bias,) = biases
        handle[bias][...] = handle[bias][...] + delta
    return out


def test_a_perturbed_xla_export_fails_the_gate_with_one_table(tiny_artifacts, tmp_path: Path, capsys):
    profile = load_profile(tiny_artifacts["profile"].parent, "tiny")
    weights = perturbed_weights(tiny_artifacts["weights"], tmp_path / "model.weights.h5", 1e-3)
    perturbed = export.export(
        tiny_artifacts["layout"].data.split("val"),
        tiny_artifacts["labels"],
        tiny_artifacts["vocab"],
        weights,
        tiny_artifacts["train_log"],
        tiny_artifacts["hparams"],
        REPO / "model_src" / "model.py",
        tiny_artifacts["layout"].token_ids("train"),
        tmp_path / "saved_model_xla",
        warmup_batch_sizes=(1, 8),
    )
    capsys.readouterr()
    out = tmp_path / "xla_checks.json"
    # The message names the profile's own file.
    with pytest.raises(StageError, match=rf"saved_model_xla/1: XLA checks failed for {re.escape(str(tiny_artifacts['profile']))} \(table above\)"):
        xla_check.xla_checks(profile, tiny_artifacts["saved_model"], perturbed, tiny_artifacts["test"], out)
    table = capsys.readouterr().err.splitlines()
    assert table[0].split() == ["artifact", "checked", "on", "what", "broke"]
    rows = [line.split(None, 3) for line in table[1:]]
    assert [(r[0], r[1]) for r in rows] == [("saved_model_xla", "serving_default"), ("saved_model_xla", "classify_ids")]
    assert all(r[3].startswith("/CPU:0") and "max |Δlogit| 0.001" in r[3] and "(allowed <= 0.0001, xla_max_abs_logit)" in r[3] for r in rows)
    assert not out.exists()


def test_signatures_that_bypass_xla_fail_the_gate(tiny_artifacts, tmp_path: Path, capsys):
    # The CPU graph under the XLA flavour's name, warm-up file and all: what the export used to ship.
    profile = load_profile(tiny_artifacts["profile"].parent, "tiny")
    bypass = tmp_path / "saved_model_xla" / "1"
    shutil.copytree(tiny_artifacts["saved_model"], bypass)
    shutil.copyfile(tiny_artifacts["saved_model_xla"] / saved_model.WARMUP_FILE, bypass / saved_model.WARMUP_FILE)
    with pytest.raises(StageError, match="XLA checks failed"):
        xla_check.xla_checks(profile, tiny_artifacts["saved_model"], bypass, tiny_artifacts["test"], tmp_path / "xla_checks.json")
    problems = [line.split(None, 4)[1:] for line in capsys.readouterr().err.splitlines()[1:]]
    assert [p[:3] for p in problems] == [[signature, "batch", str(size)] for signature in ("serving_default", "classify_ids") for size in (1, 8)]
    assert all(p[3] == "the first call compiled no XLA module: the signature does not reach the jit-compiled function" for p in problems)


def test_a_warm_up_file_that_misses_a_profile_batch_size_fails_the_gate(tiny_artifacts, tmp_path: Path, capsys):
    write_profile(tmp_path / "targets", "tiny", TINY_PROFILE.replace("warmup_batch_sizes = [1, 8]", "warmup_batch_sizes = [1, 8, 4]"))
    profile = load_profile(tmp_path / "targets", "tiny")
    with pytest.raises(StageError, match="XLA checks failed"):
        xla_check.xla_checks(
            profile, tiny_artifacts["saved_model"], tiny_artifacts["saved_model_xla"], tiny_artifacts["test"], tmp_path / "xla_checks.json"
        )
    err = capsys.readouterr().err
    assert (
        "assets.extra/tf_serving_warmup_requests" in err
        and "no warm-up request for classify_ids at batch 4 (the profile's warmup_batch_sizes)" in err
    )


def test_the_stage_reads_the_test_split_file_not_a_data_directory(tmp_path: Path, capsys):
    common = ["--profile", "tiny.toml", "--reference", "ref/1", "--model", "xla/1", "--checks", "xla_checks.json"]
    args = xla_check.build_parser().parse_args([*common, "--test", "data/test.tfrecord"])
    assert args.test == Path("data/test.tfrecord")
    with pytest.raises(SystemExit):
        xla_check.build_parser().parse_args([*common, "--test", "data/test.tfrecord", "--data-dir", "data"])
    assert "unrecognized arguments: --data-dir data" in capsys.readouterr().err
