"""The Lu 2020 chapter's figures: the warp's register exchange (the layout of the paper's Figure 3)."""

from __future__ import annotations

from typing import Any

import numpy as np


def exchange_diagram(trace: Any, *, lanes: int = 8, ax: Any = None) -> Any:
    """A warp's register exchange (the layout of Lu et al. 2020's Figure 3) from a simulated trace: what each
    lane holds.

    One panel per stage (the loads, then each shuffle step; two panels a row), one column per lane t0.., one cell per
    window slot showing the global column it holds: loaded (blue), received earlier (pale orange),
    received in this step (orange, "<tN" naming the sending lane); the slots sent in a step have a
    thick edge. Why: the schedule, checked by the simulator, drawn as the paper draws it.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    k = trace.held.shape[1]
    lanes = min(lanes, trace.held.shape[0])
    band, width = k + 1.8, lanes + 1.6  # a stage's height (cells plus its title) and width (cells plus slot names)
    stages = [("loads", trace.loaded, None)] + [
        (f"step {i + 1} (j={s.step.slot}, xor {s.step.mask})", s.held, s) for i, s in enumerate(trace.steps)
    ]
    rows = (len(stages) + 1) // 2
    if ax is None:
        _, ax = plt.subplots(figsize=(7.0, 7.0 * (rows * band + 1.2) / (2 * width)))
    loaded = ~np.isnan(trace.loaded)
    for n, (title, held, step) in enumerate(stages):
        top, left = -(n // 2) * band, (n % 2) * width
        ax.text(left - 0.5, top - 0.3, title, fontsize=9, va="center", ha="left", fontweight="bold")
        for t in range(lanes):
            x = left + t
            if n < 2:
                ax.text(x, 0.5, f"t{t}", ha="center", va="bottom", fontsize=9)
            for slot in range(k):
                y = top - 1.4 - slot
                if t == 0:
                    ax.text(x - 0.6, y, f"s{slot}", ha="right", va="center", fontsize=8, color="grey")
                new = step is not None and slot == step.step.slot
                if np.isnan(held[t, slot]):
                    color, text = "white", ""
                elif loaded[t, slot]:
                    color, text = "C0", f"{held[t, slot]:.0f}"
                else:
                    color, text = ("C1" if new else "#f7d9b5"), f"{held[t, slot]:.0f}"
                sent = step is not None and slot == step.sent[t]
                ax.add_patch(Rectangle((x - 0.45, y - 0.45), 0.9, 0.9, facecolor=color, alpha=0.85 if color != "white"
                             else 1.0, edgecolor="black" if sent else "grey", linewidth=2.0 if sent else 0.5,
                             linestyle="-" if text else ":"))  # fmt: skip
                if text:
                    ax.text(x, y + (0.15 if new else 0), text, ha="center", va="center", fontsize=9,
                            color="white" if color == "C0" else "k")  # fmt: skip
                if new:
                    ax.text(x, y - 0.28, f"<t{step.partner[t]}", ha="center", va="center", fontsize=7)
    ax.set_xlim(-1.4, 2 * width - 1.4)
    ax.set_ylim(-rows * band + 0.2, 1.2)
    ax.set_aspect("equal")
    ax.axis("off")
    legend = "loaded: blue; shuffled: orange (<tN: from lane N); thick edge: sent in the step"
    ax.set_title(f"Column reuse, K = {k}: the global column in each window slot\n{legend}", fontsize=9)
    return ax
