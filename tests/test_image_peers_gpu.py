"""The image-processing peers of the Lu 2020 chapter (NVIDIA NPP, CV-CUDA) against float64, on odd sizes, an
image narrower than the filter and every filter size the chapter sweeps; each skips where its library is not
installed."""

from __future__ import annotations

import numpy as np
import pytest

from convkit import cvcuda_filter, npp, reference

pytestmark = pytest.mark.gpu

PEERS = {"npp": npp, "cvcuda": cvcuda_filter}


@pytest.mark.parametrize("peer", list(PEERS))
@pytest.mark.parametrize("shape", [(5, 3), (37, 41), (64, 64)])
@pytest.mark.parametrize("k", [3, 5, 7])
def test_the_peer_matches_float64(peer, shape, k):
    import cupy

    module = PEERS[peer]
    if not module.available():
        pytest.skip(f"{peer} is not installed here")
    rng = np.random.default_rng(k)
    x = rng.standard_normal((1, 1, *shape)).astype(np.float32)
    w = rng.standard_normal((1, 1, k, k)).astype(np.float32)
    out = cupy.full(x.shape, cupy.nan, dtype=cupy.float32)
    module.correlate(cupy.asarray(x), cupy.asarray(w), out)
    assert reference.relative_error(out.get(), reference.conv2d(x, w, pad=k // 2)) < 1e-5
