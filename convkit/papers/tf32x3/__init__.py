"""FP32 accuracy on tensor cores: the 3xTF32 implicit GEMM (:mod:`convkit.families.tf32x3`) against the FP32 kernels,
every cuDNN algorithm in FMA math, PyTorch, cuBLAS and CUTLASS, on the FP32 chapter's problems.

- :func:`measure`: the FP32 chapter's 671 problems (cuConv's 616, Lu 2020's 26 and Chang 2022's 63 multi-channel
  layers, which overlap), each measured whole in one run: ``igemm_tf32x3`` at the launches tuned into
  ``tf32x3_tuning.csv``, the FP32 implicit GEMM and Winograd at the FP32 chapter's tuned launches
  (``fp32_tuning.csv``, read as recorded: the same kernels at the same launches in both chapters), every
  cuDNN algorithm, PyTorch (TF32 off), cuBLAS on 1x1 and every CUTLASS kernel (3xTF32 and SIMT, NHWC, its
  layout transforms untimed), into ``tf32x3.csv``, resuming, in chunks of :data:`CHUNK` problems.
- :func:`measure_repeat`: every :data:`REPEAT_STEP`-th problem again in a fresh process, for the spread.
- :mod:`.accuracy`: the error against float64 as K grows, on hard inputs, for every precision.
- The ncu profile (:data:`PROFILE_PROBLEMS`, and the best and worst of cuConv's layers for the 3xTF32 kernel).

The kernel's edge launches run with the FP32 implicit GEMM's (:mod:`convkit.families.fp32.edges`: one loop over
both kinds of the design).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from convkit.core.gpu import has_tf32_tensor_cores
from convkit.core.problem import ConvProblem
from convkit.cuda.operands import ConvArgs
from convkit.families import fp32, tf32x3
from convkit.families.registry import Family, Kernels, KnobTable, Variant, first_of
from convkit.libs import cutlass, pytorch
from convkit.papers.paper import Paper, Profile, ProfiledCase, convolution_cases
from convkit.papers.tf32x3 import claims, opening, profiled, results
from convkit.study import tables
from convkit.study.layer_sets import three_chapter_problems as problems
from convkit.study.sweep import run_experiment, tune_then_sweep
from convkit.study.tuning import knob_table

EXPERIMENT, TUNING, REPEAT_EXPERIMENT = results.SWEEP, results.TUNING, results.REPEAT
#: The tuning table of the FP32 chapter, whose launches the FP32 kernels run here.
FP32_TUNING = "fp32_tuning"
#: Every kernel of the sweep: the 3xTF32 family's and the FP32 chapter's, so each problem compares them in one run.
VARIANTS = (*tf32x3.VARIANTS, *fp32.VARIANTS)


def _run_pytorch_tf32(a: ConvArgs, p: ConvProblem, spec: None = None) -> None:
    a.out[...] = pytorch.autotuned_conv2d(p, a.x, a.w, tf32=True)()


#: PyTorch's autotuned cuDNN in TF32 (its default for convolutions), recorded beside the kernels and peers as the
#: speed a caller gives up for FP32's accuracy: its error recorded, held to no bar (a NaN output still fails), never
#: "the best library" (convkit.study.tables.REFERENCES); where the GPU has TF32 tensor cores (a T4 would run FP32).
TF32_LINE = Variant(pytorch.TF32_VARIANT, _run_pytorch_tf32, tolerance=math.inf, impl=pytorch.TF32_IMPL,
                    precision="tf32", applies_to=lambda p: pytorch.available() and has_tf32_tensor_cores())  # fmt: skip
#: The library peers beside cuDNN and PyTorch: cuBLAS SGEMM (1x1) and CUTLASS; then the TF32 line.
PEERS = (*fp32.PEERS, *cutlass.PEERS, TF32_LINE)
#: The sweep's timing: the FP32 chapter's (many problems, 20+ cases each).
TIMING: dict[str, Any] = {"warmup": 2, "min_reps": 5, "max_reps": 200, "budget_ms": 20.0}
#: Problems tuned and then swept together: an interrupted session leaves whole chunks behind.
CHUNK = 16
#: The run-to-run spread: every REPEAT_STEP-th problem measured again (about 5%).
REPEAT_STEP = 20


def measure(
    directory: Path | None,
    *,
    quick: bool = False,
    experiment: str = EXPERIMENT,
    progress: Callable[[str], None] | None = print,
) -> None:
    """Tune the 3xTF32 kernel's launch (``tf32x3_tuning.csv``), then sweep every kernel (the FP32 ones at the FP32
    chapter's tuned launches) and library on each problem into ``<experiment>.csv`` in ``directory`` (default
    ``results/<this GPU>``), :data:`CHUNK` problems at a time."""
    todo = problems(quick)
    for start in range(0, len(todo), CHUNK):
        tune_then_sweep(directory, todo[start : start + CHUNK], VARIANTS, tuning=TUNING, experiment=experiment,
                        peers=PEERS, timing=TIMING, progress=progress, tune_here=tf32x3.VARIANTS,
                        knobs_from=(FP32_TUNING,))  # fmt: skip


def measure_repeat(directory: Path | None, *, progress: Callable[[str], None] | None = print) -> Any:
    """Every :data:`REPEAT_STEP`-th problem of the sweep again, the same cases at the same tuned launches, into
    ``tf32x3_repeat.csv``: run in a process of its own after the sweep, it gives the spread within which two
    times are a tie."""
    from convkit.study.results import gpu_results_dir

    directory = gpu_results_dir(directory)
    return run_experiment(REPEAT_EXPERIMENT, problems()[::REPEAT_STEP], VARIANTS, directory=directory, peers=PEERS,
                          timing=TIMING, progress=progress, tuned=tuned(directory))  # fmt: skip


def tuned(directory: Path) -> KnobTable:
    """The knobs the sweep runs: the 3xTF32 kernel's from this chapter's tuning table, the FP32 kernels' from the
    FP32 chapter's."""
    return first_of([knob_table(directory, table) for table in (TUNING, FP32_TUNING)])


