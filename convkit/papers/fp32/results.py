"""The FP32-ceiling chapter's numbers, from a results folder: per-problem speed-ups against the best library
measured in the same run, the cuConv cells beside their attainable bound, the targets, throughput against the
ceilings, Winograd's error, the run-to-run spread, the ncu evidence and the book's findings rows.

Every function takes frames (or the folder) the sweep (``fp32.csv``), its repeat (``fp32_repeat.csv``), the
tuning table (``fp32_tuning.csv``) and the profile (``fp32_kernels.csv``) were recorded in.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.families.fp32 import IGEMM, WINOGRAD
from convkit.study import tables
from convkit.study.layer_sets import three_chapter_suites as suites

#: The experiments the chapter reads: its sweep, the repeated sample, the tuning table and the ncu profile.
SWEEP, REPEAT, TUNING, PROFILE = "fp32", "fp32_repeat", "fp32_tuning", "fp32_kernels"
VARIANTS = (IGEMM, WINOGRAD)
#: How the chapter names the kernels and the libraries.
NAMES = {IGEMM: "implicit GEMM", WINOGRAD: "Winograd", "cudnn.benchmark": "PyTorch (cuDNN autotuned)",
         "sgemm": "cuBLAS SGEMM"}  # fmt: skip
#: Layers at least this large are "large" for the throughput targets (GFLOP, direct method).
LARGE_GFLOP = 20.0
#: The chapters whose recorded sweeps say where the study stood before these kernels, and whether only their
#: multi-channel problems are measured here again (cuConv's are all).
EARLIER = {"cuconv": False, "lu2020": True, "chang2022": True}


def earlier_speedups(directory: Path, experiment: str, multi_only: bool) -> Any:
    """Per problem of an earlier chapter's recorded sweep: the best of its kernels against the best library of
    that run (:func:`best_rows`, with ``tflops``)."""
    from convkit.study.results import load_results

    frame, _ = load_results(Path(directory), experiment)
    variants = sorted(frame.loc[frame["impl"] == tables.CONVKIT, "variant"].unique())
    out = best_rows(frame, variants, where=(lambda f: f["C"].astype(int) > 1) if multi_only else None)
    out["tflops"] = out["gflop"] / out["best_us"] * 1e3
    return out


def before(directory: Path) -> dict[str, Any]:
    """Where the study stood before these kernels, from the earlier chapters' recorded sweeps in ``directory``:
    cuConv's share faster, geometric mean, lowest early and late cells and TFLOP/s at batch >= 32; the
    memory-transactions layers' geometric mean; the Pascal-era grid's layers where its kernels were slower."""
    if not all((Path(directory) / f"{name}.csv").is_file() for name in EARLIER):
        return {"cuconv_share": math.nan, "cuconv_geomean": math.nan, "early_cell": math.nan, "late_cell": math.nan,
                "tflops": "not recorded", "lu_geomean": math.nan, "chang_slower": "-", "chang_layers": "-"}  # fmt: skip
    cuconv, lu, chang = (earlier_speedups(directory, name, multi_only) for name, multi_only in EARLIER.items())
    cells = cuconv.groupby(["r", "n"])["speedup"].apply(tables.geomean)
    big = cuconv[cuconv["n"] >= 32]["tflops"]
    return {
        "cuconv_share": tables.share_faster(cuconv["speedup"]), "cuconv_geomean": tables.geomean(cuconv["speedup"]),
        "early_cell": _early(cells).min(), "late_cell": _late(cells).min(),
        "tflops": f"{big.quantile(0.1):.0f}-{big.max():.0f} TFLOP/s", "lu_geomean": tables.geomean(lu["speedup"]),
        "chang_slower": int((chang["speedup"] < 1).sum()), "chang_layers": len(chang),
    }  # fmt: skip


def _early(cells: Any) -> Any:
    """The 1x1 cells and every batch-1 and batch-8 cell of a (filter, batch) series."""
    return cells[(cells.index.get_level_values(0) == 1) | (cells.index.get_level_values(1) <= 8)]


def _late(cells: Any) -> Any:
    """The 3x3 and 5x5 cells from batch 16."""
    return cells[(cells.index.get_level_values(0) > 1) & (cells.index.get_level_values(1) >= 16)]


best_rows, suite_rows = tables.best_rows, tables.suite_rows


def cell_table(cuconv: Any) -> Any:
    """cuConv's problems by filter size and batch: the geometric-mean speed-up over the best library,
    and beside it the bound a direct kernel at 100% of the SGEMM ceiling would reach."""
    return tables.cell_table(cuconv, bound="bound")


def profile_table(kernels: Any) -> Any:
    """Per profiled layer and implementation, its longest kernel: time, FMA-pipe use, issue-slot use, FMA share
    of the instructions, achieved occupancy, shared-memory bank conflicts and the two leading stall reasons."""
    return tables.profile_table(kernels, NAMES, "sm__pipe_fma_cycles_active_avg_pct_of_peak_sustained_active",
                                "sm__inst_executed_pipe_fma_sum", "FMA")  # fmt: skip


def problem_table(frame: Any, ceilings: dict[str, float] | None = None) -> Any:
    """One row per problem (:func:`best_rows` of both families), with cuBLAS where it ran and the direct-method
    bound (``bound``: the best library's time over the time the FLOPs take at the SGEMM ceiling)."""
    out = best_rows(frame, VARIANTS, ceilings)
    ok = tables.timed(frame)
    cublas = ok[ok["impl"] == "cublas"].set_index(["label", "pad", "stride"])["us"]
    out["cublas_us"] = [cublas.get((r.label, r.pad, r.stride), math.nan) for r in out.itertuples()]
    if ceilings is not None:
        out["bound"] = out["best_lib_us"] / (out["gflop"] * 1e3 / ceilings["sgemm_tflops"])
    return out


def goals(cuconv: Any, lu: Any, chang: Any, earlier: dict[str, Any], sgemm_tflops: float) -> Any:
    """What the chapter set out to reach, where the study stood before (:func:`before`) and what is measured now."""
    import pandas as pd

    one = cuconv[cuconv["r"] == 1]
    large = cuconv[cuconv["gflop"] >= LARGE_GFLOP]
    direct_tflops = large["gflop"] / large[f"{IGEMM}_us"] * 1e3
    cells = cuconv.groupby(["r", "n"])["speedup"].apply(tables.geomean)
    early, late = _early(cells).min(), _late(cells).min()
    share, mean = tables.share_faster(cuconv["speedup"]), tables.geomean(cuconv["speedup"])
    b1 = one[one["n"] == 1]
    sgemm_share = 100 * float((one["best_us"] <= one["cublas_us"]).mean())
    ceiling_share = float(direct_tflops.median()) / sgemm_tflops
    e = earlier

    def row(goal: str, then: str, now: str, reached: bool) -> dict[str, Any]:
        return {"goal": goal, "before": then, "now": now, "reached": "yes" if reached else "no"}

    rows = [
        row("cuConv's 616: faster than the best library on >= 50%", f"{e['cuconv_share']:.1f}%", f"{share:.1f}%",
            share >= 50),
        row("cuConv's 616: geometric mean >= 1.0x", f"{e['cuconv_geomean']:.2f}x", f"{mean:.2f}x", mean >= 1),
        row("every batch-1 1x1 layer faster", "(cuBLAS not measured)", f"{int((b1['speedup'] > 1).sum())} of {len(b1)}",
            bool((b1["speedup"] > 1).all())),
        row(">= 1.0x in every 1x1 cell and every batch-1 and batch-8 cell", f"lowest {e['early_cell']:.2f}x",
            f"lowest {early:.3f}x", early >= 1),
        row("3x3 and 5x5 cells from batch 16: >= 0.9x each", f"lowest {e['late_cell']:.2f}x", f"lowest {late:.3f}x",
            late >= 0.9),
        row("1x1: at least cuBLAS SGEMM's speed on >= 90%", "(cuBLAS not measured)",
            f"{sgemm_share:.0f}% of {len(one)}", sgemm_share >= 90),
        row("direct kernel on layers >= 20 GFLOP: >= 80% of the SGEMM ceiling", e["tflops"],
            f"median {direct_tflops.median():.1f} TFLOP/s ({100 * ceiling_share:.0f}% of {sgemm_tflops:.1f}), "
            f"best {direct_tflops.max():.1f}", ceiling_share >= 0.8),
        row("memory-transactions multi-channel layers: geometric mean >= 1.0x", f"{e['lu_geomean']:.2f}x",
            f"{tables.geomean(lu['speedup']):.2f}x", tables.geomean(lu["speedup"]) >= 1),
        row("Pascal-era multi-channel grid: slower on none", f"slower on {e['chang_slower']} of {e['chang_layers']}",
            f"slower on {int((chang['speedup'] < 1).sum())} of {len(chang)}", bool((chang["speedup"] >= 1).all())),
    ]  # fmt: skip
    return pd.DataFrame(rows).set_index("goal")


def throughput_table(cuconv: Any, ceilings: dict[str, float]) -> Any:
    """The large layers (>= 20 GFLOP): TFLOP/s of each family (Winograd's over the direct method's FLOPs,
    "effective"), the best library's, and the implicit GEMM's share of the SGEMM ceiling."""
    large = cuconv[cuconv["gflop"] >= LARGE_GFLOP].sort_values("gflop", ascending=False)
    out = large[["label", "gflop"]].copy()
    out["implicit GEMM (TFLOP/s)"] = large["gflop"] / large[f"{IGEMM}_us"] * 1e3
    out["share of SGEMM"] = out["implicit GEMM (TFLOP/s)"] / ceilings["sgemm_tflops"]
    out["Winograd, effective (TFLOP/s)"] = large["gflop"] / large[f"{WINOGRAD}_us"] * 1e3
    out["best library, effective (TFLOP/s)"] = large["gflop"] / large["best_lib_us"] * 1e3
    out["best library"] = large["best_lib"].map(lambda v: NAMES.get(v, v))
    out["speed-up"] = large["speedup"]
    return out.rename(columns={"label": "layer", "gflop": "GFLOP"}).set_index("layer")


def winograd_errors(tuning: Any, sweep: Any) -> Any:
    """Relative error against float64 of each Winograd tile over every checked run (the tuning table), beside
    the implicit GEMM's and cuDNN's transform algorithms' (the sweep)."""
    import pandas as pd

    ok = tuning[(tuning["status"] == "ok") & (tuning["variant"] == WINOGRAD)].copy()
    ok["tile"] = [f"F({json.loads(p)['m']}x{json.loads(p)['m']}, {r}x{r})"
                  for p, r in zip(ok["params"], ok["R"], strict=True)]  # fmt: skip
    rows = [{"method": f"convkit Winograd {tile}", "runs": len(g), "median": g["rel_err"].median(),
             "largest": g["rel_err"].max()} for tile, g in ok.groupby("tile")]  # fmt: skip
    done = sweep[sweep["status"] == "ok"]
    transforms = ("WINOGRAD", "WINOGRAD_NONFUSED", "FFT", "FFT_TILING", "IMPLICIT_PRECOMP_GEMM")
    named = (("convkit", IGEMM, "convkit implicit GEMM (direct)"), *(("cudnn", a, f"cuDNN {a}") for a in transforms))
    for impl, variant, name in named:
        g = done[(done["impl"] == impl) & (done["variant"] == variant)]
        if len(g):
            rows.append(
                {"method": name, "runs": len(g), "median": g["rel_err"].median(), "largest": g["rel_err"].max()}
            )
    return pd.DataFrame(rows).set_index("method")


def roofline_points(table: Any, ceilings: dict[str, float]) -> list[tuple[str, float, float, str]]:
    """Every compute-bound problem (arithmetic intensity past the ridge) twice: convkit's best and the best
    library's, in (effective) GFLOP/s against its minimal-traffic intensity."""
    points = []
    for r in table.itertuples():
        ai = r.problem.arithmetic_intensity
        if ai < ceilings["ridge_flops_per_byte"]:
            continue
        points.append(("", ai, r.gflop / r.best_us * 1e6, "convkit's best"))
        points.append(("", ai, r.gflop / r.best_lib_us * 1e6, "best library"))
    return points


def result_lines(
    cuconv: Any, lu: Any, chang: Any, earlier: dict[str, Any], spread_: dict[str, float], sgemm_tflops: float
) -> list[str]:
    """The chapter's opening: what was set out, what is measured, the verdict, every number from the results."""
    cells = cuconv.groupby(["r", "n"])["speedup"].apply(tables.geomean)
    small = cells[cells.index.get_level_values(1) <= 8].drop(1, level=0)
    late = _late(cells)
    one = cells.loc[1]
    large = cuconv[cuconv["gflop"] >= LARGE_GFLOP]
    direct = float((large["gflop"] / large[f"{IGEMM}_us"] * 1e3).median())
    vs_cublas = float((cuconv.loc[cuconv["r"] == 1, "cublas_us"] / cuconv.loc[cuconv["r"] == 1, "best_us"]).median())
    return [
        "**Aim**: FP32 kernels that hold their own where the work is compute-bound, where the papers' kernels "
        f"lost (on cuConv's 616 layers the best of them was faster than the best library on "
        f"{earlier['cuconv_share']:.1f}%, geometric mean {earlier['cuconv_geomean']:.2f}x).",
        f"**Measured (H100)**: an implicit GEMM and Winograd kernels are faster than the best library of the same "
        f"run on {tables.share_faster(cuconv['speedup']):.1f}% of cuConv's 616 layers (geometric mean "
        f"{tables.geomean(cuconv['speedup']):.2f}x), {tables.geomean(lu['speedup']):.2f}x on the "
        f"memory-transactions chapter's {len(lu)} layers (before: {earlier['lu_geomean']:.2f}x) and slower on "
        f"{int((chang['speedup'] < 1).sum())} of the Pascal-era grid's {len(chang)} (before: "
        f"{earlier['chang_slower']}).",
        f"**Verdict**: the 3x3 and 5x5 layers are won at batch 1 and 8 ({small.min():.2f}-{small.max():.2f}x a "
        f"cell) and held from batch 16 ({late.min():.2f}-{late.max():.2f}x against cuDNN's FFT and Winograd; "
        f"times within {100 * spread_['p95']:.0f}% are ties). The 1x1 layers, a plain GEMM, stay behind "
        f"({one.min():.2f}-{one.max():.2f}x a cell): the implicit GEMM runs {direct:.0f} TFLOP/s on the large "
        f"layers, {100 * direct / sgemm_tflops:.0f}% of cuBLAS's SGEMM rate, and on the median 1x1 layer "
        f"{vs_cublas:.2f}x cuBLAS's speed.",
    ]  # fmt: skip


def load(directory: Path, experiment: str = SWEEP) -> dict[str, Any]:
    """The chapter's frames from a results folder: the sweep ``experiment``, its repeat, the tuning table and the
    profile (empty frames where not recorded)."""
    import pandas as pd

    from convkit.study.results import load_results

    out = {}
    for key, name in (("sweep", experiment), ("repeat", REPEAT), ("tuning", TUNING), ("kernels", PROFILE)):
        path = Path(directory) / f"{name}.csv"
        out[key] = load_results(Path(directory), name)[0] if path.is_file() else pd.DataFrame()
    return out


def chapter_tables(directory: Path, ceilings: dict[str, float], experiment: str = SWEEP) -> dict[str, Any]:
    """Everything the chapter shows, from a results folder and the GPU's ceilings: the frames, the per-problem
    table, each suite's rows, the spread and where the study stood before (:func:`before`). A quick run's
    ``experiment`` (any but :data:`SWEEP`) has the quick suites."""
    frames = load(directory, experiment)
    table = problem_table(frames["sweep"], ceilings)
    groups = {name: suite_rows(table, problems) for name, problems in suites(experiment != SWEEP).items()}
    extra = {"ceilings": ceilings, "table": table, "spread": tables.spread(frames["sweep"], frames["repeat"]),
             "before": before(directory)}  # fmt: skip
    return frames | extra | groups


def findings(directory: Path) -> list[dict[str, str]]:
    """The book's findings row of this chapter (:data:`convkit.papers.paper.FINDING_COLUMNS`)."""
    from convkit.study.roofline import recorded_ceilings

    t = chapter_tables(directory, recorded_ceilings(directory))
    cuconv, ceilings, earlier = t["cuconv"], t["ceilings"], t["before"]
    large = cuconv[cuconv["gflop"] >= LARGE_GFLOP]
    tflops = float((large["gflop"] / large[f"{IGEMM}_us"] * 1e3).median())
    return [{
        "paper": "Past the papers", "claim": "FP32 kernels can match the library where the work is compute-bound",
        "paper's number": "(the study's own aim)",
        "paper's design on the H100": f"the papers' best on cuConv's 616: faster on {earlier['cuconv_share']:.1f}%, "
                                      f"{earlier['cuconv_geomean']:.2f}x",
        "our best on the H100": f"faster on {tables.share_faster(cuconv['speedup']):.1f}%, "
                                f"{tables.geomean(cuconv['speedup']):.2f}x",
        "best library on the H100": "cuDNN (FFT, Winograd, implicit GEMM) and cuBLAS SGEMM on 1x1",
        "efficiency": f"implicit GEMM {tflops:.1f} TFLOP/s on layers >= 20 GFLOP "
                      f"({100 * tflops / ceilings['sgemm_tflops']:.0f}% of SGEMM)",
        "what changed": "an implicit GEMM with a cp.async pipeline and Winograd up to F(6x6, 3x3) and F(4x4, 5x5)",
    }]  # fmt: skip


def layer_table(rows: Any) -> Any:
    """Rows of :func:`problem_table` as a reader sees them: each layer, our faster kernel and the best library."""
    cols = {"label": "layer", "best": "FP32 kernel", "best_us": "FP32 kernel (us)", "best_lib": "best library",
            "best_lib_us": "best library (us)", "speedup": "speed-up"}  # fmt: skip
    return tables.layer_table(rows, cols, NAMES)


def for_chapter(directory: Path, ceilings: dict[str, float], suite: str) -> tuple[str, Any]:
    """What an earlier chapter shows of these kernels on its own problems (``suite``: ``cuconv``, ``lu2020`` or
    ``chang2022``): a sentence, and a table (cuConv's cells; every layer for the others). Empty where the
    chapter's sweep is not recorded in ``directory``."""
    import pandas as pd

    if not (Path(directory) / f"{SWEEP}.csv").is_file():
        return "", pd.DataFrame()
    rows = chapter_tables(directory, ceilings)[suite]
    text = (f"Past the papers, this study's FP32 kernels (an implicit GEMM and Winograd) on the same problems, each "
            f"against the best library of their own run: faster on {int((rows['speedup'] > 1).sum())} of "
            f"{len(rows)}, geometric mean {tables.geomean(rows['speedup']):.2f}x.")  # fmt: skip
    return text, cell_table(rows) if suite == "cuconv" else layer_table(rows)


#: The ladder from the papers' designs to these kernels: (step, the sweep it was measured in, variant).
LADDER = (
    ("cuConv's design: scalar products, then a sum", "cuconv", "cuconv_paper"),
    ("cuConv with several filters a thread", "cuconv", "cuconv_fused"),
    ("... and the channel reduction split", "cuconv", "cuconv_split"),
    ("cuConv's design carried to an implicit GEMM in register tiles", "cuconv", "cuconv_tiled"),
    ("this chapter's implicit GEMM: a copy pipeline, warp tiles", SWEEP, IGEMM),
    ("this chapter's Winograd (effective rate)", SWEEP, WINOGRAD),
)


def ladder(directory: Path, sgemm_tflops: float) -> Any:
    """Median TFLOP/s of each step of :data:`LADDER` on cuConv's layers of at least :data:`LARGE_GFLOP`, each
    from the sweep it was measured in (the cuConv chapter's, or this chapter's), against the SGEMM ceiling."""
    import pandas as pd

    from convkit.study.results import load_results

    labels = {p.label for p in suites()["cuconv"]}
    rows = []
    for step, experiment, variant in LADDER:
        if not (Path(directory) / f"{experiment}.csv").is_file():
            continue
        ok = tables.timed(load_results(Path(directory), experiment)[0])
        mine = ok[(ok["variant"] == variant) & ok["label"].isin(labels)]
        flops = pd.Series([ConvProblem.from_row(r).flops for _, r in mine.iterrows()], index=mine.index, dtype=float)
        large = flops >= LARGE_GFLOP * 1e9
        if not large.any():
            continue
        median = float((flops[large] / mine.loc[large, "us"] / 1e6).median())
        where = "the cuConv chapter" if experiment == "cuconv" else "this chapter"
        rows.append({"step": step, "measured in": where, "layers": int(large.sum()), "median TFLOP/s": median,
                     "share of SGEMM": median / sgemm_tflops})  # fmt: skip
    return pd.DataFrame(rows).set_index("step")
