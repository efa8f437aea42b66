"""FP32 accuracy on tensor cores: the measuring step of the chapter to come on the 3xTF32 family.

Not in the registry yet: the chapter joins it, with its notebook and ``book/_toc.yml`` entry, once its sweep is
recorded (the book renders recorded results only). What is here already runs on a GPU:

- :func:`measure`: the FP32 chapter's 671 problems (cuConv's 616, Lu 2020's 26 and Chang 2022's 63 multi-channel
  layers, which overlap), each measured whole in one run: ``igemm_tf32x3`` at the launches tuned into
  ``tf32x3_tuning.csv``, the FP32 implicit GEMM and Winograd at the FP32 chapter's tuned launches
  (``fp32_tuning.csv``, read as recorded: the same kernels at the same launches in both chapters), every
  cuDNN algorithm, PyTorch (TF32 off), cuBLAS on 1x1 and every CUTLASS kernel (3xTF32 and SIMT, NHWC, its
  layout transforms untimed), into ``tf32x3.csv``, resuming, in chunks of :data:`CHUNK` problems.
- :func:`measure_repeat`: every :data:`REPEAT_STEP`-th problem again in a fresh process, for the spread.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from convkit.bench.variant import first_of
from convkit.families import fp32, tf32x3
from convkit.libs import cutlass
from convkit.study.layer_sets import three_chapter_problems as problems
from convkit.study.sweep import run_experiment, tune_then_sweep
from convkit.study.tuning import knob_table

EXPERIMENT, TUNING, REPEAT_EXPERIMENT = "tf32x3", "tf32x3_tuning", "tf32x3_repeat"
#: The tuning table of the FP32 chapter, whose launches the FP32 kernels run here.
FP32_TUNING = "fp32_tuning"
#: Every kernel of the sweep: the 3xTF32 family's and the FP32 chapter's, so each problem compares them in one run.
VARIANTS = (*tf32x3.VARIANTS, *fp32.VARIANTS)
#: The library peers beside cuDNN and PyTorch: cuBLAS SGEMM (1x1) and CUTLASS.
PEERS = (*fp32.PEERS, *cutlass.PEERS)
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
    tuned = first_of([knob_table(directory, table) for table in (TUNING, FP32_TUNING)])
    return run_experiment(REPEAT_EXPERIMENT, problems()[::REPEAT_STEP], VARIANTS, directory=directory, peers=PEERS,
                          timing=TIMING, progress=progress, tuned=tuned)  # fmt: skip
