"""Every Lu 2020 kernel on edge shapes, each output checked against float64 (compute-sanitizer's driver).

Single channel: widths below a warp and no warp divides, an image smaller than the filter, several
images and filters, partial padding, each kernel at its untuned launch and its largest candidate, and
lu_wide (past the paper) at its default launch and at one row and one warp. Multi
channel: channels no stage divides, filters no thread's group divides, one channel staged at a time.
"""

from __future__ import annotations

import numpy as np

from convkit.core import reference
from convkit.core.reference import DIRECT_TOLERANCE
from convkit.families.lu2020.launch import (
    SINGLE_VARIANTS,
    LuMultiLaunch,
    LuWideLaunch,
    conv2d_multi,
    conv2d_single,
    conv2d_wide,
    default_single,
    single_candidates,
)

#: (N, H, W, M, K, pad) of the single-channel kernels (the last: lu_wide's 16-byte path over a partial warp).
SINGLE_SHAPES = [(2, 37, 45, 3, 5, 2), (1, 3, 2, 1, 7, 3), (1, 9, 70, 2, 3, 0), (1, 11, 132, 1, 7, 3)]
#: (N, C, H, W, M, K) of lu_multi, "same" padding.
MULTI_SHAPES = [(1, 13, 9, 11, 20, 3), (2, 3, 5, 40, 9, 7)]


def edge_check() -> None:
    """Launch every kernel on the edge shapes; raises AssertionError naming the shape and launch that is wrong."""
    import cupy

    rng = np.random.default_rng()
    for n, h, w, m, k, pad in SINGLE_SHAPES:
        x = cupy.asarray(rng.standard_normal((n, 1, h, w), dtype=np.float32))
        f = cupy.asarray(rng.standard_normal((m, 1, k, k), dtype=np.float32))
        ref = reference.conv2d(x.get(), f.get(), pad=pad)
        for variant in SINGLE_VARIANTS:
            for launch in {default_single(variant), single_candidates(variant)[-1]}:
                y = conv2d_single(x, f, pad=pad, launch=launch)
                err = reference.relative_error(y.get(), ref)
                assert err < DIRECT_TOLERANCE, (n, h, w, m, k, pad, launch, err)
        for launch in (LuWideLaunch(), LuWideLaunch(1, 1)):  # past the paper: four columns a lane
            y = conv2d_wide(x, f, pad=pad, launch=launch)
            err = reference.relative_error(y.get(), ref)
            assert err < DIRECT_TOLERANCE, (n, h, w, m, k, pad, launch, err)
    for n, c, h, w, m, k in MULTI_SHAPES:
        x = cupy.asarray(rng.standard_normal((n, c, h, w), dtype=np.float32))
        f = cupy.asarray(rng.standard_normal((m, c, k, k), dtype=np.float32))
        ref = reference.conv2d(x.get(), f.get(), pad=(k - 1) // 2)
        for launch in (LuMultiLaunch(), LuMultiLaunch(2, 16, 2), LuMultiLaunch(1, 4, 1, 1)):
            y = conv2d_multi(x, f, pad=(k - 1) // 2, launch=launch)
            err = reference.relative_error(y.get(), ref)
            assert err < DIRECT_TOLERANCE, (n, c, h, w, m, k, launch, err)
    cupy.cuda.runtime.deviceSynchronize()
