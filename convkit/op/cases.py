"""What runs on one problem, and how a candidate is prepared and checked: the library's side of measuring.

A :class:`Case` is one thing to run on one problem (an implementation, a variant, its launch knobs as canonical
text); :func:`cases` lists a problem's (the variants that support it, every cuDNN algorithm, PyTorch, the peers);
:func:`prepare_case` turns one into ``(run, check_run)`` on given inputs, or says why it cannot run; and
:func:`poisoned_run_error` checks a run against the float64 reference. The op's first-use tuner
(:mod:`convkit.op.tune`) and the study's sweeps (:mod:`convkit.bench.measure`) both build on these.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from convkit.core import reference
from convkit.core.problem import ConvProblem
from convkit.core.reference import DIRECT_TOLERANCE, TRANSFORM_TOLERANCE
from convkit.cuda.operands import ConvArgs, new_workspace
from convkit.families.registry import Kernels, KnobTable, Variant

#: Problems above this many FLOPs get their float64 reference on the GPU (CuPy, float64 cuBLAS):
#: the same code as on the CPU, minutes faster for the large layers.
GPU_REFERENCE_FLOPS = 2e9


@dataclass(frozen=True)
class Case:
    """One thing to run on one problem: an implementation, a variant, its parameters (:func:`params_text`)."""

    impl: str
    variant: str
    params: str = "{}"


def params_text(params: Mapping[str, Any] | None) -> str:
    """Canonical text of tuning parameters (sorted JSON), part of a row's key."""
    return json.dumps(dict(params or {}), sort_keys=True, separators=(",", ":"))


def variant_case(
    variant: Variant, problem: ConvProblem, knobs: Mapping[str, Any] | None = None, *, tuned: KnobTable | None = None
) -> Case:
    """The case that runs ``variant`` on ``problem`` with ``knobs`` (default: :meth:`Variant.knobs`, ``tuned``'s
    where it has them)."""
    return Case(variant.impl, variant.name, params_text(variant.knobs(problem, tuned) if knobs is None else knobs))


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
            out += [variant_case(variant, problem, launch.to_params()) for launch in variant.candidates(problem)]
        else:
            out.append(variant_case(variant, problem, tuned=tuned))
    if cudnn:
        out += [Case("cudnn", algo) for algo in FORWARD_ALGORITHMS]
        if pytorch or (pytorch is None and torch_baseline.available()):
            out.append(Case("pytorch", torch_baseline.VARIANT))
    out += [variant_case(peer, problem) for peer in peers if peer.supports(problem)]
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
    """A function giving ``(run, check_run)`` of ``case`` writing ``y`` (``check_run`` None where the checked run is
    ``run``), or a refusal, ``{"status", "note"}``, saying why it cannot run (a cuDNN algorithm over the workspace
    limit, a launch its kernel cannot run on ``problem``): what :func:`convkit.bench.measure.check_and_time` and
    the op's first-use tuner take."""

    def prepare() -> Any:
        from convkit.libs import pytorch

        if case.impl in ("pytorch", pytorch.TF32_IMPL):  # the latter: PyTorch's default TF32, a reference line
            import cupy

            autotuned = pytorch.autotuned_conv2d(problem, x, w, tf32=case.impl == pytorch.TF32_IMPL)
            # PyTorch allocates its output: the checked run copies it into the poisoned one
            return (lambda: autotuned()), (lambda: cupy.copyto(y, autotuned()))
        if case.impl == "cudnn":
            return cudnn_prepare(problem, case, x, w, y)()
        if case.impl == "cutlass":  # NHWC: the layout transforms stay out of the timed run
            from convkit.libs import cutlass

            return cutlass.prepared(case.variant, problem, x, w, y)
        variant = kernels[case.variant]
        launch = variant.launch_of(json.loads(case.params))  # read once, before the timed runs
        reasons = launch.not_supported_reasons(problem) if launch is not None else []
        if reasons:  # a tuning candidate the kernel cannot run here: said, not an error
            return {"status": "not_supported", "note": "; ".join(reasons)[:300]}
        args = ConvArgs(x, w, y, workspace=new_workspace(launch, problem))  # allocated once, as the op does
        return (lambda: variant.run(args, problem, launch)), None

    return prepare


def cudnn_prepare(problem: ConvProblem, case: Case, x: Any, w: Any, y: Any) -> Callable[[], Any]:
    """:func:`prepare_case` for one cuDNN forward algorithm (``case.variant``)."""

    def prepare() -> Any:
        from convkit.libs.cudnn import CudnnConvolution

        conv = CudnnConvolution(problem)
        need = conv.workspace(case.variant)
        if need.status != "ok":
            return {"status": need.status, "note": need.note}
        return (lambda: conv.forward(case.variant, x, w, y)), None

    return prepare


def poisoned_run_error(out: Any, ref: Any, run: Callable[[], Any]) -> float:
    """Poison ``out`` with NaN, ``run()`` once, synchronize; the norm-wise relative error to ``ref`` (where
    ``ref`` lives: CPU or GPU). An element the kernel forgets to write makes it NaN."""
    import cupy

    out.fill(math.nan)
    run()
    cupy.cuda.get_current_stream().synchronize()
    on_gpu = type(ref).__module__.split(".")[0] == "cupy"
    return reference.relative_error(out if on_gpu else out.get(), ref)
