"""The 3xTF32 chapter's numbers, from a results folder: per problem, the 3xTF32 kernel, the FP32 kernels and the
best FP32 library of the same run; the targets beside the FP32 kernels' numbers; the ladder and the throughput
against the FP32 and TF32 ceilings; CUTLASS beside ours; the error against float64 as K grows; the ncu evidence
and the book's findings row.

Every function takes the frames (or the folder) of the sweep (``tf32x3.csv``), its repeat, the tuning table,
the accuracy experiment (``tf32x3_accuracy.csv``) and the profile (``tf32x3_kernels.csv``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from convkit.core.reference import TRANSFORM_TOLERANCE
from convkit.families.fp32 import IGEMM, WINOGRAD
from convkit.families.tf32x3 import IGEMM as TF32X3
from convkit.families.tf32x3 import WGMMA, WINOGRAD_WGMMA
from convkit.families.tf32x3 import WINOGRAD as WINOGRAD_TF32X3
from convkit.libs import cutlass
from convkit.papers.tf32x3.accuracy import ERROR_K, accuracy_medians
from convkit.study import tables
from convkit.study.layer_sets import three_chapter_suites as suites

#: The experiments the chapter reads.
SWEEP, REPEAT, TUNING, ACCURACY, PROFILE = (
    "tf32x3",
    "tf32x3_repeat",
    "tf32x3_tuning",
    "tf32x3_accuracy",
    "tf32x3_kernels",
)
#: Our kernels: all are what the op chooses among; the FP32 two are where the study stood before. 3xTF32 Winograd
#: (FP32 Winograd's transforms, its products on the 3xTF32 GEMM) and the two on Hopper's wgmma (direct, and Winograd
#: with its products there) count where a run recorded them.
VARIANTS = (TF32X3, WINOGRAD_TF32X3, WGMMA, WINOGRAD_WGMMA, IGEMM, WINOGRAD)
FP32_VARIANTS = (IGEMM, WINOGRAD)
#: CUTLASS's kernels as the book names them: "CUTLASS 3xTF32, 128 x 64".
CUTLASS_NAMES = {name: f"CUTLASS {'3xTF32' if precision == 'tf32x3' else 'FP32'}, "
                       f"{name.rsplit('_', 1)[1].replace('x', ' x ')}"
                 for name, precision in cutlass.KERNELS}  # fmt: skip
#: Every kernel of the chapter's sweep by its book name (a profile takes every kernel the sweep runs).
NAMES = {**tables.LIBRARY_NAMES, **{v: tables.KERNEL_WORDS[v] for v in VARIANTS},
         **CUTLASS_NAMES}  # fmt: skip
#: Layers this large (GFLOP, direct method) are "large" for throughput, and count in the geometric mean.
LARGE_GFLOP, COUNTED_GFLOP = 20.0, 1.0
#: The targets the chapter reports against (tensor cores at the ceiling): cuConv's share faster than the best FP32
#: library (%) and geometric mean on its layers of >= 1 GFLOP, the direct kernel's median TFLOP/s on the large
#: layers, 1x1 layers over cuBLAS SGEMM, the memory-transactions chapter's multi-channel geometric mean, and the
#: share of the problems both ran where ours beats CUTLASS's fastest 3xTF32 tile (%).
TARGET_SHARE, TARGET_GEOMEAN, TARGET_TFLOPS, TARGET_1X1, TARGET_SUITES, TARGET_CUTLASS = 75.0, 1.3, 80.0, 1.2, 1.5, 80.0
#: Our direct 3xTF32 kernels (mma.sync and wgmma: ``direct_us``, the best per problem) and the Hopper family's two
#: (``hopper_us``), where a run recorded them; the latter's median TFLOP/s on the large layers aimed at.
DIRECT, HOPPER, TARGET_HOPPER = (TF32X3, WGMMA), (WGMMA, WINOGRAD_WGMMA), 120.0


def _cutlass(frame: Any, precision: str) -> Any:
    """Per problem (label, pad, stride), the fastest CUTLASS kernel of ``precision`` (``tf32x3`` or ``simt``)."""
    ok = tables.timed(frame)
    rows = ok[(ok["impl"] == "cutlass") & ok["variant"].str.contains(precision)]
    return rows.groupby(["label", "pad", "stride"])["us"].min()


def problem_table(frame: Any, ceilings: dict[str, float] | None = None) -> Any:
    """One row per problem (:func:`convkit.study.tables.best_rows` of all our kernels: what the op chooses
    among), with the FP32 kernels' best (``fp32_us``, ``fp32_speedup``: where the study stood), the 3xTF32
    kernel's speed-up alone, the best of our direct 3xTF32 kernels and of the Hopper family where recorded
    (:data:`DIRECT`, :data:`HOPPER`), cuBLAS where it ran, and CUTLASS's fastest 3xTF32 and SIMT kernels."""
    out = tables.best_rows(frame, VARIANTS, ceilings)
    out["fp32_us"] = out[[f"{v}_us" for v in FP32_VARIANTS if f"{v}_us" in out]].min(axis=1)
    out["fp32_speedup"] = out["best_lib_us"] / out["fp32_us"]
    out["tf32x3_speedup"] = out["best_lib_us"] / out[f"{TF32X3}_us"]
    for column, kernels in (("direct_us", DIRECT), ("hopper_us", HOPPER)):
        if mine := [f"{v}_us" for v in kernels if f"{v}_us" in out]:
            out[column] = out[mine].min(axis=1)
    ok = tables.timed(frame)
    cublas = ok[ok["impl"] == "cublas"].set_index(["label", "pad", "stride"])["us"]
    keys = list(zip(out["label"], out["pad"], out["stride"], strict=True))
    out["cublas_us"] = [cublas.get(k, math.nan) for k in keys]
    for precision in ("tf32x3", "simt"):
        fastest = _cutlass(frame, precision)
        out[f"cutlass_{precision}_us"] = [fastest.get(k, math.nan) for k in keys]
    return out


