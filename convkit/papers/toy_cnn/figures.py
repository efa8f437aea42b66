"""The fused-layer chapter's figures: the ladder (Table 2) as shares of each GPU's peak, and the block sweep."""

from __future__ import annotations

from typing import Any

import numpy as np


def ladder(table: Any, *, ax: Any = None) -> Any:
    """Table 2 as grouped bars: each step's share of the FP32 peak, ours (H100, measured peak) beside the
    report's (T4, 8.1 TFLOP/s datasheet peak); ``table`` is :func:`..results.ladder_table`'s."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.5))
    names = ["V5 fused" if n.startswith("V5:") else "V5 unfused" if n.startswith("V5's") else
             "V0" if n.startswith("GPU kernel") else n.split(" (")[-1].rstrip(")") for n in table.index]  # fmt: skip
    x = np.arange(len(table))
    ax.bar(x - 0.2, table["% of FP32 peak"], width=0.4, color="C0", label="ours, H100 (share of its FMA peak)")
    report = table["report % of T4 peak"]
    ax.bar(x + 0.2, report, width=0.4, color="C3", label="report, T4 (share of 8.1 TFLOP/s; no V5 there)")
    ax.set_xticks(x, [n.replace(" ", "\n", 1) for n in names], fontsize=9)
    ax.set_ylabel("share of FP32 peak (%)", fontsize=10)
    ax.set_xlabel("step of the ladder", fontsize=10)
    ax.tick_params(axis="y", labelsize=9)
    ax.set_ylim(0, 100)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=9, loc="upper left")
    ax.figure.tight_layout()
    return ax


def block_heatmap(sweep: Any, *, value: str = "tflops") -> Any:
    """One heatmap per block z: block x across, block y down, ``value`` (TFLOP/s) in each cell.

    ``sweep`` has columns bx, by, bz and ``value``.
    """
    import matplotlib.pyplot as plt

    zs = sorted(sweep["bz"].unique())
    xs, ys = sorted(sweep["bx"].unique()), sorted(sweep["by"].unique())
    fig, axes = plt.subplots(1, len(zs), figsize=(7, 3.2), squeeze=False, constrained_layout=True)
    top = float(sweep[value].max())
    image = None
    for ax, z in zip(axes[0], zs, strict=True):
        grid = np.full((len(ys), len(xs)), np.nan)
        for _, row in sweep[sweep["bz"] == z].iterrows():
            grid[ys.index(row["by"]), xs.index(row["bx"])] = row[value]
        image = ax.imshow(grid, vmin=0, vmax=top, cmap="viridis", origin="lower")
        for (i, j), v in np.ndenumerate(grid):
            if not np.isnan(v):
                ax.text(j, i, f"{v:.0f}", ha="center", va="center", fontsize=9, color="white" if v < 0.6 * top else "k")
        ax.set_xticks(range(len(xs)), [str(x) for x in xs], fontsize=9)
        ax.set_yticks(range(len(ys)), [str(y) for y in ys], fontsize=9)
        ax.set_xlabel("block x", fontsize=9)
        ax.set_title(f"block z = {z}", fontsize=10)
    axes[0][0].set_ylabel("block y (pooled rows)", fontsize=9)
    bar = fig.colorbar(image, ax=axes[0].tolist(), shrink=0.8)
    bar.set_label("V4 TFLOP/s (H100)", fontsize=9)
    return axes
