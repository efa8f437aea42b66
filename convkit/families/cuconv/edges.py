"""Every cuConv kernel on edge shapes, each output checked against float64 (compute-sanitizer's driver).

Edge shapes: sizes that are no multiple of any block, C = 1, M = 1, an input smaller than the filter
with padding, stride 2; launches whose blocks straddle the end, every filters-per-thread width, channel
splits, the largest tile, and a tiled reduction split to single elements.
"""

from __future__ import annotations

import numpy as np

from convkit.core import reference
from convkit.core.reference import DIRECT_TOLERANCE
from convkit.families.cuconv.launch import CuconvLaunch, conv2d_cuconv

EDGE_SHAPES = [  # (N, C, H, W, M, R, S, pad, stride)
    (1, 1, 3, 2, 1, 5, 5, 2, 1),
    (2, 3, 17, 13, 5, 3, 3, 1, 2),
    (1, 5, 33, 31, 3, 7, 7, 3, 1),
]


def edge_check() -> None:
    """Launch every variant on :data:`EDGE_SHAPES`; raises AssertionError naming the shape that is wrong."""
    import cupy

    for n, c, h, w, m, r, s, pad, stride in EDGE_SHAPES:
        rng = np.random.default_rng()
        x = cupy.asarray(rng.standard_normal((n, c, h, w), dtype=np.float32))
        f = cupy.asarray(rng.standard_normal((m, c, r, s), dtype=np.float32))
        ref = reference.conv2d(x.get(), f.get(), pad=pad, stride=stride)
        outputs = [
            # 96 threads a block: blocks straddle the end
            conv2d_cuconv(x, f, pad=pad, stride=stride, launch=CuconvLaunch("paper", 96)),
            conv2d_cuconv(x, f, pad=pad, stride=stride, launch=CuconvLaunch("fused", 96, filters_per_thread=8)),
            conv2d_cuconv(x, f, pad=pad, stride=stride, launch=CuconvLaunch("split", 64, 2, splits=c)),
            conv2d_cuconv(x, f, pad=pad, stride=stride, launch=CuconvLaunch.tiled("128x128")),
            conv2d_cuconv(x, f, pad=pad, stride=stride, launch=CuconvLaunch.tiled("16x64", splits=2)),
            conv2d_cuconv(x, f, pad=pad, stride=stride, launch=CuconvLaunch.tiled("64x32", splits=c * r * s)),
        ]
        for y in outputs:
            err = reference.relative_error(y.get(), ref)
            assert err < DIRECT_TOLERANCE, (n, c, h, w, m, r, s, pad, stride, err)
    cupy.cuda.runtime.deviceSynchronize()