def load(directory: Path, experiment: str = SWEEP) -> dict[str, Any]:
    """The chapter's frames: the sweep ``experiment``, its repeat, the tuning table, the accuracy experiment and
    the profile (empty frames where not recorded)."""
    import pandas as pd

    from convkit.study.results import load_results

    named = (("sweep", experiment), ("repeat", REPEAT), ("tuning", TUNING), ("accuracy", ACCURACY),
             ("kernels", PROFILE))  # fmt: skip
    return {key: load_results(Path(directory), name)[0] if (Path(directory) / f"{name}.csv").is_file()
            else pd.DataFrame() for key, name in named}  # fmt: skip


def chapter_tables(
    directory: Path, ceilings: dict[str, float], experiment: str = SWEEP, *, quick: bool | None = None
) -> dict[str, Any]:
    """Everything the chapter shows: the frames, the per-problem table, each suite's rows (multi-channel ones
    for the two smaller suites), the spread and the GPU as prose names it (``gpu``). A quick run's ``experiment``
    has the quick suites."""
    from convkit.study.results import gpu_model

    frames = load(directory, experiment)
    table = problem_table(frames["sweep"], ceilings)
    groups = {
        name: tables.suite_rows(table, problems)
        for name, problems in suites(experiment != SWEEP if quick is None else quick).items()
    }
    for name in ("lu2020", "chang2022"):
        groups[name] = groups[name][[p.c > 1 for p in groups[name]["problem"]]].reset_index(drop=True)
    spread = tables.spread(frames["sweep"], frames["repeat"])
    gpu = gpu_model(Path(directory))
    return frames | groups | {"ceilings": ceilings, "table": table, "spread": spread, "gpu": gpu}


def _cells(rows: Any, column: str) -> Any:
    return rows.groupby(["r", "n"])[column].apply(tables.geomean)


def _tflops(rows: Any, us: str) -> Any:
    return rows["gflop"] / rows[us] * 1e3


