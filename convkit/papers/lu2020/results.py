"""The Lu 2020 chapter's numbers, from the recorded sweep, the ncu profile and the compiler (CPU only).

:func:`single_table` and :func:`multi_table` give one row per configuration: each kernel's time, the
peers' (every cuDNN algorithm alone, PyTorch's autotuned cuDNN, ``cupyx.scipy.ndimage.correlate``),
the roofline floor and the speedups. :func:`transactions` sets the ncu load counters beside the warp
simulator's counts, :func:`compiler_table` gives ptxas's verdict on the window array per architecture,
:func:`paper_vs_ours` sets every item of the paper beside ours, :func:`result_lines` is the chapter's
result box, :func:`goals` what the study set out to reach and :func:`findings` the book's findings rows.
Each library against the floor, and the kernel past the paper, are in :mod:`.libraries`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.families.lu2020.launch import NDIMAGE_PEER, SINGLE_VARIANTS, WIDE
from convkit.libs.pytorch import VARIANT as PYTORCH_VARIANT
from convkit.papers.lu2020 import warp_sim
from convkit.papers.lu2020.loads import VARIANT_NAMES, figure1_table, row_reuse_table
from convkit.study import tables
from convkit.study.results import load_results
from convkit.study.roofline import recorded_ceilings

#: The sweep's, its repeated sample's and the ncu profile's experiments (as :mod:`convkit.papers.lu2020` names them).
EXPERIMENT, REPEAT, PROFILE_EXPERIMENT = "lu2020", "lu2020_repeat", "lu2020_kernels"
#: The single-channel kernels: the paper's ladder, then the one past it.
SINGLE_KERNELS = (*(f"lu_{v}" for v in SINGLE_VARIANTS), f"lu_{WIDE}")
#: What the study set out to reach on the H100: single channel against the fastest of cuDNN and cupyx.ndimage
#: for 5x5 and 7x7 filters on images from 1024 x 1024 (each at least 2x, moonshot geometric mean 4x); multi channel
#: against the best cuDNN algorithm.
SINGLE_TARGET, SINGLE_MOONSHOT, MULTI_TARGET = 2.0, 4.0, 1.3
TARGET_FILTERS, TARGET_MIN_SIZE = (5, 7), 1024
#: Past the paper: the share of the roofline floor the best single-channel kernel set out to reach on those images.
FLOOR_TARGET = 0.8


#: NVIDIA NPP's filter, the second image-processing peer (``convkit.libs.npp``).
NPP_PEER = "nppi_filter"
#: NVIDIA CV-CUDA's conv2d, the third (``convkit.libs.cvcuda``).
CVCUDA_PEER = "cvcuda_conv2d"


def _library_name(variant: str) -> str:
    """How the chapter names a library case: ``cuDNN <algorithm>``, ``PyTorch (cuDNN)``, ``cupyx.ndimage``."""
    names = {PYTORCH_VARIANT: "PyTorch (cuDNN)", NDIMAGE_PEER: "cupyx.ndimage", NPP_PEER: "NVIDIA NPP",
             CVCUDA_PEER: "CV-CUDA"}  # fmt: skip
    return names.get(variant, f"cuDNN {variant}")


def _problem_rows(frame: Any, variants: list[str], ceilings: dict[str, float], *, single: bool) -> list[dict[str, Any]]:
    """:func:`convkit.study.tables.problem_rows` of the single-channel images or the multi-channel layers, with
    the configuration's N, C, M, size and K."""
    rows = tables.problem_rows(frame, variants, ceilings, where=lambda ok: (ok["C"].astype(int) == 1) == single)
    for row in rows:
        problem: ConvProblem = row["problem"]
        row.update({"N": problem.n, "C": problem.c, "M": problem.m, "size": problem.h, "K": problem.r})
    return rows


