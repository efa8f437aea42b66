"""NVIDIA NPP's filter on the GPU: its semantics measured by an impulse response and by reads outside the region
of interest; its check against float64 is in tests/test_image_peers_gpu.py."""

from __future__ import annotations

import pytest

from convkit import npp

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _needs_npp():
    if not npp.available():
        pytest.skip("NPP's libnppif is not installed here")


@pytest.mark.parametrize("k", [3, 5, 7])
@pytest.mark.parametrize("centred", [True, False])
def test_the_coefficients_are_applied_as_a_convolution(k, centred):
    """Coefficient (i, j) lands where a convolution of the stored kernel puts it (the documented "reverse
    order"), the anchor coefficient on the source pixel itself: at offset (i - anchor_y, j - anchor_x)."""
    anchor = (k // 2, k // 2) if centred else (0, 0)
    found = npp.impulse_response(k, anchor)
    expected = {(i - anchor[0], j - anchor[1]): float(i * k + j + 1) for i in range(k) for j in range(k)}
    assert found == expected


@pytest.mark.parametrize("k", [3, 5, 7])
def test_which_paths_read_outside_the_region(k):
    """The 7x7 path reads the window outside the region of interest; the 3x3 and 5x5 paths do not."""
    response = npp.border_response(k)
    assert (response["first_row"] > 0) == (k == 7), response
