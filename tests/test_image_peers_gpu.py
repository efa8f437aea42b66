"""The image-processing peers of the Lu 2020 chapter on the GPU (NVIDIA NPP, CV-CUDA): their semantics measured
by impulse responses (and, for NPP, by reads outside the region of interest), and each against float64 on odd
sizes, an image narrower than the filter and every filter size the chapter sweeps. Each test skips where its
library is not installed."""

from __future__ import annotations

import numpy as np
import pytest

from convkit.core import reference
from convkit.libs import cvcuda as cvcuda_filter
from convkit.libs import npp

pytestmark = pytest.mark.gpu

PEERS = {"npp": npp, "cvcuda": cvcuda_filter}


def _needs(peer: str):
    module = PEERS[peer]
    if not module.available():
        pytest.skip(f"{peer} is not installed here")
    return module


@pytest.mark.parametrize("k", [3, 5, 7])
@pytest.mark.parametrize("centred", [True, False])
def test_the_coefficients_are_applied_as_a_convolution(k, centred):
    """NPP: coefficient (i, j) lands where a convolution of the stored kernel puts it (the documented "reverse
    order"), the anchor coefficient on the source pixel itself: at offset (i - anchor_y, j - anchor_x)."""
    _needs("npp")
    anchor = (k // 2, k // 2) if centred else (0, 0)
    found = npp.impulse_response(k, anchor)
    expected = {(i - anchor[0], j - anchor[1]): float(i * k + j + 1) for i in range(k) for j in range(k)}
    assert found == expected


@pytest.mark.parametrize("k", [3, 5, 7])
def test_which_paths_read_outside_the_region(k):
    """NPP: the 7x7 path reads the window outside the region of interest; the 3x3 and 5x5 paths do not."""
    _needs("npp")
    response = npp.border_response(k)
    assert (response["first_row"] > 0) == (k == 7), response


@pytest.mark.parametrize("k", [3, 5, 7])
def test_the_coefficients_land_as_flips_says(k):
    """CV-CUDA: coefficient (i, j) lands at offset (K//2 - i, K//2 - j) from the impulse when conv2d correlates
    (the output pixel whose window holds the impulse at (i, j)); mirrored when it convolves."""
    _needs("cvcuda")
    found = cvcuda_filter.impulse_response(k)
    h = k // 2
    sign = -1 if cvcuda_filter.FLIPS else 1
    expected = {(sign * (h - i), sign * (h - j)): float(i * k + j + 1) for i in range(k) for j in range(k)}
    assert found == expected


@pytest.mark.parametrize("peer", list(PEERS))
@pytest.mark.parametrize("shape", [(5, 3), (37, 41), (64, 64)])
@pytest.mark.parametrize("k", [3, 5, 7])
def test_the_peer_matches_float64(peer, shape, k):
    import cupy

    module = _needs(peer)
    rng = np.random.default_rng(k)
    x = rng.standard_normal((1, 1, *shape)).astype(np.float32)
    w = rng.standard_normal((1, 1, k, k)).astype(np.float32)
    out = cupy.full(x.shape, cupy.nan, dtype=cupy.float32)
    module.correlate(cupy.asarray(x), cupy.asarray(w), out)
    assert reference.relative_error(out.get(), reference.conv2d(x, w, pad=k // 2)) < 1e-5
