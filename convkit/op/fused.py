"""``convkit.conv2d_relu_pool``: conv + bias + ReLU + 2x2 max-pool as one op.

Where the fused kernel of the CNN chapter applies (5x5 filters, no padding) and the package's choices for
this GPU do not have a library's layer faster (:mod:`convkit.core.shipped`), each image runs through that one
kernel; otherwise :func:`convkit.op.conv.conv2d`, then ReLU and the pool in the caller's library.
"""

from __future__ import annotations

import functools
from typing import Any

from convkit.core import shipped
from convkit.core.arguments import check_arguments, describe
from convkit.core.problem import ConvProblem
from convkit.families import toy_cnn
from convkit.op import torch_ops
from convkit.op.conv import RUNNERS, conv2d, known
from convkit.op.interop import cupy_stream, gpu_name


def fused_knobs(problem: ConvProblem, gpu: str) -> dict[str, Any] | None:
    """The fused kernel's knobs for ``problem`` on ``gpu``: the shipped choice of its one-image layer, the
    default tile where none is shipped; None where the kernel does not apply or a library's layer was faster."""
    if not toy_cnn.fused_applies(problem):
        return None
    choices = shipped.shipped(gpu).get("fused", {})
    key = toy_cnn.one_image(problem).key
    return choices[key] if key in choices else toy_cnn.launch.default_tile().to_params()


def conv2d_relu_pool(x: Any, w: Any, bias: Any, *, padding: int = 0) -> Any:
    """``max_pool2d(relu(conv2d(x, w, bias, padding=padding)), 2)``: the CNN chapter's layer as one op.

    Where the fused kernel of that chapter applies (5x5 filters, no padding) and its recorded sweep does not
    have a library faster, each image runs through that one kernel; otherwise :func:`conv2d` then ReLU and
    the pool in the caller's library. Arguments as :func:`conv2d` (``bias`` required). The choice is made
    once per call signature, as :func:`conv2d`'s.
    """
    if torch_ops.compiling():  # torch.compile is tracing: one node of its graph, the registered operator
        return torch_ops.traced_conv2d_relu_pool(x, w, bias, padding)
    return conv2d_relu_pool_eager(x, w, bias, padding)


def conv2d_relu_pool_eager(x: Any, w: Any, bias: Any, padding: int) -> Any:
    """:func:`conv2d_relu_pool` as it runs outside ``torch.compile`` (and inside its registered operator)."""
    k, runner = known("relu_pool", x, w, bias, 1, padding) if bias is not None else (None, None)
    if runner is not None:
        return runner(x, w, bias)
    xd, wd, bd = describe("x", x), describe("w", w), describe("bias", bias)
    problem = check_arguments(xd, wd, bd, stride=1, padding=padding)
    knobs = fused_knobs(problem, gpu_name())
    if knobs is not None:
        runner = functools.partial(_fused, problem=problem, knobs=knobs, library=xd.library)
    elif xd.library == "torch":
        runner = functools.partial(_composed_torch, padding=padding)
    else:
        runner = functools.partial(_composed_cupy, padding=padding)
    if k is not None:
        RUNNERS[k] = runner
    return runner(x, w, bias)


torch_ops.EAGER["conv2d_relu_pool"] = conv2d_relu_pool_eager


def _composed_torch(x: Any, w: Any, bias: Any, *, padding: int) -> Any:
    import torch

    return torch.nn.functional.max_pool2d(torch.relu_(conv2d(x, w, bias, padding=padding)), 2)


def _composed_cupy(x: Any, w: Any, bias: Any, *, padding: int) -> Any:
    import cupy

    y = conv2d(x, w, bias, padding=padding)
    cupy.maximum(y, 0, out=y)
    n, m, ph, pw = y.shape[0], y.shape[1], y.shape[2] // 2, y.shape[3] // 2
    return y[:, :, : 2 * ph, : 2 * pw].reshape(n, m, ph, 2, pw, 2).max(axis=(3, 5))


def _fused(x: Any, w: Any, bias: Any, *, problem: ConvProblem, knobs: dict[str, Any], library: str) -> Any:
    """The chapter's fused kernel on every image of ``x``, in the caller's library and stream."""
    import contextlib

    import cupy

    shape = (problem.n, problem.m, problem.out_h // 2, problem.out_w // 2)
    if library == "torch":
        import torch

        device = x.get_device()
        result = torch.empty(shape, dtype=torch.float32, device=x.device)
        context = cupy_stream(device)
        x, w, bias, out = (cupy.from_dlpack(a.detach()) for a in (x, w, bias, result))  # as conv.py's
    else:
        result = out = cupy.empty(shape, dtype=cupy.float32)
        context = contextlib.nullcontext()
    with context:
        toy_cnn.run_fused(x, w, bias, problem, out, knobs)
    return result
