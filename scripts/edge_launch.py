"""Launch every convkit kernel once on edge shapes, for compute-sanitizer (scripts/sanitize.sh).

Edge shapes: sizes that are no multiple of any block, C=1, M=1, an input smaller than the
filter with padding, stride 2. Each output is also checked against the float64 reference.
"""

from __future__ import annotations

import cupy
import numpy as np

from convkit import ceilings, lu2020, reference
from convkit import chang2022 as chang
from convkit.cuconv import conv2d_cuconv
from convkit.direct import conv2d_direct
from convkit.problem import ConvProblem
from convkit.timing import benchmark
from convkit.toy_cnn import TiledConfig, conv_relu_pool, reference_layer, report_grid

EDGE_SHAPES = [  # (N, C, H, W, M, R, S, pad, stride)
    (1, 1, 3, 2, 1, 5, 5, 2, 1),
    (2, 3, 17, 13, 5, 3, 3, 1, 2),
    (1, 5, 33, 31, 3, 7, 7, 3, 1),
]

for n, c, h, w, m, r, s, pad, stride in EDGE_SHAPES:
    rng = np.random.default_rng()
    x = cupy.asarray(rng.standard_normal((n, c, h, w), dtype=np.float32))
    f = cupy.asarray(rng.standard_normal((m, c, r, s), dtype=np.float32))
    ref = reference.conv2d(x.get(), f.get(), pad=pad, stride=stride)
    outputs = [
        conv2d_direct(x, f, pad=pad, stride=stride, threads=96),  # 96: blocks straddle the end
        conv2d_cuconv(x, f, pad=pad, stride=stride, variant="paper", threads=96),
        conv2d_cuconv(x, f, pad=pad, stride=stride, variant="fused", threads=96, filters_per_thread=8),
        conv2d_cuconv(x, f, pad=pad, stride=stride, variant="split", threads=64, filters_per_thread=2, splits=c),
        conv2d_cuconv(x, f, pad=pad, stride=stride, variant="tiled", tile="128x128"),
        conv2d_cuconv(x, f, pad=pad, stride=stride, variant="tiled", tile="16x64", splits=2),
        conv2d_cuconv(x, f, pad=pad, stride=stride, variant="tiled", tile="64x32", splits=c * r * s),
    ]
    for y in outputs:
        err = reference.relative_error(y.get(), ref)
        assert err < 1e-5, (n, c, h, w, m, r, s, pad, stride, err)
# The fused CNN layer (kernels/toy_cnn.cu): pooled outputs no block divides, grid.z above and below
# one pass over the channels, channel counts no stage or tile divides, an unaligned input (4-byte copies).
for c, h, w, m in [(3, 19, 23, 5), (9, 36, 44, 70)]:
    rng = np.random.default_rng()
    x, f, b = (cupy.asarray(rng.standard_normal(s, dtype=np.float32)) for s in ((1, c, h, w), (m, c, 5, 5), (m,)))
    ref = reference_layer(x.get(), f.get(), b.get())
    unaligned = cupy.empty(x.size + 1, dtype=cupy.float32)[1:].reshape(x.shape)
    unaligned[...] = x
    grid = report_grid(ConvProblem(1, c, h, w, m, 5, 5), (5, 3, 2), grid_z=2)  # 2 x 2 channels a pass
    outputs = [conv_relu_pool(x, f, b, variant=v, block=(5, 3, 2), grid=grid) for v in ("v0", "v1", "v2")]
    outputs += [conv_relu_pool(x, f, b, variant=v, block=(4, 4, 4)) for v in ("v3", "v4")]
    outputs += [conv_relu_pool(x, f, b, variant="tiled", tile=TiledConfig(64, 16, 16, 4)),
                conv_relu_pool(unaligned, f, b, variant="tiled", tile=TiledConfig(32, 16, 16, 3)),
                conv_relu_pool(x, f, b, variant="unfused", tile=TiledConfig(64, 8, 32, 2))]  # fmt: skip
    for y in outputs:
        err = reference.relative_error(y.get(), ref)
        assert err < 1e-5, (c, h, w, m, err)
