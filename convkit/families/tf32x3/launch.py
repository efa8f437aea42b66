"""Launcher for ``kernels/implicit_gemm_tf32x3.cu``: the implicit GEMM in 3xTF32 on ``mma.sync`` tensor cores.

:class:`TensorCoreGemmLaunch` is the FP32 implicit GEMM's launch
(:class:`convkit.families.fp32.launch.ImplicitGemmLaunch`: its tiles, split-K, batch and alignment) for the
3xTF32 kernel: 16-deep slices, a deeper pipeline in dynamic shared memory, and no launch below compute
capability 8.0 (no TF32 tensor cores: the T4 declines here, and the SIMT kernels serve it).
:class:`TensorCoreWinogradLaunch` is Winograd's (:mod:`convkit.families.fp32.winograd`) with its batched
products on that kernel: the transforms in FP32 as before, the products FP32-accurate on tensor cores.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar

from convkit.core.gpu import TF32_CAPABILITY, build_target, has_tf32_tensor_cores
from convkit.core.problem import ConvProblem
from convkit.cuda.launch import ElementwiseLaunch
from convkit.cuda.launch import launch as launch_kernel
from convkit.families.fp32.launch import (
    ImplicitGemmLaunch,
    candidates,
    conv2d_implicit_gemm,
    default_knobs,
    tile_shape,
)
from convkit.families.fp32.winograd import (
    FILTERS_SPLIT,
    PLAIN,
    WinogradLaunch,
    winograd_candidates,
    winograd_default,
)

#: The kernel's slice depth (BK): two m16n8k8 steps.
SLICE_K = 16
#: Pipeline depths the kernel builds.
STAGES = (2, 3, 4, 5)
#: The input precision the kernel keeps (the vocabulary of Triton's ``tl.dot(input_precision=...)``).
INPUT_PRECISION = "tf32x3"


#: Warp tiles (filters x positions): 32x64, the kernel's first design, or 64x32, CUTLASS's.
WARPS = ("32x64", "64x32")
#: How the kernel gets the weights' two TF32 parts: split in the loop (None), "split" ahead by the launch, once per
#: call, or "presplit" by its caller, in the same planes (Winograd's filter transform).
WEIGHTS = (None, "split", "presplit")
#: Slices summed in the tensor cores before their FP32 add: 1 (None) or 2.
FLUSHES = (None, 2)


def stage_bytes(tile: str, split_weights: bool = False) -> int:
    """Shared memory of one pipeline stage: both slices, their rows padded by 8 floats; weights split ahead are
    staged as two filter-major planes instead, rows of 16 + 4 floats."""
    bm, bn, _ = tile_shape(tile)
    weights = 2 * bm * (SLICE_K + 4) if split_weights else SLICE_K * (bm + 8)
    return 4 * (weights + SLICE_K * (bn + 8))


def padded_k(problem: ConvProblem) -> int:
    """C*R*S rounded up to whole float4s: the row of a weight plane split ahead."""
    return 4 * math.ceil(problem.c * problem.r * problem.s / 4)


def split_elements(problem: ConvProblem) -> int:
    """Floats of the weights split ahead: two planes, big then small, of M rows of :func:`padded_k`."""
    return 2 * problem.m * padded_k(problem)


def split_weights(problem: ConvProblem, w: Any, planes: Any) -> Any:
    """Enqueue the split of ``w`` into ``planes`` (:func:`split_elements` floats, :class:`SplitWeightsLaunch`) and
    return them."""
    import cupy

    k = problem.c * problem.r * problem.s
    launch_kernel(SplitWeightsLaunch(), problem, (w, planes, cupy.int32(problem.m), cupy.int32(k)))
    return planes


@dataclass(frozen=True)
class SplitWeightsLaunch(ElementwiseLaunch):
    """``split_weights_tf32x3``: the weights' big and small TF32 parts, two planes of M rows of :func:`padded_k`."""

    kind: ClassVar[str] = "tf32x3_split_weights"
    source: ClassVar[str] = "implicit_gemm_tf32x3"
    kernel: ClassVar[str] = "split_weights_tf32x3"
    max_blocks: ClassVar[int] = 65535  # grid-stride beyond

    def elements(self, problem: ConvProblem) -> int:
        return problem.m * padded_k(problem)


