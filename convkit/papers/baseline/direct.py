"""Launcher for ``kernels/direct.cu``: the plain direct convolution, one thread per output."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from convkit.arrays import check_conv_args, output_for
from convkit.compile import launch
from convkit.problem import ConvProblem

#: Threads per block: a multiple of the warp size that the launcher's grid cap divides well.
DEFAULT_THREADS = 256
#: The grid's x-dimension limit; the kernel strides over the outputs beyond it.
MAX_BLOCKS = 2**31 - 1


@dataclass(frozen=True)
class DirectLaunch:
    """How ``conv2d_direct`` is launched: threads per block, one thread per output (a
    :class:`convkit.compile.Launch`)."""

    threads: int = DEFAULT_THREADS

    source: ClassVar[str] = "direct"

    def as_params(self) -> dict[str, int]:
        """The knobs as a results row's ``params``."""
        return {"threads": self.threads}

    def kernel_name(self, problem: ConvProblem) -> str:
        return "conv2d_direct"

    def options(self, problem: ConvProblem) -> tuple[str, ...]:
        return ()

    def grid(self, problem: ConvProblem) -> tuple[int, ...]:
        return (min(math.ceil(math.prod(problem.output_shape) / self.threads), MAX_BLOCKS),)

    def block(self, problem: ConvProblem) -> tuple[int, ...]:
        return (self.threads,)

    def shared_bytes(self, problem: ConvProblem) -> int:
        return 0

    def can_implement(self, problem: ConvProblem) -> None:
        """Raise ValueError naming ``threads`` if it is no int in 1..1024 (every problem runs)."""
        if not isinstance(self.threads, int) or isinstance(self.threads, bool) or not 1 <= self.threads <= 1024:
            raise ValueError(f"threads must be an int in 1..1024, got {self.threads!r}")


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
    spec = DirectLaunch(threads)
    spec.can_implement(problem)  # before anything is allocated
    import cupy

    out = output_for(out, problem)
    p = problem
    launch(spec, p, (x, w, out, *(cupy.int32(v) for v in (p.n, p.c, p.h, p.w, p.m, p.r, p.s, p.out_h, p.out_w,
                                                          p.pad, p.stride))))  # fmt: skip
    return out
