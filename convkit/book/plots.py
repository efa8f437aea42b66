"""The study's figures, drawn from results tables (pandas DataFrames); matplotlib only.

Every figure of the book shares one style (:func:`book_style`, applied when a chapter imports
:mod:`convkit.book.chapter` in a notebook): tick labels of at least 8 pt, figures at twice the
screen's pixel density (``retina`` PNG), labelled ticks on log axes (``0.5x, 1x, 2x`` for ratios).
The roofline is the one :func:`convkit.study.roofline.roof` names, as every floor is.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

#: The book's matplotlib settings: readable ticks (>= 8 pt), 2x pixels for saved figures.
BOOK_RC: dict[str, Any] = {
    "font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "xtick.labelsize": 9, "ytick.labelsize": 9,
    "legend.fontsize": 9, "figure.titlesize": 11, "savefig.dpi": 200, "savefig.bbox": "tight",
}  # fmt: skip
#: Fewest points of one kind drawn small and see-through on a roofline (fewer are drawn as labelled dots).
DENSE_POINTS = 60
#: Most tick labels on one axis.
MAX_TICKS = 12


def book_style() -> None:
    """Apply :data:`BOOK_RC` and, inside a Jupyter kernel, show figures as 2x PNG (``retina``: twice the pixels,
    the same size on the page). Idempotent; a no-op for the inline format outside IPython."""
    import matplotlib as mpl

    mpl.rcParams.update(BOOK_RC)
    shell = None
    if "IPython" in sys.modules:
        from IPython import get_ipython

        shell = get_ipython()
    if shell is None or getattr(shell, "kernel", None) is None:
        return
    try:
        from matplotlib_inline.config import InlineBackend
    except ImportError:  # pragma: no cover - matplotlib-inline comes with ipykernel
        return
    InlineBackend.instance(parent=shell).figure_formats = {"retina"}


def _ratio_text(value: float, _pos: Any = None) -> str:
    """A ratio tick: ``0.25x``, ``1x``, ``8x``."""
    return f"{value:g}x"


def _plain_text(value: float, _pos: Any = None) -> str:
    """A log tick as a plain number: ``0.5``, ``20``, ``1,000``."""
    return f"{value:,.0f}" if value >= 1000 else f"{value:g}"


def ratio_axis(axis: Any) -> None:
    """A log ratio axis (speed-ups) with a label on every power of two (``0.5x, 1x, 2x, 4x``; every other power
    where more than :data:`MAX_TICKS` would show), placed when the figure is drawn."""
    from matplotlib import ticker

    axis.set_major_locator(ticker.LogLocator(base=2, numticks=MAX_TICKS))
    axis.set_major_formatter(ticker.FuncFormatter(_ratio_text))
    axis.set_minor_locator(ticker.NullLocator())


def log_axis(axis: Any, *, base: float = 10) -> None:
    """Plain-number labels on a log axis (``0.5``, ``20``, ``1,000``, not ``10^3``): 1, 2 and 5 times each power
    of ten (thinned to at most :data:`MAX_TICKS` when the figure is drawn), or each power of ``base``."""
    from matplotlib import ticker

    class Ticks(ticker.LogLocator):
        def tick_values(self, vmin: float, vmax: float) -> Any:  # 1-2-5 where the axis spans under 3 decades
            low, high = sorted((max(vmin, 1e-300), max(vmax, 1e-300)))
            self._subs = np.array((1.0, 2.0, 5.0) if base == 10 and high / low < 1e3 else (1.0,))
            return super().tick_values(vmin, vmax)

    axis.set_major_locator(Ticks(base=base, numticks=MAX_TICKS))
    axis.set_major_formatter(ticker.FuncFormatter(_plain_text))
    axis.set_minor_formatter(ticker.NullFormatter())


def latency_curve(curve: Any, *, l2_bytes: float | None = None, clock_mhz: float | None = None, ax: Any = None) -> Any:
    """Load latency in cycles against the pointer chase's footprint (log x), L2 size marked; with ``clock_mhz``,
    a right axis in nanoseconds at that clock."""
    import matplotlib.pyplot as plt

    ax = ax or plt.subplots(figsize=(7, 3.5))[1]
    ax.plot(curve["footprint_bytes"] / 2**20, curve["cycles"], marker="o", label="measured (median of chains)")
    ax.set_xscale("log", base=2)
    log_axis(ax.xaxis, base=2)
    ax.set_xlabel("footprint (MiB)", fontsize=10)
    ax.set_ylabel("cycles per dependent load", fontsize=10)
    ax.tick_params(labelsize=9)
    if l2_bytes:
        ax.axvline(l2_bytes / 2**20, color="grey", linestyle="--", label=f"L2 size ({l2_bytes / 2**20:.0f} MiB)")
    if clock_mhz:
        right = ax.secondary_yaxis("right", functions=(lambda c: c / clock_mhz * 1e3, lambda ns: ns * clock_mhz / 1e3))
        right.set_ylabel(f"ns at {clock_mhz:.0f} MHz", fontsize=10)
        right.tick_params(labelsize=9)
    ax.legend(fontsize=9, loc="upper left")
    ax.set_title("Global-memory load latency (pointer chase)", fontsize=11)
    ax.grid(True, alpha=0.3)
    return ax


#: The library's colour in every figure that sets it beside our kernels (theirs take the others, in order).
LIBRARY_COLOUR = "C1"


def _kind_colours(kinds: list[str]) -> list[str]:
    """A colour per kind of point: :data:`LIBRARY_COLOUR` for a library's, C0, C2, C3... for the others."""
    ours = iter(f"C{i}" for i in range(10) if f"C{i}" != LIBRARY_COLOUR)
    return [LIBRARY_COLOUR if "library" in kind.lower() else next(ours) for kind in kinds]


