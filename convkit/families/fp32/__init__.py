"""FP32 kernels at the ceiling, past the papers (``kernels/implicit_gemm.cu``, ``kernels/winograd.cu``).

``fp32_igemm``, an implicit GEMM for any filter, stride and padding (CUTLASS's SIMT SGEMM design over NCHW,
a cp.async pipeline, split-K for small layers), and ``fp32_winograd``, Winograd's F(2x2, 3x3) .. F(6x6, 3x3)
and F(2x2, 5x5) .. F(4x4, 5x5) with its products on the same GEMM (:mod:`.launch`, :mod:`.winograd`); and
cuBLAS SGEMM, measured beside them on the 1x1 layers. The implicit GEMM is what ``convkit.conv2d`` runs
where nothing is recorded and tuning is off: it takes every problem.
"""

from __future__ import annotations

from convkit.core.gpu import sm_count
from convkit.core.problem import ConvProblem
from convkit.core.reference import TRANSFORM_TOLERANCE
from convkit.cuda.operands import ConvArgs
from convkit.families.fp32 import launch, winograd
from convkit.families.registry import Family, Variant, called_when_run
from convkit.libs import cublas

IGEMM, WINOGRAD = "fp32_igemm", "fp32_winograd"


def _run_igemm(a: ConvArgs, p: ConvProblem, spec: launch.ImplicitGemmLaunch) -> None:
    launch.conv2d_implicit_gemm(a.x, a.w, pad=p.pad, stride=p.stride, launch=spec, out=a.out, bias=a.bias,
                                workspace=a.workspace)  # fmt: skip


def _run_winograd(a: ConvArgs, p: ConvProblem, spec: winograd.WinogradLaunch) -> None:
    winograd.conv2d_winograd(a.x, a.w, pad=p.pad, launch=spec, out=a.out, bias=a.bias, workspace=a.workspace)


def winograd_supports(p: ConvProblem) -> bool:
    """Stride 1 and a square filter some built F(m, r) takes within the workspace limit."""
    return p.stride == 1 and p.r == p.s and winograd.winograd_fits(p)


def _run_cublas(a: ConvArgs, p: ConvProblem, spec: None = None) -> None:
    cublas.conv1x1(a.x, a.w, a.out)


IGEMM_VARIANT = Variant(
    IGEMM,
    _run_igemm,
    default=lambda p: launch.default_knobs(p, sm_count()),
    candidates=lambda p: launch.candidates(p, sm_count()),
    launch_from=launch.ImplicitGemmLaunch.from_params,
)
WINOGRAD_VARIANT = Variant(
    WINOGRAD,
    _run_winograd,
    default=winograd.winograd_default,
    candidates=winograd.winograd_candidates,
    launch_from=winograd.WinogradLaunch.from_params,
    tolerance=TRANSFORM_TOLERANCE,
    applies_to=winograd_supports,
)
VARIANTS: tuple[Variant, ...] = (IGEMM_VARIANT, WINOGRAD_VARIANT)
#: cuBLAS SGEMM on the 1x1 layers (impl ``cublas``).
PEERS: tuple[Variant, ...] = (Variant(cublas.VARIANT, _run_cublas, applies_to=cublas.supports, impl=cublas.IMPL),)

#: Each variant's method in words: the book's one name for it.
WORDS = {
    "fp32_igemm": "FP32 implicit GEMM",
    "fp32_winograd": "FP32 Winograd",
}


FAMILY = Family("fp32", VARIANTS, PEERS, sources=("implicit_gemm", "winograd"), words=WORDS,
                sample_problems=launch.SAMPLE_PROBLEMS, tuned_on_first_use=True,
                edge_check=called_when_run(f"{__name__}.edges", "edge_check"))  # fmt: skip
