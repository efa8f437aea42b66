"""Launchers for ``kernels/cuconv.cu``: the cuConv paper's two-stage design and the fused variants past it.

Variants, selectable by name (the chapter's ladder):

- ``paper``: ``scalar_prods`` (one block per filter row, staged in shared memory) then
  ``sum_planes`` over the R*S temporary planes; 1x1 filters write the output in stage 1.
- ``fused``: ``fused_tile``, each thread accumulating ``filters_per_thread`` filters in registers,
  one kernel, no temporary planes (the paper's thread-level work fusion, section 6).
- ``split``: ``fused`` with the channel reduction split over ``splits`` blocks whose partial
  planes ``sum_planes`` adds (block-level parallelism for small batch-1 layers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from convkit.arrays import check_conv_args, check_output
from convkit.compile import load_kernel
from convkit.problem import ConvProblem

VARIANTS = ("paper", "fused", "split")
#: Shared memory a block of fused_tile stages at most: the 48 KiB every GPU gives without opt-in.
WEIGHT_TILE_BYTES = 48 * 1024
#: Blocks to aim for when choosing `splits`: 4 per SM keeps every SM of an H100 (132) busy.
BLOCKS_PER_SM_TARGET = 4
#: Fewest channels one split reduces, so partial planes do not cost more than they save.
MIN_CHANNELS_PER_SPLIT = 16
FILTERS_PER_THREAD = (1, 2, 4, 8)


@dataclass(frozen=True)
class Knobs:
    """Launch knobs of one variant; ``splits`` is 1 except for ``split``."""

    threads: int
    filters_per_thread: int = 1
    splits: int = 1

    def as_params(self) -> dict[str, int]:
        return {"threads": self.threads, "filters_per_thread": self.filters_per_thread, "splits": self.splits}


def _warp_round(n: int, limit: int = 256) -> int:
    return max(32, min(limit, 32 * math.ceil(n / 32)))


def default_knobs(problem: ConvProblem, variant: str, sm_count: int = 132) -> Knobs:
    """The knobs a variant runs with when none are given (a heuristic; the tuner may do better).

    Threads cover the output positions of one image plane (rounded to warps, at most 256) so
    small planes do not leave threads idle; ``split`` divides the channels until the grid has
    about ``BLOCKS_PER_SM_TARGET`` blocks per SM, keeping ``MIN_CHANNELS_PER_SPLIT`` per split.
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    positions = problem.n * problem.out_h * problem.out_w
    threads = _warp_round(positions)
    if variant == "paper":
        return Knobs(threads=threads)
    mt = 4 if problem.m >= 4 else 1
    if variant == "fused":
        return Knobs(threads=threads, filters_per_thread=mt)
    blocks = math.ceil(positions / threads) * math.ceil(problem.m / mt)
    wanted = math.ceil(BLOCKS_PER_SM_TARGET * sm_count / blocks)
    most = max(1, problem.c // MIN_CHANNELS_PER_SPLIT)
    splits = 1 << max(0, math.ceil(math.log2(max(1, min(wanted, most)))))
    return Knobs(threads=threads, filters_per_thread=mt, splits=min(splits, most))


def workspace_elements(problem: ConvProblem, variant: str, knobs: Knobs) -> int:
    """float32 elements of temporary storage a launch needs (0 when it writes the output directly)."""
    out = problem.n * problem.m * problem.out_h * problem.out_w
    if variant == "paper":
        return 0 if problem.r * problem.s == 1 else problem.r * problem.s * out
    return 0 if knobs.splits == 1 else knobs.splits * out


def _check_knobs(problem: ConvProblem, variant: str, knobs: Knobs) -> None:
    if not 1 <= knobs.threads <= 1024:
        raise ValueError(f"threads must be in 1..1024, got {knobs.threads}")
    if knobs.filters_per_thread not in FILTERS_PER_THREAD:
        raise ValueError(f"filters_per_thread must be one of {FILTERS_PER_THREAD}, got {knobs.filters_per_thread}")
    if not 1 <= knobs.splits <= problem.c:
        raise ValueError(f"splits must be in 1..C={problem.c}, got {knobs.splits}")
    if variant == "paper" and problem.m * problem.r * problem.s > 65535:
        raise ValueError("the paper's grid has one block row per filter row: M*R*S must be <= 65535")


def conv2d_cuconv(
    x: Any,
    w: Any,
    *,
    pad: int = 0,
    stride: int = 1,
    variant: str = "split",
    threads: int | None = None,
    filters_per_thread: int | None = None,
    splits: int | None = None,
    out: Any = None,
) -> Any:
    """cuConv convolution (cross-correlation) of NCHW ``x`` with MCRS ``w``.

    Args:
        x: float32 ``cupy.ndarray`` (N, C, H, W), C-contiguous.
        w: float32 ``cupy.ndarray`` (M, C, R, S), C-contiguous.
        pad: zero padding on every side.
        stride: window step in both directions.
        variant: ``"paper"``, ``"fused"`` or ``"split"`` (see the module doc).
        threads: threads per block; default from :func:`default_knobs`.
        filters_per_thread: filters each thread accumulates (fused, split): 1, 2, 4 or 8.
        splits: channel splits (split only).
        out: optional float32 output (N, M, P, Q).

    Returns:
        the output ``cupy.ndarray`` (N, M, P, Q), enqueued on the current stream.

    Example:
        >>> y = conv2d_cuconv(x, w, pad=1, variant="paper")  # doctest: +SKIP
    """
    problem = check_conv_args(x, w, pad=pad, stride=stride)
    import cupy

    sm_count = cupy.cuda.Device().attributes["MultiProcessorCount"]
    base = default_knobs(problem, variant, sm_count)
    knobs = Knobs(
        threads=threads or base.threads,
        filters_per_thread=filters_per_thread or base.filters_per_thread,
        splits=splits or base.splits,
    )
    if variant != "split" and knobs.splits != 1:
        raise ValueError(f"splits applies to variant 'split' only, got splits={knobs.splits} for {variant!r}")
    _check_knobs(problem, variant, knobs)
    if out is None:
        out = cupy.empty(problem.output_shape, dtype=cupy.float32)
    else:
        check_output(out, problem)
    temp_size = workspace_elements(problem, variant, knobs)
    temp = cupy.empty(temp_size, dtype=cupy.float32) if temp_size else out
    p = problem
    dims = tuple(cupy.int32(v) for v in (p.n, p.c, p.h, p.w, p.m, p.r, p.s, p.out_h, p.out_w, p.pad, p.stride))
    positions = p.n * p.out_h * p.out_w
    if variant == "paper":
        kernel = load_kernel("cuconv", "scalar_prods")
        grid = (math.ceil(positions / knobs.threads), p.m * p.r * p.s)
        # whole 16-byte vectors: with exactly 4*C bytes, memcheck flagged shared reads past the row
        # (C = 3, compute-sanitizer on the H100; cause in the SASS not established)
        kernel(grid, (knobs.threads,), (x, w, temp, *dims), shared_mem=16 * math.ceil(p.c / 4))
        planes = p.r * p.s
    else:
        mt = knobs.filters_per_thread
        per_split = math.ceil(p.c / knobs.splits)
        tile = max(1, min(per_split, WEIGHT_TILE_BYTES // (4 * mt * p.r * p.s)))
        kernel = load_kernel("cuconv", "fused_tile", options=(f"-DCONVKIT_MT={mt}",))
        grid = (math.ceil(positions / knobs.threads), math.ceil(p.m / mt), math.ceil(p.c / per_split))
        args = (x, w, temp, *dims, cupy.int32(per_split), cupy.int32(tile))
        kernel(grid, (knobs.threads,), args, shared_mem=4 * mt * tile * p.r * p.s)
        planes = grid[2]
    if temp is not out:
        _sum_planes(temp, out, planes)
    return out


def _sum_planes(src: Any, out: Any, planes: int) -> None:
    """out = the sum of ``planes`` consecutive out-sized planes of ``src`` (stage 2)."""
    import cupy

    threads = 256
    blocks = min(math.ceil(out.size / threads), 65535)
    load_kernel("cuconv", "sum_planes")((blocks,), (threads,), (src, out, cupy.int32(planes), cupy.int64(out.size)))
