"""The float64 reference against explicit loops on small random shapes."""

from __future__ import annotations

import numpy as np
import pytest

from convkit.core import reference


def loops_conv2d(x, w, pad, stride):
    n, c, h, wd = x.shape
    m, _, r, s = w.shape
    p, q = (h + 2 * pad - r) // stride + 1, (wd + 2 * pad - s) // stride + 1
    y = np.zeros((n, m, p, q))
    for b in range(n):
        for k in range(m):
            for i in range(p):
                for j in range(q):
                    acc = 0.0
                    for ch in range(c):
                        for u in range(r):
                            for v in range(s):
                                hh, ww = i * stride + u - pad, j * stride + v - pad
                                if 0 <= hh < h and 0 <= ww < wd:
                                    acc += x[b, ch, hh, ww] * w[k, ch, u, v]
                    y[b, k, i, j] = acc
    return y


SHAPES = [  # (N, C, H, W, M, R, S, pad, stride)
    (1, 3, 7, 9, 4, 3, 3, 1, 1),
    (2, 1, 6, 5, 3, 5, 5, 2, 1),
    (1, 4, 8, 8, 1, 1, 1, 0, 1),
    (1, 2, 9, 7, 2, 3, 3, 1, 2),
    (2, 2, 2, 3, 3, 5, 5, 2, 1),  # input smaller than the filter
    (1, 3, 5, 6, 2, 3, 2, 0, 1),  # non-square filter, no padding
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_conv2d_matches_loops(shape, rng):
    n, c, h, w, m, r, s, pad, stride = shape
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    f = rng.standard_normal((m, c, r, s)).astype(np.float32)
    out = reference.conv2d(x, f, pad=pad, stride=stride)
    assert out.dtype == np.float64
    np.testing.assert_allclose(
        out, loops_conv2d(x.astype(np.float64), f.astype(np.float64), pad, stride), rtol=1e-12, atol=1e-12
    )


def test_conv2d_rejects_mismatch_and_empty_output(rng):
    with pytest.raises(ValueError, match="channels"):
        reference.conv2d(rng.standard_normal((1, 3, 5, 5)), rng.standard_normal((2, 2, 3, 3)))
    with pytest.raises(ValueError, match="give no output"):
        reference.conv2d(rng.standard_normal((1, 3, 2, 2)), rng.standard_normal((2, 3, 3, 3)))


def test_bias_relu_pool_match_loops(rng):
    y = rng.standard_normal((2, 3, 5, 7))
    bias = rng.standard_normal(3)
    biased = reference.bias_add(y, bias)
    for k in range(3):
        np.testing.assert_array_equal(biased[:, k], y[:, k] + bias[k])
    np.testing.assert_array_equal(reference.relu(y), np.where(y > 0, y, 0.0))
    pooled = reference.max_pool2x2(y)
    assert pooled.shape == (2, 3, 2, 3)  # odd trailing row and column dropped
    for i in range(2):
        for j in range(3):
            np.testing.assert_array_equal(
                pooled[..., i, j], y[..., 2 * i : 2 * i + 2, 2 * j : 2 * j + 2].max(axis=(-2, -1))
            )


def test_relative_error(rng):
    ref = rng.standard_normal((3, 4))
    assert reference.relative_error(ref.copy(), ref) == 0.0
    noisy = ref * (1 + 1e-7)
    assert reference.relative_error(noisy, ref) == pytest.approx(1e-7, rel=1e-3)
    poisoned = ref.copy()
    poisoned[1, 2] = np.nan
    assert np.isnan(reference.relative_error(poisoned, ref))
    with pytest.raises(ValueError, match="shape"):
        reference.relative_error(ref[:2], ref)
