"""The operands of ``kernels/wgmma_tf32x3.cu``'s warp-specialised kernels as they read them, and the launches that
split them once per call: the weights tiled in blocks of filters by K-tiles (:class:`SplitTiledLaunch`), or for the
split-ahead kernel the input channels last and the weights to match, in one launch (:class:`SplitAheadLaunch`); with the
block and tile sizes they share with :mod:`convkit.families.tf32x3.wgmma`, whose launches run them. The kernels' one
definition of these layouts is ``kernels/wgmma_operands.cuh`` (Winograd's transforms write them too).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from convkit.core.gpu import build_target
from convkit.core.problem import ConvProblem
from convkit.cuda.launch import ElementwiseLaunch, KernelLaunch
from convkit.families.fp32.launch import MAX_OPERAND_ELEMENTS

#: The block's filters (two warpgroups of 64) and the K-tile (four wgmma k-steps).
BLOCK_M, TILE_K = 128, 32
#: The wgmma's N: the block's pixels.
WIDTHS = (128, 256)


def filter_macros(problem: ConvProblem) -> tuple[str, ...]:
    """The filter's size as every kernel of ``kernels/wgmma_tf32x3.cu`` is built with it (one module a filter
    size serves the weights' split and the kernel alike)."""
    return (f"-DCONVKIT_R={problem.r}", f"-DCONVKIT_S={problem.s}")


#: The warp-specialised kernel's shared-memory stages, threads (a producer warpgroup, two consumers) and pixels a
#: block; the split-ahead one's filters a block besides 128, its stages then (smaller, so more of them).
WS_STAGES, WS_THREADS, WS_WIDTH = 3, 384, 128
NARROW_FILTERS, NARROW_STAGES = 64, 4
#: Fewer filters a block than a wgmma's 64 rows: the gathering kernel's pixels are then the products' rows, its
#: filters their columns (N); in NARROW_STAGES stages.
PIXEL_ROW_FILTERS = (16, 32)


def ws_stages(block_filters: int) -> int:
    """The warp-specialised kernels' shared-memory stages at ``block_filters`` a block (the kernel's WS_STAGES): one
    more where they are fewer than 128, their stages smaller."""
    return NARROW_STAGES if block_filters < BLOCK_M else WS_STAGES


#: The most splits of K the gathering kernel takes (a block a tile; the grid's third dimension).
MAX_SPLITS = 64
#: At 128 filters a block, each consumer warp's rows on their way to the output (the kernel's store_tile_staged): 8
#: rows of 128 pixels and 8 floats of padding, for each of the two consumers' 4 warps.
STAGED_ROWS_BYTES = 8 * 8 * (WS_WIDTH + 8) * 4


#: The GPU the kernel runs on (built as sm_90a: wgmma is Hopper's alone).
HOPPER = "sm_90"


def check_problem(problem: ConvProblem, filters: int = BLOCK_M) -> None:
    """Raise ValueError naming the problem where a size is past the wgmma kernels' 32-bit indices or their grid (of
    ``filters`` a block), or the GPU where it is not Hopper."""
    sizes = {"x": math.prod(problem.input_shape), "w": math.prod(problem.filter_shape),
             "out": math.prod(problem.output_shape)}  # fmt: skip
    for name, size in sizes.items():
        if size > MAX_OPERAND_ELEMENTS:
            raise ValueError(f"{name} holds {size} elements; the wgmma kernel indexes under 2^31")
    if math.ceil(problem.m / filters) > 65535:
        raise ValueError(f"m={problem.m} needs more than 65535 blocks of {filters} filters")
    if (here := build_target()) != HOPPER:
        raise ValueError(f"the wgmma kernel needs Hopper's warpgroup MMA (compute capability 9.0, built as "
                         f"sm_90a); this build targets {here}")  # fmt: skip


#: With tap pairs (:class:`~convkit.families.tf32x3.wgmma.WgmmaWsLaunch`'s ``tap_pairs``, a layer of at most this many
#: channels): the input's channels-last rows this wide, a K-tile two taps of them.
PAIRED_CHANNELS = TILE_K // 2


def k_tiles(problem: ConvProblem, channels_last: bool = False, tap_pairs: bool = False) -> int:
    """The warp-specialised kernels' K-tiles of 32: over K = C R S, or (``channels_last``, inputs split ahead) 32
    channels at one tap, C rounded up to 32, or (``tap_pairs``) two taps of :data:`PAIRED_CHANNELS`."""
    if tap_pairs:
        return math.ceil(problem.r * problem.s / 2)
    if channels_last:
        return math.ceil(problem.c / TILE_K) * problem.r * problem.s
    return math.ceil(problem.c * problem.r * problem.s / TILE_K)


