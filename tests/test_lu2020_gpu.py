"""Every Lu 2020 kernel at many launches against the float64 reference, outputs poisoned before launch, the
image peer, the largest problems and the argument checks (GPU)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from convkit.core import reference
from convkit.core.problem import ConvProblem
from convkit.core.reference import DIRECT_TOLERANCE
from convkit.cuda.operands import ConvArgs
from convkit.families.lu2020 import launch as lu2020
from convkit.papers.lu2020 import NDIMAGE
from convkit.papers.lu2020 import problem_sets as lu_problems

pytestmark = pytest.mark.gpu

# (N, H, W, M, pad): widths below a warp, widths and heights no warp or block divides, an image smaller
# than the filter, several images and filters at once, "valid" and partial padding.
SINGLE_SHAPES = [(1, 37, 45, 1, "same"), (1, 5, 3, 1, "same"), (2, 70, 97, 3, "same"), (1, 131, 33, 1, 0),
                 (1, 9, 200, 2, 1), (3, 2, 2, 1, "same")]  # fmt: skip
# (N, C, H, W, M): channels no stage divides, filters no thread's group divides, widths below a warp.
MULTI_SHAPES = [(1, 13, 9, 11, 20), (2, 3, 40, 33, 8), (1, 17, 28, 28, 37), (1, 1, 5, 70, 4)]


def _inputs(cupy, n, c, h, w, m, k, pad):
    rng = np.random.default_rng()
    x = cupy.asarray(rng.standard_normal((n, c, h, w), dtype=np.float32))
    f = cupy.asarray(rng.standard_normal((m, c, k, k), dtype=np.float32))
    return x, f, reference.conv2d(x.get(), f.get(), pad=pad)


def _check(cupy, launch, ref):
    out = cupy.full(ref.shape, math.nan, dtype=cupy.float32)
    launch(out)
    err = reference.relative_error(out.get(), ref)
    assert err < DIRECT_TOLERANCE, err


def _pad(spec, k):
    return (k - 1) // 2 if spec == "same" else min(spec, k - 1)


@pytest.mark.parametrize("k", lu2020.FILTER_SIZES)
@pytest.mark.parametrize("shape", SINGLE_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("variant", lu2020.SINGLE_VARIANTS)
def test_single_matches_reference(variant, shape, k):
    import cupy

    n, h, w, m, pad_spec = shape
    pad = _pad(pad_spec, k)
    if h + 2 * pad < k or w + 2 * pad < k:
        pytest.skip("no output for this filter")
    x, f, ref = _inputs(cupy, n, 1, h, w, m, k, pad)
    launches = [*lu2020.single_candidates(variant)[::2], lu2020.default_single(variant)]
    for launch in launches:
        _check(cupy, lambda out, a=launch: lu2020.conv2d_single(x, f, pad=pad, launch=a, out=out), ref)


@pytest.mark.parametrize("k", lu2020.FILTER_SIZES)
@pytest.mark.parametrize("shape", MULTI_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_multi_matches_reference(shape, k):
    import cupy

    n, c, h, w, m = shape
    pad = (k - 1) // 2
    x, f, ref = _inputs(cupy, n, c, h, w, m, k, pad)
    for launch in (*lu2020.MULTI_CANDIDATES[::3], lu2020.LuMultiLaunch(rows=1, filters=4, warps=1, stage_channels=1)):
        _check(cupy, lambda out, a=launch: lu2020.conv2d_multi(x, f, pad=pad, launch=a, out=out), ref)


def test_largest_grid_problems():
    """The biggest image of the single-channel grid (8192^2, 7x7) and the biggest layer (batch 32)."""
    import cupy

    biggest_layer = max(lu_problems.multi_problems(), key=lambda p: p.flops)
    for problem, single in ((lu_problems.single_problems()[-1], True), (biggest_layer, False)):
        rng = cupy.random.default_rng()
        x = rng.standard_normal(problem.input_shape, dtype=cupy.float32)
        f = rng.standard_normal(problem.filter_shape, dtype=cupy.float32)
        ref = reference.conv2d(x, f, pad=problem.pad)  # float64 on the GPU
        out = cupy.full(problem.output_shape, math.nan, dtype=cupy.float32)
        if single:
            lu2020.conv2d_single(x, f, pad=problem.pad, variant="combined", out=out)
        else:
            lu2020.conv2d_multi(x, f, pad=problem.pad, out=out)
        assert reference.relative_error(out, ref) < DIRECT_TOLERANCE


def test_correlate_peer_is_same_convolution():
    import cupy

    problem = ConvProblem.same(1, 1, 61, 83, 1, 7)
    x, f, ref = _inputs(cupy, 1, 1, 61, 83, 1, 7, 3)
    _check(cupy, lambda out: NDIMAGE.run(ConvArgs(x, f, out), problem), ref)


def test_unaligned_input():
    """A view starting one float past an allocation: no load may assume 16-byte alignment."""
    import cupy

    x, f, ref = _inputs(cupy, 1, 1, 33, 47, 1, 5, 2)
    unaligned = cupy.empty(x.size + 1, dtype=cupy.float32)[1:].reshape(x.shape)
    unaligned[...] = x
    for variant in lu2020.SINGLE_VARIANTS:
        _check(cupy, lambda out, v=variant: lu2020.conv2d_single(unaligned, f, pad=2, variant=v, out=out), ref)


@pytest.mark.parametrize("k", lu2020.FILTER_SIZES)
@pytest.mark.parametrize("shape", [*SINGLE_SHAPES, (1, 40, 260, 2, "same"), (2, 17, 128, 1, "same")],
                         ids=lambda s: "x".join(map(str, s)))  # fmt: skip
def test_wide_matches_reference(shape, k):
    """lu_wide (past the paper) on the single-channel shapes plus widths of whole float4s (its 16-byte path),
    at every rows knob; aligned, and a view one float past an allocation (its 4-byte path)."""
    import cupy

    n, h, w, m, pad_spec = shape
    pad = _pad(pad_spec, k)
    if h + 2 * pad < k or w + 2 * pad < k or pad > 4 or k - 1 - pad > 4:
        pytest.skip("no output for this filter, or a halo wider than the kernel's")
    x, f, ref = _inputs(cupy, n, 1, h, w, m, k, pad)
    unaligned = cupy.empty(x.size + 1, dtype=cupy.float32)[1:].reshape(x.shape)
    unaligned[...] = x
    for rows in (1, 4, 8, 16):
        for image in (x, unaligned):
            launch = lu2020.LuWideLaunch(rows, 2)
            _check(cupy, lambda out, a=launch, i=image: lu2020.conv2d_wide(i, f, pad=pad, launch=a, out=out), ref)


def test_bad_arguments_are_named():
    import cupy

    x = cupy.zeros((1, 1, 16, 16), dtype=cupy.float32)
    w = cupy.zeros((1, 1, 5, 5), dtype=cupy.float32)
    with pytest.raises(TypeError, match="x must be float32"):
        lu2020.conv2d_single(x.astype(cupy.float64), w, pad=2)
    with pytest.raises(ValueError, match="w must hold square 3x3, 5x5 or 7x7"):
        lu2020.conv2d_single(x, cupy.zeros((1, 1, 4, 4), dtype=cupy.float32), pad=1)
    with pytest.raises(ValueError, match="C = 1"):
        two = cupy.zeros((1, 2, 16, 16), dtype=cupy.float32)
        lu2020.conv2d_single(two, cupy.zeros((1, 2, 5, 5), dtype=cupy.float32), pad=2)
    with pytest.raises(ValueError, match="pad must be below"):
        lu2020.conv2d_single(x, w, pad=5)
    with pytest.raises(ValueError, match="variant must be one of"):
        lu2020.conv2d_single(x, w, pad=2, variant="shared")
    with pytest.raises(ValueError, match=r"launch\.rows"):
        lu2020.conv2d_single(x, w, pad=2, variant="column", launch=lu2020.LuSingleLaunch("column", rows=4))
    with pytest.raises(ValueError, match=r"launch\.variant is 'row' but variant is 'column'"):
        lu2020.conv2d_single(x, w, pad=2, variant="column", launch=lu2020.LuSingleLaunch("row"))
    with pytest.raises(TypeError, match="launch must be a LuSingleLaunch"):
        lu2020.conv2d_single(x, w, pad=2, launch=lu2020.LuMultiLaunch())
    with pytest.raises(ValueError, match=r"launch\.filters"):
        lu2020.conv2d_multi(x, w, pad=2, launch=lu2020.LuMultiLaunch(filters=6))
    with pytest.raises(ValueError, match="C-contiguous"):
        lu2020.conv2d_single(cupy.zeros((1, 1, 16, 32), dtype=cupy.float32)[..., ::2], w, pad=2)
