"""Run a raw-text model over many texts: ``python -m edge_build.board.texts RUNTIME MODEL TEXTS.npz OUT.npz``.

``TEXTS.npz`` holds the texts as ``parity.pack_texts`` stores them; ``OUT.npz``
gets, per text in order, the model's logits (float32 ``[N, classes]``) and the
token ids its own tokenizer produced (int32 ``[N, sequence_length]``), read from
the model's second output. The tflite stage runs this in the runtime
environment, because only there can the model run (Flex and tensorflow-text's
kernels), and checks the ids against the training tokenizer's.
"""

from __future__ import annotations

import sys

import numpy as np

from . import EXIT_MODEL_FAILED, EXIT_RUNTIME_MISSING, EXIT_USAGE, fail
from .bench import Model
from .parity import unpack_texts
from .runtime import RuntimeMissing


def run_texts(runtime: str, model_path: str, texts: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    model = Model(runtime, model_path, threads=1, batch=1)
    if not model.takes_text or model.token_ids is None:
        raise ValueError(f"{model_path}: not a raw-text model with a token-ids output")
    logits, ids = [], []
    for text in texts:
        logits.append(model.run(np.array([text], dtype=object))[0])
        ids.append(model.last_token_ids()[0])
    return np.asarray(logits, dtype=np.float32), np.asarray(ids, dtype=np.int32)


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print("usage: python -m edge_build.board.texts RUNTIME MODEL.tflite TEXTS.npz OUT.npz", file=sys.stderr)
        return EXIT_USAGE
    runtime, model_path, texts_path, out_path = argv
    try:
        with np.load(texts_path, allow_pickle=False) as arrays:
            texts = unpack_texts(arrays)
        logits, ids = run_texts(runtime, model_path, texts)
    except RuntimeMissing as exc:
        return fail(exc, EXIT_RUNTIME_MISSING)
    except (RuntimeError, ValueError) as exc:
        return fail(f"{model_path}: {exc}", EXIT_MODEL_FAILED)
    with open(out_path, "wb") as handle:
        np.savez(handle, logits=logits, token_ids=ids)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
