"""Every fused-layer kernel on edge shapes, each output checked against float64 (compute-sanitizer's driver).

Pooled outputs no block divides, grid.z above and below one pass over the channels, channel counts no
stage or tile divides, an unaligned input (the tiled kernel's 4-byte copies instead of 16-byte ones).
"""

from __future__ import annotations

import numpy as np

from convkit.core import reference
from convkit.core.problem import ConvProblem
from convkit.core.reference import DIRECT_TOLERANCE
from convkit.families.toy_cnn.launch import (
    ToyLadderLaunch,
    ToyTiledLaunch,
    conv_relu_pool,
    default_tile,
    report_grid,
)
from convkit.papers.toy_cnn.measure import reference_layer

#: (C, H, W, M) of the pre-padded layers.
EDGE_LAYERS = [(3, 19, 23, 5), (9, 36, 44, 70)]


def edge_check() -> None:
    """Launch every variant on :data:`EDGE_LAYERS`; raises AssertionError naming the layer that is wrong."""
    import cupy

    for c, h, w, m in EDGE_LAYERS:
        rng = np.random.default_rng()
        x, f, b = (cupy.asarray(rng.standard_normal(s, dtype=np.float32)) for s in ((1, c, h, w), (m, c, 5, 5), (m,)))
        ref = reference_layer(x.get(), f.get(), b.get())
        unaligned = cupy.empty(x.size + 1, dtype=cupy.float32)[1:].reshape(x.shape)
        unaligned[...] = x
        grid = report_grid(ConvProblem(1, c, h, w, m, 5, 5), (5, 3, 2), grid_z=2)  # 2 x 2 channels a pass
        outputs = [conv_relu_pool(x, f, b, variant=v, launch=ToyLadderLaunch(v, (5, 3, 2), grid))
                   for v in ("v0", "v1", "v2")]  # fmt: skip
        outputs += [conv_relu_pool(x, f, b, variant=v, launch=ToyLadderLaunch(v, (4, 4, 4))) for v in ("v3", "v4")]
        outputs += [conv_relu_pool(x, f, b, variant="tiled", launch=default_tile()),
                    conv_relu_pool(unaligned, f, b, variant="tiled", launch=ToyTiledLaunch(32, 16, 16, 3)),
                    conv_relu_pool(x, f, b, variant="unfused", launch=ToyTiledLaunch(64, 8, 32, 2))]  # fmt: skip
        for y in outputs:
            err = reference.relative_error(y.get(), ref)
            assert err < DIRECT_TOLERANCE, (c, h, w, m, err)
    cupy.cuda.runtime.deviceSynchronize()
