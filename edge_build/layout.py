"""Every file under the build directory: where it lives, which stage writes it, and from what.

The one place that spells a build file's name. ``SConstruct`` maps these paths
onto each stage's declared files (``edge_build.stage_files``) and hands the stage
those paths on its command line; stages and benchmarks never compose a build
path themselves.
Standard library only: ``SConstruct`` imports this to parse the graph.

    build/
      data/         train|val|test.tfrecord, labels.txt, summary.json   data        <- the dataset
                    report.md, report.json, window.json                data_report <- splits, summary, vocab
      vocab/        vocab.txt                                          vocab       <- train split
      tokens/       train|val|test.npy (int32 ids)                     tokenize    <- splits, vocab, tokenizer settings
      model/        model.weights.h5, train_log.json                   train       <- train/val splits, labels, vocab, hparams, model source
      reference/    saved_model_cpu/1/...                              export      <- weights, train log, vocab, labels, val split
                    test_logits.npy                                    reference_logits <- reference SavedModel, test split
      calibration/  representative.npy, summary.json                   calibrate   <- calibration/, the split it draws from and its ids, labels, vocab
      baseline/     baseline.json                                      baseline    <- splits, labels
      quality/      quality.json                                       quality     <- reference logits, test split, baseline
      runtime-envs/<arch>-<release>-py<X.Y>-<hash>/env.json (and the Python it describes)
                                                                       runtime_env <- the profile's arch, stack and runtimes
      runtime-envs/apt/  the private apt configuration and the packages it fetched
      <target>/     the profile's artifacts (ARTIFACTS rows)           export, tflite
                    tflite_<p>.json, tflite_<p>.test_logits.npy        tflite      <- as the artifact, plus the test ids
                    golden.npz, runtime_checks.json, runtime_parity.json, recommended.json, latency.png
                                                                       runtime_check <- artifacts, reference logits, test ids, profile
                    xla_checks.json                                    xla_check   <- both SavedModels, test split, profile
                    eval.json                                          evaluate    <- artifacts, reference and its test logits, test split, profile
                    report.md                                          report      <- eval.json and everything above for the target
                    manifest.json                                      manifest    <- artifacts, conversion records, eval, parity
                    bundle/..., bundle-<target>.tar.gz                 bundle      <- TF Lite models, golden set, manifest, board code
                    boards/<board>/result.json, latency.png            board_check <- bundle, golden set, profile; the board over ssh
                    boards/report.md                                   board_report <- every board's result, runtime checks
      reproducibility/, reproducibility.json                           verify-reproducible
      logs/         data/data.log, model/train.log, <target>/tflite_int8.log, ... every stage's full output (edge_build.logged)
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from edge_build.artifacts import ARTIFACTS
from edge_build.corpus import SPLITS
from edge_build.saved_model import files as saved_model_files

#: The board-side package, copied into every bundle as ``board/``.
BOARD_DIR = Path(__file__).resolve().parent / "board"
#: What the bundle's two launchers call, in ``board/launch.py``.
LAUNCHERS = {"bench.py": "bench_main", "classify.py": "classify_main"}


def board_sources() -> list[Path]:
    return sorted(BOARD_DIR.glob("*.py"))


@dataclasses.dataclass(frozen=True)
class Data:
    """The data stage's splits and what describes them (``build/data/``)."""

    dir: Path

    def split(self, name: str) -> Path:
        return self.dir / f"{name}.tfrecord"

    @property
    def labels(self) -> Path:
        return self.dir / "labels.txt"

    @property
    def summary(self) -> Path:
        return self.dir / "summary.json"

    @property
    def outputs(self) -> dict[str, Path]:
        """What the data stage writes, by its names in ``edge_build.stage_files``."""
        return {**{split: self.split(split) for split in SPLITS}, "labels": self.labels, "summary": self.summary}

    @property
    def report(self) -> dict[str, Path]:
        """The data report's outputs: Markdown page, JSON figures, and the window it chose (``edge_build.window``)."""
        return {"page": self.report_page, "record": self.report_json, "window": self.window}

    @property
    def report_page(self) -> Path:
        return self.dir / "report.md"

    @property
    def report_json(self) -> Path:
        return self.dir / "report.json"

    @property
    def window(self) -> Path:
        return self.dir / "window.json"


