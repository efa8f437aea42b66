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
from typing import Any

from convkit import lu2020, warp_sim
from convkit.chapter import floor_us
from convkit.problem import ConvProblem

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


def _times(frame: Any) -> Any:
    ok = frame[frame["status"] == "ok"].copy()
    ok["us"] = ok["time_ms_median"].astype(float) * 1e3
    return ok


def _fastest(rows: Any) -> tuple[str, float]:
    if rows.empty:
        return "", math.nan
    best = rows.sort_values("us").iloc[0]
    return str(best["variant"]), float(best["us"])


def _base_row(group: Any, ceilings: dict[str, float]) -> dict[str, Any]:
    """A configuration's problem, floor and library times (best legacy cuDNN algorithm, PyTorch)."""
    problem = ConvProblem.from_row(group.iloc[0])
    cudnn, cudnn_us = _fastest(group[group["impl"] == "cudnn"])
    row: dict[str, Any] = {
        "label": group["label"].iloc[0], "N": problem.n, "C": problem.c, "M": problem.m, "size": problem.h,
        "K": problem.r, "floor_us": floor_us(problem, ceilings), "best_cudnn": cudnn, "best_cudnn_us": cudnn_us,
        "pytorch_us": _fastest(group[group["impl"] == "pytorch"])[1],
    }  # fmt: skip
    for variant in VARIANT_NAMES:
        mine = group[(group["impl"] == "convkit") & (group["variant"] == variant)]
        if not mine.empty:
            row[f"{variant}_us"] = float(mine["us"].min())
            row[f"params_{variant}"] = str(mine["params"].iloc[0])
    return row


def single_table(frame: Any, ceilings: dict[str, float]) -> Any:
    """One row per single-channel image (pandas): each kernel's ``<variant>_us``, ``best_cudnn_us``,
    ``pytorch_us``, ``ndimage_us``, the fastest peer (``peer``, ``peer_us``), ``speedup_<variant>`` (peer
    over ours), ``efficiency`` of the combined kernel (floor over time) and ``naive_over_packed``."""
    import pandas as pd

    ok = _times(frame)
    rows = []
    for _, group in ok[ok["C"].astype(int) == 1].groupby("label", sort=False):
        row = _base_row(group, ceilings)
        row["ndimage_us"] = _fastest(group[group["impl"] == "cupyx"])[1]
        peers = {"cuDNN " + row["best_cudnn"]: row["best_cudnn_us"], "PyTorch (cuDNN)": row["pytorch_us"],
                 "cupyx.ndimage": row["ndimage_us"]}  # fmt: skip
        peers = {k: v for k, v in peers.items() if not math.isnan(v)}
        row["peer"], row["peer_us"] = min(peers.items(), key=lambda kv: kv[1]) if peers else ("", math.nan)
        for variant in lu2020.SINGLE_VARIANTS:
            if f"lu_{variant}_us" in row:
                row[f"speedup_lu_{variant}"] = row["peer_us"] / row[f"lu_{variant}_us"]
        row["efficiency"] = row["floor_us"] / row.get("lu_combined_us", math.nan)
        row["naive_over_packed"] = row.get("lu_column_naive_us", math.nan) / row.get("lu_column_us", math.nan)
        rows.append(row)
    return pd.DataFrame(rows).sort_values(["K", "size"]).reset_index(drop=True)


def multi_table(frame: Any, ceilings: dict[str, float]) -> Any:
    """One row per multi-channel layer (pandas): ``lu_multi_us``, ``best_cudnn`` and its time, PyTorch's,
    ``speedup`` (best cuDNN algorithm over ours), ``speedup_vs_pytorch``, TFLOP/s of both."""
    import pandas as pd

    ok = _times(frame)
    rows = []
    for _, group in ok[ok["C"].astype(int) > 1].groupby("label", sort=False):
        row = _base_row(group, ceilings)
        flops = ConvProblem.from_row(group.iloc[0]).flops
        row["speedup"] = row["best_cudnn_us"] / row.get("lu_multi_us", math.nan)
        row["speedup_vs_pytorch"] = row["pytorch_us"] / row.get("lu_multi_us", math.nan)
        row["tflops_lu_multi"] = flops / row.get("lu_multi_us", math.nan) / 1e6
        row["tflops_best_cudnn"] = flops / row["best_cudnn_us"] / 1e6
        rows.append(row)
    return pd.DataFrame(rows).sort_values(["N", "size", "C", "M"]).reset_index(drop=True)


def in_target(single: Any) -> Any:
    """The single-channel rows the issue's target covers: 5x5 and 7x7 filters, images from 1024 x 1024."""
    return single[single["K"].isin(TARGET_FILTERS) & (single["size"] >= TARGET_MIN_SIZE)]


def targets(single: Any, multi: Any) -> Any:
    """The issue's targets beside what was measured (pandas), one row each."""
    import numpy as np
    import pandas as pd

    covered = in_target(single)["speedup_lu_combined"]
    geomean = float(np.exp(np.log(covered).mean())) if len(covered) else math.nan
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

    from convkit.compile import find_nvcc, ptxas_report

    if find_nvcc() is None:
        return None
    rows = []
    for k in lu2020.FILTER_SIZES:
        for arch in archs:
            for res in ptxas_report("lu2020", arch, options=lu2020.build_options(k, rows=8)):
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
    from pathlib import Path

    import pandas as pd

    from convkit.chapter import ceilings_summary
    from convkit.results import load_results

    pd.set_option("display.width", 200)
    frame, _ = load_results(Path(directory), "lu2020")
    ceil = ceilings_summary(load_results(Path(directory), "ceilings")[0])
    single, multi = single_table(frame, ceil), multi_table(frame, ceil)
    cols = ["label", "floor_us", "peer", "peer_us", *(f"lu_{v}_us" for v in lu2020.SINGLE_VARIANTS),
            "speedup_lu_combined", "efficiency"]  # fmt: skip
    print(single[[c for c in cols if c in single]].round(2).to_string())
    print(multi[["label", "lu_multi_us", "best_cudnn", "best_cudnn_us", "pytorch_us", "speedup"]].round(2).to_string())
    print(targets(single, multi).to_string())


if __name__ == "__main__":
    import sys

    main(sys.argv[1] if len(sys.argv) > 1 else "results/nvidia-h100-80gb-hbm3")
