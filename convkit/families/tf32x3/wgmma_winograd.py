"""Winograd's F(m x m, r x r) with its a*a products on Hopper's wgmma in 3xTF32 (the 3xTF32 family's
``winograd_wgmma_tf32x3``): :class:`WgmmaWinogradLaunch`, whose transforms (``kernels/winograd.cu``) write both
operands split as the split-ahead kernel of :mod:`convkit.families.tf32x3.wgmma` reads them, and
:class:`WinogradProductsLaunch`, that kernel over every transformed point's GEMM in one persistent launch
(``winograd_products_wgmma_tf32x3`` in ``kernels/wgmma_tf32x3.cu``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from convkit.core.gpu import sm_count
from convkit.core.problem import ConvProblem
from convkit.cuda.launch import KernelLaunch
from convkit.cuda.launch import launch as launch_kernel
from convkit.families.fp32.launch import MAX_OPERAND_ELEMENTS
from convkit.families.fp32.winograd import TILES, WGMMA_FP32_INPUTS, WGMMA_OPERANDS, WinogradLaunch
from convkit.families.tf32x3.wgmma import WgmmaWsLaunch
from convkit.families.tf32x3.wgmma_operands import (
    BLOCK_M,
    WS_THREADS,
    WS_WIDTH,
    check_problem,
    input_plane_elements,
    tiled_elements,
)
from convkit.families.tf32x3.wgmma_settings import SPLIT_AHEAD, SPLIT_STAGED

#: The input transform's block (``input_block`` in ``kernels/winograd.cu``): 8 tiles by 32 channels, a tile's channels
#: padded by 4 floats in shared memory, at most 36 points there at a time (32 where there are more: two halves).
INPUT_TILES, INPUT_CHANNELS, INPUT_ROW_PAD = 8, 32, 4
#: How the transformed inputs reach the products (:attr:`WgmmaWinogradLaunch.inputs`), as the direct kernel's
#: (:data:`~convkit.families.tf32x3.wgmma.WS_INPUTS`): split ahead by the input transform into a big plane and a small
#: one, or written once in FP32 and split in shared memory by the products' consumer warps once a K-tile is staged
#: (half the bytes written by the transform and read by the products).
SETTINGS = {"split ahead": SPLIT_AHEAD, "split staged": SPLIT_STAGED}
INPUTS = tuple(SETTINGS)


@dataclass(frozen=True)
class WinogradProductsLaunch(KernelLaunch):
    """``winograd_products_wgmma_tf32x3``: the ``points`` GEMMs of one pass of Winograd's transformed points, each a
    1x1 convolution ``problem`` (:meth:`~convkit.families.fp32.winograd.WinogradLaunch.gemm_problem`: C channels, 1 x
    t_pad pixels, M filters) on the split-ahead kernel in its tuning setting (:data:`SPLIT_AHEAD`: persistent over
    every point's output tiles, two K-tiles in flight, 128 filters a block); ``inputs`` one of :data:`INPUTS`."""

    points: int
    inputs: str = "split ahead"

    kind: ClassVar[str] = "tf32x3_winograd_products_wgmma"
    source: ClassVar[str] = "wgmma_tf32x3"
    arch: ClassVar[str | None] = "sm_90a"

    def kernel_name(self, problem: ConvProblem) -> str:
        return "winograd_products_wgmma_tf32x3"

    def setting(self) -> WgmmaWsLaunch:
        """The split-ahead kernel's setting it runs (:data:`SETTINGS`)."""
        return SETTINGS[self.inputs]

    def options(self, problem: ConvProblem) -> tuple[str, ...]:
        return self.setting().options(problem)

    def input_planes(self) -> int:
        """A point's planes of transformed inputs: big and small, or one of FP32."""
        return self.setting().input_planes

    def output_tiles(self, problem: ConvProblem) -> int:
        """Output tiles of every point's product together (128 filters by 128 pixels each)."""
        pixels = problem.n * problem.out_h * problem.out_w
        return self.points * math.ceil(pixels / WS_WIDTH) * math.ceil(problem.m / BLOCK_M)

    def grid(self, problem: ConvProblem) -> tuple[int, ...]:
        return (min(self.output_tiles(problem), sm_count()),)

    def block(self, problem: ConvProblem) -> tuple[int, ...]:
        return (WS_THREADS,)

    def shared_bytes(self, problem: ConvProblem) -> int:
        return SPLIT_AHEAD.shared_bytes(problem)

    def can_implement(self, problem: ConvProblem) -> None:
        """As :func:`check_problem` (Hopper; each point's operands under 2^31 floats), on a 1x1 ``problem``."""
        if problem.r != 1 or problem.s != 1 or problem.n != 1 or problem.h != 1:
            raise ValueError(f"the products are 1x1 GEMMs of one row of pixels, got {problem.label}")
        if self.inputs not in INPUTS:
            raise ValueError(f"inputs must be one of {INPUTS}, got {self.inputs!r}")
        check_problem(problem)
        if (size := self.input_planes() * input_plane_elements(problem)) > MAX_OPERAND_ELEMENTS:
            raise ValueError(f"a point's transformed inputs hold {size} elements; the kernel indexes under 2^31")


@dataclass(frozen=True)
class WgmmaWinogradLaunch(WinogradLaunch):
    """Winograd's F(m x m, r x r) (:class:`~convkit.families.fp32.winograd.WinogradLaunch`: its tile and passes of
    images) with the a*a products on Hopper's wgmma in 3xTF32: the transforms write both operands split, as the
    split-ahead kernel reads them (the filters tiled, the inputs channels last: ``winograd_transforms`` with
    :data:`~convkit.families.fp32.winograd.WGMMA_OPERANDS`), so that no pass splits them apart, and one persistent
    launch (:class:`WinogradProductsLaunch`) runs every point's GEMM. The transforms, and so the error, stay FP32
    Winograd's. Its knobs: the tile ``m``, and ``inputs`` (:data:`INPUTS`: the inputs split by their transform, or
    by the products as they stage them)."""

    inputs: str = "split ahead"

    kind: ClassVar[str] = "tf32x3_winograd_wgmma"
    knobs: ClassVar[tuple[str, ...]] = ("m", "inputs")

    def products_launch(self, problem: ConvProblem) -> WinogradProductsLaunch:
        """The products' launch on one pass of ``problem``'s images."""
        return WinogradProductsLaunch(self.alpha(problem) ** 2, self.inputs)

    def filter_elements(self, problem: ConvProblem) -> int:
        """The transformed filters split and tiled: points x :func:`tiled_elements` of a point's GEMM."""
        return self.alpha(problem) ** 2 * tiled_elements(self.gemm_problem(problem), True)

    def input_elements(self, problem: ConvProblem) -> int:
        """The transformed inputs, channels last: points x planes (two split, one FP32) of t_pad x C rounded up to
        32."""
        planes = self.products_launch(problem).input_planes()
        return self.alpha(problem) ** 2 * planes * input_plane_elements(self.gemm_problem(problem))

    def transform_layout(self) -> int:
        return WGMMA_OPERANDS if self.inputs == "split ahead" else WGMMA_FP32_INPUTS

    def transform_shared_bytes(self, problem: ConvProblem) -> int:
        """The input transform's values on their way to the channels-last planes: up to 36 points (32 of more) of 8
        tiles by 32 channels (each tile's row padded), as ``input_block`` in ``kernels/winograd.cu`` lays them out."""
        points = self.alpha(problem) ** 2
        return (points if points <= 36 else 32) * INPUT_TILES * (INPUT_CHANNELS + INPUT_ROW_PAD) * 4

    def transform_items(self, problem: ConvProblem, with_filters: bool = True) -> tuple[int, int]:
        """A thread per float of a point's tiled big plane (:meth:`filter_elements`'s half, padding included; none
        after the first pass) and per padded channel and tile, the tiles rounded up to ``input_block``'s 8."""
        gemm = self.gemm_problem(problem)
        tiles = math.ceil(self.tiles(problem)[3] / INPUT_TILES) * INPUT_TILES
        return (tiled_elements(gemm, True) // 2 if with_filters else 0), tiles * math.ceil(problem.c / 32) * 32

    def can_implement(self, problem: ConvProblem) -> None:
        """FP32 Winograd's checks and the products' (:meth:`check_products`); ``threads`` 256, the input transform's
        blocks; ``inputs`` one of :data:`INPUTS` (first: the workspace's size depends on it)."""
        if self.inputs not in INPUTS:
            raise ValueError(f"inputs must be one of {INPUTS}, got {self.inputs!r}")
        if self.threads != INPUT_TILES * INPUT_CHANNELS:
            raise ValueError(f"threads must be {INPUT_TILES * INPUT_CHANNELS} (the input transform's blocks), got "
                             f"{self.threads!r}")  # fmt: skip
        super().can_implement(problem)

    def check_products(self, problem: ConvProblem) -> None:
        """The products' launch on one pass of images: Hopper, each point's operands within its indices."""
        self.products_launch(problem).can_implement(self.gemm_problem(problem))

    def enqueue_products(self, problem: ConvProblem, u: Any, v: Any, prod: Any) -> None:
        import cupy

        gemm = self.gemm_problem(problem)
        sizes = (problem.m, problem.c, self.tiles(problem)[3], self.alpha(problem) ** 2)
        launch_kernel(self.products_launch(problem), gemm, (u, v, prod, *(cupy.int32(s) for s in sizes)))


def winograd_wgmma_default(problem: ConvProblem) -> WgmmaWinogradLaunch:
    """FP32 Winograd's rule (:func:`~convkit.families.fp32.winograd.winograd_default`): F(4x4, 3x3) for 3x3 filters,
    F(2x2, 5x5) for 5x5."""
    return WgmmaWinogradLaunch(4 if problem.r == 3 else 2)


def winograd_wgmma_candidates(problem: ConvProblem) -> list[WgmmaWinogradLaunch]:
    """Every built F(m, r) for the filter whose workspace fits one image, its products on wgmma, its inputs split by
    either side (:data:`INPUTS`): each side is the faster on some layers. On the H200, over the 3xTF32 chapter's 92
    layers Winograd on wgmma runs, the inputs split as staged (8528def) were faster than split ahead (c42b9ff, two
    sessions apart, the untouched columns within 1.3%) by more than 5% on 42, where the transforms dominate (few
    channels, large images: the transform writes half the bytes), slower by more than 5% on 19, where the products
    do (512 channels: the producer's split, as it was then, cost them 15-35%), and within 5% on 31. In one run of
    both (70e6443, the inputs split by truncation, still by the producer), over 22 layers of the chapter's last
    third: staged faster by more than 5% on 9, slower on 6, within 5% on 7. Now the consumers split a full stage (not
    yet timed). (The products at 64 filters a block, the direct kernel's candidate where a layer has at most 64, were
    measured slower here: 0.93-0.99x on the 3xTF32 chapter's 11 large layers of 64 filters or fewer,
    H200, 2026-11-28; their K-tiles are too few, two at 64 channels, for the two consumers' halves to pay.)"""
    specs = [WgmmaWinogradLaunch(m, inputs=inputs) for m, r in TILES if r == problem.r for inputs in INPUTS]
    return [spec for spec in specs if spec.images_per_pass(problem) >= 1]