@dataclasses.dataclass(frozen=True)
class Target:
    """One target profile's outputs (``build/<target>/``)."""

    dir: Path
    name: str

    def artifact(self, name: str) -> Path:
        """The artifact's file, or for a SavedModel its version directory."""
        return self.dir / ARTIFACTS[name].path

    def artifact_files(self, name: str) -> list[Path]:
        """Every file the artifact's stage writes (a SavedModel's files, or the .tflite and its conversion record)."""
        row = ARTIFACTS[name]
        files_of_kind = {
            "saved_model": lambda: [self.artifact(name) / f for f in saved_model_files(row.jit_compile)],
            "tflite": lambda: list(self.converted_files(name).values()),
        }
        return files_of_kind[row.format]()

    def converted_files(self, name: str) -> dict[str, Path]:
        """The tflite stage's outputs for a TF Lite artifact, by their names in ``edge_build.stage_files``."""
        return {"model": self.artifact(name), "record": self.conversion_record(name), "test_logits": self.test_logits(name)}

    def conversion_record(self, name: str) -> Path:
        return self.dir / f"{name}.json"

    def test_logits(self, name: str) -> Path:
        """The TF Lite model's float logits on the test split, on TensorFlow's own interpreter."""
        return self.dir / f"{name}.test_logits.npy"

    @property
    def golden(self) -> Path:
        return self.dir / "golden.npz"

    @property
    def runtime_checks(self) -> Path:
        """Every figure of the runtime checks, timings included: what the report renders (the manifest records ``runtime_parity``)."""
        return self.dir / "runtime_checks.json"

    @property
    def runtime_parity(self) -> Path:
        """The runtime checks' machine-independent figures: what the manifest records."""
        return self.dir / "runtime_parity.json"

    @property
    def latency_plot(self) -> Path:
        return self.dir / "latency.png"

    @property
    def recommended(self) -> Path:
        """The model to deploy on each runtime, from the runtime checks (``edge_build.recommend``): what the manifest records."""
        return self.dir / "recommended.json"

    @property
    def runtime_check_files(self) -> dict[str, Path]:
        """What the runtime_check stage writes, by name."""
        return {
            "golden": self.golden,
            "checks": self.runtime_checks,
            "parity": self.runtime_parity,
            "recommended": self.recommended,
            "latency_plot": self.latency_plot,
        }

    @property
    def runtime_check_outputs(self) -> list[Path]:
        return list(self.runtime_check_files.values())

    @property
    def xla_checks(self) -> Path:
        return self.dir / "xla_checks.json"

    @property
    def evaluation(self) -> Path:
        return self.dir / "eval.json"

    @property
    def report(self) -> Path:
        return self.dir / "report.md"

    @property
    def manifest(self) -> Path:
        return self.dir / "manifest.json"

    @property
    def bundle_dir(self) -> Path:
        return self.dir / "bundle"

    @property
    def bundle_archive(self) -> Path:
        return self.dir / f"bundle-{self.name}.tar.gz"

    def bundle_names(self, runtime_artifacts: tuple[str, ...]) -> list[str]:
        """Every file of the bundle, relative to its folder."""
        models = [ARTIFACTS[name].path for name in runtime_artifacts]
        board = [f"board/{p.name}" for p in board_sources()]
        return sorted([*models, "vocab.txt", "labels.txt", "golden.npz", "README.md", *LAUNCHERS, "manifest.json", *board])

    def bundle_files(self, runtime_artifacts: tuple[str, ...]) -> list[Path]:
        return [*(self.bundle_dir / n for n in self.bundle_names(runtime_artifacts)), self.bundle_archive]

    def board_outputs(self, board: str) -> list[Path]:
        """One board's results (``config.boards.Board.name``): every figure as JSON, and its latency plot."""
        folder = self.dir / "boards" / board
        return [folder / "result.json", folder / "latency.png"]

    @property
    def boards_report(self) -> Path:
        """Every board of the run, side by side with the runtime checks of this machine."""
        return self.dir / "boards" / "report.md"


