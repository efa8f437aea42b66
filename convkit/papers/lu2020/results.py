"""The Lu 2020 chapter's numbers, from the recorded sweep, the ncu profile and the compiler (CPU only).

:func:`single_table` and :func:`multi_table` give one row per configuration: each kernel's time, the
peers' (every cuDNN algorithm alone, PyTorch's autotuned cuDNN, ``cupyx.scipy.ndimage.correlate``),
the roofline floor and the speedups. :func:`transactions` sets the ncu load counters beside the warp
simulator's counts, :func:`compiler_table` gives ptxas's verdict on the window array per architecture,
and :func:`targets` and :func:`verdict` put the issue's targets beside the paper's claims.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from convkit import tables
from convkit.compile import find_nvcc, ptxas_report
from convkit.papers.lu2020 import warp_sim
from convkit.papers.lu2020.launch import FILTER_SIZES, NDIMAGE_PEER, SINGLE_VARIANTS, build_options
from convkit.problem import ConvProblem
from convkit.pytorch import VARIANT as PYTORCH_VARIANT
from convkit.results import load_results
from convkit.roofline import recorded_ceilings

#: The chapter's names for the kernels (results variant -> name).
VARIANT_NAMES: dict[str, str] = {
    "lu_direct": "direct", "lu_column_naive": "column reuse, naive", "lu_column": "column reuse, packed",
    "lu_row": "row reuse", "lu_combined": "column + row reuse", "lu_multi": "multi-channel",
}  # fmt: skip
#: The issue's targets (H100): single channel against the fastest of cuDNN and cupyx.ndimage for 5x5 and
#: 7x7 filters on images from 1024 x 1024 (each at least 2x, moonshot geometric mean 4x); multi channel
#: against the best cuDNN algorithm.
SINGLE_TARGET, SINGLE_MOONSHOT, MULTI_TARGET = 2.0, 4.0, 1.3
TARGET_FILTERS, TARGET_MIN_SIZE = (5, 7), 1024


def _library_name(variant: str) -> str:
    """How the chapter names a library case: ``cuDNN <algorithm>``, ``PyTorch (cuDNN)``, ``cupyx.ndimage``."""
    return {PYTORCH_VARIANT: "PyTorch (cuDNN)", NDIMAGE_PEER: "cupyx.ndimage"}.get(variant, f"cuDNN {variant}")


def _problem_rows(frame: Any, variants: list[str], ceilings: dict[str, float], *, single: bool) -> list[dict[str, Any]]:
    """:func:`convkit.tables.problem_rows` of the single-channel images or the multi-channel layers, with
    the configuration's N, C, M, size and K."""
    rows = tables.problem_rows(frame, variants, ceilings, where=lambda ok: (ok["C"].astype(int) == 1) == single)
    for row in rows:
        problem: ConvProblem = row["problem"]
        row.update({"N": problem.n, "C": problem.c, "M": problem.m, "size": problem.h, "K": problem.r})
    return rows


def single_table(frame: Any, ceilings: dict[str, float]) -> Any:
    """One row per single-channel image (pandas), the columns of :func:`convkit.tables.problem_row`: each
    kernel's ``<variant>_us``, ``best_cudnn_us``, ``pytorch_us``, the fastest library (``best_lib``, named
    as :func:`_library_name` does, and ``best_lib_us``), ``speedup_<variant>`` (best library over ours),
    and ``ndimage_us``, ``efficiency`` of the combined kernel (floor over time) and ``naive_over_packed``."""
    import pandas as pd

    ok = tables.timed(frame)
    rows = _problem_rows(frame, [f"lu_{v}" for v in SINGLE_VARIANTS], ceilings, single=True)
    for row in rows:
        images = ok[ok["label"] == row["label"]]
        row["ndimage_us"] = tables.fastest(images[images["impl"] == "cupyx"])[1]
        row["best_lib"] = _library_name(row["best_lib"]) if row["best_lib"] else ""
        row["efficiency"] = row.get("efficiency_lu_combined", math.nan)
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


