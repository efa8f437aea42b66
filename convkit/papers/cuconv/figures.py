"""The cuConv chapter's figures: its Figures 5-7 as grouped bars (the paper's design and our best variant)."""

from __future__ import annotations

from typing import Any

import numpy as np

#: The paper's batch-1 averages drawn as lines (Figures 5 and 7; it gives none for 3x3).
PAPER_MEANS: dict[int, float] = {1: 1.23, 5: 1.36}
#: Speedup ticks of the log axis, written as plain numbers.
TICKS = (0.0625, 0.125, 0.25, 0.5, 1, 2, 4)


def speedup_bars(
    table: Any, *, filter_size: int, batch: int = 1, paper_mean: float | None = None, paper_point: Any = None
) -> Any:
    """One of the paper's Figures 5-7 at one batch size: per configuration (``[input]-[filters]-[depth]``),
    the paper's design and our best variant over the best cuDNN algorithm, side by side, log scale,
    parity at 1, the paper's average as a labelled line and ``paper_point`` (fig_label, speedup) as a
    marker. ``table`` is :func:`convkit.papers.cuconv.results.speedup_table`'s."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    rows = table[(table["filter"] == filter_size) & (table["batch"] == batch)].sort_values(["size", "filters", "depth"])
    labels = list(rows["fig_label"])
    x = np.arange(len(labels))
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.bar(x - 0.2, rows["speedup_paper"], width=0.4, color="C0", label="paper's design")
    ax.bar(x + 0.2, rows["speedup_best"], width=0.4, color="C1", label="our best variant")
    ax.axhline(1.0, color="black", linewidth=0.9, label="parity with cuDNN's best")
    if paper_mean is not None:
        ax.axhline(
            paper_mean, color="C3", linestyle="--", linewidth=1.2, label=f"paper's mean on the V100 ({paper_mean}x)"
        )
    if paper_point is not None and paper_point[0] in labels:
        ax.plot(labels.index(paper_point[0]), paper_point[1], marker="*", color="C3", markersize=12, linestyle="none",
                label=f"paper's {paper_point[0]} ({paper_point[1]}x)")  # fmt: skip
    ax.set_yscale("log")
    values = np.concatenate([rows["speedup_paper"].to_numpy(), rows["speedup_best"].to_numpy()])
    low, high = float(np.nanmin(values)), float(np.nanmax(values))
    ax.set_ylim(min(0.8, low / 1.3), max(2.6, high * 1.6))
    ticks = [t for t in TICKS if low / 2 <= t <= high * 2]
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_ylabel("speedup over cuDNN's best (x)", fontsize=10)
    ax.set_xlabel(f"configuration, batch {batch}: input size - filters - depth", fontsize=10)
    ax.set_xticks(x, labels, rotation=90, fontsize=9 if len(labels) <= 30 else 8)
    ax.set_xlim(-0.7, len(labels) - 0.3)
    ax.tick_params(axis="y", labelsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(
        fontsize=9,
        loc="lower left",
        bbox_to_anchor=(0.0, 1.01),
        ncol=3,
        frameon=False,
        title=f"{filter_size}x{filter_size} filters, batch {batch}",
        title_fontsize=10,
        alignment="left",
    )
    fig.tight_layout()
    return ax