def large_median(cuconv: Any, us: str) -> float:
    """The median TFLOP/s (direct-method FLOPs over the time in column ``us``) on cuConv's layers of at least
    :data:`LARGE_GFLOP`, over those that have the time."""
    return float(_tflops(cuconv[cuconv["gflop"] >= LARGE_GFLOP], us).median())


def on_wgmma(cuconv: Any) -> bool:
    """Whether the run recorded the kernels on Hopper's wgmma (``hopper_us``) on cuConv's layers."""
    return "hopper_us" in cuconv and bool(cuconv["hopper_us"].notna().any())


def bound_of(ceilings: dict[str, float], wgmma: bool) -> tuple[float, str]:
    """(TFLOP/s, what it is) that bounds a 3xTF32 kernel: a third of the TF32 peak of its instruction, wgmma's
    (``wgmma``) where the ceilings measured it, else mma.sync's."""
    if wgmma and not math.isnan(ceilings.get("tf32_wgmma_peak_tflops", math.nan)):
        return ceilings["tf32_wgmma_peak_tflops"] / 3, "a third of the wgmma peak"
    return ceilings.get("tf32_mma_peak_tflops", math.nan) / 3, "a third of the mma.sync peak"


def direct_bound(t: dict[str, Any]) -> tuple[float, str]:
    """:func:`bound_of` our direct 3xTF32 kernels: of the fastest instruction they ran, wgmma where the run recorded
    them on it."""
    return bound_of(t["ceilings"], on_wgmma(t["cuconv"]))


def direct_errors(t: dict[str, Any]) -> Any:
    """Every error our direct 3xTF32 kernels (:data:`DIRECT`) recorded: their tuning runs, their sweep rows and the
    accuracy experiment's."""
    import pandas as pd

    parts = [f[(f["impl"] == "convkit") & f["variant"].isin(DIRECT)] for f in (t["tuning"], t["sweep"], t["accuracy"])
             if len(f)]  # fmt: skip
    return pd.concat(parts) if parts else pd.DataFrame({"status": [], "rel_err": []})


