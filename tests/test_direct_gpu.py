"""The direct kernel against the float64 reference, and its argument checks (GPU)."""

from __future__ import annotations

import numpy as np
import pytest

from convkit import reference
from convkit.bench import DIRECT_TOLERANCE

pytestmark = pytest.mark.gpu

# (N, C, H, W, M, R, S, pad, stride): odd sizes, C=1, M=1, inputs smaller than the filter.
SHAPES = [
    (1, 3, 17, 23, 5, 3, 3, 1, 1),
    (2, 1, 31, 29, 7, 5, 5, 2, 1),
    (1, 16, 9, 9, 1, 1, 1, 0, 1),
    (3, 5, 2, 3, 4, 5, 5, 2, 1),  # H, W smaller than the filter, padding makes an output
    (1, 7, 13, 11, 6, 3, 5, 1, 2),
    (2, 4, 1, 1, 3, 3, 3, 1, 1),
    (1, 832, 7, 7, 32, 1, 1, 0, 1),
]


def _random(cupy, shape):
    return cupy.asarray(np.random.default_rng().standard_normal(shape).astype(np.float32))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_direct_matches_reference(shape):
    import cupy

    from convkit.direct import conv2d_direct

    n, c, h, w, m, r, s, pad, stride = shape
    x, f = _random(cupy, (n, c, h, w)), _random(cupy, (m, c, r, s))
    ref = reference.conv2d(x.get(), f.get(), pad=pad, stride=stride)
    out = cupy.full(ref.shape, np.nan, dtype=cupy.float32)
    conv2d_direct(x, f, pad=pad, stride=stride, out=out)
    err = reference.relative_error(out.get(), ref)
    assert err < DIRECT_TOLERANCE, err


def test_direct_rejects_bad_arguments():
    import cupy

    from convkit.direct import conv2d_direct

    x, f = _random(cupy, (1, 3, 8, 8)), _random(cupy, (4, 3, 3, 3))
    with pytest.raises(TypeError, match="x must be float32"):
        conv2d_direct(x.astype(cupy.float64), f)
    with pytest.raises(TypeError, match=r"x must be a cupy\.ndarray"):
        conv2d_direct(x.get(), f)
    with pytest.raises(ValueError, match="x must be C-contiguous"):
        conv2d_direct(x.transpose(0, 1, 3, 2), f)
    with pytest.raises(ValueError, match="w has 2 channels but x has 3"):
        conv2d_direct(x, f[:, :2].copy())
    with pytest.raises(ValueError, match="give no output"):
        conv2d_direct(x[:, :, :2, :2].copy(), f, pad=0)
    with pytest.raises(ValueError, match="pad must be"):
        conv2d_direct(x, f, pad=-1)
    with pytest.raises(ValueError, match="stride must be"):
        conv2d_direct(x, f, stride=0)
    with pytest.raises(ValueError, match="w must be 4-D"):
        conv2d_direct(x, f[0])
    with pytest.raises(ValueError, match="out must be"):
        conv2d_direct(x, f, out=cupy.empty((1, 4, 5, 5), dtype=cupy.float32))
