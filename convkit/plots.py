"""The study's figures, drawn from results tables (pandas DataFrames); matplotlib only."""

from __future__ import annotations

from typing import Any

import numpy as np


def latency_curve(curve: Any, *, l2_bytes: float | None = None, ax: Any = None) -> Any:
    """Load latency in cycles against the pointer chase's footprint (log x), L2 size marked."""
    import matplotlib.pyplot as plt

    ax = ax or plt.subplots(figsize=(6.5, 3.6))[1]
    ax.plot(curve["footprint_bytes"] / 2**20, curve["cycles"], marker="o")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("footprint (MiB)")
    ax.set_ylabel("cycles per dependent load")
    if l2_bytes:
        ax.axvline(l2_bytes / 2**20, color="grey", linestyle="--", label="L2 size")
        ax.legend()
    ax.set_title("Global-memory load latency (pointer chase)")
    ax.grid(True, alpha=0.3)
    return ax


def roofline(
    copy_gbps: float,
    peak_tflops: float,
    *,
    points: Any = None,
    label: str = "SGEMM FP32",
    extra_ceilings: dict[str, float] | None = None,
    ax: Any = None,
) -> Any:
    """Roofline: attainable GFLOP/s against arithmetic intensity.

    Args:
        copy_gbps: memory ceiling (GB/s).
        peak_tflops: compute ceiling (TFLOP/s), named ``label``.
        points: (label, FLOP/byte, GFLOP/s, kind) tuples; one colour per kind.
        extra_ceilings: further horizontal ceilings, name -> TFLOP/s.
    """
    import matplotlib.pyplot as plt

    ax = ax or plt.subplots(figsize=(6.5, 4))[1]
    intensity = np.logspace(-2, 4, 200)
    ax.plot(
        intensity,
        np.minimum(intensity * copy_gbps, peak_tflops * 1e3),
        color="black",
        label=f"{copy_gbps:.0f} GB/s, {peak_tflops:.1f} TFLOP/s {label}",
    )
    for i, (name, tflops) in enumerate((extra_ceilings or {}).items()):
        ax.axhline(tflops * 1e3, color=f"C{i + 3}", linestyle=":", label=f"{name} {tflops:.1f} TFLOP/s")
    kinds = list(dict.fromkeys(p[3] for p in points)) if points is not None else []
    for k, kind in enumerate(kinds):
        mine = [p for p in points if p[3] == kind]
        ax.scatter([p[1] for p in mine], [p[2] for p in mine], s=18, color=f"C{k}", label=kind)
        for name, ai, gflops, _ in mine:
            if name:
                ax.annotate(name, (ai, gflops), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte of minimal traffic)")
    ax.set_ylabel("GFLOP/s")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    return ax


def algorithm_times(frame: Any, *, ax: Any = None) -> Any:
    """Median time of every measured implementation per configuration (log scale), one marker each."""
    import matplotlib.pyplot as plt

    ok = frame[frame["status"] == "ok"].copy()
    ok["name"] = ok["impl"] + " " + ok["variant"]
    labels = list(dict.fromkeys(frame["label"]))
    ax = ax or plt.subplots(figsize=(9, 0.35 * len(labels) + 1.5))[1]
    markers = "os^vD<>xP*"
    for i, (name, group) in enumerate(ok.groupby("name", sort=True)):
        y = [labels.index(lbl) for lbl in group["label"]]
        ax.scatter(group["time_ms_median"].astype(float) * 1e3, y, marker=markers[i % len(markers)], label=name, s=22)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("median time (us)")
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.legend(fontsize=7, bbox_to_anchor=(1.01, 1), loc="upper left")
    return ax


