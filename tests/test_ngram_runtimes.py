"""The model's int32 n-gram ids (pairs, triples) are the same on TensorFlow, tflite-runtime and ai-edge-litert.

TF Lite's integer overflow is undefined behaviour, not wraparound, and upstream fixed its
kernels only after tflite-runtime 2.14: the hashing must keep every step below 2**31 for
the runtimes to agree. Checked on the ids a hostile text set tokenizes to, and on the
largest ids a paired vocabulary allows.
"""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
from conftest import REPO, TINY_PROFILE, board_launcher, provisioned, with_litert, write_profile

from edge_build.model_source import load_builder
from edge_build.runtime_envs import read_environment
from edge_build.tokenizer import token_ids

pytestmark = pytest.mark.slow

HOSTILE_TEXTS = [
    "e\u0301te\u0301 cafe\u0301 na\u0308ive",  # combining marks
    "ＦＵＬＬ－ＷＩＤＴＨ １２３ ｋａｔａｋａｎａ ｶﾀｶﾅ",  # full-width and half-width forms
    "emoji 😀🎉👍🏽 family 👨‍👩‍👧 flag 🇯🇵",
    "עברית ومرحبا بالعالم \u202etxet\u202c RTL",  # right-to-left scripts and an override
    "zero\u200bwidth\u200cnon\u200djoiner\ufeffbom",
    "混合 中文 text 한국어 ไทย",
    "tab\there\r\nnull\x00byte \U0010ffff",
]
WINDOW = 32
# The characters need no probe: once trained weights are loaded, they are one row per token id (model.py, SpelledBag).
PROBES = ("bigram_ids", "trigram_ids")
MODEL_SOURCE = REPO / "model_src" / "model.py"
RUN_PROBE = """
import json, sys, numpy as np
runtime, model, ids = sys.argv[1], sys.argv[2], np.load(sys.argv[3])
module = __import__({"tflite-runtime": "tflite_runtime.interpreter", "ai-edge-litert": "ai_edge_litert.interpreter"}[runtime], fromlist=["Interpreter"])
interpreter = module.Interpreter(model_path=model)
interpreter.resize_tensor_input(interpreter.get_input_details()[0]["index"], list(ids.shape))
interpreter.allocate_tensors()
interpreter.set_tensor(interpreter.get_input_details()[0]["index"], ids)
interpreter.invoke()
print(json.dumps([interpreter.get_tensor(d["index"]).tolist() for d in interpreter.get_output_details()]))
"""


@pytest.fixture(scope="module")
def litert_runtime_env(runtime_envs, tmp_path_factory):
    """The tiny profile's Debian 12 stack with ai-edge-litert beside tflite-runtime."""
    return provisioned(runtime_envs, write_profile(tmp_path_factory.mktemp("litert-profile"), "tiny", with_litert(TINY_PROFILE, required=True)))


def hostile_vocabulary(folder) -> tuple[list[str], np.ndarray]:
    """A vocabulary of every character of the hostile texts, alone and after ``##``, and the ids the texts become."""
    characters = sorted({char for text in HOSTILE_TEXTS for char in text.lower() if not char.isspace()})
    vocabulary = ["[PAD]", "[UNK]", *characters, *(f"##{char}" for char in characters)]
    path = folder / "vocab.txt"
    path.write_text("\n".join(vocabulary) + "\n", encoding="utf-8")
    ids = token_ids(path, True, [text.encode("utf-8") for text in HOSTILE_TEXTS], WINDOW).astype(np.int32)
    return vocabulary, ids


def probe_outputs(model, layers: tuple[str, ...], ids: np.ndarray, folder, runtime_env) -> dict[str, dict[str, np.ndarray]]:
    """Each feature layer's ids on TensorFlow and, converted to TF Lite, on both runtimes (by output shape)."""
    import keras
    import tensorflow as tf

    probe = keras.Model(model.inputs, [model.get_layer(name).output for name in layers])
    expected = {name: np.asarray(values) for name, values in zip(layers, probe(ids))}
    path, ids_path = folder / "probe.tflite", folder / "ids.npy"
    path.write_bytes(tf.lite.TFLiteConverter.from_keras_model(probe).convert())
    np.save(ids_path, ids)
    python, environment = board_launcher(read_environment(runtime_env))
    results = {"tensorflow": expected}
    for runtime in ("tflite-runtime", "ai-edge-litert"):
        done = subprocess.run(
            [*python, "-c", RUN_PROBE, runtime, str(path), str(ids_path)], env=environment, capture_output=True, text=True, check=True
        )
        by_width = {np.asarray(values).shape[1]: np.asarray(values) for values in json.loads(done.stdout)}
        results[runtime] = {name: by_width[expected[name].shape[1]] for name in layers}
    return results


def test_hostile_texts_give_the_same_ngram_ids_everywhere(litert_runtime_env, tmp_path):
    vocabulary, ids = hostile_vocabulary(tmp_path)
    assert (ids > 1).sum() > 100  # the texts became characters, not [UNK]
    builder = load_builder(MODEL_SOURCE)
    model = builder(vocab_size=len(vocabulary), num_classes=2, sequence_length=WINDOW, train_ids=ids, vocabulary=vocabulary, kind="ngram_char_bag")
    results = probe_outputs(model, PROBES, ids, tmp_path, litert_runtime_env)
    for runtime in ("tflite-runtime", "ai-edge-litert"):
        for name in PROBES:
            np.testing.assert_array_equal(results[runtime][name], results["tensorflow"][name], err_msg=f"{name} on {runtime}")
    twin = builder.__globals__["ngram_keys"]
    for order, name in ((2, "bigram_ids"), (3, "trigram_ids")):
        buckets = model.feature_tables["ngrams"][name.removesuffix("_ids")]["buckets"]
        np.testing.assert_array_equal(results["tensorflow"][name], twin(ids, len(vocabulary), order) % buckets, err_msg=name)


def test_the_largest_paired_ids_hash_alike_on_every_runtime(litert_runtime_env, tmp_path):
    rng = np.random.default_rng(3)
    ids = rng.integers(46000, 46340, size=(16, WINDOW)).astype(np.int32)  # products near 2**31 at every step
    ids[:, -3:] = 0
    model = load_builder(MODEL_SOURCE)(
        vocab_size=46340, num_classes=2, sequence_length=WINDOW, train_ids=ids, kind="ngram_bag", ngram_buckets=2_000_003
    )
    results = probe_outputs(model, PROBES, ids, tmp_path, litert_runtime_env)
    for runtime in ("tflite-runtime", "ai-edge-litert"):
        for name in PROBES:
            np.testing.assert_array_equal(results[runtime][name], results["tensorflow"][name], err_msg=f"{name} on {runtime}")
    assert results["tensorflow"]["trigram_ids"].max() > 1_000_000  # the buckets are reached, not folded to a few
