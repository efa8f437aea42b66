"""Launcher for ``kernels/direct.cu``: the plain direct convolution, one thread per output."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from convkit.cuda.arrays import check_conv_args, output_for
from convkit.cuda.launch import ElementwiseLaunch
from convkit.cuda.launch import launch as launch_kernel

#: Threads per block: a multiple of the warp size that the launcher's grid cap divides well.
DEFAULT_THREADS = 256


@dataclass(frozen=True)
class DirectLaunch(ElementwiseLaunch):
    """How ``conv2d_direct`` is launched: threads per block, one thread per output."""

    threads: int = DEFAULT_THREADS

    kind: ClassVar[str] = "direct"
    source: ClassVar[str] = "direct"
    kernel: ClassVar[str] = "conv2d_direct"


def conv2d_direct(
    x: Any, w: Any, *, pad: int = 0, stride: int = 1, launch: DirectLaunch | None = None, out: Any = None
) -> Any:
    """Direct convolution (cross-correlation) of NCHW ``x`` with MCRS ``w`` on the GPU.

    Args:
        x: float32 ``cupy.ndarray`` (N, C, H, W), C-contiguous.
        w: float32 ``cupy.ndarray`` (M, C, R, S), C-contiguous.
        pad: zero padding on every side.
        stride: window step in both directions.
        launch: the threads per block; default :data:`DEFAULT_THREADS`.
        out: optional float32 output (N, M, P, Q) to write into.

    Returns:
        the output ``cupy.ndarray`` (N, M, P, Q), enqueued on the current stream.

    Example:
        >>> y = conv2d_direct(x, w, pad=1)  # doctest: +SKIP
    """
    problem = check_conv_args(x, w, pad=pad, stride=stride)
    spec = launch or DirectLaunch()
    if not isinstance(spec, DirectLaunch):
        raise TypeError(f"launch must be a DirectLaunch, got {type(spec).__name__}")
    spec.can_implement(problem)  # before anything is allocated
    import cupy

    out = output_for(out, problem)
    p = problem
    launch_kernel(spec, p, (x, w, out, *(cupy.int32(v) for v in (p.n, p.c, p.h, p.w, p.m, p.r, p.s, p.out_h, p.out_w,
                                                          p.pad, p.stride))))  # fmt: skip
    return out
