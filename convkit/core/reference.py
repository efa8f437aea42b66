"""The float64 reference every kernel is checked against.

The functions take NumPy arrays (or CuPy arrays: the same code runs on the GPU in float64, for
layers too large to check on the CPU in reasonable time) and compute in float64. The convolution
is a cross-correlation, as in cuDNN and every paper of the study.
"""

from __future__ import annotations

from typing import Any

import numpy as np

Array = Any  # numpy.ndarray or cupy.ndarray

#: Relative error a direct FP32 method must stay under (the study's correctness bar).
DIRECT_TOLERANCE = 1e-5
#: FFT and Winograd transforms round more: they land near 1e-6..1e-4 on FP32 data.
TRANSFORM_TOLERANCE = 1e-3


def _xp(a: Array) -> Any:
    """The array module (numpy or cupy) an array belongs to."""
    module = type(a).__module__.split(".")[0]
    if module == "cupy":
        import cupy

        return cupy
    return np


def conv2d(x: Array, w: Array, *, pad: int = 0, stride: int = 1) -> Array:
    """NCHW cross-correlation in float64: ``y[n,m,p,q] = sum_{c,r,s} x[n,c,p*u+r-pad,q*u+s-pad] w[m,c,r,s]``.

    Args:
        x: input, shape (N, C, H, W).
        w: filters, shape (M, C, R, S).
        pad: zero padding on every side.
        stride: window step in both directions.

    Returns:
        float64 array of shape (N, M, P, Q).
    """
    xp = _xp(x)
    n, c, h, wd = x.shape
    m, c_w, r, s = w.shape
    if c != c_w:
        raise ValueError(f"w has {c_w} channels but x has {c}")
    p = (h + 2 * pad - r) // stride + 1
    q = (wd + 2 * pad - s) // stride + 1
    if p < 1 or q < 1:
        raise ValueError(f"pad={pad}, stride={stride} give no output for {h}x{wd} and {r}x{s}")
    x64 = xp.pad(xp.asarray(x, dtype=xp.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    w64 = xp.asarray(w, dtype=xp.float64)
    y = xp.zeros((n, m, p, q), dtype=xp.float64)
    # One (N*P*Q x C) @ (C x M) product per filter tap: memory stays at one input-sized slice.
    for i in range(r):
        for j in range(s):
            window = x64[:, :, i : i + stride * (p - 1) + 1 : stride, j : j + stride * (q - 1) + 1 : stride]
            y += xp.einsum("ncpq,mc->nmpq", window, w64[:, :, i, j], optimize=True)
    return y


def bias_add(y: Array, bias: Array) -> Array:
    """Add one bias per channel of an NCHW array, in float64."""
    xp = _xp(y)
    return xp.asarray(y, dtype=xp.float64) + xp.asarray(bias, dtype=xp.float64)[None, :, None, None]


def relu(y: Array) -> Array:
    """max(y, 0) elementwise, in float64."""
    xp = _xp(y)
    return xp.maximum(xp.asarray(y, dtype=xp.float64), 0.0)


def max_pool2x2(y: Array) -> Array:
    """2x2 max-pool with stride 2 over the last two axes (odd trailing rows/columns dropped)."""
    xp = _xp(y)
    y = xp.asarray(y, dtype=xp.float64)
    h2, w2 = y.shape[-2] // 2, y.shape[-1] // 2
    y = y[..., : 2 * h2, : 2 * w2]
    return y.reshape(*y.shape[:-2], h2, 2, w2, 2).max(axis=(-3, -1))


def relative_error(out: Array, ref: Array) -> float:
    """Norm-wise relative error ``||out - ref|| / ||ref||`` in float64; NaN anywhere gives NaN.

    A shape mismatch raises rather than broadcasting into a meaningless number.
    """
    if tuple(out.shape) != tuple(ref.shape):
        raise ValueError(f"output shape {tuple(out.shape)} differs from reference {tuple(ref.shape)}")
    xp = _xp(ref)
    out64 = xp.asarray(out, dtype=xp.float64)
    ref64 = xp.asarray(ref, dtype=xp.float64)
    denom = float(xp.linalg.norm(ref64.ravel()))
    diff = float(xp.linalg.norm((out64 - ref64).ravel()))
    if not np.isfinite(diff):
        return float("nan")
    return diff / denom if denom > 0 else (0.0 if diff == 0 else float("inf"))