PROFILE_PROBLEMS, PROFILED_PEERS = profiled.PROFILE_PROBLEMS, profiled.PROFILED_PEERS
STALLS = ("not_selected", "dispatch_stall", "math_pipe_throttle", "barrier", "long_scoreboard", "short_scoreboard",
          "wait", "mio_throttle", "sleeping", "gmma")  # fmt: skip
PROFILE_METRICS: tuple[str, ...] = (
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "smsp__issue_active.avg.pct_of_peak_sustained_active", "smsp__inst_executed_pipe_tensor_op_hmma.sum",
    "smsp__inst_executed_pipe_tensor_op_gmma.sum",
    "smsp__inst_executed.sum", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
    *(f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio" for s in STALLS), *tables.LOCAL_MEMORY,
)  # fmt: skip


def best_and_worst(directory: Path) -> list[tuple[str, ConvProblem]]:
    """The cuConv layers of at least 1 GFLOP where the 3xTF32 kernel is fastest and slowest against the best
    library, from the sweep recorded in ``directory`` (none where it is not)."""
    from convkit.study.roofline import recorded_ceilings

    if not (Path(directory) / f"{EXPERIMENT}.csv").is_file():
        return []
    t = results.chapter_tables(Path(directory), recorded_ceilings(Path(directory)) or {})
    rows = t["cuconv"][t["cuconv"]["gflop"] >= results.COUNTED_GFLOP].dropna(subset=["tf32x3_speedup"])
    if rows.empty:
        return []
    best, worst = rows.loc[rows["tf32x3_speedup"].idxmax()], rows.loc[rows["tf32x3_speedup"].idxmin()]
    return [(f"best for 3xTF32 ({best['label']})", best["problem"]),
            (f"worst for 3xTF32 ({worst['label']})", worst["problem"])]  # fmt: skip


def profiled_peers(directory: Path) -> tuple[Any, ...]:
    """The peers the profile takes: every peer but CUTLASS's and the TF32 line, and of CUTLASS's
    :data:`PROFILED_PEERS` and the fastest 3xTF32 tile of each profiled layer in the sweep recorded in ``directory``
    (:func:`profiled.fastest_cutlass_tiles`)."""
    from convkit.study.results import load_results

    recorded = (Path(directory) / f"{EXPERIMENT}.csv").is_file()
    fastest = profiled.fastest_cutlass_tiles(load_results(directory, EXPERIMENT)[0]) if recorded else {}
    wanted = (p for p in PEERS if p is not TF32_LINE)  # PyTorch's kernels are cuDNN's
    return tuple(p for p in wanted if p.impl != cutlass.IMPL or p.name in {*PROFILED_PEERS, *fastest.values()})


def profiled_cases(directory: Path) -> Iterator[ProfiledCase]:
    """The profile's cases: on each of :data:`PROFILE_PROBLEMS` and :func:`best_and_worst`, every kernel at the
    launch tuned in ``directory``, then cuBLAS where it applies, :data:`PROFILED_PEERS` and CUTLASS's fastest
    3xTF32 tile of each profiled layer in the sweep recorded there (:func:`profiled.fastest_cutlass_tiles`)."""
    named = [("layers", name, p) for name, p in (*PROFILE_PROBLEMS, *best_and_worst(directory))]
    peers = profiled_peers(directory)
    return convolution_cases(named, Kernels(VARIANTS, peers), cudnn=False, tuned=tuned(directory))


#: The chapter's own kernels (the FP32 ones it measures belong to the FP32 chapter) and every peer it measures.
KERNELS = Family("tf32x3", tf32x3.VARIANTS, PEERS, sources=tf32x3.FAMILY.sources,
                 sample_problems=tf32x3.FAMILY.sample_problems)  # fmt: skip

PAPER = Paper(
    "tf32x3", "FP32 accuracy on tensor cores", "07_tf32x3", EXPERIMENT, measure, KERNELS, tuning=TUNING,
    problems=problems, findings=opening.findings,
    profile=Profile(results.PROFILE, profiled_cases, PROFILE_METRICS), repeat=measure_repeat,
    claims=claims.claims, measured_after=("fp32",),  # its sweep runs the FP32 kernels at FP32's tuned launches
)  # fmt: skip