def in_target(single: Any) -> Any:
    """The single-channel rows the issue's target covers: 5x5 and 7x7 filters, images from 1024 x 1024."""
    return single[single["K"].isin(TARGET_FILTERS) & (single["size"] >= TARGET_MIN_SIZE)]


def targets(single: Any, multi: Any) -> Any:
    """The issue's targets beside what was measured (pandas), one row each."""
    import pandas as pd

    covered = in_target(single)["speedup_lu_combined"]
    geomean = tables.geomean(covered)
    wins = multi["speedup"] >= MULTI_TARGET
    ratio = single["naive_over_packed"]
    return pd.DataFrame([
        {"target": f"single channel, 5x5 and 7x7, >= {TARGET_MIN_SIZE}^2: every image >= {SINGLE_TARGET}x "
                   "over the fastest of cuDNN, PyTorch and cupyx.ndimage",
         "measured": f"min {covered.min():.2f}x, {int((covered >= SINGLE_TARGET).sum())} of {len(covered)} at "
                     f"{SINGLE_TARGET}x or more", "met": bool(len(covered)) and bool((covered >= SINGLE_TARGET).all())},
        {"target": f"moonshot: geometric mean >= {SINGLE_MOONSHOT}x over the same images",
         "measured": f"{geomean:.2f}x", "met": geomean >= SINGLE_MOONSHOT},
        {"target": f"multi channel: >= {MULTI_TARGET}x over the best cuDNN FP32 algorithm",
         "measured": f"{int(wins.sum())} of {len(multi)} layers; mean {multi['speedup'].mean():.2f}x, "
                     f"max {multi['speedup'].max():.2f}x", "met": bool(len(multi)) and bool(wins.all())},
        {"target": "naive vs packed column reuse timed side by side",
         "measured": f"naive / packed time: median {ratio.median():.2f}x ({ratio.min():.2f}x..{ratio.max():.2f}x)",
         "met": bool(ratio.notna().any())},
    ])  # fmt: skip


def claims(single: Any, multi: Any, loads: Any) -> Any:
    """The paper's claims beside ours (pandas)."""
    import pandas as pd

    k5 = loads[loads["k"] == 5].set_index("method")
    paper = warp_sim.PAPER_LOADS  # (loads per row, per window) the paper states at K = 5
    (direct_row, direct_window), (column_row, column_window) = paper[5, "direct"], paper[5, "column"]
    covered = in_target(single)["speedup_lu_combined"]
    return pd.DataFrame([
        {"claim": "global loads per 5-wide window row, direct -> column reuse",
         "paper": f"{direct_row} -> {column_row}",
         "ours": f"{k5.loc['direct', 'loads_per_row']} -> {k5.loc['column', 'loads_per_row']} (simulator)"},
        {"claim": "global loads per 5x5 window, direct -> column reuse",
         "paper": f"{direct_window} -> {column_window}",
         "ours": f"{k5.loc['direct', 'loads_per_window']:.0f} -> {k5.loc['column', 'loads_per_window']:.0f} "
                 "(simulator)"},
        {"claim": "2D convolution against image-processing libraries", "paper": "more than 2x (RTX 2080 Ti)",
         "ours": f"{covered.min():.1f}x..{covered.max():.1f}x over the fastest of cuDNN, PyTorch and "
                 f"cupyx.ndimage (5x5, 7x7, >= {TARGET_MIN_SIZE}^2)"},
        {"claim": "multi channel against the fastest cuDNN algorithm", "paper": "up to 1.3x",
         "ours": f"{multi['speedup'].min():.2f}x..{multi['speedup'].max():.2f}x (mean {multi['speedup'].mean():.2f}x)"},
    ])  # fmt: skip


