"""Checking and timing: every convkit kernel and every cuDNN forward algorithm on one problem.

:func:`measure_problem` draws fresh random inputs, computes the float64 reference once, then for
each case poisons the output with NaN, runs it, checks it, and times it only if it was right.
:func:`run_experiment` drives :func:`convkit.results.sweep` with it, so every chapter's sweep is
resumable. Later chapters add their kernels to :data:`VARIANTS`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convkit import reference
from convkit.problem import ConvProblem
from convkit.results import Case, ResultStore, make_row, params_text, sweep

#: Relative error a direct FP32 method must stay under (the study's correctness bar).
DIRECT_TOLERANCE = 1e-5
#: FFT and Winograd transforms round more: they land near 1e-6..1e-4 on FP32 data.
TRANSFORM_TOLERANCE = 1e-3
#: Problems above this many FLOPs get their float64 reference on the GPU (CuPy, float64 cuBLAS):
#: the same code as on the CPU, minutes faster for the large layers.
GPU_REFERENCE_FLOPS = 2e9


@dataclass(frozen=True)
class Variant:
    """A convkit kernel as the benchmark sees it: its launch knobs for a problem, and how to run it.

    ``run(x, w, problem, out, **knobs)`` enqueues the kernel writing ``out``; ``knobs(problem)``
    gives the knobs it runs with there (tuned where a tuner has run), recorded in the row's
    ``params``; ``candidates(problem)`` the knob sets a tuning run measures.
    """

    name: str
    run: Callable[..., Any]
    knobs: Callable[[ConvProblem], dict[str, Any]] = lambda p: {}
    candidates: Callable[[ConvProblem], list[dict[str, Any]]] | None = None
    tolerance: float = DIRECT_TOLERANCE
    supports: Callable[[ConvProblem], bool] = lambda p: True


def _direct(x: Any, w: Any, p: ConvProblem, out: Any, **knobs: Any) -> None:
    from convkit.direct import conv2d_direct

    conv2d_direct(x, w, pad=p.pad, stride=p.stride, out=out, **knobs)


def _cuconv(variant: str) -> Variant:
    from convkit import cuconv

    def run(x: Any, w: Any, p: ConvProblem, out: Any, **knobs: Any) -> None:
        cuconv.conv2d_cuconv(x, w, pad=p.pad, stride=p.stride, variant=variant, out=out, **knobs)

    name = f"cuconv_{variant}"

    def knobs(p: ConvProblem) -> dict[str, Any]:
        from convkit import tuner
        from convkit.gpu import sm_count

        tuned = tuner.tuned_knobs(p, name)
        return tuned if tuned is not None else cuconv.default_knobs(p, variant, sm_count()).as_params()

    def candidates(p: ConvProblem) -> list[dict[str, Any]]:
        from convkit.gpu import sm_count

        return [k.as_params() for k in cuconv.candidates(p, variant, sm_count())]

    return Variant(name, run, knobs, candidates=candidates)


#: Every convkit kernel the benchmark knows, by variant name.
VARIANTS: dict[str, Variant] = {
    "direct": Variant("direct", _direct, lambda p: {"threads": 256}),
    **{f"cuconv_{v}": _cuconv(v) for v in ("paper", "fused", "split", "tiled")},
}
#: The cuConv chapter's ladder: the paper's design, then each step past it.
CUCONV_VARIANTS: tuple[str, ...] = ("cuconv_paper", "cuconv_fused", "cuconv_split", "cuconv_tiled")


def cases(
    problem: ConvProblem,
    variants: Iterable[str] | None = None,
    *,
    cudnn: bool = True,
    pytorch: bool | None = None,
    tune: bool = False,
) -> list[Case]:
    """What to measure on ``problem``: the chosen convkit variants, then every cuDNN algorithm.

    With ``cudnn``, PyTorch's autotuned convolution follows as a second opinion on the best cuDNN
    time; ``pytorch=None`` includes it where PyTorch with CUDA is importable. With ``tune``, each
    variant gives one case per knob candidate instead of its (tuned) knobs.
    """
    from convkit import pytorch as torch_baseline
    from convkit.cudnn import FORWARD_ALGORITHMS

    names = list(VARIANTS) if variants is None else list(variants)
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variants {unknown}; known: {sorted(VARIANTS)}")
    out = []
    for name in names:
        variant = VARIANTS[name]
        if not variant.supports(problem):
            continue
        if tune and variant.candidates is not None:
            out += [Case("convkit", name, params_text(k)) for k in variant.candidates(problem)]
        else:
            out.append(Case("convkit", name, params_text(variant.knobs(problem))))
    if cudnn:
        out += [Case("cudnn", algo) for algo in FORWARD_ALGORITHMS]
        if pytorch or (pytorch is None and torch_baseline.available()):
            out.append(Case("pytorch", torch_baseline.VARIANT))
    return out


def tolerance_for(case: Case) -> float:
    """The relative error ``case`` must stay under: a convkit variant's own, looser for cuDNN's FFT
    and Winograd algorithms and for PyTorch (whose autotuner may pick them), else the direct bar."""
    from convkit.cudnn import TRANSFORM_ALGORITHMS

    if case.impl == "convkit":
        return VARIANTS[case.variant].tolerance
    if case.impl == "pytorch" or (case.impl == "cudnn" and case.variant in TRANSFORM_ALGORITHMS):
        return TRANSFORM_TOLERANCE
    return DIRECT_TOLERANCE


def _reference(problem: ConvProblem, x: Any, w: Any) -> Any:
    """float64 reference on the CPU, or on the GPU (same code) for large problems."""
    if problem.flops > GPU_REFERENCE_FLOPS:
        return reference.conv2d(x, w, pad=problem.pad, stride=problem.stride)
    return reference.conv2d(x.get(), w.get(), pad=problem.pad, stride=problem.stride)


def measure_problem(
    problem: ConvProblem, todo: list[Case], *, seed: int | None = None, timing: dict[str, Any] | None = None
) -> Iterator[dict[str, Any]]:
    """Check, then time, each case of ``todo`` on fresh random inputs; yields one row per case.

    Args:
        problem: the convolution.
        todo: cases from :func:`cases`.
        seed: random seed for the inputs (fresh entropy when None).
        timing: keyword arguments for :func:`convkit.timing.benchmark` (budget, L2 flush, ...).
    """
    from convkit.gpu import require_cupy

    cupy = require_cupy()
    timing = dict(timing or {})
    try:
        rng = cupy.random.default_rng(seed)
        x = rng.standard_normal(problem.input_shape, dtype=cupy.float32)
        w = rng.standard_normal(problem.filter_shape, dtype=cupy.float32)
        y = cupy.empty(problem.output_shape, dtype=cupy.float32)
    except cupy.cuda.memory.OutOfMemoryError as exc:
        for case in todo:
            yield make_row(problem, case, status="oom", note=str(exc)[:300])
        return
    ref = _reference(problem, x, w)

    for case in todo:
        yield _measure_case(problem, case, x, w, y, ref, timing)
        cupy.get_default_memory_pool().free_all_blocks()  # cuDNN workspaces must not pile up


def _measure_case(
    problem: ConvProblem,
    case: Case,
    x: Any,
    w: Any,
    y: Any,
    ref: Any,
    timing: dict[str, Any],
) -> dict[str, Any]:
    """One row: check the case's output against ``ref``, time it if right, or say why not."""
    import cupy

    from convkit.cudnn import CudnnConvolution, CudnnError
    from convkit.timing import benchmark

    check_run: Callable[[], None] | None = None  # where the checked run differs from the timed one
    try:
        if case.impl == "convkit":
            variant = VARIANTS[case.variant]
            knobs = json.loads(case.params)

            def run() -> None:
                variant.run(x, w, problem, y, **knobs)
        elif case.impl == "pytorch":
            from convkit import pytorch

            autotuned = pytorch.autotuned_conv2d(problem, x, w)

            def run() -> None:
                autotuned()

            def check_run() -> None:  # PyTorch allocates its output: copy it into the poisoned one
                cupy.copyto(y, autotuned())

        else:
            conv = CudnnConvolution(problem)
            need = conv.workspace(case.variant)
            if need.status != "ok":
                return make_row(problem, case, status=need.status, note=need.note)

            def run() -> None:
                conv.forward(case.variant, x, w, y)

        tolerance = tolerance_for(case)
        y.fill(math.nan)  # poison: an element the kernel forgets to write fails the check
        (check_run or run)()
        cupy.cuda.get_current_stream().synchronize()
        on_gpu = problem.flops > GPU_REFERENCE_FLOPS  # compare where the reference lives
        err = reference.relative_error(y if on_gpu else y.get(), ref)
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
    return make_row(problem, case, status="ok", timing=result, rel_err=err, note=f"tolerance {tolerance:g}")


def run_experiment(
    experiment: str,
    problems: Iterable[ConvProblem],
    *,
    directory: Path | None = None,
    variants: Iterable[str] | None = None,
    cudnn: bool = True,
    tune: bool = False,
    seed: int | None = None,
    timing: dict[str, Any] | None = None,
    progress: Callable[[str], None] | None = print,
) -> Path:
    """Measure ``problems`` into ``results/<gpu-slug>/<experiment>.csv``, resuming what is there.

    ``tune`` measures every knob candidate of the variants (see :func:`cases`). Returns the
    directory written to.
    """
    from convkit import provenance
    from convkit.gpu import device_name, gpu_slug
    from convkit.paths import results_dir

    directory = Path(directory) if directory is not None else results_dir() / gpu_slug(device_name())
    variants = list(variants) if variants is not None else None
    store = ResultStore.open(directory, experiment, provenance.collect())
    sweep(store, problems, lambda p: cases(p, variants, cudnn=cudnn, tune=tune),
          lambda p, todo: measure_problem(p, todo, seed=seed, timing=timing), progress=progress)  # fmt: skip
    return directory
