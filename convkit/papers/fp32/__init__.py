"""Past the papers: FP32 kernels at the ceiling for the compute-bound layers.

The papers' kernels win where the work is small; this chapter's kernels go after the rest. Two
families (:mod:`.launch`): ``fp32_igemm``, an implicit GEMM for any filter, stride and padding
(CUTLASS's SIMT SGEMM design over NCHW, a cp.async pipeline, split-K for small layers), and
``fp32_winograd``, Winograd's F(2x2, 3x3), F(4x4, 3x3) and F(2x2, 5x5) with its products on the same
GEMM. Each runs at the launch a tuning run found fastest. They are measured, with every cuDNN forward
algorithm, PyTorch and (on 1x1 layers) cuBLAS SGEMM in the same run, on the problems of three
chapters: cuConv's 616 network layers, the memory-transactions chapter's 26 multi-channel layers and
the Pascal-era chapter's 63-layer grid.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.families.fp32 import FAMILY, PEERS, VARIANTS
from convkit.families.registry import Kernels
from convkit.papers.fp32 import claims, results
from convkit.papers.paper import Paper, Profile, ProfiledCase, convolution_cases
from convkit.study.layer_sets import three_chapter_problems as problems
from convkit.study.sweep import run_experiment, tune_then_sweep
from convkit.study.tuning import knob_table

#: The sweep's experiment and its tuning table (results/<gpu>/fp32.csv, fp32_tuning.csv).
EXPERIMENT, TUNING = results.SWEEP, results.TUNING
#: The sweep's timing: cuConv's budget (many problems, 13+ cases each).
TIMING: dict[str, Any] = {"warmup": 2, "min_reps": 5, "max_reps": 200, "budget_ms": 20.0}


#: Problems tuned and then swept together: an interrupted session leaves whole chunks behind.
CHUNK = 16


def measure(
    directory: Path,
    *,
    quick: bool = False,
    experiment: str = EXPERIMENT,
    progress: Callable[[str], None] | None = print,
) -> None:
    """Tune both families' launches (``fp32_tuning.csv``), then sweep them with every cuDNN algorithm,
    PyTorch and cuBLAS (1x1) into ``<experiment>.csv``, :data:`CHUNK` problems at a time; both experiments
    resume where they stopped, and a problem whose tuned launch changed is swept again whole."""
    todo = problems(quick)
    for start in range(0, len(todo), CHUNK):
        part = todo[start : start + CHUNK]
        tune_then_sweep(directory, part, VARIANTS, tuning=TUNING, experiment=experiment, peers=PEERS, timing=TIMING,
                        progress=progress)  # fmt: skip


#: The run-to-run spread: every REPEAT_STEP-th problem measured again in a fresh process (about 5%).
REPEAT_EXPERIMENT, REPEAT_STEP = results.REPEAT, 20


def measure_repeat(directory: Path, *, progress: Callable[[str], None] | None = print) -> None:
    """Measure every :data:`REPEAT_STEP`-th problem of the sweep again, the same cases at the same tuned
    launches, into ``fp32_repeat.csv``: run in a process of its own after the sweep, it gives the spread
    within which two times are a tie."""
    run_experiment(REPEAT_EXPERIMENT, problems()[::REPEAT_STEP], VARIANTS, directory=directory, peers=PEERS,
                   timing=TIMING, progress=progress, tuned=knob_table(directory, TUNING))  # fmt: skip


#: The ncu profile: four network layers from the latency-bound to the compute-bound, every kernel of the
#: chapter at its tuned launch and every cuDNN algorithm, with occupancy, FMA-pipe use, instruction counts,
#: shared-memory bank conflicts and the leading stall reasons.
PROFILE_EXPERIMENT = results.PROFILE
PROFILE_PROBLEMS: tuple[tuple[str, ConvProblem], ...] = (
    ("1x1, batch 1 (GoogLeNet 5b)", ConvProblem.same(1, 832, 7, 7, 32, 1)),
    ("1x1, batch 64 (ResNet-50 res4)", ConvProblem.same(64, 1024, 14, 14, 256, 1)),
    ("3x3, batch 32 (VGG19 conv3)", ConvProblem.same(32, 256, 56, 56, 256, 3)),
    ("5x5, batch 64 (AlexNet conv2)", ConvProblem.same(64, 96, 27, 27, 256, 5)),
)
STALLS = ("not_selected", "dispatch_stall", "math_pipe_throttle", "barrier", "long_scoreboard", "short_scoreboard",
          "wait", "mio_throttle")  # fmt: skip
PROFILE_METRICS: tuple[str, ...] = (
    "sm__warps_active.avg.pct_of_peak_sustained_active", "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    "smsp__issue_active.avg.pct_of_peak_sustained_active", "sm__inst_executed_pipe_fma.sum", "smsp__inst_executed.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
    *(f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio" for s in STALLS),
)  # fmt: skip


def profiled_cases(directory: Path) -> Iterator[ProfiledCase]:
    """The profile's cases: on each of :data:`PROFILE_PROBLEMS`, both families at their launches tuned in
    ``directory``, then every cuDNN algorithm and cuBLAS where it applies."""
    named = [("layers", name, p) for name, p in PROFILE_PROBLEMS]
    return convolution_cases(named, Kernels(VARIANTS, PEERS), cudnn=True, tuned=knob_table(directory, TUNING))


PAPER = Paper(
    "fp32", "Past the papers: at the FP32 ceiling", "06_fp32", EXPERIMENT, measure, FAMILY, tuning=TUNING,
    problems=problems, findings=results.findings,
    profile=Profile(PROFILE_EXPERIMENT, profiled_cases, PROFILE_METRICS), repeat=measure_repeat,
    claims=claims.claims,
)  # fmt: skip
