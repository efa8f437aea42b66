"""Launchers for ``kernels/cuconv.cu``: the cuConv paper's two-stage design and the fused variants past it.

Variants, selectable by name (the chapter's ladder):

- ``paper``: ``scalar_prods`` (one block per filter row, staged in shared memory) then
  ``sum_planes`` over the R*S temporary planes; 1x1 filters write the output in stage 1.
- ``fused``: ``fused_tile``, each thread accumulating ``filters_per_thread`` filters in registers,
  one kernel, no temporary planes (the paper's thread-level work fusion, section 6).
- ``split``: ``fused`` with the channel reduction split over ``splits`` blocks whose partial
  planes ``sum_planes`` adds (block-level parallelism for small batch-1 layers).
- ``tiled``: ``tiled_gemm``, block-level fusion carried through: a ``tile`` of BM filters x BN
  output positions per block, an 8x8 or 4x4 register tile per thread, the reduction over
  C*R*S split ``splits`` ways when the tiles alone cannot fill the GPU.

:func:`default_knobs` is each variant's heuristic, a :class:`CuconvLaunch`; :func:`candidates` lists the
launches a tuning run (:mod:`convkit.study.tuning`) measures, whose fastest per problem the sweep then uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from convkit.core import gpu
from convkit.core.problem import ConvProblem
from convkit.cuda.arrays import check_conv_args, output_for
from convkit.cuda.launch import ElementwiseLaunch, KernelLaunch
from convkit.cuda.launch import launch as launch_kernel
from convkit.cuda.operands import epilogue_bias, float32_regions, regions_bytes

VARIANTS = ("paper", "fused", "split", "tiled")
#: Shared memory a block of fused_tile stages at most: the 48 KiB every GPU gives without opt-in.
WEIGHT_TILE_BYTES = 48 * 1024
#: Blocks to aim for when choosing `splits`: 4 per SM keeps every SM of an H100 (132) busy.
BLOCKS_PER_SM_TARGET = 4
#: Fewest channels one split reduces, so partial planes do not cost more than they save.
MIN_CHANNELS_PER_SPLIT = 16
FILTERS_PER_THREAD = (1, 2, 4, 8)
#: tiled_gemm's block tiles "BMxBN" (filters x positions) -> thread tile (TM, TN) and reduction slice
#: BK, largest first; threads per block = (BM / TM) * (BN / TN). 8x8 thread tiles for the big blocks
#: (64 FMAs per four float4 shared-memory reads), 4x4 where a block must stay small for small layers.
#: BK = 16 halves the dependent slices of short reductions; 128x128 keeps 8, as 16 spills there
#: (ptxas, sm_90, at the two-blocks-per-SM register cap).
TILES: dict[str, tuple[int, int, int]] = {
    "128x128": (8, 8, 8), "128x64": (8, 8, 16), "64x128": (8, 8, 16), "64x64": (4, 4, 16),
    "64x32": (4, 4, 16), "32x64": (4, 4, 16), "32x32": (4, 4, 16), "16x64": (4, 4, 16),
}  # fmt: skip
#: Split points of a tiled reduction are multiples of this (the largest BK), so every tile's
#: slices line up with them.
SLICE_K = 16
#: Fewest reduction elements (of C*R*S) one tiled split takes: below this, partial planes cost more
#: than the parallelism they add.
MIN_K_PER_SPLIT = 32
#: Above this many FLOPs a tuning run measures only the heuristic knobs of paper, fused and split.
SMALL_CANDIDATE_SET_FLOPS = 50e9


@dataclass(frozen=True)
class CuconvLaunch(KernelLaunch):
    """How one variant's main kernel is launched (a :class:`convkit.cuda.launch.Launch`).

    ``splits`` is 1 except for ``split`` and ``tiled``; ``tile`` ("BMxBN") is ``tiled``'s alone, and
    its threads follow from it. Where the main kernel leaves partial planes (:meth:`planes` above 1),
    ``sum_planes`` adds them as a second launch, :class:`CuconvSumLaunch`. The variant is not a knob:
    :meth:`to_params` leaves it out, as the results rows name it in their own column.
    """

    variant: str
    threads: int
    filters_per_thread: int = 1
    splits: int = 1
    tile: str | None = None

    kind: ClassVar[str] = "cuconv"
    knobs: ClassVar[tuple[str, ...]] = ("threads", "filters_per_thread", "splits", "tile")
    source: ClassVar[str] = "cuconv"

    @classmethod
    def tiled(cls, tile: str, splits: int = 1) -> CuconvLaunch:
        """``tiled``'s launch on ``tile`` (one of :data:`TILES`; its threads follow from it)."""
        return cls("tiled", tile_shape(tile)[4], splits=splits, tile=tile)

    def kernel_name(self, problem: ConvProblem) -> str:
        return {"paper": "scalar_prods", "tiled": "tiled_gemm"}.get(self.variant, "fused_tile")

    def options(self, problem: ConvProblem) -> tuple[str, ...]:
        """Compile-time knobs: the tile and filter size of ``tiled_gemm``, the filters per thread of ``fused_tile``."""
        if self.variant == "tiled":
            bm, bn, tm, tn, _ = tile_shape(self.tile)
            macros = {"BM": bm, "BN": bn, "TM": tm, "TN": tn, "BK": TILES[self.tile][2], "R": problem.r, "S": problem.s}
            return tuple(f"-DCONVKIT_{k}={v}" for k, v in macros.items())
        if self.variant == "paper":
            return ()
        return (f"-DCONVKIT_MT={self.filters_per_thread}",)

    def per_split(self, problem: ConvProblem) -> int:
        """What one split reduces: elements of C*R*S (``tiled``, whole slices) or channels (the others)."""
        if self.variant == "tiled":
            return k_per_split(problem, self.splits)
        return math.ceil(problem.c / self.splits)

    def channel_tile(self, problem: ConvProblem) -> int:
        """Channels ``fused_tile`` stages in shared memory at a time: as many as fit :data:`WEIGHT_TILE_BYTES`."""
        most = WEIGHT_TILE_BYTES // (4 * self.filters_per_thread * problem.r * problem.s)
        return max(1, min(self.per_split(problem), most))

    def grid(self, problem: ConvProblem) -> tuple[int, ...]:
        p = problem
        positions = p.n * p.out_h * p.out_w
        if self.variant == "paper":  # one block row per filter row
            return math.ceil(positions / self.threads), p.m * p.r * p.s
        if self.variant == "tiled":
            bm, bn, *_ = tile_shape(self.tile)
            return math.ceil(positions / bn), math.ceil(p.m / bm), math.ceil(p.c * p.r * p.s / self.per_split(p))
        mt = self.filters_per_thread
        return math.ceil(positions / self.threads), math.ceil(p.m / mt), math.ceil(p.c / self.per_split(p))

    def block(self, problem: ConvProblem) -> tuple[int, ...]:
        return (self.threads,)

    def shared_bytes(self, problem: ConvProblem) -> int:
        if self.variant == "tiled":
            return 0  # static shared memory
        if self.variant == "paper":
            # whole 16-byte vectors: with exactly 4*C bytes, memcheck flagged shared reads past the row
            # (C = 3, compute-sanitizer on the H100; cause in the SASS not established)
            return 16 * math.ceil(problem.c / 4)
        return 4 * self.filters_per_thread * self.channel_tile(problem) * problem.r * problem.s

    def planes(self, problem: ConvProblem) -> int:
        """Partial output planes the main kernel writes (1: it writes the output itself)."""
        if self.variant == "paper":
            return problem.r * problem.s
        return self.grid(problem)[2]

    def workspace_elements(self, problem: ConvProblem) -> int:
        """float32 elements of temporary storage the launch needs (0 when it writes the output directly)."""
        planes = self.planes(problem)
        return 0 if planes == 1 else planes * problem.n * problem.m * problem.out_h * problem.out_w

    def workspace_bytes(self, problem: ConvProblem) -> int:
        """The partial planes, float32."""
        elements = self.workspace_elements(problem)
        return regions_bytes([elements]) if elements else 0

    def adds_bias(self, problem: ConvProblem) -> bool:
        """Partial planes: their sum (stage 2) adds it."""
        return self.planes(problem) > 1

    def can_implement(self, problem: ConvProblem) -> None:
        """Raise ValueError naming the knob the kernels cannot run on ``problem``."""
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {self.variant!r}")
        if self.variant not in ("split", "tiled") and self.splits != 1:
            raise ValueError(
                f"splits applies to variants 'split' and 'tiled' only, got splits={self.splits} for {self.variant!r}"
            )
        if self.variant == "tiled":
            tile_threads = tile_shape(self.tile)[4]
            if self.threads != tile_threads:
                raise ValueError(f"threads={self.threads} contradicts tile {self.tile!r}, which runs {tile_threads} "
                                 "threads")  # fmt: skip
        elif self.tile is not None:
            raise ValueError(f"tile applies to variant 'tiled' only, got tile={self.tile!r} for {self.variant!r}")
        if not 1 <= self.threads <= 1024:
            raise ValueError(f"threads must be in 1..1024, got {self.threads}")
        if self.filters_per_thread not in FILTERS_PER_THREAD:
            raise ValueError(f"filters_per_thread must be one of {FILTERS_PER_THREAD}, got {self.filters_per_thread}")
        most = problem.c * problem.r * problem.s if self.variant == "tiled" else problem.c
        if not 1 <= self.splits <= most:
            raise ValueError(f"splits must be in 1..{most} for {self.variant!r}, got {self.splits}")
        if self.variant == "paper" and problem.m * problem.r * problem.s > 65535:
            raise ValueError("the paper's grid has one block row per filter row: M*R*S must be <= 65535")


