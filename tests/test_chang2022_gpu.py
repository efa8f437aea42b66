"""Both Chang 2022 kernels against the float64 reference, outputs poisoned before launch (GPU)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from convkit.core import reference
from convkit.core.problem import ConvProblem
from convkit.core.reference import DIRECT_TOLERANCE
from convkit.families.chang2022 import model, multi, ranking, single
from convkit.families.chang2022.launch import conv2d_multi, conv2d_single
from convkit.papers.chang2022 import problems

pytestmark = pytest.mark.gpu

# (H, W, M, K): widths no 4-pixel strip divides, maps smaller than the filter's halo, M = 1, M not a
# multiple of 8, one of the grid's sizes.
SINGLE_SHAPES = [(13, 29, 11, 3), (1, 1, 1, 5), (7, 5, 9, 5), (33, 64, 40, 1), (28, 28, 32, 3), (2, 130, 3, 5)]
# Plans by hand: many pieces along both axes, single-row pieces, one piece per block.
HAND_PLANS = [
    single.StagedSingleLaunch("both", 3, 2, band_rows=5, group_filters=6, piece_rows=2, piece_filters=4, threads=128),
    single.StagedSingleLaunch(
        "filters", 7, 1, band_rows=10**6, group_filters=3, piece_rows=1, piece_filters=3, threads=512
    ),
    single.StagedSingleLaunch(
        "maps", 1, 5, band_rows=1, group_filters=10**6, piece_rows=1, piece_filters=2, threads=256
    ),
]
# (C, H, W, M, K): channels no segment divides, widths not multiples of 4 (4-byte copies), maps
# smaller than a tile, M not a multiple of the block's filters.
MULTI_SHAPES = [(13, 9, 11, 20, 3), (1, 7, 7, 5, 1), (37, 16, 24, 70, 5), (8, 3, 40, 16, 3), (64, 14, 14, 64, 1)]
MULTI_CONFIGS = [
    multi.TiledMultiLaunch(bm=16, tile_h=1, tile_w=32, px=1),
    multi.TiledMultiLaunch(bm=40, tile_h=2, tile_w=16, px=1, ck=16),
    multi.TiledMultiLaunch(bm=32, tile_h=8, tile_w=8, px=4, rows16=True),
    multi.TiledMultiLaunch(bm=16, tile_h=32, tile_w=32, rpt=2, px=4, rows16=True, split=3),
    multi.TiledMultiLaunch(bm=64, tile_h=8, tile_w=16, px=4, rows16=True, split=2),
    multi.TiledMultiLaunch(bm=16, tile_h=8, tile_w=8, px=4, ck=4, rows16=True, split=5),
    multi.TiledMultiLaunch(bm=8, tile_h=8, tile_w=16, px=4, ck=4, rows16=True, split=64),
]


def _inputs(cupy, c, h, w, m, k):
    rng = np.random.default_rng()
    x = cupy.asarray(rng.standard_normal((1, c, h, w), dtype=np.float32))
    f = cupy.asarray(rng.standard_normal((m, c, k, k), dtype=np.float32))
    return x, f, reference.conv2d(x.get(), f.get(), pad=(k - 1) // 2)


def _model():
    return model.latency_model(model.current_figures())


def _check(cupy, launch, ref, shape):
    out = cupy.full(shape, math.nan, dtype=cupy.float32)
    launch(out)
    err = reference.relative_error(out.get(), ref)
    assert err < DIRECT_TOLERANCE, err


@pytest.mark.parametrize("shape", SINGLE_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("planner", ["plan_single", "fill_plan", *range(len(HAND_PLANS))])
def test_single_matches_reference(shape, planner):
    import cupy

    h, w, m, k = shape
    x, f, ref = _inputs(cupy, 1, h, w, m, k)
    problem = ConvProblem.same(1, 1, h, w, m, k)
    plan = getattr(single, planner)(problem, _model()) if isinstance(planner, str) else HAND_PLANS[planner]
    _check(cupy, lambda out: conv2d_single(x, f, launch=plan, out=out), ref, problem.output_shape)


@pytest.mark.parametrize("shape", MULTI_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("config", ["paper", "h100", *range(len(MULTI_CONFIGS))])
def test_multi_matches_reference(shape, config):
    import cupy

    from convkit.core.gpu import sm_count

    c, h, w, m, k = shape
    x, f, ref = _inputs(cupy, c, h, w, m, k)
    problem = ConvProblem.same(1, c, h, w, m, k)
    if config == "paper":
        cfg = multi.paper_multi_config(problem, _model())
    elif config == "h100":
        cfg = ranking.multi_config(problem, sm_count())
    else:
        cfg = MULTI_CONFIGS[config]
    _skip_unless_it_fits(cfg, problem)
    _check(cupy, lambda out: conv2d_multi(x, f, launch=cfg, out=out), ref, problem.output_shape)


def _skip_unless_it_fits(cfg, problem):
    """A fixed launch sized for the H100 can need more shared memory than a smaller GPU (or the T4's
    compute_75 paths) allows: the launcher refuses it by name (tested on CPU); here it is skipped."""
    from convkit.core.gpu import shared_memory_limits

    need, limit = cfg.shared_bytes(problem), shared_memory_limits()[0]
    if need > limit:
        pytest.skip(f"needs {need} bytes of shared memory; this GPU allows {limit}")


# (C, H, W, M): pixel counts no block or strip divides (odd: 4-byte copies), channels no segment
# divides, M not a multiple of the block's filters, one of the grid's small layers.
POINTWISE_SHAPES = [(37, 5, 7, 70, 1), (1, 3, 3, 5, 1), (100, 16, 17, 130, 1), (64, 14, 14, 64, 1), (24, 12, 12, 9, 1)]
POINTWISE_CONFIGS = [
    *(multi.PointwiseMultiLaunch(*tile) for tile in multi.POINTWISE_TILES),
    multi.PointwiseMultiLaunch(64, 64, 8, 8, 8, split=3),
    multi.PointwiseMultiLaunch(32, 32, 4, 4, 32, split=2),
]


# (C, H, W, M, K): maps no 7x7 tile divides, C not a multiple of 4 (4-byte weight copies) or of a segment,
# M not a multiple of the block's filters, a 1x1 layer, one of the grid's small layers.
BROADCAST_SHAPES = [(6, 13, 11, 40, 3), (5, 9, 17, 33, 5), (64, 7, 7, 64, 5), (12, 30, 29, 70, 3), (3, 5, 5, 32, 1)]
BROADCAST_CONFIGS = [
    *(multi.BroadcastMultiLaunch(*tile) for tile in multi.BROADCAST_TILES),
    multi.BroadcastMultiLaunch(64, 2, 7, 7, 8, split=3),
    multi.BroadcastMultiLaunch(32, 4, 4, 8, 4, split=2),
]


# The kernels past the paper, each on its own shapes: (shape, config index) pairs.
PAST_THE_PAPER = [
    *((shape, ("pointwise", i)) for i in range(len(POINTWISE_CONFIGS)) for shape in POINTWISE_SHAPES),
    *((shape, ("broadcast", i)) for i in range(len(BROADCAST_CONFIGS)) for shape in BROADCAST_SHAPES),
]


@pytest.mark.parametrize(("shape", "config"), PAST_THE_PAPER,
                         ids=[f"{kind}{i}-{'x'.join(map(str, s))}" for s, (kind, i) in PAST_THE_PAPER])  # fmt: skip
def test_past_the_paper_kernels_match_reference(shape, config):
    import cupy

    c, h, w, m, k = shape
    x, f, ref = _inputs(cupy, c, h, w, m, k)
    kind, index = config
    cfg = (POINTWISE_CONFIGS if kind == "pointwise" else BROADCAST_CONFIGS)[index]
    _skip_unless_it_fits(cfg, ConvProblem.same(1, c, h, w, m, k))
    _check(cupy, lambda out: conv2d_multi(x, f, launch=cfg, out=out), ref, (1, m, h, w))


# (H, W, M): maps of 1, 35 and 377 pixels and widths no 4-pixel quad divides, maps smaller than the halo,
# M not a multiple of the filters per thread, one of the grid's sizes.
SINGLE_DIRECT_SHAPES = [(1, 1, 1), (7, 5, 9), (13, 29, 3), (33, 64, 40), (28, 28, 32), (2, 3, 5)]
SINGLE_DIRECT_PLANS = [single.DirectSingleLaunch(1, 64), single.DirectSingleLaunch(4, 128),
                       single.DirectSingleLaunch(16, 32), single.DirectSingleLaunch(8, 256),
                       single.DirectSingleLaunch(1, 64, rows=4, shared_weights=True),
                       single.DirectSingleLaunch(16, 32, rows=2, shared_weights=True),
                       single.DirectSingleLaunch(5, 128, rows=1, shared_weights=True)]  # fmt: skip
# at 1x1 the map is one row: rows 1 only
SINGLE_DIRECT_CASES = [(k, plan) for k in model.FILTER_SIZES for plan in SINGLE_DIRECT_PLANS if plan.rows == 1 or k > 1]


@pytest.mark.parametrize("shape", SINGLE_DIRECT_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize(("k", "plan"), SINGLE_DIRECT_CASES,
                         ids=[f"k{k}-f{p.filters}t{p.threads}r{p.rows}{'s' * p.shared_weights}"
                              for k, p in SINGLE_DIRECT_CASES])  # fmt: skip
def test_single_direct_matches_reference(shape, k, plan):
    import cupy

    h, w, m = shape
    x, f, ref = _inputs(cupy, 1, h, w, m, k)
    _check(cupy, lambda out: conv2d_single(x, f, launch=plan, out=out), ref, (1, m, h, w))


def test_pointwise_rejects_larger_filters():
    import cupy

    x, f = cupy.ones((1, 4, 8, 8), dtype=cupy.float32), cupy.ones((4, 4, 3, 3), dtype=cupy.float32)
    with pytest.raises(ValueError, match="for 1x1 filters"):
        conv2d_multi(x, f, launch=multi.PointwiseMultiLaunch())


@pytest.mark.parametrize(
    "problem", [problems.single_problems()[-1], problems.multi_problems()[-1]], ids=["single", "multi"]
)
def test_largest_grid_problems(problem):
    """The grids' largest configurations (1024x1024 x 512 filters 5x5; 512x512, 512 -> 512, 5x5), default launches."""
    import cupy

    from convkit.op.cases import float64_reference

    rng = cupy.random.default_rng()
    x = rng.standard_normal(problem.input_shape, dtype=cupy.float32)
    f = rng.standard_normal(problem.filter_shape, dtype=cupy.float32)
    ref = float64_reference(problem, x, f)
    out = cupy.full(problem.output_shape, math.nan, dtype=cupy.float32)
    if problem.c == 1:
        conv2d_single(x, f, out=out)
    else:
        conv2d_multi(x, f, out=out)
    assert reference.relative_error(out, ref) < DIRECT_TOLERANCE