def roofline(
    ceilings: Mapping[str, float] | float,
    peak_tflops: float | None = None,
    *,
    points: Any = None,
    label: str = "SGEMM FP32",
    extra_ceilings: dict[str, float] | None = None,
    roofs: dict[str, tuple[float, float]] | None = None,
    ax: Any = None,
) -> Any:
    """Roofline: attainable GFLOP/s against arithmetic intensity, under the book's one roof.

    Args:
        ceilings: the ceilings' summary (:func:`convkit.study.roofline.ceilings_summary`): the roof drawn is
            :func:`convkit.study.roofline.roof` of it, the one every floor uses. Or, with ``peak_tflops``, the
            memory ceiling itself (GB/s).
        peak_tflops: the compute ceiling (TFLOP/s), named ``label``, where ``ceilings`` is a bandwidth.
        points: (label, FLOP/byte, GFLOP/s, kind) tuples; one colour per kind. Kinds of more than
            :data:`DENSE_POINTS` points are drawn small and see-through; every point lies inside the axes.
        extra_ceilings: further horizontal ceilings, name -> TFLOP/s.
        roofs: further whole roofs drawn dashed (a paper's or a datasheet's), name -> (GB/s, TFLOP/s).
    """
    import matplotlib.pyplot as plt

    from convkit.study.roofline import roof

    if isinstance(ceilings, Mapping):
        copy_gbps, peak_tflops = roof(dict(ceilings))
    elif peak_tflops is None:
        raise TypeError("roofline: give the ceilings' summary, or the copy bandwidth and peak_tflops")
    else:
        copy_gbps = float(ceilings)
    ax = ax or plt.subplots(figsize=(7, 3.8))[1]
    points = list(points) if points is not None else []
    intensities = [p[1] for p in points if p[1] > 0]
    ridge = peak_tflops * 1e3 / copy_gbps  # where the roof bends: always in view, with the data around it
    low = min([ridge / 10, *(0.5 * ai for ai in intensities)] if intensities else [ridge / 100])
    high = max([ridge * 10, *(2 * ai for ai in intensities)] if intensities else [ridge * 100])
    intensity = np.logspace(np.log10(low), np.log10(high), 200)
    ax.plot(
        intensity,
        np.minimum(intensity * copy_gbps, peak_tflops * 1e3),
        color="black",
        label=f"{copy_gbps:,.0f} GB/s, {peak_tflops:.1f} TFLOP/s {label}",
    )
    for i, (name, (gbps, tflops)) in enumerate((roofs or {}).items()):
        ax.plot(intensity, np.minimum(intensity * gbps, tflops * 1e3), color=f"C{i + 6}", linestyle="--",
                linewidth=1.2, label=f"{name}: {gbps:,.0f} GB/s, {tflops:.1f} TFLOP/s")  # fmt: skip
    for i, (name, tflops) in enumerate((extra_ceilings or {}).items()):
        ax.axhline(tflops * 1e3, color=f"C{i + 3}", linestyle=":", label=f"{name} {tflops:.1f} TFLOP/s")
    kinds = list(dict.fromkeys(p[3] for p in points))
    for kind, colour in zip(kinds, _kind_colours(kinds), strict=True):
        mine = [p for p in points if p[3] == kind]
        dense = len(mine) > DENSE_POINTS
        ax.scatter([p[1] for p in mine], [p[2] for p in mine], s=8 if dense else 22, alpha=0.35 if dense else 0.9,
                   linewidths=0, color=colour, label=f"{kind} ({len(mine):,})" if dense else kind)  # fmt: skip
        for name, ai, gflops, _ in mine:
            if name:
                ax.annotate(name, (ai, gflops), fontsize=9, xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    rates = [p[2] for p in points if p[2] > 0]
    top = max([peak_tflops, *(t for _, t in (roofs or {}).values()), *(extra_ceilings or {}).values()]) * 1e3
    bottom = min([low * copy_gbps, *(0.5 * r for r in rates)])
    ax.set_ylim(bottom=bottom, top=max([top, *rates]) * 3)  # every point inside, the roof clear of the top
    ax.set_xlim(low, high)
    ax.set_xlabel("arithmetic intensity (FLOP / byte of minimal traffic)", fontsize=10)
    ax.set_ylabel("GFLOP/s", fontsize=10)
    ax.tick_params(labelsize=9)
    ax.grid(True, which="major", alpha=0.3)
    legend = ax.legend(fontsize=9, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.16))  # below: covers no point
    for handle in legend.legend_handles:  # the legend's markers opaque, whatever the points' transparency
        if hasattr(handle, "set_alpha"):
            handle.set_alpha(1.0)
    return ax


