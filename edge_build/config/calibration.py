"""``calibration/calibration.toml``: what the INT8 representative dataset is made of."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from edge_build.config.loading import from_mapping, load_toml


@dataclasses.dataclass(frozen=True)
class CalibrationConfig:
    """``calibration/calibration.toml``: what the INT8 representative dataset is made of.

    Attributes:
      samples: examples drawn from ``split``, stratified per class (0 with ``field_samples_mode = "only"``).
      split: ``train`` or ``val``; never ``test``, which must stay unseen.
      seed: seeds the draw.
      field_samples: optional text file of the user's own examples, one per line,
        relative to the TOML file; tokenized the same way as the drawn ones.
      field_samples_mode: ``mix`` adds them to the drawn examples, ``only`` uses them instead.
    """

    samples: int = 300
    split: Literal["train", "val"] = "train"
    seed: int = 0
    field_samples: str = ""
    field_samples_mode: Literal["mix", "only"] = "mix"

    def __post_init__(self) -> None:
        if self.samples < 0:
            raise ValueError(f"key 'samples': must be 0 or more, not {self.samples}")
        if self.field_samples_mode == "only" and not self.field_samples:
            raise ValueError("key 'field_samples_mode': 'only' needs a 'field_samples' file")
        if self.field_samples_mode == "only" and self.samples:
            raise ValueError("key 'samples': must be 0 when field_samples_mode is 'only' (the split is not drawn from)")
        if not self.samples and not self.field_samples:
            raise ValueError("key 'samples': the representative set would be empty (set samples > 0 or a field_samples file)")


def load_calibration(path: Path | str) -> CalibrationConfig:
    path = Path(path)
    return from_mapping(CalibrationConfig, load_toml(path), where=str(path))
