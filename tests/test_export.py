import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO

from edge_build import saved_model, xla
from edge_build.errors import StageError
from edge_build.provenance import sha256_file
from edge_build.stages import export


def test_the_export_writes_exactly_the_declared_files(tiny_build):
    path = tiny_build["saved_model"]
    assert path.name == "1" and path.parent.name == "saved_model_cpu"
    written = sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())
    assert written == sorted(saved_model.FILES) == sorted(saved_model.files(jit_compile=False))
    assert sorted(tiny_build["layout"].reference_files) == sorted(p for p in path.rglob("*") if p.is_file())
    assert [p.name for p in path.parent.iterdir()] == ["1"]  # no temporary left behind


def test_the_vocabulary_is_an_asset_and_the_metadata_describes_the_model(tiny_build):
    path = tiny_build["saved_model"]
    assert (path / "assets" / "vocab.txt").read_bytes() == tiny_build["vocab"].read_bytes()
    meta = json.loads((path / "assets.extra" / "metadata.json").read_text())
    assert meta["labels"] == ["astronomy", "cooking", "football"]
    assert meta["sequence_length"] == 24
    assert meta["vocab_sha256"] == sha256_file(tiny_build["vocab"])
    assert meta["weights_sha256"] == sha256_file(tiny_build["weights"])
    assert meta["versions"]["tensorflow"].startswith("2.21") and meta["versions"]["tensorflow-text"].startswith("2.21")
    assert meta["build_timestamp"] and "git_revision" in meta


def test_a_fresh_python_loads_it_and_classifies_raw_text(tiny_build):
    # As a user would: a new interpreter, tensorflow_text imported, no edge_build code.
    script = (
        "import sys, tensorflow as tf, tensorflow_text\n"
        "m = tf.saved_model.load(sys.argv[1])\n"
        "print(sorted(m.signatures))\n"
        "out = m.signatures['serving_default'](text=tf.constant(['The telescope saw a comet near the planet orbit']))\n"
        "print(out['label'].numpy()[0].decode(), out['probabilities'].numpy().shape)\n"
        "ids = m.signatures['classify_ids'](input_ids=tf.zeros([2, 24], tf.int32))\n"
        "print(ids['logits'].shape)\n"
    )
    result = subprocess.run([sys.executable, "-c", script, str(tiny_build["saved_model"])], capture_output=True, text=True, check=True)
    assert result.stdout.splitlines() == ["['classify_ids', 'serving_default']", "astronomy (1, 3)", "(2, 3)"]


def test_saved_model_cli_lists_both_signatures_and_their_inputs(tiny_build):
    cli = Path(sys.executable).with_name("saved_model_cli")
    result = subprocess.run([str(cli), "show", "--all", "--dir", str(tiny_build["saved_model"])], capture_output=True, text=True, check=True)
    assert "signature_def['serving_default']" in result.stdout and "inputs['text']" in result.stdout
    assert "signature_def['classify_ids']" in result.stdout and "inputs['input_ids']" in result.stdout
    assert "shape: (-1, 24)" in result.stdout


def test_the_reload_check_catches_a_model_that_does_not_match(tiny_build, tmp_path: Path):
    loaded = saved_model.load(tiny_build["saved_model"])
    texts = ["goal striker penalty", "flour oven butter"]
    logits = saved_model.classify_texts(loaded, [t.encode() for t in texts])["logits"]
    good, bad = tmp_path / "good.npz", tmp_path / "bad.npz"
    np.savez(good, texts=np.array(texts), logits=logits)
    np.savez(bad, texts=np.array(texts), logits=logits + 0.5)
    assert saved_model.check_reload(tiny_build["saved_model"], good) == 0.0
    with pytest.raises(StageError, match="reloaded logits differ from the trained model's by 0.5"):
        saved_model.check_reload(tiny_build["saved_model"], bad)
    with pytest.raises(StageError, match="reload check failed in a fresh process: error: .*differ"):
        saved_model.check_in_fresh_process(tiny_build["saved_model"], bad)


def split_inputs(tiny_build) -> tuple[Path, Path]:
    """The validation split and labels.txt: what the export's reload and weight checks read."""
    return tiny_build["layout"].data.split("val"), tiny_build["labels"]