def speedup_by_batch(
    table: Any, *, filter_size: int, batches: tuple[int, ...], column: str, title: str, axes: Any = None
) -> Any:
    """Speed-up over a baseline per configuration, one panel per batch size (the layout of cuConv's Figures 5-7).

    One panel per batch size, one bar per configuration labelled ``[input]-[filters]-[depth]``,
    log scale with the break-even line at 1 (above it convkit is faster).

    Args:
        table: one row per problem with columns batch, filter, fig_label and ``column``.
        filter_size: 1, 3 or 5.
        batches: the batch sizes to show (the paper: 1x1 up to 64, 3x3 up to 16, 5x5 up to 256).
        column: ``speedup_paper`` or ``speedup_best``.
        title: the figure's title.
    """
    import matplotlib.pyplot as plt

    rows = table[table["filter"] == filter_size]
    labels = list(dict.fromkeys(rows.sort_values(["size", "filters", "depth"])["fig_label"]))
    if axes is None:
        fig, axes = plt.subplots(len(batches), 1, figsize=(max(6.0, 0.22 * len(labels) + 1.5), 1.9 * len(batches)),
                                 sharex=True, squeeze=False)  # fmt: skip
        axes = axes[:, 0]
        fig.suptitle(title, fontsize=10)
    for ax, batch in zip(axes, batches, strict=True):
        values = rows[rows["batch"] == batch].set_index("fig_label")[column].reindex(labels)
        colors = ["C2" if v > 1 else "C3" for v in values.fillna(0)]
        ax.bar(range(len(labels)), values.to_numpy(), color=colors)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_ylabel(f"batch {batch}", fontsize=8)
        ax.grid(True, axis="y", which="both", alpha=0.3)
    axes[-1].set_xticks(range(len(labels)), labels, rotation=90, fontsize=6)
    plt.tight_layout()
    return axes


def block_heatmap(sweep: Any, *, value: str = "tflops", title: str = "V4 over block shapes") -> Any:
    """One heatmap per block z: block x across, block y down, ``value`` (TFLOP/s) in each cell.

    ``sweep`` has columns bx, by, bz and ``value``.
    """
    import matplotlib.pyplot as plt

    zs = sorted(sweep["bz"].unique())
    xs, ys = sorted(sweep["bx"].unique()), sorted(sweep["by"].unique())
    fig, axes = plt.subplots(1, len(zs), figsize=(3.2 * len(zs), 3.2), squeeze=False, constrained_layout=True)
    top = float(sweep[value].max())
    for ax, z in zip(axes[0], zs, strict=True):
        grid = np.full((len(ys), len(xs)), np.nan)
        for _, row in sweep[sweep["bz"] == z].iterrows():
            grid[ys.index(row["by"]), xs.index(row["bx"])] = row[value]
        image = ax.imshow(grid, vmin=0, vmax=top, cmap="viridis", origin="lower")
        for (i, j), v in np.ndenumerate(grid):
            if not np.isnan(v):
                ax.text(j, i, f"{v:.1f}", ha="center", va="center", fontsize=8, color="white" if v < 0.6 * top else "k")
        ax.set_xticks(range(len(xs)), [str(x) for x in xs])
        ax.set_yticks(range(len(ys)), [str(y) for y in ys])
        ax.set_xlabel("block x (pooled columns)")
        ax.set_title(f"block z = {z}")
    axes[0][0].set_ylabel("block y (pooled rows)")
    fig.colorbar(image, ax=axes[0].tolist(), label="TFLOP/s")
    fig.suptitle(title)
    return axes


