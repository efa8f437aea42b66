"""NVIDIA NPP's filter on the GPU: its semantics measured (impulse response, reads outside the region) and the
chapter's peer against float64."""

from __future__ import annotations

import numpy as np
import pytest

from convkit import npp, reference

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


@pytest.mark.parametrize("shape", [(5, 3), (37, 41), (64, 64)])
@pytest.mark.parametrize("k", [3, 5, 7])
def test_the_peer_matches_float64(shape, k):
    import cupy

    rng = np.random.default_rng(k)
    x = rng.standard_normal((1, 1, *shape)).astype(np.float32)
    w = rng.standard_normal((1, 1, k, k)).astype(np.float32)
    out = cupy.full(x.shape, cupy.nan, dtype=cupy.float32)
    npp.correlate(cupy.asarray(x), cupy.asarray(w), out)
    assert reference.relative_error(out.get(), reference.conv2d(x, w, pad=k // 2)) < 1e-5
