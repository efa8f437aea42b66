"""Where the op meets its callers' libraries: PyTorch's streams, CuPy's, and a call's signature.

A call's signature (shapes, stride, padding, device, for CuPy arrays the stream, the operands' 16-byte
alignment) is what a recorded plan is kept under (:mod:`convkit.op.conv`); it is read with a few attribute
reads, and is None where a check that can change between calls of one signature fails, so the first-call checks say why.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from convkit.core.memo import memoize
from convkit.cuda.launch import external_stream, stream_key


def stream_handle(device: int) -> int:
    """The handle of PyTorch's current stream on ``device``, without making a ``torch.cuda.Stream`` (as Triton
    reads it): a call per op must stay cheap."""
    return _raw_stream()(device)


@memoize()
def _raw_stream() -> Callable[[int], int]:
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw if raw is not None else lambda device: torch.cuda.current_stream(device).cuda_stream


def cupy_stream(device: int | None = None) -> Any:
    """A CuPy stream on PyTorch's current stream of ``device`` (default: the current device), made once per
    stream: CuPy launches inside ``with cupy_stream():`` queue behind PyTorch's work, in order."""
    if device is None:
        import torch

        device = torch.cuda.current_device()
    return external_stream(stream_handle(device), device)


@memoize(for_each_device=True)
def gpu_name() -> str:
    """The current GPU's results folder name (its properties are read once per device: a read costs ~0.3 ms)."""
    from convkit.core.gpu import device_name, gpu_slug

    return gpu_slug(device_name())


@memoize()
def _torch_calls() -> tuple[type, Any, Callable[[], int], Callable[[], bool]]:
    """(Tensor, float32, the current device, whether grad mode is on): PyTorch's, looked up once, as a repeated
    call reads them each time."""
    import torch

    current = getattr(torch._C, "_cuda_getDevice", torch.cuda.current_device)
    return torch.Tensor, torch.float32, current, torch.is_grad_enabled


def torch_signature(x: Any, w: Any, bias: Any, stride: Any, padding: Any) -> tuple[Any, ...] | None:
    """The signature of a PyTorch call whose tensors pass every check that can change between calls of one
    signature (dtype, device, contiguity, gradient); None otherwise (the first-call checks then say why)."""
    tensor, f32, current_device, grad_enabled = _torch_calls()
    if not isinstance(w, tensor) or x.dtype is not f32 or w.dtype is not f32:
        return None
    if not (x.is_contiguous() and w.is_contiguous()):
        return None
    device = x.get_device()
    if device < 0 or w.get_device() != device or device != current_device():
        return None
    wants_grad = x.requires_grad or w.requires_grad
    bias_shape = None
    if bias is not None:
        if not isinstance(bias, tensor) or bias.dtype is not f32 or not bias.is_contiguous():
            return None
        if bias.get_device() != device:
            return None
        wants_grad = wants_grad or bias.requires_grad
        bias_shape = bias.shape
    if wants_grad and grad_enabled():
        return None
    # no stream: a tensor call's runner enqueues on the stream current at each call (convkit.op.conv)
    return ("torch", x.shape, w.shape, bias_shape, stride, padding, device, x.data_ptr() & 15,
            w.data_ptr() & 15)  # fmt: skip


def cupy_signature(x: Any, w: Any, bias: Any, stride: Any, padding: Any) -> tuple[Any, ...] | None:
    """As :func:`torch_signature`, for CuPy arrays (the stream is CuPy's current one)."""
    import cupy

    if type(w) is not cupy.ndarray or x.dtype.char != "f" or w.dtype.char != "f":
        return None
    if not (x.flags.c_contiguous and w.flags.c_contiguous):
        return None
    device = x.data.device_id
    if w.data.device_id != device or device != cupy.cuda.runtime.getDevice():
        return None
    bias_shape = None
    if bias is not None:
        if type(bias) is not cupy.ndarray or bias.dtype.char != "f" or not bias.flags.c_contiguous:
            return None
        if bias.data.device_id != device:
            return None
        bias_shape = bias.shape
    # the stream's key: a runner (and the scratch it keeps) per stream, per thread on the per-thread default stream
    return ("cupy", x.shape, w.shape, bias_shape, stride, padding, device,
            stream_key(cupy.cuda.get_current_stream().ptr), x.data.ptr & 15, w.data.ptr & 15)  # fmt: skip


def signature_function(kind: type) -> Callable[..., tuple[Any, ...] | None] | None:
    """The signature function of an array type (None for a type of neither CuPy nor PyTorch)."""
    return _signature_functions().get(kind)


@memoize()
def _signature_functions() -> dict[type, Callable[..., tuple[Any, ...] | None]]:
    """The signature function of each array type, found on first use (importing convkit imports neither CuPy
    nor PyTorch)."""
    found = {}
    for module, attribute, keyer in (("cupy", "ndarray", cupy_signature), ("torch", "Tensor", torch_signature)):
        try:
            found[getattr(importlib.import_module(module), attribute)] = keyer
        except ImportError:
            pass
    return found
