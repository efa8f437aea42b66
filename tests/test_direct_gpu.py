"""The direct kernel where the generic check does not reach: a block past the end, and its argument checks (GPU)."""

from __future__ import annotations

import numpy as np
import pytest

from convkit.core import reference
from convkit.core.reference import DIRECT_TOLERANCE
from convkit.families.baseline.launch import DirectLaunch, conv2d_direct

pytestmark = pytest.mark.gpu


def _random(cupy, shape):
    return cupy.asarray(np.random.default_rng().standard_normal(shape).astype(np.float32))


def test_blocks_straddling_the_end():
    """96 threads a block: the last block is partly past the outputs (the sample problems run 256)."""
    import cupy

    x, f = _random(cupy, (2, 3, 17, 13)), _random(cupy, (5, 3, 3, 3))
    ref = reference.conv2d(x.get(), f.get(), pad=1, stride=2)
    out = cupy.full(ref.shape, np.nan, dtype=cupy.float32)
    conv2d_direct(x, f, pad=1, stride=2, launch=DirectLaunch(96), out=out)
    err = reference.relative_error(out.get(), ref)
    assert err < DIRECT_TOLERANCE, err


def test_direct_rejects_bad_arguments():
    import cupy

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
    with pytest.raises(ValueError, match=r"threads must be an int in 1\.\.1024"):
        conv2d_direct(x, f, launch=DirectLaunch(2048))