def test_weights_that_do_not_fit_the_model_are_refused(tiny_build, tmp_path: Path):
    hparams = tmp_path / "hparams.toml"
    hparams.write_text(tiny_build["hparams"].read_text().replace("embedding_dim = 8", "embedding_dim = 16"), encoding="utf-8")
    out = tmp_path / "saved_model_cpu"
    with pytest.raises(StageError, match="model.weights.h5: cannot load into the model built from"):
        export.export(
            *split_inputs(tiny_build),
            tiny_build["vocab"],
            tiny_build["weights"],
            tiny_build["train_log"],
            hparams,
            REPO / "model_src" / "model.py",
            tiny_build["layout"].token_ids("train"),
            out,
        )
    assert not out.exists() or not any(out.iterdir())


def test_weights_that_load_only_in_part_are_caught(tiny_build, tmp_path: Path):
    # What a silently skipped layer looks like: the model no longer scores what training recorded.
    log = json.loads(tiny_build["train_log"].read_text())
    log["best_val_accuracy"] = log["best_val_accuracy"] - 0.5
    forged = tmp_path / "train_log.json"
    forged.write_text(json.dumps(log))
    out = tmp_path / "saved_model_cpu"
    with pytest.raises(StageError, match="the loaded model scores .* on the validation split, training recorded"):
        export.export(
            *split_inputs(tiny_build),
            tiny_build["vocab"],
            tiny_build["weights"],
            forged,
            tiny_build["hparams"],
            REPO / "model_src" / "model.py",
            tiny_build["layout"].token_ids("train"),
            out,
        )
    assert not (out / "1").exists()


def test_the_xla_flavour_compiles_ids_to_logits_and_matches_the_cpu_model(tiny_artifacts):
    xla_model, cpu = tiny_artifacts["saved_model_xla"], tiny_artifacts["saved_model"]
    assert xla_model.parent.name == "saved_model_xla"
    written = sorted(str(p.relative_to(xla_model)) for p in xla_model.rglob("*") if p.is_file())
    assert written == sorted(saved_model.files(jit_compile=True)) == sorted([*saved_model.FILES, "assets.extra/tf_serving_warmup_requests"])
    assert saved_model.WARMUP_FILE == "assets.extra/tf_serving_warmup_requests"
    assert saved_model.xla_compiled_functions(xla_model) and not saved_model.xla_compiled_functions(cpu)
    meta = json.loads((xla_model / "assets.extra" / "metadata.json").read_text())
    assert meta["flavour"] == "xla" and meta["warmup_batch_sizes"] == [1, 8]
    assert "TF Serving replays assets.extra/tf_serving_warmup_requests (both signatures at batch sizes 1, 8)" in meta["load_note"]
    texts = [b"goal striker penalty league", b"comet planet orbit", b"garlic onion simmer"]
    xla_out = saved_model.classify_texts(saved_model.load(xla_model), texts)
    cpu_out = saved_model.classify_texts(saved_model.load(cpu), texts)
    assert np.max(np.abs(xla_out["logits"] - cpu_out["logits"])) <= 1e-4
    assert xla_out["label"].tolist() == cpu_out["label"].tolist()
    loaded = saved_model.load(xla_model)
    assert sorted(loaded.signatures) == ["classify_ids", "serving_default"]


DUMP_AFTER_ONE_CALL = """
import os, sys, tensorflow as tf, tensorflow_text
m = tf.saved_model.load(sys.argv[1])
m.signatures[sys.argv[2]](**{sys.argv[3]: tf.constant(eval(sys.argv[4]))})
print(len({name.split(".")[0] for name in os.listdir(sys.argv[5]) if name.startswith("module_")}))
"""