def single_table(frame: Any, ceilings: dict[str, float]) -> Any:
    """One row per single-channel image (pandas), the columns of :func:`convkit.study.tables.problem_row`: each
    kernel's ``<variant>_us``, ``best_cudnn_us``, ``pytorch_us``, the fastest library (``best_lib``, named
    as :func:`_library_name` does, and ``best_lib_us``), ``speedup_<variant>`` (best library over ours),
    ``ndimage_us``, ``npp_us`` and ``cvcuda_us`` (NaN where not measured), ``efficiency`` of the combined
    kernel (floor over time), ``best_kernel`` (named as :data:`VARIANT_NAMES` does), its ``best_us``,
    ``efficiency_best`` and ``speedup_best``, and ``naive_over_packed``."""
    import pandas as pd

    ok = tables.timed(frame)
    rows = _problem_rows(frame, list(SINGLE_KERNELS), ceilings, single=True)
    for row in rows:
        images = ok[ok["label"] == row["label"]]
        row["ndimage_us"] = tables.fastest(images[images["impl"] == "cupyx"])[1]
        row["npp_us"] = tables.fastest(images[images["impl"] == "npp"])[1]
        row["cvcuda_us"] = tables.fastest(images[images["impl"] == "cvcuda"])[1]
        row["best_lib"] = _library_name(row["best_lib"]) if row["best_lib"] else ""
        row["efficiency"] = row.get("efficiency_lu_combined", math.nan)
        best, row["best_us"] = tables.fastest(images[images["impl"] == "convkit"])
        row["best_kernel"] = VARIANT_NAMES.get(best, best)
        row["efficiency_best"] = row["floor_us"] / row["best_us"]
        row["speedup_best"] = row["best_lib_us"] / row["best_us"]
        row["naive_over_packed"] = row.get("lu_column_naive_us", math.nan) / row.get("lu_column_us", math.nan)
    return pd.DataFrame(rows).sort_values(["K", "size"]).reset_index(drop=True)


def multi_table(frame: Any, ceilings: dict[str, float]) -> Any:
    """One row per multi-channel layer (pandas): ``lu_multi_us``, ``best_cudnn`` and its time, PyTorch's,
    ``speedup`` (best cuDNN algorithm over ours), ``speedup_vs_pytorch``, TFLOP/s of both."""
    import pandas as pd

    rows = _problem_rows(frame, ["lu_multi"], ceilings, single=False)
    for row in rows:
        flops = row["problem"].flops
        row["speedup"] = row["best_cudnn_us"] / row.get("lu_multi_us", math.nan)
        row["speedup_vs_pytorch"] = row["pytorch_us"] / row.get("lu_multi_us", math.nan)
        row["tflops_lu_multi"] = flops / row.get("lu_multi_us", math.nan) / 1e6
        row["tflops_best_cudnn"] = flops / row["best_cudnn_us"] / 1e6
    return pd.DataFrame(rows).sort_values(["N", "size", "C", "M"]).reset_index(drop=True)


#: The libraries of the single-channel sweep: :func:`single_table`'s time column -> the name a reader meets.
LIBRARY_COLUMNS = {"best_cudnn_us": "cuDNN (fastest algorithm)", "pytorch_us": "PyTorch (cuDNN)",
                   "ndimage_us": "cupyx.ndimage", "npp_us": "NVIDIA NPP", "cvcuda_us": "CV-CUDA"}  # fmt: skip


def libraries_measured(single: Any) -> str:
    """The libraries with a time on some image, as a reader meets them: "cuDNN, PyTorch, ... and CV-CUDA"."""
    names = LIBRARY_COLUMNS | {"best_cudnn_us": "cuDNN", "pytorch_us": "PyTorch"}
    shown = [names[c] for c in LIBRARY_COLUMNS if c in single and single[c].notna().any()]
    return ", ".join(shown[:-1]) + f" and {shown[-1]}" if len(shown) > 1 else "".join(shown)


