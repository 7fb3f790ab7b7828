"""The artifact table: every artifact a profile may list, one row each.

A row says where the artifact lives in its target's directory, its format,
how it is made (``SConstruct`` dispatches on ``made_by``), whether it is
checked on the runtimes and shipped in the bundle, its precision and what it
takes in, which parity checks gate it against the reference, which latency
budget applies on the runtimes and which profile settings it reads.
``SConstruct``, the profile, the conversion, the checks, the report and the
bundle read these rows; nothing parses an artifact's name. What follows from
the model's interface (its inputs and outputs, its converter, how it is run
and shipped) is the interface's row in ``edge_build.interfaces``: adding a TF
Lite artifact of an existing interface is a row here (and, for a new weight
precision, its converter option, ``edge_build.convert.converter``).
Standard library only: ``SConstruct`` imports it.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from typing import Literal

from edge_build.interfaces import INTERFACES, Interface

#: ``(what, figure, comparison, tolerance key)``: a figure of ``board.parity.compare``
#: (or one it derives) must be ``<=`` or ``>=`` the profile tolerance of that key
#: (``Tolerances.limits``; a logit error's bound scales with the logits unless set absolutely).
Check = tuple[str, str, Literal["<=", ">="], str]
MAX_LOGIT_ERROR = "max |Δlogit|"
#: An INT8 model is held to the reference's labels, not its logits: quantization moves every logit a little.
INT8_PARITY: tuple[Check, ...] = (
    ("top-1 agreement", "top1_agreement", ">=", "int8_min_top1_agreement"),
    ("accuracy drop", "accuracy_drop", "<=", "int8_max_accuracy_drop"),
)


@dataclasses.dataclass(frozen=True)
class Artifact:
    """A row of the artifact table.

    Attributes:
      path: relative to ``<build_dir>/<target>/``; a SavedModel's version directory.
      description: one line for people.
      format: ``saved_model`` or ``tflite``.
      made_by: how the build makes it: ``reference`` (a copy of the reference CPU SavedModel),
        ``export`` (the export stage, another flavour of SavedModel) or ``tflite`` (the tflite stage).
      on_runtimes: checked on the profile's TF Lite runtimes and shipped in the bundle.
      precision: of the weights: ``fp32``, ``fp16`` or ``int8``.
      interface: its row in ``edge_build.interfaces``: ``text`` (the tokenizer is inside), ``ids`` (int32 token ids) or
        ``tasks`` (BERT-style ids, mask and segment ids, which a MediaPipe Tasks library fills from raw text with the
        tokenizer in the model's metadata).
      parity: the checks against the reference that gate it, on the build and on the board.
      latency_key: its p50 budget in the profile's ``[latency]`` (TF Lite artifacts).
      jit_compile: a SavedModel whose ids -> logits function XLA compiles.
      calibrated: converted with the representative set (needs the calibrate stage).
      settings: the profile keys (``table.key``, or a whole ``table``) it reads beyond its
        parity tolerances and latency budget; ``settings_taken`` adds those two.
    """

    path: str
    description: str
    format: Literal["saved_model", "tflite"]
    made_by: Literal["reference", "export", "tflite"]
    on_runtimes: bool
    precision: Literal["fp32", "fp16", "int8"]
    interface: str
    parity: tuple[Check, ...] = ()
    latency_key: str | None = None
    jit_compile: bool = False
    calibrated: bool = False
    settings: tuple[str, ...] = ()

    @property
    def interface_row(self) -> Interface:
        return INTERFACES[self.interface]


def logit_error(name: str, value: float, spec: str = ".3g") -> str:
    """Artifact ``name``'s max or mean |Δlogit| against the reference, as the report and the console lines show it."""
    return "n/a (scores)" if ARTIFACTS[name].interface_row.outputs == "scores" else format(value, spec)


def logit_settings(prefix: str) -> tuple[str, str]:
    """The tolerances that scale a float artifact's logit-error bound (``<prefix>_max_abs_logit`` overrides them)."""
    return f"tolerances.{prefix}_logit_rtol", "tolerances.logit_atol"


#: What every TF Lite artifact reads: the Flex fallback of its conversion, and where and how it is checked.
TFLITE_SETTINGS = ("quantization.select_tf_ops", "stack", "runtimes", "checks", "deploy")


ARTIFACTS: Mapping[str, Artifact] = types.MappingProxyType(
    {
        "saved_model_cpu": Artifact(
            "saved_model_cpu/1",
            "CPU SavedModel (TF Serving layout), tokenizer and vocabulary inside",
            "saved_model",
            "reference",
            False,
            "fp32",
            "text",
        ),
        "saved_model_xla": Artifact(
            "saved_model_xla/1",
            "SavedModel whose ids -> logits part is XLA-compiled (jit_compile), for GPUs",
            "saved_model",
            "export",
            False,
            "fp32",
            "text",
            parity=((MAX_LOGIT_ERROR, "max_abs_logit_error", "<=", "xla_max_abs_logit"),),
            jit_compile=True,
            # The scaled bound's factors, and the GPU's bound when XLA ran on a GPU.
            settings=("xla", *logit_settings("xla"), "tolerances.xla_gpu_max_abs_logit", *logit_settings("xla_gpu")),
        ),
        "tflite_fp32": Artifact(
            "model_fp32.tflite",
            "TF Lite, float32 weights and activations, int32 ids in",
            "tflite",
            "tflite",
            True,
            "fp32",
            "ids",
            parity=((MAX_LOGIT_ERROR, "max_abs_logit_error", "<=", "fp32_max_abs_logit"),),
            latency_key="fp32_p50_ms",
            settings=(*TFLITE_SETTINGS, *logit_settings("fp32")),
        ),
        "tflite_fp16": Artifact(
            "model_fp16.tflite",
            "TF Lite, float16 weights (half the size), float32 arithmetic, int32 ids in",
            "tflite",
            "tflite",
            True,
            "fp16",
            "ids",
            parity=((MAX_LOGIT_ERROR, "max_abs_logit_error", "<=", "fp16_max_abs_logit"),),
            latency_key="fp16_p50_ms",
            settings=(*TFLITE_SETTINGS, *logit_settings("fp16")),
        ),
        "tflite_int8": Artifact(
            "model_int8.tflite",
            "TF Lite, full-integer INT8 calibrated on real text, int32 ids in",
            "tflite",
            "tflite",
            True,
            "int8",
            "ids",
            parity=INT8_PARITY,
            latency_key="int8_p50_ms",
            calibrated=True,
            settings=(
                *TFLITE_SETTINGS,
                "quantization.output_type",
                "quantization.recipes",
            ),  # a raw-text model's logits stay float32; no ladder for it
        ),
        "tflite_text_int8": Artifact(
            "model_text_int8.tflite",
            "TF Lite, raw text in: tensorflow-text tokenizer inside (custom ops + Flex), INT8 classifier calibrated as tflite_int8",
            "tflite",
            "tflite",
            True,
            "int8",
            "text",
            parity=INT8_PARITY,
            latency_key="text_int8_p50_ms",
            calibrated=True,
            settings=TFLITE_SETTINGS,
        ),
        "tflite_tasks_int8": Artifact(
            "model_tasks_int8.tflite",
            "TF Lite for MediaPipe Tasks' TextClassifier: BERT-style inputs, BertTokenizer and labels in its metadata, "
            "quantized by tflite_int8's ladder (full-integer INT8 first), softmax scores out",
            "tflite",
            "tflite",
            True,
            "int8",
            "tasks",
            parity=INT8_PARITY,
            latency_key="tasks_int8_p50_ms",
            calibrated=True,
            settings=(*TFLITE_SETTINGS, "quantization.recipes"),  # its scores stay float32: MediaPipe refuses an int8 output
        ),
        "tflite_scores_fp32": Artifact(
            "model_scores_fp32.tflite",
            "TF Lite, float32, int32 ids in, softmax scores out (softmax inside the graph, for apps that show scores)",
            "tflite",
            "tflite",
            True,
            "fp32",
            "scores",
            parity=INT8_PARITY,  # held to the reference's labels, as tflite_int8: its scores are no logits
            latency_key="fp32_p50_ms",
            settings=TFLITE_SETTINGS,
        ),
    }
)


def settings_taken(name: str) -> frozenset[str]:
    """The profile keys artifact ``name`` reads: its settings, parity tolerances and latency budget."""
    row = ARTIFACTS[name]
    tolerances = (f"tolerances.{key}" for *_, key in row.parity)
    return frozenset([*row.settings, *tolerances, *([f"latency.{row.latency_key}"] if row.latency_key else [])])


def takers(setting: str) -> list[str]:
    """The artifacts that read ``setting`` (``table.key``), in table order."""
    table = setting.split(".")[0]
    return [name for name in ARTIFACTS if {setting, table} & settings_taken(name)]