def test_unaligned_input_uses_four_byte_copies():
    import cupy

    x, f, ref = _inputs(cupy, 16, 12, 16, 24, 3)
    unaligned = cupy.empty(x.size + 1, dtype=cupy.float32)[1:].reshape(x.shape)
    unaligned[...] = x
    cfg = multi.TiledMultiLaunch(bm=32, tile_h=8, tile_w=8, px=4, rows16=True)
    _check(cupy, lambda out: conv2d_multi(unaligned, f, launch=cfg, out=out), ref, (1, 24, 12, 16))
    x, f, ref = _inputs(cupy, 16, 12, 16, 24, 1)
    unaligned[...] = x
    _check(cupy, lambda out: conv2d_multi(unaligned, f, launch=multi.PointwiseMultiLaunch(64, 64, 4, 4), out=out),
           ref, (1, 24, 12, 16))  # fmt: skip
    x, f, ref = _inputs(cupy, 1, 12, 16, 24, 1)
    unaligned = cupy.empty(x.size + 1, dtype=cupy.float32)[1:].reshape(x.shape)
    unaligned[...] = x
    plan = single.DirectSingleLaunch(4, 64)
    _check(cupy, lambda out: conv2d_single(unaligned, f, launch=plan, out=out), ref, (1, 24, 12, 16))


