"""The Lu 2020 chapter's numbers, from the recorded sweep, the ncu profile and the compiler (CPU only).

:func:`single_table` and :func:`multi_table` give one row per configuration: each kernel's time, the
peers' (every cuDNN algorithm alone, PyTorch's autotuned cuDNN, ``cupyx.scipy.ndimage.correlate``),
the roofline floor and the speedups. :func:`transactions` sets the ncu load counters beside the warp
simulator's counts, :func:`compiler_table` gives ptxas's verdict on the window array per architecture,
:func:`paper_vs_ours` sets every item of the paper beside ours; :func:`headline` holds the numbers that
:func:`result_lines` (the chapter's result box) and :func:`findings` (the book's findings rows) both state, and
:func:`limits` says what bounds each result.
Each library against the floor, and the kernel past the paper, are in :mod:`.libraries`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.families.lu2020.launch import SINGLE_VARIANTS, WIDE
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
#: The images the paper's "more than 2x" is judged on: 5x5 and 7x7 filters, images from 1024 x 1024 (smaller
#: images and 3x3 filters leave too little work for any kernel to pull away from the launch floor).
TARGET_FILTERS, TARGET_MIN_SIZE = (5, 7), 1024
#: The paper's claims: more than 2x over image-processing libraries, up to 1.3x over the fastest cuDNN algorithm.
PAPER_SINGLE, PAPER_MULTI = 2.0, 1.3
#: The MyST labels of the chapter's sections the findings rows link to.
SECTIONS = {"loads": "lu2020-column-reuse", "single": "lu2020-single-channel", "multi": "lu2020-multichannel"}


#: NVIDIA NPP's filter, the second image-processing peer (``convkit.libs.npp``).
NPP_PEER = "nppi_filter"
#: NVIDIA CV-CUDA's conv2d, the third (``convkit.libs.cvcuda``).
CVCUDA_PEER = "cvcuda_conv2d"


def _library_name(variant: str) -> str:
    """How the chapter names a library case: ``cuDNN <algorithm>``, ``PyTorch (cuDNN)``, ``cupyx.ndimage``."""
    return tables.library_name(variant)


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
LIBRARY_COLUMNS = {"best_cudnn_us": "cuDNN (fastest algorithm)", "pytorch_us": tables.library_name(PYTORCH_VARIANT),
                   "ndimage_us": "cupyx.ndimage", "npp_us": "NVIDIA NPP", "cvcuda_us": "CV-CUDA"}  # fmt: skip


def libraries_measured(single: Any) -> str:
    """The libraries with a time on some image, as a reader meets them: "cuDNN, PyTorch, ... and CV-CUDA"."""
    names = LIBRARY_COLUMNS | {"best_cudnn_us": "cuDNN", "pytorch_us": "PyTorch"}
    shown = [names[c] for c in LIBRARY_COLUMNS if c in single and single[c].notna().any()]
    return tables.listed(shown)


def tie_tolerance(spread: dict[str, float] | None) -> float:
    """The spread's 95th percentile: speed-ups within it of 1 are ties (0 where none is recorded)."""
    p95 = (spread or {}).get("p95", math.nan)
    return 0.0 if math.isnan(p95) else p95


def in_target(single: Any) -> Any:
    """The single-channel images the paper's "more than 2x" is judged on: 5x5 and 7x7 filters, from 1024 x 1024."""
    return single[single["K"].isin(TARGET_FILTERS) & (single["size"] >= TARGET_MIN_SIZE)]


def chapter_tables(directory: Path, experiment: str = EXPERIMENT) -> tuple[Any, Any]:
    """(:func:`single_table`, :func:`multi_table`) of the sweep recorded in ``directory``."""
    frame, _ = load_results(Path(directory), experiment)
    ceil = recorded_ceilings(Path(directory))
    if ceil is None:
        raise FileNotFoundError(f"no ceilings recorded in {Path(directory).name}: the floors need them")
    return single_table(frame, ceil), multi_table(frame, ceil)


