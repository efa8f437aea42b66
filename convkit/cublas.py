"""The GEMM peer of 1x1 convolutions: cuBLAS SGEMM in true FP32 (TF32 off).

In NCHW a 1x1 convolution at stride 1 without padding is a batch of GEMMs, Y[n] = W . X[n]
(M x C times C x H*W), which cuBLAS runs as one strided-batched SGEMM with no layout transform:
in cuBLAS's column-major terms, Y[n]^T (HW x M) = X[n]^T (HW x C) . W^T (C x M), the filters
shared by every image (stride 0).
"""

from __future__ import annotations

import functools
from typing import Any

from convkit.compile import enqueue
from convkit.problem import ConvProblem

#: The peer's name in results rows (impl ``cublas``).
IMPL, VARIANT = "cublas", "sgemm"


def supports(problem: ConvProblem) -> bool:
    """True for a 1x1 convolution at stride 1 without padding: a GEMM per image."""
    return problem.r == problem.s == 1 and problem.stride == 1 and problem.pad == 0


def conv1x1(x: Any, w: Any, out: Any) -> None:
    """Enqueue ``out[n] = w . x[n]`` for every image on the current stream (cuBLAS, FP32 math).

    Args:
        x: float32 C-contiguous ``cupy.ndarray`` (N, C, H, W).
        w: float32 C-contiguous ``cupy.ndarray`` (M, C, 1, 1).
        out: float32 C-contiguous ``cupy.ndarray`` (N, M, H, W).
    """
    n, c, h, wd = x.shape
    enqueue(_sgemm, (x, w, out, n, c, h * wd, w.shape[0]))


def _pointer(a: Any) -> int:
    return a if isinstance(a, int) else a.data.ptr


@functools.cache
def _scalars() -> tuple[Any, Any]:
    import numpy as np

    return np.ones(1, np.float32), np.zeros(1, np.float32)


def _sgemm(args: tuple[Any, ...], stream: Any = None) -> None:
    """The strided-batched SGEMM of :func:`conv1x1` (arrays or device pointers, as :func:`enqueue` replays)."""
    import cupy
    from cupy_backends.cuda.libs import cublas

    x, w, out, n, c, hw, m = args
    handle = cupy.cuda.device.get_cublas_handle()
    cublas.setStream(handle, (stream or cupy.cuda.get_current_stream()).ptr)
    cublas.setMathMode(handle, cublas.CUBLAS_DEFAULT_MATH)  # FP32 arithmetic: no TF32 tensor cores
    one, zero = _scalars()
    cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
    cublas.sgemmStridedBatched(
        handle, cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, hw, m, c,
        one.ctypes.data, _pointer(x), hw, c * hw, _pointer(w), c, 0,
        zero.ctypes.data, _pointer(out), hw, m * hw, n,
    )  # fmt: skip
