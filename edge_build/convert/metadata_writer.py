"""TF Lite Model Metadata for a converted model, written by MediaPipe's metadata writer.

    python -m edge_build.convert.metadata_writer MODEL OUT SPEC.json METADATA.json

Runs in the metadata writer's environment (``stacks.writer_environment``: MediaPipe
0.10.21, the last release whose Python writer imports), never in the build's
own Python; the tflite stage starts it. It reads the model, the spec (what
``metadata_spec`` returns: name, description, version, author, the model's
metadata layout, its vocabulary and labels) and writes the model with its metadata to OUT
and the metadata as MediaPipe's displayer shows it (JSON) to METADATA.json.

- A Tasks-ready model (layout ``bert``) gets what MediaPipe's TextClassifier reads:
  ``BertTokenizer`` with the vocabulary, its three inputs by name, the labels on
  its scores (``create_for_bert_model``).
- An ids model (``ids``) gets the vocabulary on its ids input and the labels on
  its logits; a raw-text model (``text``) the labels on its logits. Plain tensor metadata, not
  a classification output: MediaPipe's would state scores between 0 and 1.

Everything else about the file stays as converted: the graph is untouched, the
associated files go into a zip appended to it. The zip's member times are
pinned, so the same inputs give the same bytes. Standard library and MediaPipe
only. Errors are one line on stderr and exit 1, and OUT is not written.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

#: The zip members' time: the earliest a zip can hold, as reproducible-build tools pin it.
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def metadata_spec(
    layout: str, name: str, description: str, version: str, vocab: Path, labels: list[str], inputs: list[str], outputs: list[str]
) -> dict:
    """The spec this module reads: the model's metadata layout (its interface's ``metadata``), its tensors' names, vocabulary and labels."""
    return {
        "layout": layout,
        "name": name,
        "description": description,
        "version": version,
        "author": "edge-build",
        "vocab": str(vocab),
        "labels": labels,
        "inputs": inputs,
        "outputs": outputs,
    }


@contextlib.contextmanager
def pinned_zip_times() -> Iterator[None]:
    """MediaPipe's populator adds each associated file with ``ZipFile.writestr(name, bytes)``, stamped with the current
    local time: stamp them with ``ZIP_TIME`` instead (stored, not deflated, as MediaPipe reads them in place)."""
    original = zipfile.ZipFile.writestr

    def writestr(self, member, data, *args, **kwargs):
        if not isinstance(member, zipfile.ZipInfo):
            member = zipfile.ZipInfo(member, date_time=ZIP_TIME)
            member.compress_type = zipfile.ZIP_STORED
            member.external_attr = 0o600 << 16
        return original(self, member, data, *args, **kwargs)

    zipfile.ZipFile.writestr = writestr
    try:
        yield
    finally:
        zipfile.ZipFile.writestr = original


def write(model: bytes, spec: dict) -> tuple[bytes, str]:
    """``model`` with the metadata ``spec`` describes, and that metadata as JSON."""
    from mediapipe.tasks.python.metadata.metadata_writers import metadata_info, metadata_writer, text_classifier

    general = metadata_info.GeneralMd(name=spec["name"], version=spec["version"], description=spec["description"], author=spec["author"])
    labels = metadata_writer.Labels().add(spec["labels"])
    if spec["layout"] == "bert":
        ids, mask, segments = spec["inputs"]
        tasks = text_classifier.MetadataWriter.create_for_bert_model(
            bytearray(model), metadata_writer.BertTokenizer(spec["vocab"]), labels, ids_name=ids, mask_name=mask, segment_name=segments
        )
        writer = tasks.writer
    else:
        writer = metadata_writer.MetadataWriter.create(bytearray(model))
        vocab = metadata_info.AssociatedFileMd(
            spec["vocab"], "WordPiece vocabulary: line n is token id n", metadata_info._metadata_fb.AssociatedFileType.VOCABULARY
        )
        (inputs,) = spec["inputs"]
        if spec["layout"] == "ids":
            # add_feature_input takes no associated files: the tensor's metadata carries the vocabulary, the writer packs it.
            writer._input_mds.append(metadata_info.TensorMd(name=inputs, description="int32 WordPiece ids, 0 is padding", associated_files=[vocab]))
            writer._associated_files.append(spec["vocab"])
        else:
            writer.add_feature_input(inputs, "UTF-8 text; the WordPiece tokenizer is inside the model")
        label_file = metadata_info.AssociatedFileMd(
            writer._export_labels("labels.txt", spec["labels"]),
            "class names: line n is logit n",
            metadata_info._metadata_fb.AssociatedFileType.TENSOR_AXIS_LABELS,
        )
        logits, *others = spec["outputs"]
        writer._output_mds.append(metadata_info.TensorMd(name=logits, description="class logits", associated_files=[label_file]))
        for other in others:
            writer.add_feature_output(other, "int32 WordPiece ids the model's tokenizer gave the text")
    # The Tasks writer's name and description are fixed ("TextClassifier") and neither writer takes a version.
    writer._general_md = general
    with pinned_zip_times():
        content, metadata_json = writer.populate()
    return bytes(content), metadata_json


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print("usage: python -m edge_build.convert.metadata_writer MODEL OUT SPEC.json METADATA.json", file=sys.stderr)
        return 2
    model, out, spec, shown = (Path(a) for a in argv)
    try:
        content, metadata_json = write(model.read_bytes(), json.loads(spec.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError) as exc:
        print(f"{model}: metadata not written: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    with tempfile.NamedTemporaryFile(dir=out.parent, delete=False) as handle:
        handle.write(content)
    Path(handle.name).replace(out)
    shown.write_text(metadata_json, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