def headline(single: Any, multi: Any) -> dict[str, str]:
    """The numbers the result box and the findings rows both state, as text: on the claim's images
    (:func:`in_target`) the paper's design (column + row reuse) and our best against the best library (range,
    geometric mean, share of the floor); on the multi-channel layers our best (the paper's multi-channel kernel,
    the only convkit kernel of this run there) against the best library and, as the paper compares, against
    cuDNN alone."""
    covered = in_target(single)
    design, ours = covered["speedup_lu_combined"], covered["best_lib_us"] / covered["best_us"]
    library, cudnn = multi["speedup_lu_multi"], multi["speedup"]
    wide = int((covered["best_kernel"] == VARIANT_NAMES["lu_wide"]).sum())
    return {
        "single_lib": _most_common(covered["best_lib"]),
        "multi_lib": _most_common(multi["best_lib"].map(_library_name)),
        "ours_kernel": (f"four output columns a lane, loaded 16 bytes at a time, the fastest on {wide} of "
                        f"{len(covered)}"),
        "design_range": f"{design.min():.2f}x to {design.max():.2f}x",
        "design_geomean": f"{tables.geomean(design):.2f}x",
        "design_share": f"{covered['efficiency'].median():.0%}",
        "ours_range": f"{ours.min():.2f}x to {ours.max():.2f}x",
        "ours_geomean": f"{tables.geomean(ours):.2f}x",
        "ours_share": f"{(covered['floor_us'] / covered['best_us']).median():.0%}",
        "all_range": f"{single['speedup_best'].min():.2f}x to {single['speedup_best'].max():.2f}x",
        "multi_wins": f"{int((library > 1).sum())} of {len(multi)}",
        "multi_geomean": f"{tables.geomean(library):.2f}x",
        "multi_best": f"{library.max():.2f}x",
        "multi_share": f"{multi['efficiency_lu_multi'].median():.0%}",
        "cudnn_wins": f"{int((cudnn > 1).sum())} of {len(multi)}",
        "cudnn_range": f"{cudnn.min():.2f}x to {cudnn.max():.2f}x",
        "cudnn_geomean": f"{tables.geomean(cudnn):.2f}x",
    }  # fmt: skip


#: The filter width the paper states its load counts for.
PAPER_LOADS_K = 5


def loads_per_window() -> dict[str, float]:
    """Global loads per :data:`PAPER_LOADS_K`-wide window of an interior warp, from the warp simulator: the direct
    kernel's (``direct``), column reuse's (``column``) and column + row reuse's (``combined``, 8 outputs down a
    column a thread)."""
    loads = warp_sim.transactions_table()
    window = loads[loads["k"] == PAPER_LOADS_K].set_index("method")["loads_per_window"]
    return {method: float(window[method]) for method in ("direct", "column", "combined")}


def window_loads() -> dict[str, str]:
    """:func:`loads_per_window` as text: the result box and the findings row both state them."""
    return {method: f"{n:.0f}" for method, n in loads_per_window().items()}


def fp32_line(fp32_rows: Any) -> str:
    """The FP32 chapter's kernels on this chapter's multi-channel layers, in their own run (``fp32_rows``: that
    chapter's rows of this suite, with ``speedup`` over the best library of their run), in one sentence."""
    speed = fp32_rows["speedup"]
    return (f"**Past the papers**: the FP32 chapter's implicit GEMM and Winograd kernels, measured on the same "
            f"layers in their own run, are faster than that run's best library on {int((speed > 1).sum())} of "
            f"{len(speed)} (geometric mean {tables.geomean(speed):.2f}x).")  # fmt: skip