def targets(t: dict[str, Any]) -> Any:
    """Per measure: the FP32 kernels of the same run, with the 3xTF32 kernel beside them, the value aimed at
    (``target``) and whether it is reached (``reached``); :func:`standing` is what the book shows of it."""
    import pandas as pd

    cuconv, lu, chang = t["cuconv"], t["lu2020"], t["chang2022"]
    counted = cuconv[cuconv["gflop"] >= COUNTED_GFLOP]
    one = cuconv[cuconv["r"] == 1]
    direct, simt = large_median(cuconv, "direct_us"), large_median(cuconv, f"{IGEMM}_us")
    bound = direct_bound(t)[0]
    both = t["table"].dropna(subset=["cutlass_tf32x3_us", "direct_us"])
    vs_cutlass = tables.share_faster(both["cutlass_tf32x3_us"] / both["direct_us"])
    errors = direct_errors(t)
    wrong = int((errors["status"] == "wrong").sum())
    worst = float(errors["rel_err"].astype(float).max()) if len(errors) else math.nan
    mine, simt_err = accuracy_medians(t["accuracy"])

    def row(measure: str, before: str, now: str, target: str, reached: bool) -> dict[str, str]:
        return {"measure": measure, "FP32 kernels": before, "with 3xTF32": now, "target": target,
                "reached": "yes" if reached else "no"}  # fmt: skip

    share, share_before = tables.share_faster(cuconv["speedup"]), tables.share_faster(cuconv["fp32_speedup"])
    mean, mean_before = tables.geomean(counted["speedup"]), tables.geomean(counted["fp32_speedup"])
    low, low_before = _cells(cuconv, "speedup").min(), _cells(cuconv, "fp32_speedup").min()
    vs_sgemm, vs_sgemm_before = ((one["cublas_us"] / one[us]).median() for us in ("best_us", "fp32_us"))
    lu_mean, lu_before = tables.geomean(lu["speedup"]), tables.geomean(lu["fp32_speedup"])
    rows = [
        row(f"cuConv's {len(cuconv)} layers: share faster than the best FP32 library", f"{share_before:.1f}%",
            f"{share:.1f}%", f">= {TARGET_SHARE:.0f}%", share >= TARGET_SHARE),
        row(f"cuConv's {len(counted)} layers of >= {COUNTED_GFLOP:.0f} GFLOP: geometric-mean speed-up",
            f"{mean_before:.2f}x", f"{mean:.2f}x", f">= {TARGET_GEOMEAN}x", mean >= TARGET_GEOMEAN),
        row("cuConv's lowest (filter, batch) cell", f"{low_before:.2f}x", f"{low:.2f}x", ">= 1.0x", low >= 1),
        row(f"direct 3xTF32 kernels, median on layers >= {LARGE_GFLOP:.0f} GFLOP", f"{simt:.1f} TFLOP/s",
            f"{direct:.1f} TFLOP/s ({100 * direct / bound:.0f}% of the 3xTF32 bound, {bound:.0f})",
            f">= {TARGET_TFLOPS:.0f} TFLOP/s", direct >= TARGET_TFLOPS),
        row(f"{len(one)} 1x1 layers: median speed-up over cuBLAS SGEMM", f"{vs_sgemm_before:.2f}x", f"{vs_sgemm:.2f}x",
            f">= {TARGET_1X1}x", vs_sgemm >= TARGET_1X1),
        row(f"memory-transactions chapter's {len(lu)} multi-channel layers: geometric-mean speed-up",
            f"{lu_before:.2f}x", f"{lu_mean:.2f}x", f">= {TARGET_SUITES}x", lu_mean >= TARGET_SUITES),
        row(f"Pascal-era chapter's {len(chang)}-layer grid: layers slower than the best library",
            f"{int((chang['fp32_speedup'] < 1).sum())}", f"{int((chang['speedup'] < 1).sum())}", "0",
            bool((chang["speedup"] >= 1).all())),
        row(f"problems both ran ({len(both)}): share where our direct 3xTF32 beats CUTLASS's", "-",
            f"{vs_cutlass:.1f}%", f">= {TARGET_CUTLASS:.0f}%", vs_cutlass >= TARGET_CUTLASS),
        row("3xTF32 runs checked: wrong results; largest error", "-", f"{wrong} of {len(errors):,}; {worst:.1e}",
            "0; <= 1e-5", wrong == 0 and worst <= 1e-5),
    ]  # fmt: skip
    if not math.isnan(mine):  # where the run has the accuracy experiment (a quick run has not)
        rows.append(row(f"median error for K >= {ERROR_K}, normal inputs", f"{simt_err:.2e}", f"{mine:.2e}",
                        "at most the FP32 kernel's", mine <= simt_err))  # fmt: skip
    if on_wgmma(cuconv):  # the Hopper family, where the run recorded it
        hopper = large_median(cuconv, "hopper_us")
        measure = f"Hopper family (wgmma), median on layers >= {LARGE_GFLOP:.0f} GFLOP"
        rows.insert(4, row(measure, "-", f"{hopper:.1f} TFLOP/s", f">= {TARGET_HOPPER:.0f} TFLOP/s",
                           hopper >= TARGET_HOPPER))  # fmt: skip
    winograd = t["sweep"][t["sweep"]["variant"].isin((WINOGRAD_TF32X3, WINOGRAD_WGMMA))] if len(t["sweep"]) else []
    if len(winograd):
        ok = winograd[winograd["status"].isin(("ok", "wrong"))]
        over, largest = int((ok["status"] == "wrong").sum()), float(ok["rel_err"].astype(float).max())
        rows.append(row("3xTF32 Winograd runs: wrong results; largest error", "-", f"{over} of {len(ok):,}; "
                        f"{largest:.1e}", f"0; <= {TRANSFORM_TOLERANCE:.0e}",
                        over == 0 and largest <= TRANSFORM_TOLERANCE))  # fmt: skip
    return pd.DataFrame(rows).set_index("measure")