def tie_tolerance(spread: dict[str, float] | None) -> float:
    """The spread's 95th percentile: speed-ups within it of 1 are ties (0 where none is recorded)."""
    p95 = (spread or {}).get("p95", math.nan)
    return 0.0 if math.isnan(p95) else p95


def in_target(single: Any) -> Any:
    """The single-channel images the study's first goal covers: 5x5 and 7x7 filters, images from 1024 x 1024."""
    return single[single["K"].isin(TARGET_FILTERS) & (single["size"] >= TARGET_MIN_SIZE)]


def goals(single: Any, multi: Any, spread: dict[str, float] | None = None) -> Any:
    """What the study set out to reach on the H100 beside what was measured (pandas), one row each; ties with a
    library are differences within the ``spread``'s 95th percentile."""
    import pandas as pd

    covered = in_target(single)["speedup_lu_combined"]
    geomean = tables.geomean(covered)
    wins = multi["speedup"] >= MULTI_TARGET
    ratio = single["naive_over_packed"]
    share = in_target(single)["efficiency_best"]
    tolerance = tie_tolerance(spread)
    versus = single["speedup_best"]
    return pd.DataFrame([
        {"what the study set out to reach": f"single channel, 5x5 and 7x7, from {TARGET_MIN_SIZE}^2: every image "
                   f">= {SINGLE_TARGET}x over the fastest of {libraries_measured(single)}",
         "measured": f"min {covered.min():.2f}x, {int((covered >= SINGLE_TARGET).sum())} of {len(covered)} at "
                     f"{SINGLE_TARGET}x or more",
         "reached": bool(len(covered)) and bool((covered >= SINGLE_TARGET).all())},
        {"what the study set out to reach": f"stretch: geometric mean >= {SINGLE_MOONSHOT}x over the same images",
         "measured": f"{geomean:.2f}x", "reached": geomean >= SINGLE_MOONSHOT},
        {"what the study set out to reach": f"multi channel: >= {MULTI_TARGET}x over the best cuDNN FP32 algorithm",
         "measured": f"{int(wins.sum())} of {len(multi)} layers; mean {multi['speedup'].mean():.2f}x, "
                     f"max {multi['speedup'].max():.2f}x", "reached": bool(len(multi)) and bool(wins.all())},
        {"what the study set out to reach": "naive and packed column reuse timed side by side",
         "measured": f"naive / packed time: median {ratio.median():.2f}x ({ratio.min():.2f}x..{ratio.max():.2f}x)",
         "reached": bool(ratio.notna().any())},
        {"what the study set out to reach": f"past the paper: the best kernel at >= {FLOOR_TARGET:.0%} of the roofline "
                   f"floor, 5x5 and 7x7 from {TARGET_MIN_SIZE}^2",
         "measured": f"{share.min():.0%}..{share.max():.0%} (median {share.median():.0%}); "
                     f"{int((share >= FLOOR_TARGET).sum())} of {len(share)} images",
         "reached": bool(len(share)) and bool((share >= FLOOR_TARGET).all())},
        {"what the study set out to reach": "past the paper: the best kernel at least as fast as the fastest of "
                   f"{libraries_measured(single)} on every image",
         "measured": f"min {versus.min():.2f}x; {int((versus >= 1 - tolerance).sum())} of {len(versus)} images at "
                     f"1.0x or within the spread",
         "reached": bool(len(versus)) and bool((versus >= 1 - tolerance).all())},
    ])  # fmt: skip


def chapter_tables(directory: Path, experiment: str = EXPERIMENT) -> tuple[Any, Any]:
    """(:func:`single_table`, :func:`multi_table`) of the sweep recorded in ``directory``."""
    frame, _ = load_results(Path(directory), experiment)
    ceil = recorded_ceilings(Path(directory))
    if ceil is None:
        raise FileNotFoundError(f"no ceilings recorded in {Path(directory).name}: the floors need them")
    return single_table(frame, ceil), multi_table(frame, ceil)


