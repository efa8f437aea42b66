"""FP32 accuracy on tensor cores (``kernels/implicit_gemm_tf32x3.cu``): the implicit GEMM in 3xTF32.

``igemm_tf32x3`` splits each FP32 operand into two TF32 parts and sums three tensor-core products, the
small ones first, each slice's sum added in FP32 outside the tensor cores: FP32's accuracy (the direct
methods' bar, 1e-5 of float64) at tensor-core speed, for any filter, stride and padding.
``winograd_tf32x3`` is FP32 Winograd (``kernels/winograd.cu``) with its batched products on that kernel, held to
the transform methods' bar as FP32 Winograd is. Below compute capability 8.0 (the T4) their launches decline and
the FP32 SIMT kernels serve. ``igemm_wgmma_tf32x3`` is the implicit GEMM in 3xTF32 on Hopper's warpgroup MMA
(``kernels/wgmma_tf32x3.cu``, :mod:`convkit.families.tf32x3.wgmma`; its tuning candidates in
:mod:`convkit.families.tf32x3.wgmma_settings`, its first-use pick in :mod:`convkit.families.tf32x3.wgmma_pick`), on
compute capability 9.0 alone;
``winograd_wgmma_tf32x3`` is FP32 Winograd with its products on that GEMM's split-ahead kernel, both operands split by
the transforms (:mod:`convkit.families.tf32x3.wgmma_winograd`).
"""

from __future__ import annotations

import dataclasses

from convkit.core.gpu import sm_count
from convkit.core.problem import ConvProblem
from convkit.core.reference import TRANSFORM_TOLERANCE
from convkit.cuda.operands import ConvArgs
from convkit.families.fp32 import launch as fp32_launch
from convkit.families.fp32 import winograd_supports
from convkit.families.fp32.winograd import conv2d_winograd
from convkit.families.registry import Family, Variant, called_when_run
from convkit.families.tf32x3 import launch, wgmma, wgmma_pick, wgmma_settings, wgmma_winograd

IGEMM, WINOGRAD, WGMMA = "igemm_tf32x3", "winograd_tf32x3", "igemm_wgmma_tf32x3"
WINOGRAD_WGMMA = "winograd_wgmma_tf32x3"


def _run_igemm(a: ConvArgs, p: ConvProblem, spec: launch.TensorCoreGemmLaunch) -> None:
    launch.conv2d_tf32x3(a.x, a.w, pad=p.pad, stride=p.stride, launch=spec, out=a.out, bias=a.bias,
                         workspace=a.workspace)  # fmt: skip


IGEMM_VARIANT = Variant(
    IGEMM,
    _run_igemm,
    default=lambda p: launch.default_launch(p, sm_count()),
    candidates=lambda p: launch.launch_candidates(p, sm_count()),
    launch_from=launch.TensorCoreGemmLaunch.from_params,
    precision=launch.INPUT_PRECISION,
)


def _run_winograd(a: ConvArgs, p: ConvProblem, spec: launch.TensorCoreWinogradLaunch) -> None:
    conv2d_winograd(a.x, a.w, pad=p.pad, launch=spec, out=a.out, bias=a.bias, workspace=a.workspace)


WINOGRAD_VARIANT = Variant(
    WINOGRAD,
    _run_winograd,
    default=launch.winograd_launch,
    candidates=launch.winograd_launch_candidates,
    launch_from=launch.TensorCoreWinogradLaunch.from_params,
    tolerance=TRANSFORM_TOLERANCE,
    applies_to=winograd_supports,
    precision=launch.INPUT_PRECISION,
)


def _run_wgmma(a: ConvArgs, p: ConvProblem, spec: wgmma.WgmmaLaunch) -> None:
    wgmma.conv2d_wgmma_tf32x3(a.x, a.w, pad=p.pad, stride=p.stride, launch=spec, out=a.out, bias=a.bias,
                              workspace=a.workspace)  # fmt: skip


WGMMA_VARIANT = Variant(
    WGMMA,
    _run_wgmma,
    default=wgmma_pick.wgmma_default,
    candidates=wgmma_settings.wgmma_candidates,
    launch_from=wgmma.launch_from_params,
    precision=launch.INPUT_PRECISION,
)
# 3xTF32 Winograd whose products run on wgmma: the same run, bar and domain, its own launches
WINOGRAD_WGMMA_VARIANT = dataclasses.replace(
    WINOGRAD_VARIANT,
    name=WINOGRAD_WGMMA,
    default=wgmma_winograd.winograd_wgmma_default,
    candidates=wgmma_winograd.winograd_wgmma_candidates,
    launch_from=wgmma_winograd.WgmmaWinogradLaunch.from_params,
)
VARIANTS: tuple[Variant, ...] = (IGEMM_VARIANT, WINOGRAD_VARIANT, WGMMA_VARIANT, WINOGRAD_WGMMA_VARIANT)


#: Each variant's method in words: the book's one name for it.
WORDS = {
    "igemm_tf32x3": "3xTF32 implicit GEMM",
    "winograd_tf32x3": "3xTF32 Winograd",
    "igemm_wgmma_tf32x3": "3xTF32 implicit GEMM on wgmma",
    "winograd_wgmma_tf32x3": "3xTF32 Winograd on wgmma",
}


FAMILY = Family("tf32x3", VARIANTS, sources=("implicit_gemm_tf32x3", "wgmma_tf32x3"), words=WORDS,
                sample_problems=fp32_launch.SAMPLE_PROBLEMS,
                edge_check=called_when_run(f"{__name__}.edges", "edge_check"),
                tuned_on_first_use=True)  # fmt: skip
