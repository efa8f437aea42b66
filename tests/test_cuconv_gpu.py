"""cuConv's launches past the generic check (tests/test_variants_gpu.py), outputs poisoned before launch (GPU):
knobs that stress the edges on odd shapes, every tuning candidate, argument errors before launch."""

from __future__ import annotations

import numpy as np
import pytest

from convkit.core import reference
from convkit.core.reference import DIRECT_TOLERANCE
from convkit.families.cuconv.launch import CuconvLaunch

pytestmark = pytest.mark.gpu

# (N, C, H, W, M, R, S, pad, stride): batch 1..8, odd sizes, C=1, M=1, 1x1 / 3x3 / 5x5 / 7x7.
SHAPES = [
    (1, 832, 7, 7, 32, 1, 1, 0, 1),
    (1, 64, 27, 27, 37, 1, 1, 0, 1),
    (3, 19, 13, 11, 5, 3, 3, 1, 1),
    (1, 1, 31, 29, 7, 5, 5, 2, 1),
    (8, 48, 7, 7, 1, 5, 5, 2, 1),
    (2, 5, 9, 17, 3, 7, 7, 3, 1),
    (1, 7, 3, 2, 6, 5, 5, 2, 1),  # input smaller than the filter
    (2, 9, 15, 12, 10, 3, 3, 1, 2),  # stride 2: not in the paper, supported
]
# (variant, launch): the heuristic's (None), then launches that stress the edges (tiny blocks, every MT, many splits)
RUNS = [
    ("paper", None),
    ("paper", CuconvLaunch("paper", 32)),
    ("fused", None),
    ("fused", CuconvLaunch("fused", 64, filters_per_thread=8)),
    ("fused", CuconvLaunch("fused", 96, filters_per_thread=1)),
    ("split", None),
    ("split", CuconvLaunch("split", 128, filters_per_thread=2, splits=3)),
    ("tiled", None),
    ("tiled", CuconvLaunch.tiled("128x128")),
    ("tiled", CuconvLaunch.tiled("64x128", splits=3)),
    ("tiled", CuconvLaunch.tiled("16x64", splits=5)),
    ("tiled", CuconvLaunch.tiled("32x32", splits=2)),
]


def _random(cupy, shape):
    return cupy.asarray(np.random.default_rng().standard_normal(shape).astype(np.float32))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize(("variant", "launch"), RUNS, ids=[f"{v}-{k.to_params() if k else 'default'}" for v, k in RUNS])
def test_variant_matches_reference(shape, variant, launch):
    import cupy

    from convkit.families.cuconv.launch import conv2d_cuconv

    n, c, h, w, m, r, s, pad, stride = shape
    if launch is not None and launch.splits > c:
        pytest.skip("more splits than channels")
    x, f = _random(cupy, (n, c, h, w)), _random(cupy, (m, c, r, s))
    ref = reference.conv2d(x.get(), f.get(), pad=pad, stride=stride)
    out = cupy.full(ref.shape, np.nan, dtype=cupy.float32)
    conv2d_cuconv(x, f, pad=pad, stride=stride, variant=variant, launch=launch, out=out)
    err = reference.relative_error(out.get(), ref)
    assert err < DIRECT_TOLERANCE, err


@pytest.mark.parametrize("label", ["7-1-1-32-832", "13-2-3-48-17", "9-3-5-20-33"])
def test_every_tuning_candidate_matches_reference(label):
    """What the tuner may pick is correct: every candidate of every variant, poisoned output."""
    import cupy

    from convkit.core.problem import ConvProblem
    from convkit.families.cuconv.launch import VARIANTS, candidates, conv2d_cuconv

    p = ConvProblem.from_label(label)
    x, f = _random(cupy, p.input_shape), _random(cupy, p.filter_shape)
    ref = reference.conv2d(x.get(), f.get(), pad=p.pad)
    for variant in VARIANTS:
        for knobs in candidates(p, variant):
            out = cupy.full(ref.shape, np.nan, dtype=cupy.float32)
            conv2d_cuconv(x, f, pad=p.pad, launch=knobs, out=out)
            err = reference.relative_error(out.get(), ref)
            assert err < DIRECT_TOLERANCE, (knobs, err)


def test_bad_knobs_are_refused_before_launch():
    import cupy

    from convkit.families.cuconv.launch import conv2d_cuconv

    x, f = _random(cupy, (1, 4, 8, 8)), _random(cupy, (3, 4, 3, 3))
    with pytest.raises(ValueError, match="variant must be one of"):
        conv2d_cuconv(x, f, variant="fast")
    with pytest.raises(ValueError, match="filters_per_thread must be one of"):
        conv2d_cuconv(x, f, launch=CuconvLaunch("fused", 128, filters_per_thread=3))
    with pytest.raises(ValueError, match="splits applies to variants 'split' and 'tiled' only"):
        conv2d_cuconv(x, f, launch=CuconvLaunch("fused", 128, splits=2))
    with pytest.raises(ValueError, match="tile must be one of"):
        conv2d_cuconv(x, f, launch=CuconvLaunch("tiled", 256, tile="48x48"))
    with pytest.raises(ValueError, match="tile applies to variant 'tiled' only"):
        conv2d_cuconv(x, f, launch=CuconvLaunch("paper", 64, tile="64x64"))
    with pytest.raises(ValueError, match="contradicts tile"):
        conv2d_cuconv(x, f, launch=CuconvLaunch("tiled", 128, tile="64x64"))
    with pytest.raises(ValueError, match="splits must be in"):
        conv2d_cuconv(x, f, launch=CuconvLaunch("split", 128, splits=5))
    with pytest.raises(ValueError, match="threads must be"):
        conv2d_cuconv(x, f, launch=CuconvLaunch("paper", 2048))
    with pytest.raises(TypeError, match="launch must be a CuconvLaunch"):
        conv2d_cuconv(x, f, launch={"threads": 64})
    with pytest.raises(TypeError, match="x must be float32"):
        conv2d_cuconv(x.astype(cupy.float16), f)
