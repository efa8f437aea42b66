"""``convkit.conv2d``: the study's kernels as one op, for CuPy arrays and PyTorch CUDA tensors.

Per GPU and problem the op runs the fastest implementation the study checked and recorded
(:mod:`convkit.dispatch`): one of convkit's kernels, or the library where the library was faster (PyTorch's
``conv2d`` for tensors, cuDNN's recorded algorithm for CuPy arrays, cuBLAS for 1x1 layers). A problem with no
recorded choice is tuned on first use (every registered kernel, cuDNN and the peers, checked and timed once,
the fastest kept in the user's cache), or, with tuning off, runs the FP32 chapter's implicit GEMM, which takes
every filter size, stride and padding.

Arguments are checked before anything is allocated or launched, and every error names the argument. Not
supported, and said so: autograd (tensors that require a gradient while grad mode is on), ``channels_last``
tensors, groups and dilation (``convkit.torch.patch`` leaves such layers to PyTorch).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from convkit import dispatch
from convkit.problem import ConvProblem

#: What runs a problem no table records: the FP32 chapter's implicit GEMM (any filter, stride, padding).
FALLBACK = dispatch.Choice("convkit", "fp32_igemm", "", "fp32", source="heuristic")


@dataclass(frozen=True)
class Operand:
    """What the checks need to know of an argument, whichever library holds it."""

    library: str  # "cupy" or "torch"
    shape: tuple[int, ...]
    dtype: str
    device: int | None  # CUDA device ordinal; None: not on a GPU
    contiguous: bool
    channels_last: bool = False
    requires_grad: bool = False


def describe(name: str, a: Any) -> Operand:
    """The :class:`Operand` of a CuPy array or a PyTorch tensor; raises TypeError naming ``name`` otherwise."""
    module = type(a).__module__.split(".")[0]
    if module == "torch":
        cuda = bool(a.is_cuda)
        channels_last = a.dim() == 4 and not a.is_contiguous() and a.is_contiguous(memory_format=_channels_last())
        return Operand("torch", tuple(a.shape), str(a.dtype).removeprefix("torch."), a.device.index if cuda else None,
                       bool(a.is_contiguous()), channels_last, bool(a.requires_grad) and _grad_enabled())  # fmt: skip
    if module == "cupy":
        return Operand("cupy", tuple(a.shape), str(a.dtype), a.device.id, bool(a.flags.c_contiguous))
    raise TypeError(f"{name} must be a cupy.ndarray or a torch.Tensor on the GPU, got {type(a).__module__}."
                    f"{type(a).__name__}")  # fmt: skip


def _channels_last() -> Any:
    import torch

    return torch.channels_last


def _grad_enabled() -> bool:
    import torch

    return bool(torch.is_grad_enabled())


def check_arguments(x: Operand, w: Operand, bias: Operand | None, *, stride: Any, padding: Any) -> ConvProblem:
    """The problem ``x``, ``w`` (and ``bias``) describe; raises TypeError or ValueError naming the argument."""
    named = [("x", x), ("w", w)] + ([("bias", bias)] if bias is not None else [])
    for name, a in named:
        if a.library != x.library:
            raise TypeError(f"{name} is a {a.library} array but x is a {x.library} one: pass one library's arrays")
        if a.device is None:
            raise ValueError(f"{name} must be on a CUDA device, it is on the CPU")
        if a.dtype != "float32":
            raise TypeError(f"{name} must be float32, got {a.dtype}")
        if a.requires_grad:
            raise ValueError(f"{name} requires a gradient: convkit.conv2d has no backward; call it under "
                             "torch.no_grad() or use torch.nn.functional.conv2d")  # fmt: skip
        if a.channels_last:
            raise ValueError(f"{name} is channels_last: convkit.conv2d takes NCHW (call .contiguous())")
        if not a.contiguous:
            raise ValueError(f"{name} must be contiguous (NCHW)")
        if a.device != x.device:
            raise ValueError(f"{name} is on device {a.device} but x is on device {x.device}")
    if len(x.shape) != 4:
        raise ValueError(f"x must be 4-D (N, C, H, W), got shape {x.shape}")
    if len(w.shape) != 4:
        raise ValueError(f"w must be 4-D (M, C, R, S), got shape {w.shape}")
    if w.shape[1] != x.shape[1]:
        raise ValueError(f"w has {w.shape[1]} channels but x has {x.shape[1]} (groups are not supported)")
    if bias is not None and bias.shape != (w.shape[0],):
        raise ValueError(f"bias must have shape ({w.shape[0]},), one value per filter, got {bias.shape}")
    for name, value, least in (("stride", stride, 1), ("padding", padding, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ValueError(f"{name} must be an int >= {least} (the same in both directions), got {value!r}")
    n, c, h, wd = x.shape
    m, _, r, s = w.shape
    if (h + 2 * padding - r) // stride + 1 < 1 or (wd + 2 * padding - s) // stride + 1 < 1:
        raise ValueError(f"padding={padding}, stride={stride} give no output for a {h}x{wd} input and a {r}x{s} "
                         "filter")  # fmt: skip
    return ConvProblem(n, c, h, wd, m, r, s, pad=padding, stride=stride)


_CHOICES: dict[tuple[str, str], dispatch.Choice] = {}


def tuning_enabled() -> bool:
    """Whether a problem no table records is tuned on first use (``CONVKIT_TUNE=0`` turns it off, as
    ``torch.backends.cudnn.benchmark = False`` does for PyTorch); off, it runs :data:`FALLBACK`."""
    return os.environ.get("CONVKIT_TUNE", "1") != "0"


def choose(problem: ConvProblem, gpu: str) -> dispatch.Choice:
    """The implementation of ``problem`` on ``gpu``, found once per process and then remembered: the user's
    cache, then the shipped table, else tuned now (:func:`convkit.dispatch.tune`, kept in the cache) or, with
    tuning off, :data:`FALLBACK`."""
    k = (gpu, dispatch.key(problem))
    found = _CHOICES.get(k)
    if found is None:
        found = dispatch.lookup(problem, gpu) or (dispatch.tune(problem, gpu) if tuning_enabled() else FALLBACK)
        _CHOICES[k] = found
    return found


def conv2d(x: Any, w: Any, bias: Any = None, *, stride: int = 1, padding: int = 0) -> Any:
    """Cross-correlation of NCHW ``x`` with MCRS ``w`` (plus ``bias``), like ``torch.nn.functional.conv2d``
    without groups or dilation, by the fastest implementation recorded for this GPU and problem.

    Args:
        x: float32 (N, C, H, W), a CuPy array or a PyTorch CUDA tensor, contiguous.
        w: float32 (M, C, R, S), the same library and device as ``x``.
        bias: optional float32 (M,).
        stride: window step in both directions.
        padding: zero padding on every side.

    Returns:
        the output (N, M, P, Q) as the caller's type, enqueued on the caller's current stream.
    """
    xd, wd = describe("x", x), describe("w", w)
    bd = describe("bias", bias) if bias is not None else None
    problem = check_arguments(xd, wd, bd, stride=stride, padding=padding)
    if xd.library == "torch":
        return _conv2d_torch(x, w, bias, problem)
    return _conv2d_cupy(x, w, bias, problem)


def _gpu_name() -> str:
    from convkit.gpu import device_name, gpu_slug

    return gpu_slug(device_name())


def _run(choice: dispatch.Choice, x: Any, w: Any, problem: ConvProblem, out: Any) -> None:
    """Enqueue a convkit or cuBLAS choice on CuPy arrays into ``out``."""
    from convkit import cublas
    from convkit.papers import paper

    if choice.impl == "cublas":
        cublas.conv1x1(x, w, out)
        return
    variant = paper(choice.paper).kernels[choice.variant]
    knobs = json.loads(choice.params) if choice.params else variant.knobs(problem)
    variant.run(x, w, problem, out, **knobs)


def _conv2d_cupy(x: Any, w: Any, bias: Any, problem: ConvProblem) -> Any:
    import cupy

    choice = choose(problem, _gpu_name())
    out = cupy.empty(problem.output_shape, dtype=cupy.float32)
    if choice.impl == "cudnn":  # cuDNN's recorded algorithm, its descriptors made once per problem
        from convkit.cudnn import CudnnConvolution

        conv = _CUDNN.get(problem)
        if conv is None:
            conv = _CUDNN[problem] = CudnnConvolution(problem)
        conv.forward(choice.variant, x, w, out)
    else:  # a convkit kernel, cuBLAS; where PyTorch was fastest, which CuPy arrays do not reach: the fallback
        _run(choice if choice.impl in ("convkit", "cublas") else FALLBACK, x, w, problem, out)
    if bias is not None:
        out += bias.reshape(1, -1, 1, 1)
    return out


#: CuPy streams wrapping PyTorch's, by handle; cuDNN descriptors by problem: made once per process.
_STREAMS: dict[int, Any] = {}
_CUDNN: dict[ConvProblem, Any] = {}


def _conv2d_torch(x: Any, w: Any, bias: Any, problem: ConvProblem) -> Any:
    import cupy
    import torch

    choice = choose(problem, _gpu_name())
    if choice.impl not in ("convkit", "cublas"):  # the library was fastest: PyTorch's own cuDNN
        return torch.nn.functional.conv2d(x, w, bias, stride=problem.stride, padding=problem.pad)
    out = torch.empty(problem.output_shape, dtype=torch.float32, device=x.device)
    handle = torch.cuda.current_stream(x.device).cuda_stream
    stream = _STREAMS.get(handle)
    if stream is None:
        stream = _STREAMS[handle] = cupy.cuda.ExternalStream(handle)
    with cupy.cuda.Device(x.device.index), stream:
        _run(choice, cupy.from_dlpack(x), cupy.from_dlpack(w), problem, cupy.from_dlpack(out))
    if bias is not None:
        out += bias.view(1, -1, 1, 1)
    return out
