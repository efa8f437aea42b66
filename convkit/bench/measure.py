"""Checking and timing: convkit kernels, library peers and every cuDNN forward algorithm on one problem.

:func:`measure_problem` draws fresh random inputs, computes the float64 reference once, then for
each case poisons the output with NaN, runs it, checks it, and times it only if it was right.
The study's sweeps (:mod:`convkit.study.sweep`) measure with it, on what :mod:`convkit.op.cases` lists and
prepares (as the op's tuning on first use does). The kernels come in as
:class:`convkit.families.registry.Variant` objects that each kernel family declares; this module names no family.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from convkit.bench.rows import make_row
from convkit.core.problem import ConvProblem
from convkit.families.registry import Kernels, KnobTable, Variant
from convkit.op.cases import (
    Case,
    float64_reference,
    poisoned_run_error,
    prepare_case,
    random_inputs,
    tolerance_for,
    variant_case,
)

#: Tuning's timing: enough runs to rank knob candidates, a fraction of a sweep's budget (the study's tuning
#: tables and the op's tuning on first use alike).
TUNING_TIMING: dict[str, Any] = {"warmup": 1, "min_reps": 3, "max_reps": 50, "budget_ms": 3.0}
#: A correctness check's timing: one run, no warm-up (the generic tests and tuning dry runs).
CHECK_ONLY: dict[str, Any] = {"warmup": 0, "min_reps": 1, "max_reps": 1, "budget_ms": 0.0}


def measure_problem(
    problem: ConvProblem,
    todo: list[Case],
    kernels: Kernels,
    *,
    seed: int | None = None,
    timing: dict[str, Any] | None = None,
) -> Iterator[dict[str, Any]]:
    """Check, then time, each case of ``todo`` on fresh random inputs; yields one row per case.

    Args:
        problem: the convolution.
        todo: cases from :func:`cases`.
        kernels: the variants and peers the cases name.
        seed: random seed for the inputs (fresh entropy when None).
        timing: keyword arguments for :func:`convkit.cuda.timing.benchmark` (budget, L2 flush, ...).
    """
    from convkit.core.gpu import require_cupy

    cupy = require_cupy()
    timing = dict(timing or {})
    try:
        x, w, y = random_inputs(problem, seed)
    except cupy.cuda.memory.OutOfMemoryError as exc:
        for case in todo:
            yield make_row(problem, case, status="oom", note=str(exc)[:300])
        return
    ref = float64_reference(problem, x, w)
    for case in todo:
        prepare = prepare_case(problem, case, kernels, x, w, y)
        yield check_and_time(problem, case, prepare, y, ref, timing, tolerance=tolerance_for(case, kernels))
        cupy.get_default_memory_pool().free_all_blocks()  # cuDNN workspaces must not pile up


def check_and_time(
    problem: ConvProblem,
    case: Case,
    prepare: Callable[[], Any],
    out: Any,
    ref: Any,
    timing: dict[str, Any],
    *,
    tolerance: float | None = None,
    min_bytes: int | None = None,
) -> dict[str, Any]:
    """The study's measuring rule for one case, as a results row.

    ``prepare()`` returns ``(run, check_run)`` (``check_run`` None when the checked run is ``run``)
    or a refusal, ``{"status", "note"}`` (the case cannot run: e.g. a cuDNN algorithm over the workspace limit),
    recorded as a row of that status. The
    checked run fills the poisoned ``out`` (:func:`poisoned_run_error`), its error must stay under
    ``tolerance`` (default :func:`tolerance_for`), and only then is ``run`` timed. cuDNN refusals,
    out-of-memory and any other error become rows with their message. ``min_bytes`` overrides the
    problem's minimal traffic in the bandwidth column.
    """
    import cupy

    from convkit.cuda.timing import benchmark
    from convkit.libs.cudnn import CudnnError

    try:
        prepared = prepare()
        if isinstance(prepared, dict):  # a refusal: why it cannot run
            return make_row(problem, case, status=prepared["status"], note=prepared["note"])
        run, check_run = prepared
        tolerance = tolerance_for(case) if tolerance is None else tolerance
        err = poisoned_run_error(out, ref, check_run or run)
        if not err <= tolerance:  # NaN fails too
            return make_row(problem, case, status="wrong", rel_err=err,
                            note=f"relative error over the tolerance {tolerance:g}; not timed")  # fmt: skip
        result = benchmark(run, **timing)
    except CudnnError as exc:
        return make_row(problem, case, status="not_supported" if exc.not_supported else "error", note=str(exc)[:300])
    except cupy.cuda.memory.OutOfMemoryError as exc:
        return make_row(problem, case, status="oom", note=str(exc)[:300])
    except Exception as exc:  # recorded with its message; the sweep goes on
        return make_row(problem, case, status="error", note=f"{type(exc).__name__}: {exc}"[:300])
    row = make_row(problem, case, status="ok", timing=result, rel_err=err, note=f"tolerance {tolerance:g}")
    if min_bytes is not None:
        row["gbytes_per_s"] = f"{min_bytes / (result.median_ms * 1e6):.6g}"
    return row


def variant_checks(
    variants: Sequence[Variant], problems: Iterable[ConvProblem], tuned: KnobTable | None = None
) -> Iterator[tuple[ConvProblem, list[Case]]]:
    """(problem, cases) that check each variant at its knobs (``tuned``'s where it has them) on each problem it
    supports: what the generic GPU test runs."""
    for problem in problems:
        todo = [variant_case(variant, problem, tuned=tuned) for variant in variants if variant.supports(problem)]
        if todo:
            yield problem, todo
