"""The latency plot of the runtime checks and of each board: one box per model and runtime."""

from __future__ import annotations

from pathlib import Path

from edge_build.typed_records import CheckTable


def plot_latency(series: list[tuple[str, list[float]]], path: Path, title: str = "Device runtime latency per invoke") -> None:
    """A box plot of per-invoke latencies (``(label, microseconds)`` per box, log scale) as PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(max(4, 2.2 * len(series)), 4))
    if series:
        axes.boxplot([values for _, values in series], showfliers=True)
        axes.set_xticks(range(1, len(series) + 1), [label for label, _ in series])
        axes.set_yscale("log")
    axes.set_ylabel("per-invoke latency (µs, log scale)")
    axes.set_title(title)
    figure.tight_layout()
    figure.savefig(path, format="png", dpi=100, metadata={"Software": None})
    plt.close(figure)


def latency_series(checks: CheckTable) -> list[tuple[str, list[float]]]:
    """One box per model and runtime that ran."""
    return [(f"{o.artifact}\n{o.runtime}", o.record["latency"]["invoke_us"]) for o in checks.ran()]