def standing(t: dict[str, Any]) -> Any:
    """:func:`targets` as the book shows it: each measure for the FP32 kernels and with the 3xTF32 kernel."""
    return targets(t)[["FP32 kernels", "with 3xTF32"]]


def ladder(t: dict[str, Any]) -> Any:
    """Median rate on cuConv's layers of at least :data:`LARGE_GFLOP` (all measured in this chapter's run), each
    against the FP32 SGEMM ceiling and the 3xTF32 bound (a third of the TF32 mma.sync peak; of wgmma's for the
    kernels on wgmma, where the ceilings measured it); the kernels on Hopper's wgmma and PyTorch in TF32 (a
    reference line) where the run recorded them."""
    import pandas as pd

    large = t["cuconv"][t["cuconv"]["gflop"] >= LARGE_GFLOP]
    ceilings = t["ceilings"]
    wgmma_columns = {f"{WGMMA}_us", f"{WINOGRAD_WGMMA}_us"}
    steps = (
        ("FP32 implicit GEMM (ours)", f"{IGEMM}_us"),
        ("FP32 Winograd (ours, effective)", f"{WINOGRAD}_us"),
        ("CUTLASS FP32 (NHWC)", "cutlass_simt_us"),
        ("best FP32 library (effective)", "best_lib_us"),
        ("3xTF32 implicit GEMM (ours)", f"{TF32X3}_us"),
        ("3xTF32 Winograd (ours, effective)", f"{WINOGRAD_TF32X3}_us"),
        ("CUTLASS 3xTF32 (NHWC)", "cutlass_tf32x3_us"),
        ("3xTF32 implicit GEMM on wgmma (ours)", f"{WGMMA}_us"),
        ("3xTF32 Winograd on wgmma (ours, effective)", f"{WINOGRAD_WGMMA}_us"),
        ("PyTorch in TF32 (reference, not FP32)", "pytorch_tf32_us"),
    )
    rows = []
    for step, column in (s for s in steps if s[1] in large):  # a kernel the run did not record has no step
        rate = large_median(t["cuconv"], column)
        bound = bound_of(ceilings, column in wgmma_columns)[0]
        rows.append({"step": step, "layers": int(large[column].notna().sum()), "median TFLOP/s": rate,
                     "share of SGEMM": rate / ceilings["sgemm_tflops"],
                     "share of the 3xTF32 bound": rate / bound})  # fmt: skip
    return pd.DataFrame(rows).set_index("step")


def ceilings_table(ceilings: dict[str, float]) -> Any:
    """The ceilings the chapter measures against: FP32 FMA peak, cuBLAS SGEMM, cuBLAS TF32 GEMM, our TF32
    mma.sync peak and a third of it (three tensor products per FP32 product); on Hopper, where the run measured it,
    the TF32 peak of its own instruction (wgmma) and a third of it too."""
    import pandas as pd

    named = (("FP32 FMA rate (measured)", "fma_tflops"), ("cuBLAS SGEMM, 8192-cube", "sgemm_tflops"),
             ("cuBLAS TF32 GEMM, 8192-cube", "tf32_gemm_tflops"),
             ("TF32 mma.sync peak", "tf32_mma_peak_tflops"))  # fmt: skip
    rows = [{"ceiling": name, "TFLOP/s": ceilings.get(key, math.nan)} for name, key in named]
    rows.append({"ceiling": "3xTF32 bound (mma.sync peak / 3)", "TFLOP/s": ceilings.get("tf32_mma_peak_tflops",
                                                                                       math.nan) / 3})  # fmt: skip
    if (wgmma := ceilings.get("tf32_wgmma_peak_tflops", math.nan)) == wgmma:
        rows += [{"ceiling": "TF32 wgmma peak (Hopper)", "TFLOP/s": wgmma},
                 {"ceiling": "3xTF32 bound (wgmma peak / 3)", "TFLOP/s": wgmma / 3}]  # fmt: skip
    return pd.DataFrame(rows).set_index("ceiling")


