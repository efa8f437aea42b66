"""The cuConv chapter's figures: its Figures 5-7 as grouped bars (the paper's design and our best)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: The paper's batch-1 averages drawn as lines (Figures 5 and 7, over cuDNN alone; it gives none for 3x3).
PAPER_MEANS: dict[int, float] = {1: 1.23, 5: 1.36}
#: Speedup ticks of the log axis, written as plain numbers.
TICKS = (0.0625, 0.125, 0.25, 0.5, 1, 2, 4)
#: Most layers in one panel: more are split over side-by-side panels, so that every label stays readable.
ROWS_PER_PANEL = 25


def speedup_bars(
    table: Any, *, filter_size: int, batch: int = 1, paper_mean: float | None = None, paper_point: Any = None
) -> Any:
    """One of the paper's Figures 5-7 at one batch size: per layer (its layer label, one row each), the paper's
    design and our best over the best library, side by side, each a segment from parity (1) to its value on a log
    axis, the
    paper's average (over cuDNN alone) as a labelled line and ``paper_point`` (layer label, speed-up) as a
    marker; more than :data:`ROWS_PER_PANEL` layers are split over panels side by side. ``table`` is
    :func:`convkit.papers.cuconv.results.speedup_table`'s. Returns the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    rows = table[(table["filter"] == filter_size) & (table["batch"] == batch)].sort_values(["size", "filters", "depth"])
    panels = max(1, math.ceil(len(rows) / ROWS_PER_PANEL))
    per_panel = math.ceil(len(rows) / panels)
    values = np.concatenate([rows["speedup_paper"].to_numpy(), rows["speedup_best"].to_numpy()])
    low, high = float(np.nanmin(values)), float(np.nanmax(values))
    ticks = [t for t in TICKS if low / 2 <= t <= high * 2]
    fig, axes = plt.subplots(1, panels, figsize=(7, 1.3 + 0.24 * per_panel), squeeze=False, sharex=True)
    for i, ax in enumerate(axes[0]):
        part = rows.iloc[i * per_panel : (i + 1) * per_panel]
        labels = list(part["label"])
        y = np.arange(len(labels))[::-1]
        # each speed-up a segment from parity to its value: on a log axis a ratio's length, not a bar's area
        for dy, column, colour, name in ((0.2, "speedup_paper", "C2", "the paper's design"),
                                         (-0.2, "speedup_best", "C0", "our best")):  # fmt: skip
            ax.hlines(y + dy, 1.0, part[column], color=colour, linewidth=2.2)
            ax.plot(part[column], y + dy, marker="o", markersize=4, color=colour, linestyle="none", label=name)
        ax.axvline(1.0, color="black", linewidth=0.9, label="parity with the best library")
        if paper_mean is not None:
            ax.axvline(paper_mean, color="C3", linestyle="--", linewidth=1.2,
                       label=f"the paper's mean on the V100, over cuDNN alone ({paper_mean}x)")  # fmt: skip
        if paper_point is not None and paper_point[0] in labels:
            ax.plot(paper_point[1], y[labels.index(paper_point[0])], marker="*", color="C3", markersize=12,
                    linestyle="none", label=f"the paper's {paper_point[0]} ({paper_point[1]}x)")  # fmt: skip
        ax.set_xscale("log")
        ax.set_xlim(min(0.8, low / 1.3), max(2.6, high * 1.4))
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}" if v >= 1 else f"1/{round(1 / v)}"))
        ax.set_yticks(y, labels, fontsize=9)
        ax.set_ylim(-0.7, per_panel - 0.3)
        ax.tick_params(axis="x", labelsize=9)
        ax.grid(True, axis="x", alpha=0.3)
        ax.set_xlabel("speed-up over the best library (x)", fontsize=9)
    handles, names = [], []
    for ax in axes[0]:
        for h, n in zip(*ax.get_legend_handles_labels(), strict=True):
            if n not in names:
                handles.append(h)
                names.append(n)
    fig.legend(handles, names, fontsize=9, loc="upper left", ncol=2, frameon=False,
               title=f"{filter_size}x{filter_size} filters, batch {batch}, layer label H-N-R-M-C", title_fontsize=9,
               alignment="left")  # fmt: skip
    legend_rows = math.ceil(len(names) / 2) + 1
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.19 * legend_rows / fig.get_figheight()))
    return fig