@dataclass(frozen=True)
class TensorCoreGemmLaunch(ImplicitGemmLaunch):
    """One launch of ``implicit_gemm_tf32x3`` (a :class:`convkit.cuda.launch.Launch`): ``tile``, ``splits``,
    ``stages`` as :class:`~convkit.families.fp32.launch.ImplicitGemmLaunch`'s; ``warp`` (:data:`WARPS`, None: the
    first), ``weights`` (:data:`WEIGHTS`) and ``flush`` (:data:`FLUSHES`), left out of its params at None."""

    warp: str | None = None
    weights: str | None = None
    flush: int | None = None

    kind: ClassVar[str] = "tf32x3_igemm"
    knobs: ClassVar[tuple[str, ...]] = ("tile", "splits", "stages", "warp", "weights", "flush")
    source: ClassVar[str] = "implicit_gemm_tf32x3"
    slice_k: ClassVar[int] = SLICE_K
    stores_bias: ClassVar[bool] = True

    def options(self, problem: ConvProblem) -> tuple[str, ...]:
        extra = {"WARP_M": self.warp and int(self.warp.split("x")[0]), "PRESPLIT": self.weights and 1,
                 "FLUSH": self.flush}  # fmt: skip
        return (*super().options(problem), *(f"-DCONVKIT_{k}={v}" for k, v in extra.items() if v))

    def shared_bytes(self, problem: ConvProblem) -> int:
        return self.stages * stage_bytes(self.tile, self.weights is not None)

    def weight_elements(self, problem: ConvProblem) -> int:
        """The two planes of the weights split ahead (``weights="split"``), else none."""
        return split_elements(problem) if self.weights == "split" else 0

    def prepare_weights(self, problem: ConvProblem, w: Any, planes: Any) -> Any:
        """Enqueue the split of ``w`` into ``planes`` (:func:`split_weights`) and return them."""
        return split_weights(problem, w, planes)

    def check_pipeline(self) -> None:
        """Raise ValueError naming ``stages``, ``warp``, ``weights`` or ``flush`` where the kernel builds no such
        launch, or the GPU where it has no TF32 tensor cores."""
        if self.stages not in STAGES:
            raise ValueError(f"stages must be one of {STAGES}, got {self.stages!r}")
        for name, allowed in (("warp", (None, *WARPS)), ("weights", WEIGHTS), ("flush", FLUSHES)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.weights == "split" and self.batch > 1:
            raise ValueError("weights split by the launch take one GEMM: a batch of GEMMs gets them presplit")
        if not has_tf32_tensor_cores():
            major, minor = TF32_CAPABILITY
            raise ValueError(f"3xTF32 needs TF32 tensor cores (compute capability {major}.{minor} or later); "
                             f"this build targets {build_target()}")  # fmt: skip


def conv2d_tf32x3(
    x: Any,
    w: Any,
    *,
    pad: int = 0,
    stride: int = 1,
    launch: TensorCoreGemmLaunch | None = None,
    out: Any = None,
    bias: Any = None,
    workspace: Any = None,
) -> Any:
    """Convolution (cross-correlation) of NCHW ``x`` with MCRS ``w`` as one implicit GEMM in 3xTF32: FP32
    accuracy (within 1e-5 of float64, as the FP32 kernels) from TF32 tensor cores. Arguments and result as
    :func:`convkit.families.fp32.launch.conv2d_implicit_gemm`'s; ``launch`` defaults to
    :func:`default_launch`. Raises ValueError naming ``launch`` where it reads its weights presplit (planes only
    Winograd's filter transform writes: ``w`` here is plain weights)."""
    if launch is not None and launch.weights == "presplit":
        raise ValueError("launch reads its weights presplit (Winograd's planes); conv2d_tf32x3 takes plain weights: "
                         "weights='split' splits them here")  # fmt: skip
    return conv2d_implicit_gemm(x, w, pad=pad, stride=stride, launch=launch, out=out, bias=bias, workspace=workspace,
                                kind=TensorCoreGemmLaunch)  # fmt: skip


def default_launch(problem: ConvProblem, sms: int = 132) -> TensorCoreGemmLaunch:
    """The heuristic launch (the FP32 implicit GEMM's rule, :func:`convkit.families.fp32.launch.default_knobs`)."""
    return default_knobs(problem, sms, TensorCoreGemmLaunch)


def launch_candidates(problem: ConvProblem, sms: int = 132) -> list[TensorCoreGemmLaunch]:
    """Launches a tuning run measures: the FP32 implicit GEMM's candidates and 128x128 at 5 stages, each as first
    designed and with CUTLASS's warps and the weights split ahead."""
    out = [*candidates(problem, sms, TensorCoreGemmLaunch), TensorCoreGemmLaunch("128x128", stages=5)]
    return list(dict.fromkeys([*out, *(dataclasses.replace(c, warp="64x32", weights="split") for c in out)]))


@dataclass(frozen=True)
class TensorCoreWinogradLaunch(WinogradLaunch):
    """Winograd's F(m x m, r x r) (:class:`~convkit.families.fp32.winograd.WinogradLaunch`: its tile, GEMM tile,
    stages and passes) with the a*a products on ``implicit_gemm_tf32x3``: where the GEMM carries most of the
    work, its FP32 products on tensor cores; the transforms, and so the error, stay FP32 Winograd's. ``weights``
    "split": the filter transform writes the transformed filters split into their TF32 parts (``winograd_transforms``
    with ``split``), which the products read presplit."""

    weights: str | None = None

    kind: ClassVar[str] = "tf32x3_winograd"
    knobs: ClassVar[tuple[str, ...]] = ("m", "gemm_tile", "stages", "weights")
    gemm_kind: ClassVar[type[ImplicitGemmLaunch]] = TensorCoreGemmLaunch

    def gemm_launch(self, problem: ConvProblem) -> ImplicitGemmLaunch:
        presplit = "presplit" if self.weights == "split" else None
        return dataclasses.replace(super().gemm_launch(problem), weights=presplit)

    def filter_row(self, problem: ConvProblem) -> int:
        """Floats of a transformed filter's row: C, or split, C rounded up to whole float4s."""
        return 4 * math.ceil(problem.c / 4) if self.weights == "split" else problem.c

    def filter_elements(self, problem: ConvProblem) -> int:
        """The transformed filters: points x M x :meth:`filter_row`, twice where split."""
        return (2 if self.weights == "split" else 1) * super().filter_elements(problem)

    def transform_layout(self) -> int:
        """:data:`~convkit.families.fp32.winograd.FILTERS_SPLIT` where the filters are split, else plain."""
        return FILTERS_SPLIT if self.weights == "split" else PLAIN

    def can_implement(self, problem: ConvProblem) -> None:
        """FP32 Winograd's checks, and ``weights`` one of None and "split"."""
        if self.weights not in (None, "split"):
            raise ValueError(f"weights must be None or 'split', got {self.weights!r}")
        super().can_implement(problem)


def winograd_launch(problem: ConvProblem) -> TensorCoreWinogradLaunch:
    """The heuristic launch (FP32 Winograd's rule, :func:`convkit.families.fp32.winograd.winograd_default`)."""
    return winograd_default(problem, TensorCoreWinogradLaunch)  # type: ignore[return-value]


def winograd_launch_candidates(problem: ConvProblem) -> list[TensorCoreWinogradLaunch]:
    """Launches a tuning run measures: FP32 Winograd's (:func:`~convkit.families.fp32.winograd.winograd_candidates`),
    each also with the transformed filters split ahead."""
    out = winograd_candidates(problem, TensorCoreWinogradLaunch)
    return [*out, *(dataclasses.replace(c, weights="split") for c in out)]  # type: ignore[misc]
