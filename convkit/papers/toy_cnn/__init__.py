"""The fused CNN layer (Grisett): conv 5x5 + bias + ReLU + 2x2 max-pool in one kernel, the report's ladder and past it.

The chapter measures the report's ladder V0..V4 (:mod:`.launch`) at its launches (its Tables 1 and 3,
and a wider block sweep), the study's register-tiled V5 fused and unfused, each cuDNN algorithm alone
and followed by bias, ReLU and pool, and PyTorch's layer (:mod:`.measure`), on the course lab's layer
and three smaller ones. Its cases are layers, not plain convolutions, so the paper declares no
:class:`convkit.families.registry.Variant`: its generic GPU check runs :func:`sample_checks` through
:func:`.measure.measure_layer`. :mod:`.results` turns the rows into the chapter's tables.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.families.registry import KnobTable
from convkit.families.toy_cnn import FAMILY
from convkit.families.toy_cnn.launch import (
    LAB_LAYER,
    LADDER,
    REPORT_BEST_BLOCK,
    REPORT_BEST_GRID,
    REPORT_TABLE3,
    SMALL_LAYERS,
    ToyLadderLaunch,
    block_shapes,
    default_tile,
    fitting_tiles,
    layer_output_shape,
    report_grid,
)
from convkit.op.cases import Case, params_text, tolerance_for
from convkit.papers.paper import Paper, Profile, ProfiledCase
from convkit.papers.toy_cnn import claims, edges, layer_op
from convkit.papers.toy_cnn.claims import findings
from convkit.papers.toy_cnn.measure import (
    LAYER_STEPS,
    layer_cases,
    layer_prepare,
    measure_layer,
    reference_layer,
    run_layer_experiment,
)
from convkit.papers.toy_cnn.results import TOY_EXPERIMENT
from convkit.study.results import full_or_quick, load_results
from convkit.study.tables import fastest_per

#: Full-layer runs take 4-40 ms: a few repeats each, after one warm-up.
TOY_TIMING: dict[str, Any] = {"warmup": 1, "min_reps": 5, "max_reps": 50, "budget_ms": 100.0}
#: The profile's metrics: where the time goes (occupancy, FMA pipe, shared-memory wavefronts and bank
#: conflicts, bytes from DRAM and L2, the clock the run saw).
TOY_METRICS = (
    "sm__warps_active.avg.pct_of_peak_sustained_active", "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_fma.sum", "smsp__inst_executed.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum", "sm__cycles_elapsed.avg.per_second",
)  # fmt: skip
#: Small layers the generic GPU test checks every kernel on (pre-padded): pooled outputs no block or
#: tile divides, C = 1 and M = 1 at the smallest size, more filters than a tile holds.
SAMPLE_LAYERS: tuple[ConvProblem, ...] = (
    ConvProblem(1, 3, 36, 36, 8, 5, 5), ConvProblem(1, 19, 41, 29, 37, 5, 5), ConvProblem(1, 1, 6, 6, 1, 5, 5),
    ConvProblem(1, 64, 23, 47, 70, 5, 5),
)  # fmt: skip


def _ladder(variant: str, block: Sequence[int], grid: Sequence[int]) -> tuple[str, dict[str, Any]]:
    """(variant, knobs) of a ladder launch, as its rows record it."""
    return variant, ToyLadderLaunch(variant, tuple(block), tuple(grid)).to_params()


#: A quick run's block sweep: every this-many-th block shape of the heatmap.
QUICK_BLOCK_STEP = 7


def plan(quick: bool = False) -> list[tuple[ConvProblem, list[Case]]]:
    """What the chapter measures: (layer, cases) in order, the lab's layer first.

    The lab layer: the ladder V0..V4 at the report's best launch (Table 1), V4 at the nine launches
    of its Table 3 and over the wider block sweep (the heatmap), every tiled candidate fused and
    unfused, the ladder and ``tiled`` timed the report's way too, then cuDNN (each algorithm alone
    and with bias, ReLU and pool) and PyTorch. Then smaller layers, at the report's best block.
    ``quick``: the same tables and figures from fewer launches: the ladder, three of Table 3's launches, every
    :data:`QUICK_BLOCK_STEP`-th block shape, one tile fused and unfused, the ladder's first and last steps
    timed the report's way, cuDNN and PyTorch; one smaller layer.
    """
    lab = LAB_LAYER
    ladder = [_ladder(v, REPORT_BEST_BLOCK, REPORT_BEST_GRID) for v in LADDER]
    tiles = [("tiled", t.to_params()) for t in fitting_tiles()]
    table3 = [_ladder("v4", block, grid) for grid, block, _, _ in REPORT_TABLE3]
    heatmap = [_ladder("v4", block, report_grid(lab, block)) for block in block_shapes(lab)]
    if quick:
        launches = [*ladder, *table3[:3], *heatmap[::QUICK_BLOCK_STEP], tiles[0], ("unfused", tiles[0][1])]
        host = [ladder[0], ladder[-1], ("tiled", {})]
        small = SMALL_LAYERS[0]
        small_cases = [_ladder("v4", REPORT_BEST_BLOCK, report_grid(small, REPORT_BEST_BLOCK)), tiles[0],
                       ("unfused", tiles[0][1])]  # fmt: skip
        return [(lab, layer_cases(lab, launches, host_timed=host)), (small, layer_cases(small, small_cases))]
    unfused = [("unfused", k) for _, k in tiles]
    launches = list(dict.fromkeys((v, json.dumps(k)) for v, k in [*ladder, *table3, *heatmap, *tiles, *unfused]))
    out = [(lab, layer_cases(lab, [(v, json.loads(k)) for v, k in launches], host_timed=[*ladder, ("tiled", {})]))]
    for layer in SMALL_LAYERS:
        small = [_ladder(v, REPORT_BEST_BLOCK, report_grid(layer, REPORT_BEST_BLOCK)) for v in LADDER]
        out.append((layer, layer_cases(layer, [*small, *tiles, ("unfused", tiles[0][1])])))
    return out


def measure(
    directory: Path,
    *,
    quick: bool = False,
    experiment: str = TOY_EXPERIMENT,
    progress: Callable[[str], None] | None = print,
) -> None:
    """Run :func:`plan` into ``<directory>/<experiment>.csv`` (resumable)."""
    run_layer_experiment(experiment, plan(quick), directory=directory, timing=TOY_TIMING, progress=progress)


def sample_checks(tuned: KnobTable | None = None) -> Iterator[tuple[ConvProblem, list[Case]]]:
    """(layer, cases) for the generic GPU test: on each of :data:`SAMPLE_LAYERS`, the ladder at the report's
    best block, the first and last tiled candidates, ``unfused``, and ``tiled`` timed the report's way (each at
    the launch named here: nothing of it is tuned)."""
    fitting = fitting_tiles()
    first, last = fitting[0].to_params(), fitting[-1].to_params()
    for layer in SAMPLE_LAYERS:
        ladder = [_ladder(v, REPORT_BEST_BLOCK, report_grid(layer, REPORT_BEST_BLOCK)) for v in LADDER]
        launches = [*ladder, ("tiled", first), ("tiled", last), ("unfused", first)]
        yield layer, layer_cases(layer, launches, host_timed=[("tiled", {})], cudnn=False)


def _fastest_recorded(directory: Path) -> tuple[dict[str, Any], str]:
    """(tiled knobs, cuDNN algorithm) fastest on the lab layer in the sweep recorded in ``directory``, else the
    defaults (the tile that fits this GPU; IMPLICIT_PRECOMP_GEMM)."""
    tile, algorithm = default_tile().to_params(), "IMPLICIT_PRECOMP_GEMM"
    experiment = full_or_quick(Path(directory), TOY_EXPERIMENT)
    if (Path(directory) / f"{experiment}.csv").exists():
        frame = load_results(Path(directory), experiment)[0]
        lab = frame[frame["label"] == LAB_LAYER.label]
        tiled = lab[(lab["impl"] == "convkit") & (lab["variant"] == "toy_tiled")]
        cudnn = lab[(lab["impl"] == "cudnn") & lab["params"].astype(str).str.contains("pool", regex=False)]
        best_tiled, best_cudnn = fastest_per(tiled, ["label"]), fastest_per(cudnn, ["label"])
        if len(best_tiled):
            tile = json.loads(best_tiled.iloc[0]["params"])
        if len(best_cudnn):
            algorithm = str(best_cudnn.iloc[0]["variant"])
    return tile, algorithm


def profile_cases(directory: Path) -> list[Case]:
    """The lab layer's profiled cases: the ladder at the report's best launch, ``tiled`` and ``unfused`` at
    the fastest tile recorded in ``directory``, and cuDNN's fastest recorded algorithm with its bias, ReLU and
    pool."""
    tile, algorithm = _fastest_recorded(directory)
    best = params_text(_ladder("v0", REPORT_BEST_BLOCK, REPORT_BEST_GRID)[1])
    cases = [Case("convkit", f"toy_{v}", best) for v in LADDER]
    cases += [Case("convkit", f"toy_{v}", params_text(tile)) for v in ("tiled", "unfused")]
    return [*cases, Case("cudnn", algorithm, LAYER_STEPS)]


def profiled_cases(directory: Path) -> Iterator[ProfiledCase]:
    """:func:`profile_cases` on one draw of the lab layer's inputs, each checked against the float64 layer."""
    import cupy

    problem = LAB_LAYER
    rng = cupy.random.default_rng()
    x = rng.standard_normal(problem.input_shape, dtype=cupy.float32)
    w = rng.standard_normal(problem.filter_shape, dtype=cupy.float32)
    bias = rng.standard_normal((problem.m,), dtype=cupy.float32)
    conv_out = cupy.empty(problem.output_shape, dtype=cupy.float32)
    pooled = cupy.empty(layer_output_shape(problem), dtype=cupy.float32)
    ref = reference_layer(x, w, bias)
    for case in profile_cases(directory):
        entry = {"table": "lab layer", "config": "", "label": problem.label, "impl": case.impl,
                 "variant": case.variant, "params": case.params}  # fmt: skip
        prepare = layer_prepare(problem, case, x, w, bias, conv_out, pooled)
        yield ProfiledCase(entry, prepare, pooled, ref, tolerance_for(case))


PAPER = Paper(
    "toy_cnn", "Fused CNN layer (Grisett)", "04_toy_cnn", TOY_EXPERIMENT, measure, FAMILY, convolutions=False,
    sample_checks=sample_checks, measure_rows=measure_layer, fused_choices=layer_op.fused_choices,
    findings=findings, edge_check=edges.edge_check, profile=Profile("toy_cnn_kernels", profiled_cases, TOY_METRICS),
    claims=claims.claims,
)  # fmt: skip