def algorithm_times(
    frame: Any,
    *,
    names: dict[str, str] | None = None,
    quoted: dict[str, float] | None = None,
    quoted_label: str = "PyTorch, time quoted beforehand",
    ax: Any = None,
) -> Any:
    """Median time of every measured implementation per configuration (log scale), one marker each.

    Args:
        frame: a convolution results frame (rows of every status; only ``ok`` rows are drawn).
        names: label -> the configuration's name on the y axis (default: the label).
        quoted: label -> a time quoted for the configuration (us), drawn as a black bar named ``quoted_label``.
    """
    import matplotlib.pyplot as plt

    ok = frame[frame["status"] == "ok"].copy()
    ok["name"] = ok["impl"].replace({"cudnn": "cuDNN", "pytorch": "PyTorch"}) + " " + ok["variant"]
    labels = list(dict.fromkeys(frame["label"]))
    ax = ax or plt.subplots(figsize=(7, 0.3 * len(labels) + 2.6))[1]
    markers = "os^vD<>xP*"
    for i, (name, group) in enumerate(ok.groupby("name", sort=True)):
        y = [labels.index(lbl) for lbl in group["label"]]
        ax.scatter(group["time_ms_median"].astype(float) * 1e3, y, marker=markers[i % len(markers)], label=name, s=24)
    if quoted:
        kept = [(us, labels.index(lbl)) for lbl, us in quoted.items() if lbl in labels]
        ax.scatter([k[0] for k in kept], [k[1] for k in kept], marker="|", s=160, color="black",
                   label=quoted_label)  # fmt: skip
    ax.set_yticks(range(len(labels)), [(names or {}).get(lbl, lbl) for lbl in labels], fontsize=9)
    ax.invert_yaxis()
    ax.set_xscale("log")
    log_axis(ax.xaxis)
    ax.set_xlabel("median time (us)", fontsize=10)
    ax.set_title("Every implementation on every configuration", fontsize=11)
    ax.tick_params(axis="x", labelsize=9)
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.legend(fontsize=9, ncol=2, loc="upper center", bbox_to_anchor=(0.4, -0.12))
    return ax