def schedule_table(ks: tuple[int, ...] = (3, 5, 7, 9)) -> Any:
    """The exchange per filter width: loaded slots, the steps (slot, xor mask), loads and shuffles per row."""
    import pandas as pd

    rows = []
    for k in ks:
        s = warp_sim.exchange_schedule(k)
        rows.append({"K": k, "loaded slots": ", ".join(map(str, s.loads)),
                     "steps (slot, xor)": " ".join(f"({t.slot}, {t.mask})" for t in s.steps),
                     "loads per row": f"{k} -> {len(s.loads)}", "shuffles per row": len(s.steps)})  # fmt: skip
    return pd.DataFrame(rows)


#: ncu's counters in the profile (results columns).
REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_ld_sum"
SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld_sum"
LOCAL_LD, LOCAL_ST = "l1tex__t_sectors_pipe_lsu_mem_local_op_ld_sum", "l1tex__t_sectors_pipe_lsu_mem_local_op_st_sum"


def transactions(kernels: Any) -> Any:
    """ncu's global load requests and sectors per output beside the simulator's count of the same launch,
    and local-memory sectors (pandas), per filter width and kernel."""
    import pandas as pd

    rows = []
    ok = kernels[(kernels["status"] == "ok") & (kernels["impl"] == "convkit")]
    for r in ok.itertuples():
        problem = ConvProblem.from_label(r.label)
        method = r.variant.removeprefix("lu_")
        launch = json.loads(r.params)
        predicted = warp_sim.problem_loads(problem.h, problem.w, problem.r, problem.pad, method,
                                           rows=launch.get("rows", 1))  # fmt: skip
        outputs = problem.out_h * problem.out_w
        requests, sectors = float(getattr(r, REQUESTS)), float(getattr(r, SECTORS))
        simulated = predicted.requests / outputs
        rows.append({
            "K": problem.r, "kernel": VARIANT_NAMES[r.variant], "rows": launch.get("rows", 1),
            "requests / output (ncu)": requests / outputs, "requests / output (simulator)": simulated,
            "sectors / output (ncu)": sectors / outputs, "sectors / output (simulator)": predicted.sectors / outputs,
            "local sectors (ld + st)": float(getattr(r, LOCAL_LD)) + float(getattr(r, LOCAL_ST)),
            "time_us": float(r.time_us),
        })  # fmt: skip
    return pd.DataFrame(rows).sort_values(["K", "time_us"], ascending=[True, False]).reset_index(drop=True)


def compiler_table(archs: tuple[str, ...] = ("sm_75", "sm_90")) -> Any:
    """ptxas's resources for the naive and packed column-reuse kernels (and the others) per filter width
    and architecture (pandas), or None where ``nvcc`` is not installed. A stack frame means the window
    array lives in local memory."""
    import pandas as pd

    if find_nvcc() is None:
        return None
    rows = []
    for k in FILTER_SIZES:
        for arch in archs:
            for res in ptxas_report("lu2020", arch, options=build_options(k, rows=8)):
                if res.kernel == "lu_multi":
                    continue
                rows.append({"K": k, "arch": arch, "kernel": VARIANT_NAMES[res.kernel], "registers": res.registers,
                             "stack frame (B)": res.stack_frame_bytes, "spill stores (B)": res.spill_store_bytes,
                             "spill loads (B)": res.spill_load_bytes})  # fmt: skip
    return pd.DataFrame(rows)


def verdict(single: Any, multi: Any) -> str:
    """Markdown: the targets met or not, and where the multi-channel kernel loses and why."""
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
    cols = ["label", "floor_us", "best_lib", "best_lib_us", *(f"lu_{v}_us" for v in SINGLE_VARIANTS),
            "speedup_lu_combined", "efficiency"]  # fmt: skip
    print(single[[c for c in cols if c in single]].round(2).to_string())
    print(multi[["label", "lu_multi_us", "best_cudnn", "best_cudnn_us", "pytorch_us", "speedup"]].round(2).to_string())
    print(targets(single, multi).to_string())


if __name__ == "__main__":
    import sys

    main(sys.argv[1] if len(sys.argv) > 1 else "results/nvidia-h100-80gb-hbm3")