@pytest.mark.parametrize(
    "signature, argument, value", [("serving_default", "text", "['comet planet orbit']"), ("classify_ids", "input_ids", "[[1] * 24]")]
)
def test_one_call_of_either_xla_signature_in_a_new_process_compiles_and_the_cpu_flavour_compiles_nothing(
    tiny_artifacts, tmp_path: Path, signature, argument, value
):
    # As a user would see it: XLA's dump directory after loading the SavedModel and calling it once.
    counts = {}
    for flavour, path in (("xla", tiny_artifacts["saved_model_xla"]), ("cpu", tiny_artifacts["saved_model"])):
        dump = tmp_path / flavour
        dump.mkdir()
        env = {**os.environ, "XLA_FLAGS": f"--xla_dump_to={dump}"}
        result = subprocess.run(
            [sys.executable, "-c", DUMP_AFTER_ONE_CALL, str(path), signature, argument, value, str(dump)], capture_output=True, text=True, env=env
        )
        assert result.returncode == 0, result.stderr[-2000:]
        counts[flavour] = int(result.stdout.split()[-1])
    assert counts["xla"] >= 1 and counts["cpu"] == 0


def test_the_warm_up_file_parses_as_tf_serving_prediction_logs(tiny_artifacts):
    requests = xla.read_warmup_requests(tiny_artifacts["saved_model_xla"] / saved_model.WARMUP_FILE)
    assert [(signature, next(iter(inputs.values())).shape) for signature, inputs in requests] == [
        ("serving_default", (1,)),
        ("classify_ids", (1, 24)),
        ("serving_default", (8,)),
        ("classify_ids", (8, 24)),
    ]
    assert [sorted(inputs) for _, inputs in requests] == [["text"], ["input_ids"]] * 2
    assert requests[0][1]["text"].tolist() == [xla.WARMUP_TEXT] and requests[1][1]["input_ids"].dtype == np.int32


def test_after_replaying_the_warm_up_file_the_first_real_calls_compile_nothing(tiny_artifacts):
    warmup = xla.run_probe(tiny_artifacts["saved_model_xla"], "--replay-warmup")["warmup"]
    # One module per batch size: the two signatures share the compiled function within a process.
    assert sum(r["modules_compiled"] for r in warmup["requests"]) == 2
    assert [(r["signature"], r["batch"]) for r in warmup["real_calls_after"]] == [
        ("classify_ids", 1),
        ("classify_ids", 8),
        ("serving_default", 1),
        ("serving_default", 8),
    ]
    assert all(r["modules_compiled"] == 0 for r in warmup["real_calls_after"])


def test_the_warm_up_file_is_the_same_bytes_in_every_export(tmp_path: Path):
    first, second = tmp_path / "a" / "warmup", tmp_path / "b" / "warmup"
    for path in (first, second):
        xla.write_warmup_requests(path, 24, (1, 8))
    assert first.read_bytes() == second.read_bytes()


def test_an_export_whose_signatures_do_not_reach_xla_is_refused(tiny_build, tmp_path: Path):
    # What the XLA flavour was before this check: a directory whose serving_default never compiles.
    bypass = tmp_path / "1"
    shutil.copytree(tiny_build["saved_model"], bypass)
    with pytest.raises(
        StageError, match=r"calling serving_default in a fresh process compiled no XLA module: the signature does not reach the jit-compiled function"
    ):
        export.require_compilation(bypass, bypass)


@pytest.mark.parametrize(
    "flags",
    [["--jit-compile"], ["--warmup-batch-sizes", "1", "8"]],
    ids=["jit-compile-without-batch-sizes", "batch-sizes-without-jit-compile"],
)
def test_warm_up_batch_sizes_go_with_jit_compile_and_have_no_default(tiny_build, tmp_path: Path, capsys, flags):
    from edge_build import cli

    out = tmp_path / "saved_model_xla"
    argv = [
        "--val",
        str(tiny_build["layout"].data.split("val")),
        "--labels",
        str(tiny_build["labels"]),
        "--vocab",
        str(tiny_build["vocab"]),
        "--weights",
        str(tiny_build["weights"]),
        "--train-log",
        str(tiny_build["train_log"]),
        "--hparams",
        str(tiny_build["hparams"]),
        "--model-source",
        str(REPO / "model_src" / "model.py"),
        "--train-ids",
        str(tiny_build["layout"].token_ids("train")),
        "--out-dir",
        str(out),
        *flags,
    ]
    assert cli.run(export.build_parser, export.drive, argv) == cli.EXIT_USER_ERROR
    assert capsys.readouterr().err == "error: --warmup-batch-sizes goes with --jit-compile, and --jit-compile needs it\n"
    assert not out.exists()
