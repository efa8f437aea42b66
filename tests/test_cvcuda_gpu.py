"""NVIDIA CV-CUDA's conv2d on the GPU: its orientation measured (impulse response) and the chapter's peer
against float64."""

from __future__ import annotations

import numpy as np
import pytest

from convkit import cvcuda_filter, reference

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _needs_cvcuda():
    if not cvcuda_filter.available():
        pytest.skip("CV-CUDA (cvcuda-cu12 or cvcuda-cu13) is not installed here")


@pytest.mark.parametrize("k", [3, 5, 7])
def test_the_coefficients_land_as_flips_says(k):
    """Coefficient (i, j) lands at offset (K//2 - i, K//2 - j) from the impulse when conv2d correlates (the
    output pixel whose window holds the impulse at (i, j)); mirrored when it convolves."""
    found = cvcuda_filter.impulse_response(k)
    h = k // 2
    sign = -1 if cvcuda_filter.FLIPS else 1
    expected = {(sign * (h - i), sign * (h - j)): float(i * k + j + 1) for i in range(k) for j in range(k)}
    assert found == expected


@pytest.mark.parametrize("shape", [(5, 3), (37, 41), (64, 64)])
@pytest.mark.parametrize("k", [3, 5, 7])
def test_the_peer_matches_float64(shape, k):
    import cupy

    rng = np.random.default_rng(k)
    x = rng.standard_normal((1, 1, *shape)).astype(np.float32)
    w = rng.standard_normal((1, 1, k, k)).astype(np.float32)
    out = cupy.full(x.shape, cupy.nan, dtype=cupy.float32)
    cvcuda_filter.correlate(cupy.asarray(x), cupy.asarray(w), out)
    assert reference.relative_error(out.get(), reference.conv2d(x, w, pad=k // 2)) < 1e-5