def ladder(table: Any, *, ax: Any = None) -> Any:
    """Table 2 as bars: TFLOP/s of each step on this GPU (log scale), the report's T4 GFLOP/s beside."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.5))
    positions = np.arange(len(table))
    ax.bar(positions - 0.2, table["TFLOP/s"], width=0.4, label="this GPU")
    ax.bar(positions + 0.2, table["report GFLOP/s"] / 1e3, width=0.4, label="report (T4)")
    ax.set_xticks(positions, [name.split(" (")[0][:28] for name in table.index], rotation=20, ha="right")
    ax.set_yscale("log")
    ax.set_ylabel("TFLOP/s")
    ax.legend()
    return ax


def speedups(table: Any, variants: dict[str, str], *, paper_mean: float | None = None, title: str = "") -> Any:
    """Figure 5-style: speedup over the best library per configuration (one marker series per variant),
    with the room a kernel at the roofline floor would have, parity and the paper's mean."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 3.8))
    x = range(len(table))
    for variant, name in variants.items():
        ax.plot(x, table[f"speedup_{variant}"], "o", ms=4, label=name)
    ax.plot(x, table["best_lib_us"] / table["floor_us"], "_", color="grey", ms=8, label="at the floor")
    ax.axhline(1.0, color="black", lw=0.8)
    if paper_mean is not None:
        ax.axhline(paper_mean, color="tab:red", ls="--", lw=0.8, label=f"paper's mean {paper_mean}x")
    ax.set_xticks(list(x), table["label"], rotation=90, fontsize=6)
    ax.set_yscale("log")
    ax.set_ylabel("speedup over best library")
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=4)
    fig.tight_layout()
    return ax


def exchange_diagram(trace: Any, *, lanes: int = 8, ax: Any = None) -> Any:
    """A warp's register exchange (the layout of Lu et al. 2020's Figure 3) from a simulated trace: what each
    lane holds.

    One band per stage (the loads, then each shuffle step), one column per lane t0.., one cell per
    window slot showing the global column it holds: loaded (blue), received earlier (pale orange),
    received in this step (orange, "<tN" naming the sending lane); the slots sent in a step have a
    thick edge. Why: the schedule, checked by the simulator, drawn as the paper draws it.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    k = trace.held.shape[1]
    lanes = min(lanes, trace.held.shape[0])
    band = k + 1.6  # cells plus the band's title
    stages = [("loads", trace.loaded, None)] + [
        (f"step {i + 1} (j={s.step.slot}, xor {s.step.mask})", s.held, s) for i, s in enumerate(trace.steps)
    ]
    if ax is None:
        _, ax = plt.subplots(figsize=(0.7 * lanes + 1.2, 0.3 * band * len(stages) + 0.4))
    loaded = ~np.isnan(trace.loaded)
    for n, (title, held, step) in enumerate(stages):
        top = -n * band
        ax.text(-0.5, top - 0.3, title, fontsize=8, va="center", ha="left", fontweight="bold")
        for t in range(lanes):
            for slot in range(k):
                y = top - 1.4 - slot
                if t == 0:
                    ax.text(-0.6, y, f"s{slot}", ha="right", va="center", fontsize=6, color="grey")
                new = step is not None and slot == step.step.slot
                if np.isnan(held[t, slot]):
                    color, text = "white", ""
                elif loaded[t, slot]:
                    color, text = "C0", f"{held[t, slot]:.0f}"
                else:
                    color, text = ("C1" if new else "#f7d9b5"), f"{held[t, slot]:.0f}"
                sent = step is not None and slot == step.sent[t]
                ax.add_patch(Rectangle((t - 0.45, y - 0.45), 0.9, 0.9, facecolor=color, alpha=0.85 if color != "white"
                             else 1.0, edgecolor="black" if sent else "grey", linewidth=2.0 if sent else 0.5,
                             linestyle="-" if text else ":"))  # fmt: skip
                if text:
                    ax.text(t, y, text, ha="center", va="center", fontsize=7, color="white" if color == "C0" else "k")
                if new:
                    ax.text(t + 0.42, y - 0.42, f"<t{step.partner[t]}", ha="right", va="bottom", fontsize=5)
    for t in range(lanes):
        ax.text(t, 0.7, f"t{t}", ha="center", va="bottom", fontsize=8)
    ax.set_xlim(-1.0, lanes - 0.4)
    ax.set_ylim(-len(stages) * band + 0.3, 1.4)
    ax.set_aspect("equal")
    ax.axis("off")
    legend = "loaded: blue, shuffled: orange (<tN: from lane N), thick edge: sent in the step"
    ax.set_title(f"Column reuse, K = {k}: global column in each window slot\n{legend}", fontsize=8)
    return ax