@dataclasses.dataclass(frozen=True)
class Layout:
    """The build directory's plan: every stage's outputs, by name.

    ``runtime_envs`` moves the provisioned runtime environments elsewhere (default
    ``<root>/runtime-envs``): they depend on nothing built, so build directories may share them.
    """

    root: Path
    runtime_envs: Path | None = None

    @property
    def data(self) -> Data:
        return Data(self.root / "data")

    @property
    def vocab(self) -> Path:
        return self.root / "vocab" / "vocab.txt"

    def token_ids(self, split: str) -> Path:
        """A split's int32 token ids ``[examples, sequence_length]``, tokenized as in training."""
        return self.root / "tokens" / f"{split}.npy"

    @property
    def weights(self) -> Path:
        return self.root / "model" / "model.weights.h5"

    @property
    def train_log(self) -> Path:
        return self.root / "model" / "train_log.json"

    @property
    def reference(self) -> Path:
        """The reference CPU SavedModel's version directory: every other artifact's yardstick."""
        return self.root / "reference" / "saved_model_cpu" / "1"

    @property
    def reference_files(self) -> list[Path]:
        return [self.reference / f for f in saved_model_files(jit_compile=False)]

    @property
    def reference_logits(self) -> Path:
        """The reference's logits on the test split (``serving_default`` on the raw texts)."""
        return self.root / "reference" / "test_logits.npy"

    @property
    def representative(self) -> Path:
        return self.root / "calibration" / "representative.npy"

    @property
    def calibration_summary(self) -> Path:
        return self.root / "calibration" / "summary.json"

    @property
    def baseline(self) -> Path:
        return self.root / "baseline" / "baseline.json"

    @property
    def quality(self) -> Path:
        return self.root / "quality" / "quality.json"

    @property
    def runtime_envs_dir(self) -> Path:
        return self.runtime_envs or self.root / "runtime-envs"

    def runtime_env(self, key: str) -> Path:
        """``env.json`` of one runtime environment (``stacks.EnvironmentSpec.key``); the environment itself lies beside it."""
        return self.runtime_envs_dir / key / "env.json"

    @property
    def apt(self) -> Path:
        """The private apt configuration, package lists and downloaded packages the runtime environments are assembled from."""
        return self.runtime_envs_dir / "apt"

    def target(self, name: str) -> Target:
        return Target(self.root / name, name)

    @property
    def reproducibility(self) -> Path:
        return self.root / "reproducibility.json"

    @property
    def reproducibility_dir(self) -> Path:
        return self.root / "reproducibility"

    def log(self, stage: str, output: Path) -> Path:
        """A stage's full output, beside where its first output goes: ``logs/<that folder, from the root>/<stage>.log``.

        An output outside the root (a shared runtime environment) logs under ``logs/elsewhere/<its absolute folder>/``.
        """
        folder = Path(output).parent
        if not folder.is_relative_to(self.root):
            folder = self.root / "elsewhere" / folder.resolve().relative_to("/")
        return self.root / "logs" / folder.relative_to(self.root) / f"{stage}.log"

    @property
    def shared_dirs(self) -> list[Path]:
        """Everything ``scons -c`` removes besides the targets' own directories."""
        return [
            self.root / d for d in ("data", "vocab", "tokens", "model", "reference", "calibration", "baseline", "quality", "reproducibility", "logs")
        ]