def test_unaligned_weights_use_four_byte_copies():
    import cupy

    x, f, ref = _inputs(cupy, 16, 12, 16, 24, 5)
    unaligned = cupy.empty(f.size + 1, dtype=cupy.float32)[1:].reshape(f.shape)
    unaligned[...] = f
    cfg = multi.BroadcastMultiLaunch(32, 2, 7, 7, 4, split=2)
    _check(cupy, lambda out: conv2d_multi(x, unaligned, launch=cfg, out=out), ref, (1, 24, 12, 16))


SPLIT_LAUNCHES = [
    multi.TiledMultiLaunch(bm=16, tile_h=8, tile_w=8, px=4, ck=4, rows16=True, split=5),
    multi.PointwiseMultiLaunch(32, 32, 4, 4, 8, split=4),
    multi.BroadcastMultiLaunch(32, 2, 7, 7, 4, split=5),
]


@pytest.mark.parametrize("config", SPLIT_LAUNCHES, ids=["multi", "pointwise", "broadcast"])
def test_split_launches_leave_their_counters_zero(config):
    """One-launch splits: back to back, on a second stream and at a larger grid, every launch is right."""
    import cupy

    k = 1 if isinstance(config, multi.PointwiseMultiLaunch) else 3
    for c, h, w, m in [(40, 12, 16, 24), (40, 12, 16, 24), (37, 40, 36, 50)]:
        x, f, ref = _inputs(cupy, c, h, w, m, k)
        for stream in (cupy.cuda.Stream.null, cupy.cuda.Stream(non_blocking=True)):
            with stream:
                for _ in range(3):
                    launch = lambda out, x=x, f=f: conv2d_multi(x, f, launch=config, out=out)  # noqa: E731
                    _check(cupy, launch, ref, (1, m, h, w))


