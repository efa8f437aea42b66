"""A look at the 3xTF32 kernel while it is developed (prints; records nothing): on a few network layers, every
launch candidate of igemm_tf32x3 and fp32_igemm beside every cuDNN algorithm, PyTorch (TF32 off), cuBLAS and
CUTLASS (its 3xTF32 and SIMT kernels, NHWC, the layout transforms untimed; with the nvidia-cutlass wheel),
checked against float64 and timed as the sweeps time them, the fastest of each with its launch's knobs; then the
error of both kernels as K = 9 C grows, on the accuracy experiment's kinds of input.
Run on a GPU from the repository root:
    PYTHONPATH=$PWD python3 scripts/tf32x3_probe.py
    PYTHONPATH=$PWD python3 scripts/tf32x3_probe.py --suite=cuconv [--every=6] [--part=k/n] [--csv=rows.csv] [--cutlass]
        [--touched | --small-grids] [--labels=a,b]
(--suite: the chapter's suite cuconv, lu2020 or chang2022 (their multi-channel layers), every sixth, the k-th of n
shares of them, beside the best FP32 library, or with --cutlass the direct kernels beside CUTLASS's 3xTF32 tiles;
--touched: of the layers where the wgmma kernel's pixel-rows or tap-pairs settings are candidates alone;
--small-grids: where its smaller blocks on 1x1 layers of few output tiles are; --labels: those of the layers alone.)
"""

from __future__ import annotations

from convkit.bench.measure import measure_problem
from convkit.core import reference
from convkit.core.problem import ConvProblem
from convkit.families import fp32, tf32x3
from convkit.families.fp32.launch import candidates, conv2d_implicit_gemm
from convkit.families.registry import Kernels
from convkit.families.tf32x3.launch import conv2d_tf32x3, launch_candidates
from convkit.libs import cutlass
from convkit.op.cases import Case, cases, params_text

LAYERS = (
    ConvProblem.same(16, 256, 56, 56, 256, 3), ConvProblem.same(32, 256, 56, 56, 256, 3),
    ConvProblem.same(16, 512, 28, 28, 512, 3), ConvProblem.same(16, 1024, 14, 14, 256, 1),
    ConvProblem.same(1, 832, 7, 7, 256, 1), ConvProblem.same(8, 48, 7, 7, 128, 5),
)  # fmt: skip
TIMING = {"warmup": 3, "min_reps": 10, "max_reps": 100, "budget_ms": 30.0}


def speeds() -> None:
    kernels = Kernels(tf32x3.VARIANTS + fp32.VARIANTS, fp32.PEERS + cutlass.PEERS)
    for p in LAYERS:
        todo = [Case("convkit", tf32x3.IGEMM, params_text(k.to_params())) for k in launch_candidates(p)]
        todo += [Case("convkit", fp32.IGEMM, params_text(k.to_params())) for k in candidates(p)]
        todo += cases(p, (), cudnn=True, pytorch=True, peers=fp32.PEERS + cutlass.PEERS)
        gflop = 2 * p.n * p.m * p.c * p.r * p.s * p.out_h * p.out_w / 1e9
        best: dict[str, tuple[float, float]] = {}
        for row in measure_problem(p, todo, kernels, timing=TIMING):
            if row["status"] == "ok":
                name = row["variant"] if row["impl"] == "convkit" else row["impl"]
                us = 1e3 * float(row["time_ms_median"])
                if name not in best or us < best[name][0]:
                    best[name] = (us, float(row["rel_err"]), row["params"] if row["impl"] == "convkit" else "")
        print(f"{p.label}: {gflop:.2f} GFLOP")
        for name, (us, err, params) in sorted(best.items(), key=lambda item: item[1][0]):
            print(f"    {name:14s} {us:9.1f} us {gflop / us * 1e3:7.1f} TFLOP/s  error {err:.1e}  {params}")


