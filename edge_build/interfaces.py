"""The interface table: how a model takes its input and gives its output, one row per interface.

An artifact's row names its interface (``Artifact.interface``); a runtime's row names the
interfaces it runs (``board.runtime.Runtime.interfaces``). Everything that differs
between interfaces is a field here: which module converts such a model, which extra
files that conversion reads, the tensors and metadata it writes, how the build runs it
on this machine, where the bundle ranks it among default models, and what the report
says about it. Nothing outside this table branches on an interface's name, so a new
interface is a row here, its converter module in ``edge_build/convert/``, and its name
in the runtime rows that run it.
Standard library only: ``SConstruct`` imports it.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from typing import Literal


@dataclasses.dataclass(frozen=True)
class Interface:
    """A row of the interface table.

    Attributes:
      converter: the module of the conversion wing (``edge_build/convert/``) whose ``convert(job)`` makes such a model from
        the trained Keras model. A name, not the module: every stage reads this table, and a stage reruns when a module its
        code names changes; the tflite stage names the whole wing.
      extra_inputs: the tflite stage's optional files its conversion reads (names in ``stage_files``), beyond what
        every conversion reads; SConstruct passes exactly these, so no other conversion reruns when they change.
      input_names: its input tensors, in the model's order, as its metadata names them.
      metadata: how the metadata writer describes it (``edge_build.convert.metadata_writer``): ``ids`` (the vocabulary on the
        ids input), ``text`` (a text input, the tokenizer inside) or ``bert`` (MediaPipe's BERT classifier layout).
      outputs: ``logits``, or ``scores`` (softmax, as an app reads them): a logit error says nothing of scores.
      host_runner: ``module:function`` of the wing that runs the model's shipped bytes on TensorFlow's interpreter here, for
        its validation and test logits (``converter:run_tflite`` feeds the tokenize stage's ids; ``tasks:run_tasks_tflite``
        feeds them as MediaPipe does); ``None``: TensorFlow's interpreter cannot run it, and its converter returns the
        logits the profile's runtime that can gave (the metadata leaves the graph alone).
      given_text: its runtime is given raw text (the tokenizer is in the model, or in the Tasks library that runs it).
      tokenizer_inside: the model holds the tokenizer: its ids are checked against the tokenize stage's, and its
        record's ``record_keys`` go into ``eval.json``.
      record_keys: what its conversion record adds that ``eval.json`` carries (under ``raw_text``).
      default_rank: the bundle's order among default models (lower first); ``None``: never the default, only on a
        runtime that runs nothing else.
      recommended: the build may recommend it for a runtime by measured latency (``edge_build.recommend``).
      needs_lower_case: its runtime always lowercases, so a cased vocabulary cannot be served.
      words: what such a model does, following "it": for refusals and the report.
      report_note: what the report's deploy table adds for a model of this interface that passed on a runtime, or ``""``: a
        template of ``path``, ``runtime``, ``version`` and ``p50_us``.
    """

    converter: str
    extra_inputs: tuple[str, ...]
    input_names: tuple[str, ...]
    metadata: Literal["ids", "text", "bert"]
    outputs: Literal["logits", "scores"]
    host_runner: str | None
    given_text: bool
    tokenizer_inside: bool
    default_rank: int | None
    recommended: bool
    needs_lower_case: bool
    words: str
    report_note: str = ""
    record_keys: tuple[str, ...] = ()


#: The BERT-style inputs in the model's order (ids, mask, segment ids), named as MediaPipe's metadata writer expects them by default.
BERT_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")
#: The TF Lite tensor name of each: what the metadata writer pairs with its ``ids``, ``mask`` and ``segment_ids``.
BERT_TENSORS = {name: f"serving_default_{name}:0" for name in BERT_INPUTS}

INTERFACES: Mapping[str, Interface] = types.MappingProxyType(
    {
        "ids": Interface(
            converter="ids",
            extra_inputs=(),
            input_names=("input_ids",),
            metadata="ids",
            outputs="logits",
            host_runner="converter:run_tflite",
            given_text=False,
            tokenizer_inside=False,
            default_rank=1,
            recommended=True,
            needs_lower_case=False,
            words="takes token ids",
        ),
        "text": Interface(
            converter="text",
            extra_inputs=("test",),
            input_names=("text",),
            metadata="text",
            outputs="logits",
            host_runner=None,
            given_text=True,
            tokenizer_inside=True,
            default_rank=0,
            recommended=False,
            needs_lower_case=False,
            words="takes raw text through tensorflow-text's custom ops and Flex ops",
            record_keys=("custom_ops", "flex_ops", "conversion_path", "op_paths", "calibration", "token_ids_check", "test_logits_runtime"),
        ),
        "tasks": Interface(
            converter="tasks",
            extra_inputs=("train",),
            input_names=tuple(BERT_TENSORS.values()),
            metadata="bert",
            outputs="scores",
            host_runner="tasks:run_tasks_tflite",
            given_text=True,
            tokenizer_inside=False,
            default_rank=None,
            recommended=False,
            needs_lower_case=True,
            words="is for MediaPipe Tasks (its tokenizer and labels are in the model's metadata)",
            report_note="For an app, `{path}` passed in {runtime} {version}'s TextClassifier from raw text: p50 {p50_us:.0f} µs per "
            "text, its tokenizer included (README: Use the model in an app).",
        ),
        "scores": Interface(
            converter="scores",
            extra_inputs=(),
            input_names=("input_ids",),
            metadata="ids",
            outputs="scores",
            host_runner="converter:run_tflite",
            given_text=False,
            tokenizer_inside=False,
            default_rank=None,
            recommended=False,
            needs_lower_case=False,
            words="takes token ids and gives softmax scores, for an app that shows them",
        ),
    }
)
