"""Checking and timing: convkit kernels, library peers and every cuDNN forward algorithm on one problem.

:func:`measure_problem` draws fresh random inputs, computes the float64 reference once, then for
each case poisons the output with NaN, runs it, checks it, and times it only if it was right.
The study's sweep (:mod:`convkit.study.sweep`) and the op's tuning on first use both measure with it. The
kernels come in as :class:`convkit.bench.variant.Variant` objects that each kernel family declares; this
module names no family.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from convkit.bench.rows import Case, make_row
from convkit.bench.variant import Kernels, KnobTable, Variant
from convkit.core import reference
from convkit.core.problem import ConvProblem
from convkit.core.reference import DIRECT_TOLERANCE, TRANSFORM_TOLERANCE

#: Problems above this many FLOPs get their float64 reference on the GPU (CuPy, float64 cuBLAS):
#: the same code as on the CPU, minutes faster for the large layers.
GPU_REFERENCE_FLOPS = 2e9
#: Tuning's timing: enough runs to rank knob candidates, a fraction of a sweep's budget (the study's tuning
#: tables and the op's tuning on first use alike).
TUNING_TIMING: dict[str, Any] = {"warmup": 1, "min_reps": 3, "max_reps": 50, "budget_ms": 3.0}
#: A correctness check's timing: one run, no warm-up (the generic tests and tuning dry runs).
CHECK_ONLY: dict[str, Any] = {"warmup": 0, "min_reps": 1, "max_reps": 1, "budget_ms": 0.0}


def cases(
    problem: ConvProblem,
    variants: Sequence[Variant],
    *,
    cudnn: bool = True,
    pytorch: bool | None = None,
    tune: bool = False,
    peers: Sequence[Variant] = (),
    tuned: KnobTable | None = None,
) -> list[Case]:
    """What to measure on ``problem``: the variants that support it, then every cuDNN algorithm.

    With ``cudnn``, PyTorch's autotuned convolution follows as a second opinion on the best cuDNN
    time; ``pytorch=None`` includes it where PyTorch with CUDA is importable. With ``tune``, each
    variant gives one case per knob candidate instead of its knobs (``tuned``'s where it has them, else the
    default). ``peers`` are library peers, added last where they support the problem.
    """
    from convkit.libs import pytorch as torch_baseline
    from convkit.libs.cudnn import FORWARD_ALGORITHMS

    out = []
    for variant in variants:
        if not variant.supports(problem):
            continue
        if tune and variant.candidates is not None:
            out += [variant.case(problem, knobs) for knobs in variant.candidates(problem)]
        else:
            out.append(variant.case(problem, tuned=tuned))
    if cudnn:
        out += [Case("cudnn", algo) for algo in FORWARD_ALGORITHMS]
        if pytorch or (pytorch is None and torch_baseline.available()):
            out.append(Case("pytorch", torch_baseline.VARIANT))
    out += [peer.case(problem) for peer in peers if peer.supports(problem)]
    return out


def tolerance_for(case: Case, kernels: Kernels | None = None) -> float:
    """The relative error ``case`` must stay under: a variant's own, looser for cuDNN's FFT and
    Winograd algorithms and for PyTorch (whose autotuner may pick them), else the direct bar."""
    from convkit.libs.cudnn import TRANSFORM_ALGORITHMS

    if kernels is not None and case.variant in kernels.by_name:
        return kernels[case.variant].tolerance
    if case.impl == "pytorch" or (case.impl.startswith("cudnn") and case.variant in TRANSFORM_ALGORITHMS):
        return TRANSFORM_TOLERANCE
    return DIRECT_TOLERANCE


def random_inputs(problem: ConvProblem, seed: int | None = None) -> tuple[Any, Any, Any]:
    """Fresh standard-normal float32 ``x`` and ``w`` for ``problem`` and an output buffer (CuPy)."""
    from convkit.core.gpu import require_cupy

    cupy = require_cupy()
    rng = cupy.random.default_rng(seed)
    x = rng.standard_normal(problem.input_shape, dtype=cupy.float32)
    w = rng.standard_normal(problem.filter_shape, dtype=cupy.float32)
    return x, w, cupy.empty(problem.output_shape, dtype=cupy.float32)


def float64_reference(problem: ConvProblem, x: Any, w: Any) -> Any:
    """float64 reference on the CPU, or on the GPU (same code) for large problems."""
    if problem.flops > GPU_REFERENCE_FLOPS:
        return reference.conv2d(x, w, pad=problem.pad, stride=problem.stride)
    return reference.conv2d(x.get(), w.get(), pad=problem.pad, stride=problem.stride)


def prepare_case(problem: ConvProblem, case: Case, kernels: Kernels, x: Any, w: Any, y: Any) -> Callable[[], Any]:
    """For :func:`check_and_time`: a function giving ``(run, check_run)`` of ``case`` writing ``y``, or a
    row saying why it cannot run (a cuDNN algorithm over the workspace limit)."""

    def prepare() -> Any:
        if case.impl == "pytorch":
            import cupy

            from convkit.libs import pytorch

            autotuned = pytorch.autotuned_conv2d(problem, x, w)
            # PyTorch allocates its output: the checked run copies it into the poisoned one
            return (lambda: autotuned()), (lambda: cupy.copyto(y, autotuned()))
        if case.impl == "cudnn":
            return cudnn_prepare(problem, case, x, w, y)()
        if case.impl == "cutlass":  # NHWC: the layout transforms stay out of the timed run
            from convkit.libs import cutlass

            return cutlass.prepared(case.variant, problem, x, w, y)
        variant, knobs = kernels[case.variant], json.loads(case.params)
        return (lambda: variant.run(x, w, problem, y, **knobs)), None

    return prepare


def cudnn_prepare(problem: ConvProblem, case: Case, x: Any, w: Any, y: Any) -> Callable[[], Any]:
    """:func:`prepare_case` for one cuDNN forward algorithm (``case.variant``)."""

    def prepare() -> Any:
        from convkit.libs.cudnn import CudnnConvolution

        conv = CudnnConvolution(problem)
        need = conv.workspace(case.variant)
        if need.status != "ok":
            return make_row(problem, case, status=need.status, note=need.note)
        return (lambda: conv.forward(case.variant, x, w, y)), None

    return prepare


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


def poisoned_run_error(out: Any, ref: Any, run: Callable[[], Any]) -> float:
    """Poison ``out`` with NaN, ``run()`` once, synchronize; the norm-wise relative error to ``ref`` (where
    ``ref`` lives: CPU or GPU). An element the kernel forgets to write makes it NaN."""
    import cupy

    out.fill(math.nan)
    run()
    cupy.cuda.get_current_stream().synchronize()
    on_gpu = type(ref).__module__.split(".")[0] == "cupy"
    return reference.relative_error(out if on_gpu else out.get(), ref)


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
    or a finished row (the case cannot run: e.g. a cuDNN algorithm over the workspace limit). The
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
        if isinstance(prepared, dict):
            return prepared
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
        todo = [variant.case(problem, tuned=tuned) for variant in variants if variant.supports(problem)]
        if todo:
            yield problem, todo