# Chang 2022 (kernels/chang2022.cu): widths no strip divides, maps smaller than the halo, pieces along
# both axes, channels no segment divides, channel splits (one launch: the first split zeroes the tile, all
# add), 4-byte and 16-byte copies.
for h, w, m, k in [(7, 5, 9, 5), (13, 29, 11, 3), (3, 8, 2, 1), (5, 7, 9, 1)]:
    rng = np.random.default_rng()
    x = cupy.asarray(rng.standard_normal((1, 1, h, w), dtype=np.float32))
    f = cupy.asarray(rng.standard_normal((m, 1, k, k), dtype=np.float32))
    ref = reference.conv2d(x.get(), f.get(), pad=(k - 1) // 2)
    plans = [chang.SinglePlan("both", 3, 2, 5, 6, 2, 4, 128), chang.SinglePlan("maps", 1, 5, 1, 10**6, 1, 2, 512)]
    # the unstaged launch: partial quads, filter groups and blocks, maps smaller than the halo
    plans += [chang.SingleDirectPlan(4, 64), chang.SingleDirectPlan(1, 32)]
    if k > 1:  # weights in shared memory (a block-wide copy and barrier), 2 and 4 rows per thread
        plans += [chang.SingleDirectPlan(4, 64, rows=2, shared_weights=True),
                  chang.SingleDirectPlan(3, 32, rows=4, shared_weights=True)]  # fmt: skip
    for plan in plans:
        assert reference.relative_error(chang.conv2d_single(x, f, plan=plan).get(), ref) < 1e-5, (h, w, m, k, plan)
for c, h, w, m, k in [(13, 9, 11, 20, 3), (37, 16, 24, 70, 5), (3, 5, 8, 9, 1)]:
    rng = np.random.default_rng()
    x = cupy.asarray(rng.standard_normal((1, c, h, w), dtype=np.float32))
    f = cupy.asarray(rng.standard_normal((m, c, k, k), dtype=np.float32))
    ref = reference.conv2d(x.get(), f.get(), pad=(k - 1) // 2)
    for cfg in (chang.MultiConfig(bm=16, tile_h=1, tile_w=32, px=1),
                chang.MultiConfig(bm=40, tile_h=2, tile_w=16, px=1, ck=16),
                chang.MultiConfig(bm=16, tile_h=32, tile_w=32, rpt=2, px=4, rows16=True, split=3),
                chang.MultiConfig(bm=32, tile_h=8, tile_w=8, px=4, rows16=True),
                chang.MultiConfig(bm=8, tile_h=8, tile_w=16, px=4, ck=4, rows16=True, split=4)):  # fmt: skip
        assert reference.relative_error(chang.conv2d_multi(x, f, config=cfg).get(), ref) < 1e-5, (c, h, w, m, k, cfg)
# The GEMM tile at 1x1: 16-byte and (odd pixel count) 4-byte copies, partial segments, a split.
for c, h, w, m in [(3, 5, 8, 9), (37, 5, 7, 70)]:
    rng = np.random.default_rng()
    x = cupy.asarray(rng.standard_normal((1, c, h, w), dtype=np.float32))
    f = cupy.asarray(rng.standard_normal((m, c, 1, 1), dtype=np.float32))
    ref = reference.conv2d(x.get(), f.get(), pad=0)
    for cfg in (chang.PointwiseConfig(64, 64, 8, 8, 8, split=2), chang.PointwiseConfig(16, 32, 4, 4, 4, split=3)):
        assert reference.relative_error(chang.conv2d_multi(x, f, config=cfg).get(), ref) < 1e-5, (c, h, w, m, cfg)
# A filter per thread (3x3, 5x5): tiles the map does not divide, 4-byte weight copies (C % 4 != 0),
# partial segments, several tiles per block, a split; a map in one tile (the sums stored as one run); the short
# 4x7, 2x7 and 1x7 tiles.
for c, h, w, m, k in [(6, 13, 11, 40, 3), (8, 9, 17, 33, 5), (8, 7, 7, 70, 5)]:
    rng = np.random.default_rng()
    x = cupy.asarray(rng.standard_normal((1, c, h, w), dtype=np.float32))
    f = cupy.asarray(rng.standard_normal((m, c, k, k), dtype=np.float32))
    ref = reference.conv2d(x.get(), f.get(), pad=(k - 1) // 2)
    for cfg in (chang.BroadcastConfig(32, 1, 7, 7, 4), chang.BroadcastConfig(32, 2, 7, 7, 4, split=2),
                chang.BroadcastConfig(64, 2, 7, 7, 8, split=3),
                chang.BroadcastConfig(64, 2, 4, 7, 4, split=2), chang.BroadcastConfig(64, 1, 2, 7, 4, split=3),
                chang.BroadcastConfig(32, 1, 1, 7, 4)):  # fmt: skip
        assert reference.relative_error(chang.conv2d_multi(x, f, config=cfg).get(), ref) < 1e-5, (c, h, w, m, cfg)
# the timing harness's stream-holding kernel, around a direct launch
benchmark(lambda: conv2d_direct(x, f, pad=pad, stride=stride), warmup=1, min_reps=2, max_reps=2)
ceilings.fma_peak(iters=4, blocks_per_sm=1)
ceilings.load_latency(1 << 14, steps=100, repeats=1)
ceilings.sm_clock_under_load(spin_ms=1)
ceilings.launch_floor(threads=32)
# Lu 2020 (kernels/lu2020.cu): widths below a warp and no warp divides, an image smaller than the filter,
# several images and filters, partial padding; the multi-channel form with channels no stage divides.
for n, h, w, m, k, pad in [(2, 37, 45, 3, 5, 2), (1, 3, 2, 1, 7, 3), (1, 9, 70, 2, 3, 0)]:
    rng = np.random.default_rng()
    x = cupy.asarray(rng.standard_normal((n, 1, h, w), dtype=np.float32))
    f = cupy.asarray(rng.standard_normal((m, 1, k, k), dtype=np.float32))
    ref = reference.conv2d(x.get(), f.get(), pad=pad)
    for variant in lu2020.SINGLE_VARIANTS:
        for launch in {lu2020.default_single(variant), lu2020.single_candidates(variant)[-1]}:
            y = lu2020.conv2d_single(x, f, pad=pad, variant=variant, launch=launch)
            assert reference.relative_error(y.get(), ref) < 1e-5, (n, h, w, m, k, pad, variant, launch)
for n, c, h, w, m, k in [(1, 13, 9, 11, 20, 3), (2, 3, 5, 40, 9, 7)]:
    rng = np.random.default_rng()
    x = cupy.asarray(rng.standard_normal((n, c, h, w), dtype=np.float32))
    f = cupy.asarray(rng.standard_normal((m, c, k, k), dtype=np.float32))
    ref = reference.conv2d(x.get(), f.get(), pad=(k - 1) // 2)
    for launch in (lu2020.MultiLaunch(), lu2020.MultiLaunch(2, 16, 2), lu2020.MultiLaunch(1, 4, 1, 1)):
        y = lu2020.conv2d_multi(x, f, pad=(k - 1) // 2, launch=launch)
        assert reference.relative_error(y.get(), ref) < 1e-5, (n, c, h, w, m, k, launch)
cupy.cuda.runtime.deviceSynchronize()
print("edge launches done")
