"""Argument checks shared by every convkit launcher: run before any launch, errors name the argument."""

from __future__ import annotations

from typing import Any

from convkit.core.problem import ConvProblem


def check_conv_args(x: Any, w: Any, *, pad: int, stride: int) -> ConvProblem:
    """Validate a convolution's arguments and describe it.

    Args:
        x: input, a C-contiguous float32 ``cupy.ndarray`` (N, C, H, W) on the current device.
        w: filters, a C-contiguous float32 ``cupy.ndarray`` (M, C, R, S) on the same device.
        pad: zero padding on every side, a non-negative int.
        stride: window step, a positive int.

    Returns:
        the :class:`ConvProblem` the arguments describe.

    Raises:
        TypeError: an argument of the wrong type or dtype, or not on the GPU.
        ValueError: wrong rank, non-contiguous, channel mismatch, wrong device, or a padding
            and stride that give no output.
    """
    from convkit.core.gpu import require_cupy

    cupy = require_cupy()
    current = cupy.cuda.Device().id
    for name, a in (("x", x), ("w", w)):
        if not isinstance(a, cupy.ndarray):
            raise TypeError(f"{name} must be a cupy.ndarray on the GPU, got {type(a).__module__}.{type(a).__name__}")
        if a.dtype != cupy.float32:
            raise TypeError(f"{name} must be float32, got {a.dtype}")
        if a.ndim != 4:
            shape = "(N, C, H, W)" if name == "x" else "(M, C, R, S)"
            raise ValueError(f"{name} must be 4-D {shape}, got shape {a.shape}")
        if not a.flags.c_contiguous:
            raise ValueError(f"{name} must be C-contiguous NCHW (call cupy.ascontiguousarray)")
        if a.device.id != current:
            raise ValueError(f"{name} is on device {a.device.id}, but the current device is {current}")
    if x.shape[1] != w.shape[1]:
        raise ValueError(f"w has {w.shape[1]} channels but x has {x.shape[1]}")
    if not isinstance(pad, int) or isinstance(pad, bool) or pad < 0:
        raise ValueError(f"pad must be a non-negative int, got {pad!r}")
    if not isinstance(stride, int) or isinstance(stride, bool) or stride < 1:
        raise ValueError(f"stride must be a positive int, got {stride!r}")
    n, c, h, wd = x.shape
    m, _, r, s = w.shape
    if (h + 2 * pad - r) // stride + 1 < 1 or (wd + 2 * pad - s) // stride + 1 < 1:
        raise ValueError(f"pad={pad}, stride={stride} give no output for a {h}x{wd} input and a {r}x{s} filter")
    return ConvProblem(n, c, h, wd, m, r, s, pad=pad, stride=stride)


def check_output(out: Any, problem: ConvProblem) -> None:
    """Check a caller-provided output array: float32, C-contiguous, the problem's output shape."""
    from convkit.core.gpu import require_cupy

    cupy = require_cupy()
    if not isinstance(out, cupy.ndarray) or out.dtype != cupy.float32:
        raise TypeError("out must be a float32 cupy.ndarray")
    if tuple(out.shape) != problem.output_shape or not out.flags.c_contiguous:
        raise ValueError(f"out must be C-contiguous with shape {problem.output_shape}, got {out.shape}")


def output_for(out: Any, problem: ConvProblem) -> Any:
    """``out`` checked with :func:`check_output`, or a new float32 output of the problem's shape."""
    from convkit.core.gpu import require_cupy

    if out is None:
        cupy = require_cupy()
        return cupy.empty(problem.output_shape, dtype=cupy.float32)
    check_output(out, problem)
    return out