def result_lines(single: Any, multi: Any) -> list[str]:
    """The chapter's result box: the paper's claims, what the H100 measured, the verdict."""
    covered = in_target(single)
    speed = covered["speedup_lu_combined"]
    wins = int((multi["speedup"] >= 1).sum())
    wide = covered["floor_us"] / covered["lu_wide_us"]
    single_holds = bool(len(speed)) and bool((speed > 2.0).all())
    multi_holds = bool(len(multi)) and float(multi["speedup"].max()) >= 1.0 and wins > len(multi) / 2
    return [
        "**The paper** (RTX 2080 Ti): column reuse cuts a 5x5 window's global loads from 25 to 10, row reuse loads "
        "each input row once; 2D convolution runs more than 2x faster than image-processing libraries, and "
        "multi-channel layers up to 1.3x faster than the fastest cuDNN algorithm.",
        f"**Single channel on the H100** (5x5 and 7x7, images from {TARGET_MIN_SIZE}x{TARGET_MIN_SIZE}): column + "
        f"row reuse runs {speed.min():.2f}x to {speed.max():.2f}x faster than the fastest of "
        f"{libraries_measured(single)} (geometric mean {tables.geomean(speed):.2f}x), at "
        f"{covered['efficiency'].median():.0%} of the roofline floor (median).",
        f"**Past the paper**: four output columns a lane, loaded 16 bytes at a time, reach {wide.median():.0%} of "
        f"the roofline floor on the same images (median; {wide.min():.0%} to {wide.max():.0%}), and the best kernel "
        f"is {single['speedup_best'].min():.2f}x to {single['speedup_best'].max():.2f}x the fastest library on every "
        "image.",
        f"**Multi channel on the H100**: faster than the best cuDNN algorithm on {wins} of {len(multi)} VGG19 and "
        f"ResNet-50 3x3 layers (mean {multi['speedup'].mean():.2f}x, best {multi['speedup'].max():.2f}x).",
        "**Verdict**: the single-channel claim " + ("holds" if single_holds else "does not hold")
        + " on the H100; the multi-channel one " + ("holds" if multi_holds else "does not")
        + (": cuDNN's implicit GEMM and Winograd reuse each loaded value far more than a direct kernel can."
           if not multi_holds else "."),
    ]  # fmt: skip


def naive_summary(single: Any, counters: Any) -> Any:
    """Per filter width: naive over packed column reuse (time, median and range over the images) and the
    local-memory sectors ncu counted for each on the profiled image (pandas)."""
    import pandas as pd

    rows = []
    for k, part in single.groupby("K"):
        ratio = part["naive_over_packed"]
        local = counters[counters["K"] == k].set_index("kernel")["local sectors (ld + st)"]
        rows.append({"K": int(k), "naive / packed time, median": ratio.median(), "min": ratio.min(),
                     "max": ratio.max(), "local sectors, naive": local.get(VARIANT_NAMES["lu_column_naive"]),
                     "local sectors, packed": local.get(VARIANT_NAMES["lu_column"])})  # fmt: skip
    return pd.DataFrame(rows)