def cutlass_table(table: Any) -> Any:
    """Per filter size, on the problems both ran: our direct 3xTF32 kernels (``direct_us``: the faster per problem
    where the run has the wgmma one too) against CUTLASS's fastest 3xTF32 kernel (NHWC, its layout transforms
    untimed) and our FP32 kernels against CUTLASS's SIMT kernels."""
    import pandas as pd

    rows = []
    for r, group in table.groupby("r"):
        tc = group.dropna(subset=["cutlass_tf32x3_us", "direct_us"])
        simt = group.dropna(subset=["cutlass_simt_us", "fp32_us"])
        tc_speedup, simt_speedup = (
            tc["cutlass_tf32x3_us"] / tc["direct_us"],
            simt["cutlass_simt_us"] / simt["fp32_us"],
        )
        rows.append({"filter": f"{r}x{r}", "problems": len(tc),
                     "3xTF32: ours faster on %": tables.share_faster(tc_speedup),
                     "3xTF32: geometric-mean speed-up": tables.geomean(tc_speedup),
                     "FP32: ours faster on %": tables.share_faster(simt_speedup),
                     "FP32: geometric-mean speed-up": tables.geomean(simt_speedup)})  # fmt: skip
    return pd.DataFrame(rows).set_index("filter")


def throughput_table(cuconv: Any, ceilings: dict[str, float]) -> Any:
    """The large layers: TFLOP/s of the 3xTF32 implicit GEMM (and on wgmma, ``wgmma``, where the run recorded it),
    the FP32 implicit GEMM (``FP32``), CUTLASS's 3xTF32 (``CUTLASS``) and the best library (``library``: effective,
    the direct method's FLOPs over its time), and our direct 3xTF32 kernels' speed-up over the best library (the
    faster per layer); short headings, so that the table fits the book's column."""
    large = cuconv[cuconv["gflop"] >= LARGE_GFLOP].sort_values("gflop", ascending=False)
    out = large[["label", "gflop"]].copy()
    out["3xTF32 (TFLOP/s)"] = _tflops(large, f"{TF32X3}_us")
    if f"{WGMMA}_us" in large:  # the run recorded it
        out["wgmma (TFLOP/s)"] = _tflops(large, f"{WGMMA}_us")
    out["FP32 (TFLOP/s)"] = _tflops(large, f"{IGEMM}_us")
    out["CUTLASS (TFLOP/s)"] = _tflops(large, "cutlass_tf32x3_us")
    out["library (TFLOP/s)"] = _tflops(large, "best_lib_us")
    out["best library"] = large["best_lib"].map(lambda v: NAMES.get(v, v))
    out["speed-up (x)"] = large["best_lib_us"] / large["direct_us"]
    return out.rename(columns={"label": "layer", "gflop": "GFLOP"}).set_index("layer")


def roofline_points(table: Any, ceilings: dict[str, float]) -> list[tuple[str, float, float, str]]:
    """Every compute-bound problem (past the SGEMM roofline's ridge) three times: the best library, the FP32
    kernels' best and our direct 3xTF32 kernels' (the faster per problem where the run has the wgmma one too), in
    (effective) GFLOP/s."""
    points = []
    for r in table.itertuples():
        ai = r.problem.arithmetic_intensity
        if ai < ceilings["ridge_flops_per_byte"]:
            continue
        for us, kind in (
            (r.best_lib_us, "best FP32 library"),
            (r.fp32_us, "FP32 kernels (ours)"),
            (r.direct_us, "3xTF32 (ours)"),
        ):  # drawn in this order: ours on top
            points.append(("", ai, r.gflop / us * 1e6, kind))
    return points


def layer_table(rows: Any) -> Any:
    """Rows of :func:`problem_table` as a reader sees them: each layer, our fastest kernel and the best library."""
    cols = {"label": "layer", "best": "our kernel", "best_us": "our kernel (us)", "fp32_us": "FP32 kernels (us)",
            "best_lib": "best library", "best_lib_us": "best library (us)", "speedup": "speed-up"}  # fmt: skip
    return tables.layer_table(rows, cols, NAMES)
