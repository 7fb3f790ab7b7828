"""MediaPipe Tasks' ``TextClassifier`` as the benchmark's model: raw text in, one score per label out.

A runtime whose row runs a text classifier (``Runtime.runner``) runs a Tasks-ready
model through this class wherever an interpreter would run through
``bench.Model``: the runtime checks, the tflite stage's preflight, and a board's
``bench.py`` and ``classify.py``. What is timed is one ``classify()`` call:
MediaPipe's own tokenizer (the ``BertTokenizer`` in the model's metadata), the
model and the mapping to labels. Imports only the standard library, numpy and
MediaPipe.
"""

from __future__ import annotations

import time

import numpy as np

from .runtime import check_model_file, interpreter_module


class TextClassifierModel:
    """A Tasks-ready model in MediaPipe's ``TextClassifier``: ``run`` takes UTF-8 texts and gives their scores, by label index.

    MediaPipe sizes its own thread pool, so ``threads`` is not passed on; it classifies one text per call.
    """

    takes_text = True
    #: What ``run`` gives: the model's softmax scores, not logits.
    outputs_scores = True

    def __init__(self, runtime: str, path: str, threads: int | None, batch: int):
        if batch != 1:
            raise ValueError(f"MediaPipe's TextClassifier classifies one text per call: batch 1, not {batch}")
        check_model_file(path)
        text = interpreter_module(runtime)
        from mediapipe.tasks.python.core.base_options import BaseOptions

        started = time.perf_counter()
        # Every category, not the top few: the scores are compared label by label with the reference.
        options = text.TextClassifierOptions(base_options=BaseOptions(model_asset_path=path), max_results=-1)
        self.classifier = text.TextClassifier.create_from_options(options)
        self.load_ms = (time.perf_counter() - started) * 1e3
        self.batch = 1

    def run(self, texts: np.ndarray) -> np.ndarray:
        """Scores ``[len(texts), labels]`` for UTF-8 ``texts``."""
        rows = []
        for text in texts:
            categories = self.classifier.classify(text.decode("utf-8") if isinstance(text, bytes) else str(text)).classifications[0].categories
            scores = np.zeros(len(categories), np.float32)
            for category in categories:
                scores[category.index] = category.score
            rows.append(scores)
        return np.stack(rows)

    def close(self) -> None:
        # MediaPipe 1.2's TextClassifier raises from __del__ at interpreter exit unless it was closed.
        self.classifier.close()
