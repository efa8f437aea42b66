"""NVIDIA CV-CUDA's conv2d on the GPU: its orientation measured by an impulse response; its check against
float64 is in tests/test_image_peers_gpu.py."""

from __future__ import annotations

import pytest

from convkit import cvcuda_filter

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