def k_tiles_a_split(problem: ConvProblem, splits: int) -> int:
    """The gathering kernel's K-tiles a block with K split in ``splits`` (the kernel's per_split; a last split may
    have fewer, and splits past the K-tiles none)."""
    return -(-k_tiles(problem) // splits)


def tiled_elements(
    problem: ConvProblem, channels_last: bool = False, filters: int = BLOCK_M, tap_pairs: bool = False
) -> int:
    """Floats of the weights split into :class:`WgmmaWsLaunch`'s layout: per block of ``filters`` filters and K-tile
    of 32 (:func:`k_tiles`), both planes as they lie in a stage."""
    return math.ceil(problem.m / filters) * k_tiles(problem, channels_last, tap_pairs) * 2 * filters * TILE_K


def input_plane_elements(problem: ConvProblem, tap_pairs: bool = False) -> int:
    """Floats of one of the input's two planes split ahead channels last (``split_ahead_operands_tf32x3``):
    N H W CP, CP = C rounded up to 32, or with ``tap_pairs`` :data:`PAIRED_CHANNELS`."""
    channels = PAIRED_CHANNELS if tap_pairs else math.ceil(problem.c / TILE_K) * TILE_K
    return problem.n * problem.h * problem.w * channels


@dataclass(frozen=True)
class SplitTiledLaunch(ElementwiseLaunch):
    """``split_weights_tiled_tf32x3``: the weights' big and small TF32 parts in :class:`WgmmaWsLaunch`'s layout,
    in blocks of ``filters`` filters, one thread a 16-byte line of each plane; built with that kernel's macros, so one
    module holds both."""

    filters: int = BLOCK_M

    kind: ClassVar[str] = "tf32x3_split_tiled"
    source: ClassVar[str] = "wgmma_tf32x3"
    kernel: ClassVar[str] = "split_weights_tiled_tf32x3"
    arch: ClassVar[str | None] = "sm_90a"
    max_blocks: ClassVar[int] = 65535  # grid-stride beyond

    def elements(self, problem: ConvProblem) -> int:
        return tiled_elements(problem, False, self.filters) // 8

    def options(self, problem: ConvProblem | None = None) -> tuple[str, ...]:
        return (*(filter_macros(problem) if problem is not None else ()), *filters_macro(self.filters))


def tap_pairs_macro(tap_pairs: bool | None) -> tuple[str, ...]:
    """The split-ahead kernel's (and its splits') macro for K-tiles of two taps (none without)."""
    return ("-DCONVKIT_WS_TAP_PAIRS=1",) if tap_pairs else ()


def filters_macro(filters: int) -> tuple[str, ...]:
    """The warp-specialised kernels' macro for ``filters`` a block (none at 128, their default)."""
    return () if filters == BLOCK_M else (f"-DCONVKIT_WS_FILTERS={filters}",)


@dataclass(frozen=True)
class SplitAheadLaunch(KernelLaunch):
    """``split_ahead_operands_tf32x3``: the split-ahead kernel's operands split in one launch, blocks of 32 x 8
    threads: the input's big and small TF32 parts (split as the weights are), channels last
    (:func:`input_plane_elements` floats each), a block a tile of 32 channels by 32 pixels; then the weights tiled to
    match, in blocks of ``filters`` filters (:func:`tiled_elements`), a thread a 16-byte line of each plane. Not
    ``split``, the input in FP32, one such plane."""

    split: bool = True
    tap_pairs: bool = False
    filters: int = BLOCK_M

    kind: ClassVar[str] = "tf32x3_split_ahead"
    source: ClassVar[str] = "wgmma_tf32x3"
    arch: ClassVar[str | None] = "sm_90a"

    def kernel_name(self, problem: ConvProblem) -> str:
        return "split_ahead_operands_tf32x3"

    def options(self, problem: ConvProblem) -> tuple[str, ...]:
        fp32 = () if self.split else ("-DCONVKIT_WS_INPUTS_FP32=1",)
        return (*filter_macros(problem), *fp32, *tap_pairs_macro(self.tap_pairs), *filters_macro(self.filters))

    def input_blocks(self, problem: ConvProblem) -> int:
        """The blocks that split the input: a tile of 32 channels by 32 pixels each."""
        return math.ceil(problem.h * problem.w / 32) * math.ceil(problem.c / 32) * problem.n

    def weight_blocks(self, problem: ConvProblem) -> int:
        """The blocks that split the weights: a line of 4 floats of each plane a thread, at most as many blocks as
        :class:`SplitTiledLaunch` (each thread then takes every so many lines)."""
        lines = tiled_elements(problem, True, self.filters, self.tap_pairs) // 8
        return min(math.ceil(lines / math.prod(self.block(problem))), SplitTiledLaunch.max_blocks)

    def grid(self, problem: ConvProblem) -> tuple[int, ...]:
        return (self.input_blocks(problem) + self.weight_blocks(problem),)

    def block(self, problem: ConvProblem) -> tuple[int, ...]:
        return (32, 8)

    def shared_bytes(self, problem: ConvProblem) -> int:
        return 0

    def can_implement(self, problem: ConvProblem) -> None:
        """Raise ValueError naming the input where its tiles pass the grid's 2^31 - 1 blocks, or its planes the
        kernels' 32-bit indices."""
        if self.grid(problem)[0] > 2**31 - 1:
            raise ValueError(f"x's {self.input_blocks(problem)} tiles of 32 channels by 32 pixels pass the split's "
                             f"grid (2^31 - 1 blocks)")  # fmt: skip
        planes = 2 if self.split else 1
        if (size := planes * input_plane_elements(problem, self.tap_pairs)) > MAX_OPERAND_ELEMENTS:
            raise ValueError(f"the input channels last holds {size} elements (channels rounded up to 32, or "
                             f"{PAIRED_CHANNELS} in tap pairs; {planes} planes): past 2^31")  # fmt: skip