def paper_vs_ours(single: Any, multi: Any, loads: Any, counters: Any) -> Any:
    """Every figure, algorithm and number of the paper beside the H100's (pandas), in the paper's order."""
    import pandas as pd

    k5 = loads[loads["k"] == 5].set_index("method")
    paper = warp_sim.PAPER_LOADS  # (loads per row, per window) the paper states at K = 5
    (direct_row, direct_window), (column_row, column_window) = paper[5, "direct"], paper[5, "column"]
    covered = in_target(single)["speedup_lu_combined"]
    fig1 = figure1_table().set_index("kernel")["input loads"]
    five = warp_sim.exchange_schedule(5)
    naive = naive_summary(single, counters).set_index("K")
    row = row_reuse_table().iloc[0]
    names = VARIANT_NAMES
    return pd.DataFrame([
        {"item": "Figure 1: overlapping windows (5x5 filter, 6x11 image)",
         "paper (RTX 2080 Ti)": "threads 0 and 1 share 4 columns; thread 6 loads 4 rows twice",
         "H100 (ours)": f"warp loads: direct {fig1[names['lu_direct']]}, column {fig1[names['lu_column']]}, "
                        f"row {fig1[names['lu_row']]}, both {fig1[names['lu_combined']]} (simulator)"},
        {"item": "Figure 3: the exchange, K = 5",
         "paper (RTX 2080 Ti)": "load slots 0 and 4, 3 shuffle steps",
         "H100 (ours)": f"load slots {', '.join(map(str, five.loads))}, {len(five.steps)} steps, checked on 32 lanes; "
                        f"K = 7 needs {len(warp_sim.exchange_schedule(7).loads)} loads"},
        {"item": "loads per 5-wide window row, direct -> column reuse",
         "paper (RTX 2080 Ti)": f"{direct_row} -> {column_row}",
         "H100 (ours)": f"{k5.loc['direct', 'loads_per_row']} -> {k5.loc['column', 'loads_per_row']} (simulator)"},
        {"item": "loads per 5x5 window, direct -> column reuse",
         "paper (RTX 2080 Ti)": f"{direct_window} -> {column_window}",
         "H100 (ours)": f"{k5.loc['direct', 'loads_per_window']:.0f} -> {k5.loc['column', 'loads_per_window']:.0f} "
                        "(simulator; ncu counts the same)"},
        {"item": "Algorithms 1-2: a lane-indexed window lands in local memory",
         "paper (RTX 2080 Ti)": "pack/shift keeps it in registers (no figure)",
         "H100 (ours)": f"naive / packed time at 5x5: median {naive.loc[5, 'naive / packed time, median']:.2f}x, "
                        f"at 7x7: {naive.loc[7, 'naive / packed time, median']:.2f}x"},
        {"item": "Algorithm 3: input rows for 3 outputs of a 3x3 filter",
         "paper (RTX 2080 Ti)": row["paper"],
         "H100 (ours)": f"{row['input rows, direct']} -> {row['input rows, row reuse']} (simulator)"},
        {"item": "2D convolution against image-processing libraries",
         "paper (RTX 2080 Ti)": "more than 2x",
         "H100 (ours)": f"{covered.min():.1f}x..{covered.max():.1f}x over the fastest library (5x5, 7x7, "
                        f"from {TARGET_MIN_SIZE}^2)"},
        {"item": "multi channel against the fastest cuDNN algorithm", "paper (RTX 2080 Ti)": "up to 1.3x",
         "H100 (ours)": f"{multi['speedup'].min():.2f}x..{multi['speedup'].max():.2f}x "
                        f"(mean {multi['speedup'].mean():.2f}x)"},
    ])  # fmt: skip


def _most_common(names: Any) -> str:
    counts = names.value_counts()
    return f"{counts.index[0]} ({counts.iloc[0]} of {len(names)})" if len(counts) else ""