def speedups(
    table: Any,
    variants: dict[str, str],
    *,
    x: str = "size",
    panels: str = "K",
    panel_label: str = "{}x{} filter",
    x_label: str = "image size (pixels per side)",
    paper: float | None = None,
    paper_label: str = "paper's mean",
    title: str = "",
) -> Any:
    """Figure 5-style: speed-up over the best library (log) against ``x`` (log 2), one panel per value of
    ``panels`` (the filter width), one marker per variant, grey bars where a kernel at the roofline floor
    would be, parity and the paper's number (a dashed red line labelled ``paper_label``)."""
    import matplotlib.pyplot as plt

    keys = sorted(table[panels].unique())
    fig, axes = plt.subplots(1, len(keys), figsize=(7, 3.5), sharey=True, squeeze=False)
    markers = "os^Dv"
    for ax, key in zip(axes[0], keys, strict=True):
        part = table[table[panels] == key]
        ax.plot(part[x], part["best_lib_us"] / part["floor_us"], "_", color="grey", ms=10, mew=1.5,
                label="a kernel at the roofline floor")  # fmt: skip
        for i, (variant, name) in enumerate(variants.items()):
            ax.plot(part[x] * 1.06 ** (i - (len(variants) - 1) / 2), part[f"speedup_{variant}"], markers[i % 5],
                    ms=4, alpha=0.8, label=name)  # fmt: skip
        ax.axhline(1.0, color="black", lw=0.8)
        if paper is not None:
            ax.axhline(paper, color="tab:red", ls="--", lw=1.0, label=f"{paper_label} {paper}x")
        ax.set_xscale("log", base=2)
        ticks = sorted(part[x].unique())
        ticks = ticks[:: int(np.ceil(len(ticks) / MAX_TICKS))]
        ax.set_xticks(ticks, [f"{t // 1024}k" if t >= 1024 and t % 1024 == 0 else str(t) for t in ticks],
                      fontsize=9, rotation=90 if len(ticks) > 5 else 0)  # fmt: skip
        ax.minorticks_off()
        ax.set_title(panel_label.format(key, key), fontsize=10)
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.tick_params(axis="y", labelsize=9)
    axes[0][0].set_yscale("log")
    ratio_axis(axes[0][0].yaxis)  # 0.5x, 1x, 2x, ...: every power of two labelled, not only 1x
    axes[0][0].set_ylabel("speed-up over the best library", fontsize=9)
    fig.supxlabel(x_label, fontsize=9)
    if title:
        fig.suptitle(title, fontsize=10)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=9, ncol=min(3, len(labels)), loc="lower center", bbox_to_anchor=(0.5, -0.16 -
               0.07 * (len(labels) > 3)), frameon=False)  # fmt: skip
    fig.tight_layout()
    return axes[0]


def error_by_k(curves: dict[str, Any], *, bars: dict[str, float] | None = None) -> Any:
    """Relative error against float64 (log) by K = C*R*S (log 2), one panel per kind of input (``curves``: name ->
    a frame with an implementation per row and a K per column), one line per implementation, styled alike in
    every panel; ``bars``: horizontal lines, dashed then dotted (name -> error)."""
    import matplotlib.pyplot as plt

    columns = 2 if len(curves) > 1 else 1
    rows = -(-len(curves) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(7, 2.6 * rows + 0.6), sharex=True, sharey=True, squeeze=False)
    markers = "os^Dv<>ph"
    methods = list(dict.fromkeys(m for frame in curves.values() for m in frame.index))  # one style per method
    handles: dict[str, Any] = {}
    for ax, (name, frame) in zip(axes.flat, curves.items(), strict=False):
        for method, values in frame.iterrows():
            i = methods.index(method)
            (handles[method],) = ax.plot(values.index, values.to_numpy(), marker=markers[i % len(markers)], ms=3.5,
                                         lw=1, label=method, color=f"C{i}")  # fmt: skip
        for j, (bar, value) in enumerate((bars or {}).items()):
            handles[bar] = ax.axhline(value, color="grey", ls=("--", ":", "-.")[j % 3], lw=1.0, label=bar)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        log_axis(ax.xaxis, base=16)  # K's powers of two labelled every fourth: "65,536" needs the room
        ax.set_title(name, fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
        ax.tick_params(labelsize=9)
    for ax in axes.flat[len(curves) :]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("relative error", fontsize=9)
    fig.supxlabel("K = C x R x S (the length of each dot product)", fontsize=9)
    fig.legend(list(handles.values()), list(handles), fontsize=8.5, ncol=3, loc="lower center",
               bbox_to_anchor=(0.5, -0.02 - 0.045 * -(-len(handles) // 3)), frameon=False)  # fmt: skip
    fig.tight_layout()
    return axes
