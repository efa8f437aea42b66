"""Every Chang 2022 kernel once on edge shapes, checked against float64 (compute-sanitizer's driver, GPU).

Widths no strip divides, maps smaller than the halo, pieces along both axes, channels no segment
divides, channel splits (one launch: the first split zeroes the tile, all add), 4-byte and 16-byte copies.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from convkit.core import reference
from convkit.core.gpu import shared_memory_limits
from convkit.core.problem import ConvProblem
from convkit.core.reference import DIRECT_TOLERANCE
from convkit.families.chang2022.launch import conv2d_multi, conv2d_single
from convkit.families.chang2022.multi import BroadcastMultiLaunch, PointwiseMultiLaunch, TiledMultiLaunch
from convkit.families.chang2022.single import DirectSingleLaunch, StagedSingleLaunch


def _inputs(c: int, h: int, w: int, m: int, k: int) -> tuple[Any, Any, Any]:
    """Random (1, C, H, W) input and (M, C, K, K) filters on the GPU, and their "same" float64 reference."""
    import cupy

    rng = np.random.default_rng()
    x = cupy.asarray(rng.standard_normal((1, c, h, w), dtype=np.float32))
    f = cupy.asarray(rng.standard_normal((m, c, k, k), dtype=np.float32))
    return x, f, reference.conv2d(x.get(), f.get(), pad=(k - 1) // 2)


def _check(y: Any, ref: Any, what: Any) -> None:
    err = reference.relative_error(y.get(), ref)
    assert err < DIRECT_TOLERANCE, (what, err)


def _fits(config: Any, problem: ConvProblem) -> bool:
    """Whether a fixed multi-channel launch (sized for the H100) fits this GPU's shared memory per block; one
    that does not is left out here (the launcher refuses it by name: tested on CPU)."""
    need, limit = config.shared_bytes(problem), shared_memory_limits()[0]
    if need > limit:
        print(f"  left out: {config} needs {need} bytes of shared memory; this GPU allows {limit}")
    return need <= limit


def edge_check() -> None:
    """Launch the single-channel plans, the unstaged launch, the stride-fixed tiles, the GEMM tile and the
    filter-per-thread blocks on shapes none of their blocks divides; assert each output against float64."""
    import cupy

    for h, w, m, k in [(7, 5, 9, 5), (13, 29, 11, 3), (3, 8, 2, 1), (5, 7, 9, 1)]:
        x, f, ref = _inputs(1, h, w, m, k)
        plans: list[Any] = [StagedSingleLaunch("both", 3, 2, 5, 6, 2, 4, 128),
                            StagedSingleLaunch("maps", 1, 5, 1, 10**6, 1, 2, 512)]  # fmt: skip
        # the unstaged launch: partial quads, filter groups and blocks, maps smaller than the halo
        plans += [DirectSingleLaunch(4, 64), DirectSingleLaunch(1, 32)]
        if k > 1:  # weights in shared memory (a block-wide copy and barrier), 2 and 4 rows per thread
            plans += [DirectSingleLaunch(4, 64, rows=2, shared_weights=True),
                      DirectSingleLaunch(3, 32, rows=4, shared_weights=True)]  # fmt: skip
        for plan in plans:
            _check(conv2d_single(x, f, launch=plan), ref, (h, w, m, k, plan))
    for c, h, w, m, k in [(13, 9, 11, 20, 3), (37, 16, 24, 70, 5), (3, 5, 8, 9, 1)]:
        x, f, ref = _inputs(c, h, w, m, k)
        for tiled in (TiledMultiLaunch(bm=16, tile_h=1, tile_w=32, px=1),
                      TiledMultiLaunch(bm=40, tile_h=2, tile_w=16, px=1, ck=16),
                      TiledMultiLaunch(bm=16, tile_h=32, tile_w=32, rpt=2, px=4, rows16=True, split=3),
                      TiledMultiLaunch(bm=32, tile_h=8, tile_w=8, px=4, rows16=True),
                      TiledMultiLaunch(bm=8, tile_h=8, tile_w=16, px=4, ck=4, rows16=True, split=4)):  # fmt: skip
            if _fits(tiled, ConvProblem.same(1, c, h, w, m, k)):
                _check(conv2d_multi(x, f, launch=tiled), ref, (c, h, w, m, k, tiled))
    # The GEMM tile at 1x1: 16-byte and (odd pixel count) 4-byte copies, partial segments, a split.
    for c, h, w, m in [(3, 5, 8, 9), (37, 5, 7, 70)]:
        x, f, ref = _inputs(c, h, w, m, 1)
        for pointwise in (PointwiseMultiLaunch(64, 64, 8, 8, 8, split=2),
                          PointwiseMultiLaunch(16, 32, 4, 4, 4, split=3)):  # fmt: skip
            if _fits(pointwise, ConvProblem.same(1, c, h, w, m, 1)):
                _check(conv2d_multi(x, f, launch=pointwise), ref, (c, h, w, m, pointwise))
    # A filter per thread (3x3, 5x5): tiles the map does not divide, 4-byte weight copies (C % 4 != 0),
    # partial segments, several tiles per block, a split; a map in one tile (the sums stored as one run); the
    # short 4x7, 2x7 and 1x7 tiles.
    for c, h, w, m, k in [(6, 13, 11, 40, 3), (8, 9, 17, 33, 5), (8, 7, 7, 70, 5)]:
        x, f, ref = _inputs(c, h, w, m, k)
        for broadcast in (BroadcastMultiLaunch(32, 1, 7, 7, 4), BroadcastMultiLaunch(32, 2, 7, 7, 4, split=2),
                          BroadcastMultiLaunch(64, 2, 7, 7, 8, split=3),
                          BroadcastMultiLaunch(64, 2, 4, 7, 4, split=2), BroadcastMultiLaunch(64, 1, 2, 7, 4, split=3),
                          BroadcastMultiLaunch(32, 1, 1, 7, 4)):  # fmt: skip
            if _fits(broadcast, ConvProblem.same(1, c, h, w, m, k)):
                _check(conv2d_multi(x, f, launch=broadcast), ref, (c, h, w, m, broadcast))
    cupy.cuda.runtime.deviceSynchronize()