@dataclass(frozen=True)
class CuconvSumLaunch(ElementwiseLaunch):
    """Stage 2, ``sum_planes``: the output as the sum of the partial planes the main kernel wrote."""

    kind: ClassVar[str] = "cuconv_sum"
    source: ClassVar[str] = "cuconv"
    kernel: ClassVar[str] = "sum_planes"
    max_blocks: ClassVar[int] = 65535  # grid-stride beyond


def _warp_round(n: int, limit: int = 256) -> int:
    return max(32, min(limit, 32 * math.ceil(n / 32)))


def tile_shape(tile: str) -> tuple[int, int, int, int, int]:
    """(BM, BN, TM, TN, threads) of a tiled_gemm tile name such as ``"64x128"``."""
    if tile not in TILES:
        raise ValueError(f"tile must be one of {tuple(TILES)}, got {tile!r}")
    bm, bn = (int(v) for v in tile.split("x"))
    tm, tn, _ = TILES[tile]
    return bm, bn, tm, tn, (bm // tm) * (bn // tn)


def tile_blocks(problem: ConvProblem, tile: str) -> int:
    """Blocks of one reduction split: position tiles x filter tiles."""
    bm, bn, *_ = tile_shape(tile)
    return math.ceil(problem.n * problem.out_h * problem.out_w / bn) * math.ceil(problem.m / bm)


def tiled_splits(problem: ConvProblem, tile: str, target_blocks: int) -> int:
    """Reduction splits that bring the tile's grid to about ``target_blocks``, each split at least
    ``MIN_K_PER_SPLIT`` deep and a multiple of ``SLICE_K`` (so splits land on slice boundaries)."""
    k = problem.c * problem.r * problem.s
    wanted = math.ceil(target_blocks / tile_blocks(problem, tile))
    splits = max(1, min(wanted, k // MIN_K_PER_SPLIT))
    return math.ceil(k / k_per_split(problem, splits))


def k_per_split(problem: ConvProblem, splits: int) -> int:
    """Reduction elements per tiled split: C*R*S / splits rounded up to whole slices."""
    k = problem.c * problem.r * problem.s
    return SLICE_K * math.ceil(math.ceil(k / splits) / SLICE_K)


def default_knobs(problem: ConvProblem, variant: str, sm_count: int = 132) -> CuconvLaunch:
    """The knobs a variant runs with when none are given (a heuristic; a tuning run may find better).

    Threads cover the output positions of one image plane (rounded to warps, at most 256) so
    small planes do not leave threads idle; ``split`` divides the channels until the grid has
    about ``BLOCKS_PER_SM_TARGET`` blocks per SM, keeping ``MIN_CHANNELS_PER_SPLIT`` per split.
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    positions = problem.n * problem.out_h * problem.out_w
    threads = _warp_round(positions)
    if variant == "paper":
        return CuconvLaunch(variant, threads=threads)
    if variant == "tiled":
        # the largest tile that fills one wave by itself; else a small tile and a split reduction
        for tile in TILES:
            if tile_blocks(problem, tile) >= sm_count:
                return CuconvLaunch(variant, threads=tile_shape(tile)[4], tile=tile)
        tile = "16x64" if problem.m <= 16 else "32x32"
        return CuconvLaunch(
            variant, threads=tile_shape(tile)[4], splits=tiled_splits(problem, tile, 2 * sm_count), tile=tile
        )
    mt = 4 if problem.m >= 4 else 1
    if variant == "fused":
        return CuconvLaunch(variant, threads=threads, filters_per_thread=mt)
    blocks = math.ceil(positions / threads) * math.ceil(problem.m / mt)
    wanted = math.ceil(BLOCKS_PER_SM_TARGET * sm_count / blocks)
    most = max(1, problem.c // MIN_CHANNELS_PER_SPLIT)
    splits = 1 << max(0, math.ceil(math.log2(max(1, min(wanted, most)))))
    return CuconvLaunch(variant, threads=threads, filters_per_thread=mt, splits=min(splits, most))


def candidates(problem: ConvProblem, variant: str, sm_count: int = 132) -> list[CuconvLaunch]:
    """The launches a tuning run measures for ``variant`` on ``problem``, the heuristic's first.

    Layers over ``SMALL_CANDIDATE_SET_FLOPS`` get the heuristic alone for every variant but tiled.
    ``paper``: threads per block 64..256. ``fused``: 2, 4 or 8 filters per thread. ``split``: the
    heuristic's splits, half and twice that. ``tiled``: every tile that is not mostly padding
    (BM <= 2M, BN <= 2 N*P*Q), unsplit where it gives two waves, else split to one, two and four
    waves of blocks; for grids of many waves only the three largest tiles.
    """
    base = default_knobs(problem, variant, sm_count)
    out = [base]
    positions = problem.n * problem.out_h * problem.out_w
    if variant != "tiled" and problem.flops > SMALL_CANDIDATE_SET_FLOPS:
        pass  # the ladder's lower rungs keep their heuristic on large layers: tuning them costs minutes
    elif variant == "paper":
        out += [CuconvLaunch(variant, threads=t) for t in (64, 128, 256) if t <= _warp_round(positions, 1024)]
    elif variant == "fused":
        out += [
            CuconvLaunch(variant, base.threads, filters_per_thread=mt) for mt in (2, 4, 8) if mt <= max(1, problem.m)
        ]
    elif variant == "split":
        for splits in (base.splits // 2, base.splits * 2):
            if 1 <= splits <= problem.c:
                out.append(CuconvLaunch(variant, base.threads, base.filters_per_thread, splits))
    else:
        many_waves = tile_blocks(problem, "128x128") >= 8 * sm_count
        for tile in list(TILES)[: 3 if many_waves else None]:
            bm, bn, *_, threads = tile_shape(tile)
            if (bm > 16 and bm > 2 * problem.m) or (bn > 32 and bn > 2 * positions):
                continue
            if tile_blocks(problem, tile) >= 2 * sm_count:
                out.append(CuconvLaunch(variant, threads, tile=tile))
                continue
            for waves in (1, 2, 4):
                out.append(
                    CuconvLaunch(variant, threads, splits=tiled_splits(problem, tile, waves * sm_count), tile=tile)
                )
    return list(dict.fromkeys(out))  # the heuristic's first, no repeats


def kernel_args(spec: CuconvLaunch, p: ConvProblem) -> tuple[int, ...]:
    """The main kernel's int arguments after its three pointers: the problem's sizes (the filter's too, but for
    ``tiled``, where they are macros), padding and stride, then what a split reduces (and for ``fused_tile`` the
    channels it stages at a time)."""
    if spec.variant == "tiled":
        return (p.n, p.c, p.h, p.w, p.m, p.out_h, p.out_w, p.pad, p.stride, spec.per_split(p))
    dims = (p.n, p.c, p.h, p.w, p.m, p.r, p.s, p.out_h, p.out_w, p.pad, p.stride)
    return dims if spec.variant == "paper" else (*dims, spec.per_split(p), spec.channel_tile(p))


def conv2d_cuconv(
    x: Any,
    w: Any,
    *,
    pad: int = 0,
    stride: int = 1,
    variant: str = "split",
    launch: CuconvLaunch | None = None,
    out: Any = None,
    bias: Any = None,
    workspace: Any = None,
) -> Any:
    """cuConv convolution (cross-correlation) of NCHW ``x`` with MCRS ``w``.

    Args:
        x, w, pad, stride, out: as for :func:`convkit.families.baseline.launch.conv2d_direct`.
        variant: ``"paper"``, ``"fused"``, ``"split"`` or ``"tiled"`` (see the module doc), run at its heuristic
            launch (:func:`default_knobs`) where no ``launch`` is given.
        launch: the launch, its variant included (:meth:`CuconvLaunch.tiled` for a tile); ``variant`` is then
            not read.
        bias, workspace: as :class:`convkit.cuda.operands.ConvArgs` gives them (a bias only where the launch writes
            partial planes: their sum adds it).

    Returns:
        the output ``cupy.ndarray`` (N, M, P, Q), enqueued on the current stream.

    Example:
        >>> y = conv2d_cuconv(x, w, pad=1, launch=CuconvLaunch("fused", 128, filters_per_thread=4))  # doctest: +SKIP
    """
    problem = check_conv_args(x, w, pad=pad, stride=stride)
    import cupy

    if launch is None and variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    spec = launch if launch is not None else default_knobs(problem, variant, gpu.sm_count())
    if not isinstance(spec, CuconvLaunch):
        raise TypeError(f"launch must be a CuconvLaunch, got {type(spec).__name__}")
    spec.can_implement(problem)  # before anything is allocated or launched
    epilogue = epilogue_bias(bias, spec.adds_bias(problem), f"the {spec.kind} launch {spec.to_params()}")
    out = output_for(out, problem)
    planes = spec.planes(problem)
    temp = float32_regions(workspace, [spec.workspace_elements(problem)])[0] if planes > 1 else out
    p = problem
    launch_kernel(spec, p, (x, w, temp, *(cupy.int32(v) for v in kernel_args(spec, p))))
    if planes > 1:
        sums = (temp, out, cupy.int32(planes), cupy.int64(out.size), epilogue, cupy.int32(p.m),
                cupy.int64(p.out_h * p.out_w))  # fmt: skip
        launch_kernel(CuconvSumLaunch(), p, sums)
    return out