def test_unaligned_output_uses_scalar_stores():
    """An ``out`` one float off 16-byte alignment (a view): every kernel falls back to 4-byte stores."""
    import cupy

    def unaligned_nan(shape):
        out = cupy.full(math.prod(shape) + 1, math.nan, dtype=cupy.float32)[1:].reshape(shape)
        assert out.data.ptr % 16 == 4
        return out

    x, f, ref = _inputs(cupy, 1, 12, 16, 24, 3)
    out = unaligned_nan((1, 24, 12, 16))
    conv2d_single(x, f, out=out)
    assert reference.relative_error(out.get(), ref) < DIRECT_TOLERANCE
    x, f, ref = _inputs(cupy, 1, 12, 16, 24, 1)
    out = unaligned_nan((1, 24, 12, 16))
    conv2d_single(x, f, launch=single.DirectSingleLaunch(4, 64), out=out)
    assert reference.relative_error(out.get(), ref) < DIRECT_TOLERANCE
    for config, k in [(multi.TiledMultiLaunch(bm=32, tile_h=8, tile_w=8, px=4, rows16=True), 3), (SPLIT_LAUNCHES[0], 3),
                      (multi.PointwiseMultiLaunch(64, 64, 4, 4), 1), (SPLIT_LAUNCHES[1], 1),
                      (multi.BroadcastMultiLaunch(32, 1, 7, 7, 4), 5), (SPLIT_LAUNCHES[2], 3)]:  # fmt: skip
        x, f, ref = _inputs(cupy, 16, 12, 16, 24, k)
        out = unaligned_nan((1, 24, 12, 16))
        conv2d_multi(x, f, launch=config, out=out)
        assert reference.relative_error(out.get(), ref) < DIRECT_TOLERANCE, config


def test_bad_arguments_are_named():
    import cupy

    x = cupy.ones((1, 1, 8, 8), dtype=cupy.float32)
    w = cupy.ones((4, 1, 3, 3), dtype=cupy.float32)
    with pytest.raises(TypeError, match="x must be float32"):
        conv2d_single(x.astype(cupy.float64), w)
    with pytest.raises(ValueError, match="one image"):
        conv2d_single(cupy.ones((2, 1, 8, 8), dtype=cupy.float32), w)
    with pytest.raises(ValueError, match="1x1, 3x3 or 5x5"):
        conv2d_single(x, cupy.ones((4, 1, 7, 7), dtype=cupy.float32))
    with pytest.raises(ValueError, match="one channel"):
        conv2d_single(cupy.ones((1, 2, 8, 8), dtype=cupy.float32), cupy.ones((4, 2, 3, 3), dtype=cupy.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        conv2d_multi(cupy.ones((1, 2, 8, 16), dtype=cupy.float32)[..., ::2], cupy.ones((4, 2, 3, 3),
                           dtype=cupy.float32))  # fmt: skip
    with pytest.raises(ValueError, match="plan pieces"):
        conv2d_single(x, w, launch=single.StagedSingleLaunch("maps", 1, 1, 2, 4, 3, 4))
    with pytest.raises(ValueError, match="out must be"):
        conv2d_multi(x, w, out=cupy.empty((1, 4, 8, 7), dtype=cupy.float32))
    with pytest.raises(ValueError, match="shared memory"):
        conv2d_multi(cupy.ones((1, 8, 8, 8), dtype=cupy.float32), cupy.ones((256, 8, 5, 5), dtype=cupy.float32),
                           launch=multi.TiledMultiLaunch(bm=128, tile_h=1, tile_w=32, px=1, ck=64))  # fmt: skip