def findings(directory: Path) -> list[dict[str, str]]:
    """The book's findings rows of this paper (:data:`convkit.papers.paper.FINDING_COLUMNS`), from the sweep and the
    ncu profile recorded in ``directory``."""
    single, multi = chapter_tables(directory)
    loads = warp_sim.transactions_table()
    window = loads[loads["k"] == 5].set_index("method")["loads_per_window"]
    covered = in_target(single)
    best_ours = covered["best_us"]
    best_speed = covered["best_lib_us"] / best_ours
    paper = "Lu 2020"
    return [
        {"paper": paper, "claim": "column reuse cuts a 5x5 window's global loads",
         "paper's number": "25 -> 10 (RTX 2080 Ti)",
         "paper's design on the H100": f"{window['direct']:.0f} -> {window['column']:.0f} (simulator; ncu agrees)",
         "our best on the H100": f"{window['combined']:.0f} per window with row reuse too",
         "best library on the H100": "", "efficiency": "",
         "what changed": "fewer load instructions, not fewer DRAM bytes: the overlap was L1 hits"},
        {"paper": paper, "claim": "2D convolution beats image-processing libraries",
         "paper's number": "> 2x (RTX 2080 Ti)",
         "paper's design on the H100": f"{tables.geomean(covered['speedup_lu_combined']):.2f}x geomean "
                                       f"({covered['speedup_lu_combined'].min():.2f}x min), 5x5/7x7",
         "our best on the H100": f"{tables.geomean(best_speed):.2f}x geomean",
         "best library on the H100": _most_common(covered["best_lib"]),
         "efficiency": f"{(covered['floor_us'] / best_ours).median():.0%}",
         "what changed": "row reuse saves more requests than column reuse"},
        {"paper": paper, "claim": "multi channel beats the fastest cuDNN algorithm",
         "paper's number": "up to 1.3x (RTX 2080 Ti)",
         "paper's design on the H100": f"{multi['speedup'].max():.2f}x at best, mean {multi['speedup'].mean():.2f}x",
         "our best on the H100": f"faster on {int((multi['speedup'] >= 1).sum())} of {len(multi)} layers",
         "best library on the H100": _most_common(multi["best_cudnn"].map(_library_name)),
         "efficiency": f"{multi['efficiency_lu_multi'].median():.0%}",
         "what changed": "GEMM and Winograd tiles reuse each loaded value far more"},
    ]  # fmt: skip


def verdict(single: Any, multi: Any) -> str:
    """Markdown: what the single- and multi-channel kernels reach, and where the multi-channel one loses."""
    covered = in_target(single)
    lines = [
        f"- **Single channel** (5x5 and 7x7, images from {TARGET_MIN_SIZE}x{TARGET_MIN_SIZE}): column + row "
        f"reuse runs {covered['speedup_lu_combined'].min():.2f}x..{covered['speedup_lu_combined'].max():.2f}x "
        f"faster than the fastest peer, at {covered['efficiency'].median():.0%} of the roofline floor (median)."
    ]
    lines.append(
        f"- **Multi channel**: {int((multi['speedup'] >= 1).sum())} of {len(multi)} layers faster than the "
        f"best cuDNN algorithm, {int((multi['speedup'] >= MULTI_TARGET).sum())} at {MULTI_TARGET}x or more."
    )
    if len(multi):
        worst = multi.loc[multi["speedup"].idxmin()]
        lines.append(
            f"- Slowest against cuDNN: {worst['label']} at {worst['speedup']:.2f}x "
            f"({worst['tflops_lu_multi']:.1f} against {worst['tflops_best_cudnn']:.1f} TFLOP/s, counted as direct "
            f"convolution FLOPs: Winograd and FFT do fewer)."
        )
    return "\n".join(lines)


def main(directory: str) -> None:
    """Print the chapter's tables from a results folder (the device script's summary)."""
    import pandas as pd

    pd.set_option("display.width", 200)
    frame, _ = load_results(Path(directory), "lu2020")
    ceil = recorded_ceilings(Path(directory))
    if ceil is None:
        raise SystemExit(f"no ceilings recorded in {directory}: the floors need them")
    single, multi = single_table(frame, ceil), multi_table(frame, ceil)
    cols = ["label", "floor_us", "best_lib", "best_lib_us", *(f"{k}_us" for k in SINGLE_KERNELS),
            "speedup_lu_combined", "efficiency", "best_kernel", "efficiency_best"]  # fmt: skip
    print(single[[c for c in cols if c in single]].round(2).to_string())
    print(multi[["label", "lu_multi_us", "best_cudnn", "best_cudnn_us", "pytorch_us", "speedup"]].round(2).to_string())
    print(goals(single, multi).to_string())


if __name__ == "__main__":
    import sys

    main(sys.argv[1] if len(sys.argv) > 1 else "results/nvidia-h100-80gb-hbm3")
