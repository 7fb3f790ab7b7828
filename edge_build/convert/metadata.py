"""Every converted model's TF Lite metadata (vocabulary, labels, name, version), written by MediaPipe's metadata writer.

The writer (``edge_build.convert.metadata_writer``) runs in its own environment
(``stacks.writer_environment``: MediaPipe 0.10.21, the last release whose Python writer
imports); this side names the model's tensors as its interface says and starts it.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from edge_build.artifacts import ARTIFACTS
from edge_build.config.profile import TargetProfile
from edge_build.convert.metadata_writer import metadata_spec
from edge_build.errors import StageError
from edge_build.interfaces import Interface
from edge_build.isolated import failure_line, run_isolated
from edge_build.provenance import build_timestamp, git_revision
from edge_build.runtime_envs import environment_in_use, launcher, unavailable

METADATA_TIMEOUT_S = 120


def metadata_names(content: bytes, interface: Interface) -> tuple[list[str], list[str]]:
    """The names the metadata gives the model's inputs and outputs, in the model's order: its interface's input names; a
    BERT-style model's one output by what it holds, any other model's outputs by their type (int32: the tokenizer's ids)."""
    from tensorflow.lite.python import schema_py_generated as schema

    if interface.metadata == "bert":
        return list(interface.input_names), [interface.outputs]
    (subgraph,) = schema.ModelT.InitFromPackedBuf(bytearray(content), 0).subgraphs
    outputs = ["token_ids" if subgraph.tensors[i].type == schema.TensorType.INT32 else interface.outputs for i in subgraph.outputs]
    return list(interface.input_names), outputs


def with_metadata(
    content: bytes, artifact: str, profile: TargetProfile, vocab_text: str, labels: list[str], writer_env: Path, where: str
) -> tuple[bytes, dict]:
    """The model with its TF Lite metadata, written by MediaPipe's writer in its environment, and that metadata as
    MediaPipe's displayer shows it."""
    row = ARTIFACTS[artifact]
    inputs, outputs = metadata_names(content, row.interface_row)
    # The revision and time the manifest records: SConstruct pins the time to the last commit's, so two builds give the same bytes.
    version = f"{git_revision() or 'no git revision'}, built {build_timestamp()}"
    with environment_in_use(writer_env) as environment, tempfile.TemporaryDirectory() as scratch:
        # The writer packs the file under its own name: MediaPipe and the board look for vocab.txt.
        vocab = Path(scratch) / "vocab.txt"
        vocab.write_text(vocab_text, encoding="utf-8")
        spec = metadata_spec(row.interface_row.metadata, f"{artifact} ({profile.name})", row.description, version, vocab, labels, inputs, outputs)
        reason = unavailable(environment, "mediapipe")
        if reason:
            raise StageError(f"{where}: MediaPipe's metadata writer cannot run: {reason}")
        model_in, model_out, spec_file, shown = (Path(scratch) / name for name in ("in.tflite", "out.tflite", "spec.json", "metadata.json"))
        model_in.write_bytes(content)
        spec_file.write_text(json.dumps(spec), encoding="utf-8")
        python, variables = launcher(environment)
        command = [*python, "-m", "edge_build.convert.metadata_writer", str(model_in), str(model_out), str(spec_file), str(shown)]
        done, abnormal = run_isolated(command, METADATA_TIMEOUT_S, variables)
        if abnormal or done.returncode != 0:
            raise StageError(f"{where}: MediaPipe's metadata writer failed: {abnormal or failure_line(done)}")
        return model_out.read_bytes(), json.loads(shown.read_text(encoding="utf-8"))
