"""The direct kernel on edge shapes, each output checked against float64 (compute-sanitizer's driver).

Edge shapes: sizes that are no multiple of any block, C = 1, M = 1, an input smaller than the filter
with padding, stride 2; 96 threads a block, so blocks straddle the end. The timing harness's
stream-holding kernel runs too, around a direct launch.
"""

from __future__ import annotations

import numpy as np

from convkit.core import reference
from convkit.core.reference import DIRECT_TOLERANCE
from convkit.cuda.timing import benchmark
from convkit.families.baseline.launch import DirectLaunch, conv2d_direct

EDGE_SHAPES = [  # (N, C, H, W, M, R, S, pad, stride)
    (1, 1, 3, 2, 1, 5, 5, 2, 1),
    (2, 3, 17, 13, 5, 3, 3, 1, 2),
    (1, 5, 33, 31, 3, 7, 7, 3, 1),
]


def edge_check() -> None:
    """Launch the direct kernel on :data:`EDGE_SHAPES`; raises AssertionError naming the shape that is wrong."""
    import cupy

    rng = np.random.default_rng()
    for n, c, h, w, m, r, s, pad, stride in EDGE_SHAPES:
        x = cupy.asarray(rng.standard_normal((n, c, h, w), dtype=np.float32))
        f = cupy.asarray(rng.standard_normal((m, c, r, s), dtype=np.float32))
        ref = reference.conv2d(x.get(), f.get(), pad=pad, stride=stride)
        err = reference.relative_error(conv2d_direct(x, f, pad=pad, stride=stride, launch=DirectLaunch(96)).get(), ref)
        assert err < DIRECT_TOLERANCE, (n, c, h, w, m, r, s, pad, stride, err)
    benchmark(lambda: conv2d_direct(x, f, pad=pad, stride=stride), warmup=1, min_reps=2, max_reps=2)
    cupy.cuda.runtime.deviceSynchronize()