def errors() -> None:
    from convkit.papers.tf32x3.accuracy import INPUTS, make_inputs

    for c in (32, 128, 512, 1024):
        p = ConvProblem.same(2, c, 24, 24, 64, 3)
        for seed, inputs in enumerate(INPUTS):
            x, w = make_inputs(p, inputs, seed)
            ref = reference.conv2d(x.get(), w.get(), pad=1)
            mine = reference.relative_error(conv2d_tf32x3(x, w, pad=1).get(), ref)
            simt = reference.relative_error(conv2d_implicit_gemm(x, w, pad=1).get(), ref)
            print(f"K = {9 * c:5d}, {inputs:13s}: 3xTF32 {mine:.2e}, FP32 SIMT {simt:.2e}")


def versus_cutlass(problems: list[ConvProblem]) -> None:
    """The direct 3xTF32 kernels (the wgmma kernel's tuning candidates, the mma.sync kernel's first-use launch) beside
    CUTLASS's 3xTF32 kernel at each of its tiles on ``problems``: per layer the fastest of each, then the share where
    ours is faster (the chapter's measure against CUTLASS) and the median of its speed-up."""
    import statistics

    import pandas as pd

    from convkit.study import tables

    tiles = tuple(peer for peer in cutlass.PEERS if peer.precision == "tf32x3")
    kernels = Kernels(tf32x3.VARIANTS, tiles)
    ratios = []
    for p in problems:
        todo = cases(p, (tf32x3.WGMMA_VARIANT,), cudnn=False, tune=True)
        todo += cases(p, (tf32x3.IGEMM_VARIANT,), cudnn=False, peers=tiles)
        rows = tables.timed(pd.DataFrame(measure_problem(p, todo, kernels, timing=TIMING)))
        ours, theirs = (rows[rows["impl"] == impl].sort_values("us") for impl in ("convkit", cutlass.IMPL))
        if len(ours) and len(theirs):
            mine, peer = ours.iloc[0], theirs.iloc[0]
            ratios.append(peer["us"] / mine["us"])
            print(f"{p.label} pad={p.pad} ({p.flops / 1e9:.2f} GFLOP): {mine['variant']} {mine['us']:.1f} us, "
                  f"{peer['variant']} {peer['us']:.1f} us: {ratios[-1]:.2f}x", flush=True)  # fmt: skip
    print(f"{len(ratios)} layers both ran: ours faster on {100 * sum(r > 1 for r in ratios) / len(ratios):.1f}%, "
          f"median {statistics.median(ratios):.2f}x, lowest {min(ratios):.2f}x")  # fmt: skip


def suite_problems(
    name: str, every: int, part: tuple[int, int], touched: bool = False, small_grids: bool = False
) -> list[ConvProblem]:
    """The 3xTF32 chapter's suite ``name`` (cuConv's, or the multi-channel layers of the other two, as the chapter
    counts them), every ``every``-th, its ``part`` = (k, n): the k-th of n shares; ``touched``: of the layers where
    the wgmma kernel's pixel-rows or tap-pairs settings are candidates alone; ``small_grids``: where its
    :func:`~convkit.families.tf32x3.wgmma_settings.small_grid_candidates` are."""
    from convkit.families.tf32x3.wgmma_settings import (
        pixel_rows_candidates,
        small_grid_candidates,
        tap_pair_candidates,
    )
    from convkit.study.layer_sets import three_chapter_suites

    problems = [p for p in three_chapter_suites()[name] if name == "cuconv" or p.c > 1]
    if touched:
        problems = [p for p in problems if pixel_rows_candidates(p) or tap_pair_candidates(p)]
    if small_grids:
        problems = [p for p in problems if small_grid_candidates(p)]
    return problems[::every][part[0] - 1 :: part[1]]


