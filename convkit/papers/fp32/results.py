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
NAMES = {IGEMM: "implicit GEMM", WINOGRAD: "Winograd", **tables.LIBRARY_NAMES}
#: Layers at least this large are "large" for the throughput numbers (GFLOP, direct method).
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
    cuConv's share faster and geometric mean; the memory-transactions layers' geometric mean; the Pascal-era grid's
    layers where its kernels were slower, and their recorded times per layer (``chang_us``, by label)."""
    if not all((Path(directory) / f"{name}.csv").is_file() for name in EARLIER):
        return {"cuconv_share": math.nan, "cuconv_geomean": math.nan, "lu_geomean": math.nan, "chang_slower": "-",
                "chang_layers": "-", "chang_us": {}}  # fmt: skip
    cuconv, lu, chang = (earlier_speedups(directory, name, multi_only) for name, multi_only in EARLIER.items())
    return {
        "cuconv_share": tables.share_faster(cuconv["speedup"]), "cuconv_geomean": tables.geomean(cuconv["speedup"]),
        "lu_geomean": tables.geomean(lu["speedup"]), "chang_slower": int((chang["speedup"] < 1).sum()),
        "chang_layers": len(chang), "chang_us": dict(zip(chang["label"], chang["best_us"], strict=True)),
    }  # fmt: skip


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


def throughput_table(cuconv: Any, ceilings: dict[str, float]) -> Any:
    """The large layers (>= 20 GFLOP): TFLOP/s of each family (Winograd's over the direct method's FLOPs,
    "effective"), the best library's, and the implicit GEMM's share of the SGEMM ceiling."""
    large = cuconv[cuconv["gflop"] >= LARGE_GFLOP].sort_values("gflop", ascending=False)
    out = large[["label", "gflop"]].copy()
    out["implicit GEMM (TFLOP/s)"] = large["gflop"] / large[f"{IGEMM}_us"] * 1e3
    out["% of SGEMM"] = 100 * out["implicit GEMM (TFLOP/s)"] / ceilings["sgemm_tflops"]
    out["Winograd, eff. (TFLOP/s)"] = large["gflop"] / large[f"{WINOGRAD}_us"] * 1e3
    out["best library, eff. (TFLOP/s)"] = large["gflop"] / large["best_lib_us"] * 1e3
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
    rows = [{"method": f"our Winograd {tile}", "runs": len(g), "median": g["rel_err"].median(),
             "largest": g["rel_err"].max()} for tile, g in ok.groupby("tile")]  # fmt: skip
    done = sweep[sweep["status"] == "ok"]
    transforms = ("WINOGRAD", "WINOGRAD_NONFUSED", "FFT", "FFT_TILING", "IMPLICIT_PRECOMP_GEMM")
    named = (("convkit", IGEMM, "our implicit GEMM (direct)"), *(("cudnn", a, NAMES[a]) for a in transforms))
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


def headline(t: dict[str, Any]) -> dict[str, Any]:
    """The numbers the chapter's result box and the book's findings row both state (:func:`chapter_tables`' ``t``):
    cuConv's share faster and geometric mean, now and before (``earlier``), the implicit GEMM's median TFLOP/s on
    the large layers and its share of the SGEMM ceiling, the other suites' geometric means and slower layers."""
    cuconv, lu, chang = t["cuconv"], t["lu2020"], t["chang2022"]
    large = cuconv[cuconv["gflop"] >= LARGE_GFLOP]
    direct = float((large["gflop"] / large[f"{IGEMM}_us"] * 1e3).median())
    return {"share": tables.share_faster(cuconv["speedup"]), "geomean": tables.geomean(cuconv["speedup"]),
            "cuconv_layers": len(cuconv),
            "direct_tflops": direct, "direct_share": direct / t["ceilings"]["sgemm_tflops"],
            "lu_geomean": tables.geomean(lu["speedup"]), "lu_faster": int((lu["speedup"] > 1).sum()),
            "lu_layers": len(lu), "chang_slower": int((chang["speedup"] < 1).sum()), "chang_layers": len(chang),
            "earlier": t["before"]}  # fmt: skip


def pascal_regression(t: dict[str, Any]) -> dict[str, Any]:
    """Why the Pascal-era grid has more layers slower than the best library here than its own chapter's kernels had
    in theirs: of the layers slower now, the 1x1 ones and those that lose to cuBLAS SGEMM (which that run did not
    measure); the earlier kernels' recorded times against this run's best library; and the least time of the
    implicit GEMM and of the earlier kernels on the grid's 1x1 layers (us)."""
    chang = t["chang2022"]
    earlier = t["before"].get("chang_us", {})
    slower = chang[chang["speedup"] < 1]
    ones = chang[chang["r"] == 1]
    old = chang["label"].map(earlier).astype(float)
    return {"slower": len(slower), "one_by_one": int((slower["r"] == 1).sum()),
            "to_cublas": int((slower["best_lib"] == "sgemm").sum()),
            "earlier_vs_now": int((chang["best_lib_us"] / old < 1).sum()) if len(earlier) else None,
            "least_now_us": float(ones["best_us"].min()),
            "least_earlier_us": float(ones["label"].map(earlier).astype(float).min()) if len(earlier) else math.nan,
            "layers": len(chang)}  # fmt: skip


def result_lines(t: dict[str, Any]) -> list[str]:
    """The chapter's opening (:func:`chapter_tables`' ``t``): what was attempted, what it reached, the bound that
    limits it, every number from the results (those of the findings row from :func:`headline`)."""
    cuconv, spread_ = t["cuconv"], t["spread"]
    h, earlier, why = headline(t), t["before"], pascal_regression(t)
    cells = cuconv.groupby(["r", "n"])["speedup"].apply(tables.geomean)
    small = cells[cells.index.get_level_values(1) <= 8].drop(1, level=0)
    late, one = _late(cells), cells.loc[1]
    ones = cuconv[cuconv["r"] == 1]
    cublas = float((ones["best_us"] / ones["cublas_us"]).median())
    compared = (f" (against this run's library the Pascal-era kernels' recorded times would lose on "
                f"{why['earlier_vs_now']})") if why["earlier_vs_now"] is not None else ""  # fmt: skip
    return [
        "**Question**: can FP32 kernels hold their own where the work is compute-bound, where the papers' kernels "
        f"lost? On cuConv's {h['cuconv_layers']} problems, the cuConv chapter's best kernel (the fastest of its four "
        f"variants) was faster than the best library of its own run on {earlier['cuconv_share']:.1f}% "
        f"(geometric-mean speed-up {earlier['cuconv_geomean']:.2f}x).",
        f"**Measured (H100)**: this chapter's FP32 kernels, an implicit GEMM and Winograd, are faster than the best "
        f"library of their own run (cuBLAS SGEMM on 1x1 included) on {h['share']:.1f}% of cuConv's "
        f"{h['cuconv_layers']} problems (geometric-mean speed-up {h['geomean']:.2f}x) and on "
        f"{h['lu_faster']} of the memory-transactions chapter's {h['lu_layers']} multi-channel layers "
        f"({h['lu_geomean']:.2f}x, where that paper's kernels reached {earlier['lu_geomean']:.2f}x against the best "
        f"library of their run).",
        f"**A regression on the Pascal-era grid**: slower than the best library on {h['chang_slower']} of its "
        f"{h['chang_layers']} layers, where that chapter's kernels were slower on {earlier['chang_slower']} in their "
        f"own run. {why['one_by_one']} of the {why['slower']} are 1x1 layers, {why['to_cublas']} of them lost to "
        f"cuBLAS SGEMM, which that run did not measure{compared}; and on a small 1x1 layer the implicit GEMM takes "
        f"at least {why['least_now_us']:.1f} us where that chapter's kernel took {why['least_earlier_us']:.1f} us. "
        "The op keeps the faster of the two kernels per layer.",
        f"**Verdict**: the 3x3 and 5x5 layers are won at batch 1 and 8 ({small.min():.2f}x-{small.max():.2f}x a "
        f"cell) and held from batch 16 ({late.min():.2f}x-{late.max():.2f}x against cuDNN's FFT and Winograd; "
        f"times within {100 * spread_['p95']:.0f}% are ties). The 1x1 layers, a plain GEMM, stay behind "
        f"({one.min():.2f}x-{one.max():.2f}x a cell), bounded by cuBLAS's SGEMM: the implicit GEMM runs "
        f"{h['direct_tflops']:.1f} TFLOP/s on the large layers (>= {LARGE_GFLOP:.0f} GFLOP), "
        f"{100 * h['direct_share']:.0f}% of the SGEMM rate, "
        f"and takes {cublas:.2f}x cuBLAS's time on the median 1x1 layer.",
    ]  # fmt: skip


def limits_lines(t: dict[str, Any]) -> list[str]:
    """What limits each kind of layer, from the results (:func:`chapter_tables`' ``t``): the direct bound of the
    3x3 and 5x5 cells from batch 16, the implicit GEMM's distance from SGEMM and, where profiled, the share of
    its instructions that are FMAs."""
    cuconv = t["cuconv"]
    cells = cuconv.groupby(["r", "n"])
    late = [(key, tables.geomean(g["bound"]), tables.geomean(g["speedup"])) for key, g in cells
            if key[0] > 1 and key[1] >= 16]  # fmt: skip
    below = sum(bound < 1 for _, bound, _ in late)
    reached = [speedup for *_, speedup in late]
    h = headline(t)
    out = [
        f"**3x3 and 5x5 from batch 16**: in {below} of these {len(late)} cells the library runs faster than any "
        "direct kernel can (the bracket in the table above is below 1): cuDNN's FFT and Winograd do fewer "
        f"multiplications, so only our Winograd competes there: {min(reached):.2f}x-{max(reached):.2f}x a cell.",
        f"**1x1 layers**: a GEMM with nothing to transform; the implicit GEMM reaches "
        f"{100 * h['direct_share']:.0f}% of cuBLAS's SGEMM rate on the large layers, and cuBLAS's kernel sets the "
        "pace.",
    ]
    if len(t["kernels"]):
        profiled = profile_table(t["kernels"])
        mine = profiled[profiled.index.get_level_values("implementation") == NAMES[IGEMM]]
        busy = mine[mine["issue slots %"].astype(float) >= 75]
        if len(busy):
            share = busy["FMA share of instructions %"].astype(float)
            out.append(f"**Where the implicit GEMM keeps the issue slots busy** (the profile below), "
                       f"{share.min():.0f}%-{share.max():.0f}% of its instructions are FMAs: the rest (addresses, "
                       "copies, shared-memory reads) is the distance between its rate and the FMA pipe's.")  # fmt: skip
    return out


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


def chapter_tables(
    directory: Path, ceilings: dict[str, float], experiment: str = SWEEP, *, quick: bool | None = None
) -> dict[str, Any]:
    """Everything the chapter shows, from a results folder and the GPU's ceilings: the frames, the per-problem
    table, each suite's rows, the spread and where the study stood before (:func:`before`). A quick run's
    ``experiment`` (any but :data:`SWEEP`) has the quick suites."""
    frames = load(directory, experiment)
    table = problem_table(frames["sweep"], ceilings)
    groups = {
        name: suite_rows(table, problems)
        for name, problems in suites(experiment != SWEEP if quick is None else quick).items()
    }
    extra = {"ceilings": ceilings, "table": table, "spread": tables.spread(frames["sweep"], frames["repeat"]),
             "before": before(directory)}  # fmt: skip
    return frames | extra | groups


#: The MyST labels of the chapter's sections that the findings row refers to.
SECTION = "fp32-cuconv"


def findings(directory: Path) -> list[dict[str, str]]:
    """The book's findings row of this chapter (:data:`convkit.papers.paper.FINDING_COLUMNS`, and ``section``: the
    label of the section that shows it), its numbers from :func:`headline` as the result box's."""
    from convkit.study.roofline import recorded_ceilings

    h = headline(chapter_tables(directory, recorded_ceilings(directory)))
    earlier = h["earlier"]
    return [{
        "paper": "Past the papers", "claim": "FP32 kernels can match the library where the work is compute-bound",
        "paper's number": "(no paper: the study's own question)",
        "paper's design on the H100": f"the cuConv chapter's best kernel (the fastest of its four variants): faster "
                                      f"than the best library of its own run on {earlier['cuconv_share']:.1f}% of "
                                      f"cuConv's {h['cuconv_layers']} problems, geometric mean "
                                      f"{earlier['cuconv_geomean']:.2f}x",
        "our best on the H100": f"this chapter's FP32 kernels (implicit GEMM and Winograd): faster than the best "
                                f"library of their own run on {h['share']:.1f}% of cuConv's {h['cuconv_layers']} "
                                f"problems, geometric mean {h['geomean']:.2f}x",
        "best library on the H100": "cuDNN (FFT, Winograd, implicit GEMM), PyTorch's autotuned cuDNN, and cuBLAS "
                                    "SGEMM on 1x1",
        "efficiency": f"implicit GEMM {h['direct_tflops']:.1f} TFLOP/s on layers >= {LARGE_GFLOP:.0f} GFLOP "
                      f"({100 * h['direct_share']:.0f}% of SGEMM)",
        "what changed": "an implicit GEMM with a cp.async pipeline and Winograd up to F(6x6, 3x3) and F(4x4, 5x5)",
        "section": SECTION, "claims": ("fp32.large", "fp32.all", "fp32.share"),
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

    from convkit.study.results import full_or_quick, load_results

    labels = {p.label for p in suites()["cuconv"]}
    rows = []
    for step, sweep, variant in LADDER:
        experiment = full_or_quick(Path(directory), sweep)
        if not (Path(directory) / f"{experiment}.csv").is_file():
            continue
        ok = tables.timed(load_results(Path(directory), experiment)[0])
        mine = ok[(ok["variant"] == variant) & ok["label"].isin(labels)]
        flops = pd.Series([ConvProblem.from_row(r).flops for _, r in mine.iterrows()], index=mine.index, dtype=float)
        large = flops >= LARGE_GFLOP * 1e9
        if not large.any():
            continue
        median = float((flops[large] / mine.loc[large, "us"] / 1e6).median())
        where = "the cuConv chapter" if sweep == "cuconv" else "this chapter"
        rows.append({"step": step, "measured in": where, "layers": int(large.sum()), "median TFLOP/s": median,
                     "% of SGEMM": 100 * median / sgemm_tflops})  # fmt: skip
    columns = ["step", "measured in", "layers", "median TFLOP/s", "% of SGEMM"]
    return pd.DataFrame(rows, columns=columns).set_index("step")
