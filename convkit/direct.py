"""Launcher for ``kernels/direct.cu``: the plain direct convolution, one thread per output."""

from __future__ import annotations

from typing import Any

from convkit.arrays import check_conv_args, output_for
from convkit.compile import load_kernel

#: Threads per block: a multiple of the warp size that the launcher's grid cap divides well.
DEFAULT_THREADS = 256


def conv2d_direct(
    x: Any, w: Any, *, pad: int = 0, stride: int = 1, threads: int = DEFAULT_THREADS, out: Any = None
) -> Any:
    """Direct convolution (cross-correlation) of NCHW ``x`` with MCRS ``w`` on the GPU.

    Args:
        x: float32 ``cupy.ndarray`` (N, C, H, W), C-contiguous.
        w: float32 ``cupy.ndarray`` (M, C, R, S), C-contiguous.
        pad: zero padding on every side.
        stride: window step in both directions.
        threads: threads per block (1..1024).
        out: optional float32 output (N, M, P, Q) to write into.

    Returns:
        the output ``cupy.ndarray`` (N, M, P, Q), enqueued on the current stream.

    Example:
        >>> y = conv2d_direct(x, w, pad=1)  # doctest: +SKIP
    """
    problem = check_conv_args(x, w, pad=pad, stride=stride)
    if not isinstance(threads, int) or not 1 <= threads <= 1024:
        raise ValueError(f"threads must be an int in 1..1024, got {threads!r}")
    import cupy

    out = output_for(out, problem)
    total = out.size
    # Cap the grid (the kernel strides over the rest): 2^31-1 blocks is the x-dimension limit.
    blocks = min((total + threads - 1) // threads, 2**31 - 1)
    p = problem
    load_kernel("direct", "conv2d_direct")(
        (blocks,), (threads,),
        (x, w, out, *(cupy.int32(v) for v in (p.n, p.c, p.h, p.w, p.m, p.r, p.s, p.out_h, p.out_w, p.pad, p.stride))),
    )  # fmt: skip
    return out