def suite_layers(problems: list[ConvProblem], csv_path: str | None) -> None:
    """Where the family stands on ``problems`` (a share of a suite: :func:`suite_problems`), as the 3xTF32 sweep
    measures them but in one pass: the wgmma kernels' tuning candidates (the sweep tunes each problem and keeps the
    fastest), the mma.sync and FP32 kernels at their first-use launch, every cuDNN algorithm (FMA math), PyTorch (TF32
    off) and cuBLAS where 1x1; per layer the best of ours over the best library, then by (filter, batch) cell the
    geometric mean, the share faster, and the geometric mean on the layers of at least 1 GFLOP; then the 1x1 layers'
    median over cuBLAS SGEMM and the direct kernels' and the Hopper family's median rate on the large layers, as the
    chapter's targets count them. ``csv_path``: the rows too (a probe's, for reading offline; never results/)."""
    import csv

    import pandas as pd

    from convkit.papers.tf32x3 import results
    from convkit.study import tables

    tuned = (tf32x3.WGMMA_VARIANT, tf32x3.WINOGRAD_WGMMA_VARIANT)
    first_use = tuple(v for v in (*tf32x3.VARIANTS, *fp32.VARIANTS) if v not in tuned)
    kernels = Kernels(tf32x3.VARIANTS + fp32.VARIANTS, fp32.PEERS)
    ours = [v.name for v in kernels.variants]
    rows = []
    for p in problems:
        todo = cases(p, tuned, cudnn=False, tune=True) + cases(p, first_use, pytorch=True, peers=fp32.PEERS)
        rows += list(measure_problem(p, todo, kernels, timing=TIMING))
        if csv_path:  # after each layer: a call cut short keeps what it measured
            pd.DataFrame(rows).to_csv(csv_path, index=False, quoting=csv.QUOTE_MINIMAL)
        table = tables.best_rows(pd.DataFrame(rows[-len(todo) :]), ours)
        if len(table):
            r = table.iloc[0]
            print(
                f"{p.label} pad={p.pad} ({p.flops / 1e9:.2f} GFLOP): {r['best']} {r['best_us']:.1f} us, "
                f"{r['best_lib']} {r['best_lib_us']:.1f} us: {r['speedup']:.2f}x",
                flush=True,
            )
    frame = pd.DataFrame(rows)
    table = tables.best_rows(frame, ours)
    table["r"], table["n"] = [p.r for p in table["problem"]], [p.n for p in table["problem"]]
    counted = table[[p.flops >= 1e9 for p in table["problem"]]]
    print(
        f"{len(table)} layers: faster on {tables.share_faster(table['speedup']):.1f}% (slower on "
        f"{int((table['speedup'] < 1).sum())}), geomean "
        f"{tables.geomean(table['speedup']):.2f}x; on {len(counted)} of >= 1 GFLOP "
        f"{tables.geomean(counted['speedup']):.2f}x"
    )
    for (r, n), cell in table.groupby(["r", "n"]):
        print(
            f"  {r}x{r} batch {n:3d}: geomean {tables.geomean(cell['speedup']):.2f}x over {len(cell)}, lowest "
            f"{cell['speedup'].min():.2f}x; fastest: {', '.join(cell['best'].value_counts().index[:3])}"
        )
    chapter = results.problem_table(frame)  # the chapter's own measures, as its targets count them
    one = chapter[chapter["label"].str.split("-").str[2] == "1"].dropna(subset=["cublas_us"])
    large = chapter[chapter["gflop"] >= results.LARGE_GFLOP]
    rates = [f"{name} median {(large['gflop'] / large[us] * 1e3).median():.1f} TFLOP/s"
             for name, us in (("direct", "direct_us"), ("Hopper family", "hopper_us")) if us in large]  # fmt: skip
    print(f"1x1 ({len(one)}): the best over cuBLAS SGEMM, median {(one['cublas_us'] / one['best_us']).median():.2f}x; "
          f"the {len(large)} of >= {results.LARGE_GFLOP:.0f} GFLOP: {', '.join(rates)}")  # fmt: skip


if __name__ == "__main__":
    import sys

    def arg(name: str, default: str) -> str:
        return next((a.split("=", 1)[1] for a in sys.argv if a.startswith(f"--{name}=")), default)

    if arg("suite", ""):
        share = tuple(map(int, arg("part", "1/1").split("/")))
        touched = "--touched" in sys.argv[1:]
        small_grids = "--small-grids" in sys.argv[1:]
        problems = suite_problems(arg("suite", ""), int(arg("every", "6")), (share[0], share[1]), touched, small_grids)
        if arg("labels", ""):  # --labels=a,b: those of the suite's layers alone (a rerun of some of a share)
            problems = [p for p in problems if p.label in arg("labels", "").split(",")]
        if "--cutlass" in sys.argv[1:]:
            versus_cutlass(problems)
        else:
            suite_layers(problems, arg("csv", "") or None)
    else:
        speeds()
        errors()
