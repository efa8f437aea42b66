"""Lu, Zhang, Wang 2020 (memory transactions): column and row reuse through warp shuffles, and their cost.

The paper cuts a convolution's global loads by sharing each warp's input window through
``__shfl_xor_sync`` (column reuse) and each thread's input rows across its outputs (row reuse). The
chapter measures its ladder of single-channel kernels (:mod:`.launch`: ``lu_direct`` ..
``lu_combined``) on one image and one filter against every cuDNN algorithm, PyTorch and
``cupyx.scipy.ndimage.correlate``, and its multi-channel form (``lu_multi``) on the 3x3 layers of VGG19
and ResNet-50, each kernel at the launch a tuning run found fastest. :mod:`.warp_sim` computes the
exchange the kernels run and counts their loads on the CPU; :mod:`.results` turns the rows, the ncu
load counters and ptxas's verdict on the window array into the chapter's numbers (the sanitizer's driver is
the family's, :mod:`convkit.families.lu2020.edges`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.families.lu2020 import FAMILY, IMAGE_PEERS, LADDER, MULTI, NDIMAGE, SINGLE
from convkit.families.lu2020.launch import FILTER_SIZES
from convkit.families.registry import Kernels, Variant
from convkit.papers.lu2020 import claims, results
from convkit.papers.lu2020.problem_sets import multi_problems, single_problems
from convkit.papers.lu2020.results import EXPERIMENT, PROFILE_EXPERIMENT, findings
from convkit.papers.paper import Paper, Profile, ProfiledCase, convolution_cases
from convkit.study.sweep import run_experiment, tune_then_sweep
from convkit.study.tuning import knob_table

# EXPERIMENT (the sweep: 18 images and 26 layers; every cuDNN algorithm, PyTorch and, on single images,
# cupyx.scipy.ndimage) and PROFILE_EXPERIMENT are named in the results module, which reads them.
#: The tuning table of every kernel's launch (``results/<gpu>/lu2020_tuning.csv``).
TUNING = "lu2020_tuning"
#: The sweep's timing.
TIMING: dict[str, Any] = {"warmup": 3, "min_reps": 10, "max_reps": 300, "budget_ms": 40.0}
#: Problems of a quick run: every fifth of each grid.
QUICK_STEP = 5
#: The profile's counters: the global load requests and sectors the paper's argument is
#: about, local-memory traffic (where a window array lands off registers), DRAM bytes.
METRICS = (
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum",
    "dram__bytes_read.sum", "dram__bytes_write.sum", "smsp__inst_executed.sum",
)  # fmt: skip
#: Images the ladder is profiled on: 2048 x 2048, each filter width, "same" padding.
PROFILE_SIZE = 2048


def _grids(quick: bool) -> tuple[tuple[list[ConvProblem], tuple[Variant, ...], tuple[Variant, ...]], ...]:
    """(problems, variants, peers) of the two grids; ``quick``: every :data:`QUICK_STEP`-th problem."""
    step = QUICK_STEP if quick else 1
    return (single_problems()[::step], SINGLE, IMAGE_PEERS), (multi_problems()[::step], MULTI, ())


def measure(directory: Path, *, quick: bool = False, experiment: str = EXPERIMENT, progress: Any = print,
            **options: Any) -> None:  # fmt: skip
    """Tune the launches of every kernel (``lu2020_tuning.csv``), then sweep the single-channel images (the
    paper's ladder, cuDNN, PyTorch, ``cupyx.scipy.ndimage.correlate``) and the multi-channel layers
    (``lu_multi``, cuDNN, PyTorch) into ``<experiment>.csv``; both resume where they stopped, and a problem
    whose tuned launch changed is swept again whole."""
    if options:
        raise TypeError(f"the lu2020 sweep takes no options, got {sorted(options)}")
    for problems, variants, peers in _grids(quick):
        tune_then_sweep(directory, problems, variants, tuning=TUNING, experiment=experiment, peers=peers,
                        timing=TIMING, progress=progress)  # fmt: skip


#: The run-to-run spread: every :data:`REPEAT_STEP`-th single-channel image measured again in a fresh process.
REPEAT_EXPERIMENT, REPEAT_STEP = results.REPEAT, 4


def measure_repeat(directory: Path, *, progress: Any = print) -> None:
    """Measure every :data:`REPEAT_STEP`-th image of the single-channel sweep again, the same cases at the same
    tuned launches, into ``lu2020_repeat.csv``: run in a process of its own after the sweep, it gives the spread
    within which two times are a tie."""
    run_experiment(REPEAT_EXPERIMENT, single_problems()[::REPEAT_STEP], SINGLE, directory=directory,
                   peers=IMAGE_PEERS, timing=TIMING, progress=progress,
                   tuned=knob_table(directory, TUNING))  # fmt: skip


def problems(quick: bool = False) -> list[ConvProblem]:
    """The sweep's images then layers (``quick``: every fifth of each)."""
    return [p for grid, _, _ in _grids(quick) for p in grid]


def profile_problems() -> list[tuple[str, str, ConvProblem]]:
    """(table, config, problem) of the profile: one :data:`PROFILE_SIZE` image per filter width."""
    size = PROFILE_SIZE
    return [("single channel", f"{k}x{k}", ConvProblem.same(1, 1, size, size, 1, k)) for k in FILTER_SIZES]


def profiled_cases(directory: Path) -> Iterator[ProfiledCase]:
    """The profile's cases, in order: on each image, the ladder at its tuned launches, then the image peer
    (no cuDNN: the counters are about the paper's kernels)."""
    return convolution_cases(
        profile_problems(), Kernels(LADDER, (NDIMAGE,)), cudnn=False, tuned=knob_table(directory, TUNING)
    )


PAPER = Paper(
    "lu2020", "Lu 2020, memory transactions", "02_lu2020", EXPERIMENT, measure, FAMILY, tuning=TUNING,
    problems=problems, findings=findings,
    profile=Profile(PROFILE_EXPERIMENT, profiled_cases, METRICS), repeat=measure_repeat,
    claims=claims.claims,
)  # fmt: skip