def result_lines(single: Any, multi: Any, fp32_rows: Any = None) -> list[str]:
    """The chapter's result box: the paper's claims, what the H100 measured (:func:`headline`), the verdict;
    with ``fp32_rows``, the FP32 chapter's kernels on the same layers (:func:`fp32_line`)."""
    h, window = headline(single, multi), window_loads()
    lines = [
        "**The paper** (RTX 2080 Ti): column reuse cuts a 5x5 window's global loads from 25 to 10, row reuse loads "
        f"each input row once; 2D convolution runs more than {PAPER_SINGLE:.0f}x faster than image-processing "
        f"libraries, and multi-channel layers up to {PAPER_MULTI}x faster than the fastest cuDNN algorithm.",
        f"**Loads on the H100** ({PAPER_LOADS_K}x{PAPER_LOADS_K} filter, an interior warp, counted by the warp "
        f"simulator; ncu counts the same): column reuse cuts a window's global loads from {window['direct']} to "
        f"{window['column']}, as the paper says; with row reuse too (8 outputs down a column a thread), "
        f"{window['combined']} per window.",
        f"**Single channel on the H100** (5x5 and 7x7, images from {TARGET_MIN_SIZE}x{TARGET_MIN_SIZE}): the "
        f"paper's design, column + row reuse, runs {h['design_range']} faster than the best library, the fastest "
        f"of {libraries_measured(single)} (geometric mean {h['design_geomean']}), at {h['design_share']} of the "
        f"floor (median); the best library there is most often {h['single_lib']}.",
        f"**Past the paper**: our best kernel ({h['ours_kernel']}) runs {h['ours_range']} faster on the same "
        f"images (geometric mean **{h['ours_geomean']}**), at "
        f"**{h['ours_share']}** of the floor (median); on every image of every size it is {h['all_range']} "
        "faster than the best library.",
        f"**Multi channel on the H100** (the 3x3 layers of VGG19 and ResNet-50): our best, the paper's "
        f"multi-channel kernel, is faster than the best library on **{h['multi_wins']}** layers (geometric mean "
        f"{h['multi_geomean']}, best {h['multi_best']}, at {h['multi_share']} of the floor, median). Faster on "
        f"{h['cudnn_wins']}, {h['cudnn_range']} (geometric mean {h['cudnn_geomean']}), as the paper compares: cuDNN "
        f"alone. The best library there is most often {h['multi_lib']}.",
    ]
    if fp32_rows is not None and len(fp32_rows):
        lines.append(fp32_line(fp32_rows))
    return lines


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
    h = headline(single, multi)
    fig1 = figure1_table().set_index("kernel")["input loads"]
    five = warp_sim.exchange_schedule(5)
    naive = naive_summary(single, counters).set_index("K")
    row = row_reuse_table().iloc[0]
    names = VARIANT_NAMES
    return pd.DataFrame([
        {"item": "the paper's Figure 1: overlapping windows (5x5 filter, 6x11 image)",
         "paper (RTX 2080 Ti)": "threads 0 and 1 share 4 columns; thread 6 loads 4 rows twice",
         "H100 (ours)": f"warp loads: direct {fig1[names['lu_direct']]}, column {fig1[names['lu_column']]}, "
                        f"row {fig1[names['lu_row']]}, both {fig1[names['lu_combined']]} (simulator)"},
        {"item": "the paper's Figure 3: the exchange, K = 5",
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
        {"item": "the paper's Algorithms 1-2: a lane-indexed window lands in local memory",
         "paper (RTX 2080 Ti)": "pack/shift keeps it in registers (no figure)",
         "H100 (ours)": f"naive / packed time at 5x5: median {naive.loc[5, 'naive / packed time, median']:.2f}x, "
                        f"at 7x7: {naive.loc[7, 'naive / packed time, median']:.2f}x"},
        {"item": "the paper's Algorithm 3: input rows for 3 outputs of a 3x3 filter",
         "paper (RTX 2080 Ti)": row["paper"],
         "H100 (ours)": f"{row['input rows, direct']} -> {row['input rows, row reuse']} (simulator)"},
        {"item": "2D convolution against image-processing libraries",
         "paper (RTX 2080 Ti)": "more than 2x",
         "H100 (ours)": f"column + row reuse: {h['design_range']} over the best library (5x5, 7x7, from "
                        f"{TARGET_MIN_SIZE}x{TARGET_MIN_SIZE})"},
        {"item": "multi channel against the fastest cuDNN algorithm (as the paper compares: cuDNN alone)",
         "paper (RTX 2080 Ti)": f"up to {PAPER_MULTI}x",
         "H100 (ours)": f"{h['cudnn_range']} (geometric mean {h['cudnn_geomean']})"},
    ])  # fmt: skip


def _most_common(names: Any) -> str:
    counts = names.value_counts()
    return f"{counts.index[0]}, {counts.iloc[0]} of {len(names)}" if len(counts) else ""


def findings(directory: Path) -> list[dict[str, str]]:
    """The book's findings rows of this paper (:data:`convkit.papers.paper.FINDING_COLUMNS` and the ``section``
    each links to): the numbers of :func:`result_lines`, through :func:`headline`."""
    single, multi = chapter_tables(directory)
    window = window_loads()
    h = headline(single, multi)
    paper = "Lu 2020"
    return [
        {"paper": paper, "claim": "column reuse cuts a 5x5 window's global loads",
         "paper's number": "25 -> 10 (RTX 2080 Ti)",
         "paper's design on the H100": f"{window['direct']} -> {window['column']} (simulator; ncu agrees)",
         "our best on the H100": f"{window['combined']} per window with row reuse too",
         "best library on the H100": "", "efficiency": "",
         "what changed": "fewer load instructions, not fewer DRAM bytes: the overlap was L1 hits",
         "section": SECTIONS["loads"], "claims": ("lu2020.loads",)},
        {"paper": paper, "claim": "2D convolution beats image-processing libraries (5x5 and 7x7, from 1024^2)",
         "paper's number": f"more than {PAPER_SINGLE:.0f}x (RTX 2080 Ti)",
         "paper's design on the H100": f"{h['design_range']}, geometric mean {h['design_geomean']}",
         "our best on the H100": f"{h['ours_range']}, geometric mean {h['ours_geomean']}",
         "best library on the H100": h["single_lib"],
         "efficiency": f"{h['ours_share']} of the floor",
         "what changed": "row reuse saves more requests than column reuse; four output columns a lane go past both",
         "section": SECTIONS["single"], "claims": ("lu2020.single_design", "lu2020.single_best")},
        {"paper": paper, "claim": "multi channel beats the fastest cuDNN algorithm",
         "paper's number": f"up to {PAPER_MULTI}x (RTX 2080 Ti)",
         "paper's design on the H100": f"faster on {h['cudnn_wins']}, {h['cudnn_range']} (geometric mean "
                                       f"{h['cudnn_geomean']}), as the paper compares: cuDNN alone",
         "our best on the H100": f"faster than the best library on {h['multi_wins']} layers (geometric mean "
                                 f"{h['multi_geomean']})",
         "best library on the H100": h["multi_lib"],
         "efficiency": f"{h['multi_share']} of the floor",
         "what changed": "GEMM and Winograd tiles reuse each loaded value far more than a direct kernel",
         "section": SECTIONS["multi"], "claims": ("lu2020.multi_max", "lu2020.multi_most")},
    ]  # fmt: skip


def limits(single: Any, multi: Any, sgemm_tflops: float) -> str:
    """Markdown: what each result reached and the bound that limits it (``sgemm_tflops``: the FP32 roof)."""
    covered = in_target(single)
    wide = covered["floor_us"] / covered["lu_wide_us"]
    lines = [
        f"- **Single channel, the paper's design**: column + row reuse reaches {covered['efficiency'].median():.0%} "
        "of the floor (median, 5x5 and 7x7 from 1024x1024). Its DRAM traffic is about one read of the image; what "
        "limits it is the instructions it issues, an exchange and an index per window tap of each output column.",
        f"- **Single channel, past the paper**: four output columns a lane reach {wide.median():.0%} of the floor "
        f"(median; {wide.min():.0%} to {wide.max():.0%}) on the same images: one 16-byte load brings four "
        "columns, and only the window's halo is exchanged.",
    ]
    if len(multi):
        worst = multi.loc[multi["speedup_lu_multi"].idxmin()]
        rate = multi["tflops_lu_multi"]
        lines.append(
            f"- **Multi channel**: the paper's kernel reaches {rate.median():.1f} TFLOP/s (median) against the "
            f"{sgemm_tflops:.1f} TFLOP/s SGEMM roof; its worst layer, {worst['label']}, runs at "
            f"{worst['speedup_lu_multi']:.2f}x the best library ({worst['tflops_lu_multi']:.1f} against "
            f"{worst['tflops_best_cudnn']:.1f} effective TFLOP/s of the best cuDNN algorithm: Winograd and FFT do "
            "fewer FLOPs than they are credited with). The layers are bound by FP32 arithmetic and shared-memory "
            "reads, not by the global loads the paper saves."
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
    print("\n".join(result_lines(single, multi)))


if __name__ == "__main__":
    import sys

    main(sys.argv[1] if len(sys.argv) > 1 else "results/nvidia-h100-80gb-hbm3")
