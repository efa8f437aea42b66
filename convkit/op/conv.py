"""``convkit.conv2d``: the study's kernels as one op, for CuPy arrays and PyTorch CUDA tensors.

Per GPU and problem the op runs the fastest implementation the study checked and recorded
(:mod:`convkit.op.dispatch`): one of convkit's kernels, or the library where the library was faster (PyTorch's
``conv2d`` for tensors, cuDNN's recorded algorithm for CuPy arrays, cuBLAS for 1x1 layers). A problem with no
recorded choice is tuned on first use (every registered kernel, cuDNN and the peers, checked and timed once,
the fastest kept in the user's cache), or, with tuning off, runs the FP32 chapter's implicit GEMM, which takes
every filter size, stride and padding.

Arguments are checked before anything is allocated or launched, and every error names the argument. Not
supported, and said so: autograd (tensors that require a gradient while grad mode is on), ``channels_last``
tensors, groups and dilation (``convkit.op.patch.patch`` leaves such layers to PyTorch).
"""

from __future__ import annotations

import functools
import importlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from convkit.core.arguments import check_arguments, describe
from convkit.core.problem import ConvProblem
from convkit.cuda.compile import ElementwiseLaunch, Recording
from convkit.cuda.plan import Plan
from convkit.libs.pytorch import cupy_stream, stream_handle
from convkit.op import dispatch

#: What runs a problem no table records: the FP32 chapter's implicit GEMM (any filter, stride, padding).
FALLBACK = dispatch.Choice("convkit", "fp32_igemm", "", "fp32", source="heuristic")


_CHOICES: dict[tuple[str, str], dispatch.Choice] = {}


def tuning_enabled() -> bool:
    """Whether a problem no table records is tuned on first use (``CONVKIT_TUNE=0`` turns it off, as
    ``torch.backends.cudnn.benchmark = False`` does for PyTorch); off, it runs :data:`FALLBACK`."""
    return os.environ.get("CONVKIT_TUNE", "1") != "0"


def choose(problem: ConvProblem, gpu: str) -> dispatch.Choice:
    """The implementation of ``problem`` on ``gpu``, found once per process and then remembered: the user's
    cache, then the shipped table, else tuned now (:func:`convkit.op.dispatch.tune`, kept in the cache) or, with
    tuning off, :data:`FALLBACK`."""
    k = (gpu, dispatch.key(problem))
    found = _CHOICES.get(k)
    if found is None:
        found = dispatch.lookup(problem, gpu) or (dispatch.tune(problem, gpu) if tuning_enabled() else FALLBACK)
        _CHOICES[k] = found
    return found


@dataclass(frozen=True)
class BiasLaunch(ElementwiseLaunch):
    """``add_bias`` in ``kernels/bias.cu``: the bias added to the output in place."""

    source: ClassVar[str] = "bias"
    kernel: ClassVar[str] = "add_bias"
    max_blocks: ClassVar[int] = 65535  # grid-stride beyond


#: The runner of each call signature seen (:func:`_torch_key`, :func:`_cupy_key`): a replayed plan or the
#: library, so that a repeated call does no checks but a few attribute reads and no lookups but this one.
_RUNNERS: dict[tuple[Any, ...], Callable[[Any, Any, Any], Any]] = {}


def implementation(problem: ConvProblem) -> dispatch.Choice:
    """What :func:`conv2d` runs ``problem`` with on this GPU (tuning it first if nothing records it)."""
    return choose(problem, _gpu_name())


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

    The first call of a signature (shapes, stride, padding, device, stream, the operands' 16-byte alignment)
    checks the arguments, picks the implementation and records its launches; later calls replay them
    (:mod:`convkit.cuda.plan`), checking only what can change between calls of one signature.
    """
    k, runner = _known("conv2d", x, w, bias, stride, padding)
    if runner is not None:
        return runner(x, w, bias)
    return _first_call(x, w, bias, stride, padding, k)


def replay_if_known(x: Any, w: Any, bias: Any, stride: int, padding: int) -> Any:
    """:func:`conv2d`'s output where this call's signature has run before, else None (nothing enqueued)."""
    _, runner = _known("conv2d", x, w, bias, stride, padding)
    return runner(x, w, bias) if runner is not None else None


def _known(op: str, x: Any, w: Any, bias: Any, stride: Any, padding: Any) -> tuple[Any, Any]:
    """(the signature of this call of ``op``, its runner if the signature has run before); the signature is
    None where a check fails or the arrays are of no known library (the first-call checks then say why)."""
    keyer = _keyer(type(x))
    k = keyer(x, w, bias, stride, padding) if keyer is not None else None
    if k is None:
        return None, None
    k = (op, *k)
    return k, _RUNNERS.get(k)


def _first_call(x: Any, w: Any, bias: Any, stride: Any, padding: Any, k: tuple[Any, ...] | None) -> Any:
    """Check, choose, run (recording the launches) and keep the runner under ``k`` for the next calls."""
    xd, wd = describe("x", x), describe("w", w)
    bd = describe("bias", bias) if bias is not None else None
    problem = check_arguments(xd, wd, bd, stride=stride, padding=padding)
    choice = choose(problem, _gpu_name())
    make = _torch_runner if xd.library == "torch" else _cupy_runner
    runner, out = make(choice, problem, x, w, bias)
    if k is not None:
        _RUNNERS[k] = runner
    return out


def _papers() -> tuple[Any, ...]:
    from convkit.papers import PAPERS

    return PAPERS


_GPU_NAMES: dict[int, str] = {}


def _gpu_name() -> str:
    """The current GPU's results folder name (its properties are read once per device: a read costs ~0.3 ms)."""
    import cupy

    from convkit.core.gpu import device_name, gpu_slug

    device = cupy.cuda.runtime.getDevice()
    found = _GPU_NAMES.get(device)
    if found is None:
        found = _GPU_NAMES[device] = gpu_slug(device_name())
    return found


def _run(choice: dispatch.Choice, x: Any, w: Any, bias: Any, problem: ConvProblem, out: Any) -> Recording:
    """Enqueue a convkit or cuBLAS choice (and the bias) on CuPy arrays into ``out``, recording it."""
    from convkit.cuda.compile import recording
    from convkit.libs import cublas
    from convkit.papers import paper

    with recording(bias=bias, output=out) as found:
        if choice.impl == "cublas":
            cublas.conv1x1(x, w, out)
        else:
            variant = paper(choice.paper).kernels[choice.variant]
            knobs = json.loads(choice.params) if choice.params else variant.knobs(problem)
            variant.run(x, w, problem, out, **knobs)
        if bias is not None and not found.bias_added:  # no launch took it in its epilogue
            _add_bias(out, bias, problem)
    return found


def _add_bias(out: Any, bias: Any, problem: ConvProblem) -> None:
    """Enqueue ``out += bias`` per filter (CuPy arrays) with ``kernels/bias.cu``."""
    import cupy

    from convkit.cuda.compile import launch

    plane = problem.out_h * problem.out_w
    launch(BiasLaunch(), problem, (out, bias, cupy.int32(problem.m), cupy.int64(plane), cupy.int64(out.size)))


def _recorded(choice: dispatch.Choice, problem: ConvProblem, x: Any, w: Any, bias: Any, out: Any) -> Plan:
    """Run ``choice`` on CuPy arrays and return the plan that replays it."""
    return Plan.record(_run(choice, x, w, bias, problem, out), (x, w, out, bias))


def _runs_here(choice: dispatch.Choice) -> dispatch.Choice:
    """``choice`` where convkit runs it (its kernels, cuBLAS), else the fallback kernel."""
    return choice if choice.impl in ("convkit", "cublas") else FALLBACK


# ---------------------------------------------------------------------------------------------
# PyTorch tensors

#: Scratch a plan keeps between its calls, up to this size (larger is allocated per call, as cuDNN's
#: workspace is in PyTorch): its calls run in order on one stream, so they never overlap.
KEPT_SCRATCH_BYTES = 16 << 20


def _scratch(nbytes: int, allocate: Callable[[int], Any]) -> Callable[[], Any]:
    """What a replay calls for its scratch block: None, the block kept, or a fresh one."""
    if not nbytes:
        return lambda: None
    if nbytes <= KEPT_SCRATCH_BYTES:
        kept = allocate(nbytes)
        return lambda: kept
    return lambda: allocate(nbytes)


@functools.cache
def _torch_calls() -> tuple[type, Any, Callable[[], int], Callable[[int], int], Callable[[], bool]]:
    """(Tensor, float32, the current device, the current stream's handle on a device, whether grad mode is
    on): PyTorch's, looked up once, as a repeated call reads them each time."""
    import torch

    current = getattr(torch._C, "_cuda_getDevice", torch.cuda.current_device)
    return torch.Tensor, torch.float32, current, stream_handle, torch.is_grad_enabled


def _torch_key(x: Any, w: Any, bias: Any, stride: Any, padding: Any) -> tuple[Any, ...] | None:
    """The signature of a PyTorch call whose tensors pass every check that can change between calls of one
    signature (dtype, device, contiguity, gradient); None otherwise (the first-call checks then say why)."""
    tensor, f32, current_device, current_stream, grad_enabled = _torch_calls()
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
    return ("torch", x.shape, w.shape, bias_shape, stride, padding, device, current_stream(device),
            x.data_ptr() & 15, w.data_ptr() & 15)  # fmt: skip


def _torch_runner(choice: dispatch.Choice, problem: ConvProblem, x: Any, w: Any, bias: Any) -> tuple[Any, Any]:
    import cupy
    import torch

    stride, padding = problem.stride, problem.pad
    if choice.impl not in ("convkit", "cublas"):  # the library was fastest: PyTorch's own cuDNN

        def library(x: Any, w: Any, bias: Any) -> Any:
            return torch.nn.functional.conv2d(x, w, bias, stride=stride, padding=padding)

        return library, library(x, w, bias)
    device = x.get_device()
    stream = cupy_stream(stream_handle(device), device)
    shape, where = problem.output_shape, x.device
    out = torch.empty(shape, dtype=torch.float32, device=where)
    with cupy.cuda.Device(device), stream:
        operands = [None if a is None else cupy.from_dlpack(a) for a in (x, w, out, bias)]
        plan = _recorded(choice, problem, *operands[:2], operands[3], operands[2])
    new_scratch = _scratch(plan.scratch_bytes, lambda n: torch.empty(n, dtype=torch.uint8, device=where))

    def replay(x: Any, w: Any, bias: Any) -> Any:
        out = x.new_empty(shape)
        block = new_scratch()
        plan.replay((x.data_ptr(), w.data_ptr(), out.data_ptr(), 0 if bias is None else bias.data_ptr(),
                     0 if block is None else block.data_ptr()), stream)  # fmt: skip
        return out

    return replay, out


# ---------------------------------------------------------------------------------------------
# CuPy arrays

#: cuDNN descriptors by problem: made once per process.
_CUDNN: dict[ConvProblem, Any] = {}


def _cupy_key(x: Any, w: Any, bias: Any, stride: Any, padding: Any) -> tuple[Any, ...] | None:
    """As :func:`_torch_key`, for CuPy arrays (the stream is CuPy's current one)."""
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
    return ("cupy", x.shape, w.shape, bias_shape, stride, padding, device, cupy.cuda.get_current_stream().ptr,
            x.data.ptr & 15, w.data.ptr & 15)  # fmt: skip


def _cupy_runner(choice: dispatch.Choice, problem: ConvProblem, x: Any, w: Any, bias: Any) -> tuple[Any, Any]:
    import cupy

    shape = problem.output_shape
    out = cupy.empty(shape, dtype=cupy.float32)
    if choice.impl == "cudnn":  # cuDNN's recorded algorithm, its descriptors made once per problem
        from convkit.libs.cudnn import CudnnConvolution

        conv = _CUDNN.get(problem)
        if conv is None:
            conv = _CUDNN[problem] = CudnnConvolution(problem)

        def library(x: Any, w: Any, bias: Any) -> Any:
            out = cupy.empty(shape, dtype=cupy.float32)
            conv.forward(choice.variant, x, w, out)
            if bias is not None:
                _add_bias(out, bias, problem)
            return out

        return library, library(x, w, bias)
    plan = _recorded(_runs_here(choice), problem, x, w, bias, out)
    new_scratch = _scratch(plan.scratch_bytes, lambda n: cupy.empty(n, dtype=cupy.uint8))
    current_stream = cupy.cuda.get_current_stream

    def replay(x: Any, w: Any, bias: Any) -> Any:
        out = cupy.empty(shape, dtype=cupy.float32)
        block = new_scratch()
        plan.replay((x.data.ptr, w.data.ptr, out.data.ptr, 0 if bias is None else bias.data.ptr,
                     0 if block is None else block.data.ptr), current_stream())  # fmt: skip
        return out

    return replay, out


#: The signature function of each array type, filled on first use (importing convkit imports neither CuPy
#: nor PyTorch); a type of neither library maps to None.
_KEYERS: dict[type, Callable[..., tuple[Any, ...] | None] | None] = {}


def _keyer(kind: type) -> Callable[..., tuple[Any, ...] | None] | None:
    if not _KEYERS:
        for module, attribute, keyer in (("cupy", "ndarray", _cupy_key), ("torch", "Tensor", _torch_key)):
            try:
                _KEYERS[getattr(importlib.import_module(module), attribute)] = keyer
            except ImportError:
                pass
        _KEYERS[object] = None
    return _KEYERS.get(kind)


# ---------------------------------------------------------------------------------------------
# The fused layer: conv + bias + ReLU + 2x2 max-pool


def conv2d_relu_pool(x: Any, w: Any, bias: Any, *, padding: int = 0) -> Any:
    """``max_pool2d(relu(conv2d(x, w, bias, padding=padding)), 2)``: the CNN chapter's layer as one op.

    Where the fused kernel of that chapter applies (5x5 filters, no padding) and its recorded sweep does not
    have a library faster, each image runs through that one kernel; otherwise :func:`conv2d` then ReLU and
    the pool in the caller's library. Arguments as :func:`conv2d` (``bias`` required). The choice is made
    once per call signature, as :func:`conv2d`'s.
    """
    k, runner = _known("relu_pool", x, w, bias, 1, padding) if bias is not None else (None, None)
    if runner is not None:
        return runner(x, w, bias)
    xd, wd, bd = describe("x", x), describe("w", w), describe("bias", bias)
    problem = check_arguments(xd, wd, bd, stride=1, padding=padding)
    layer = next((p.fused_layer for p in _papers() if p.fused_layer is not None), None)
    knobs = layer.choose(problem, _gpu_name()) if layer is not None else None
    if knobs is not None:
        runner = functools.partial(_fused, problem=problem, layer=layer, knobs=knobs, library=xd.library)
    elif xd.library == "torch":
        runner = functools.partial(_composed_torch, padding=padding)
    else:
        runner = functools.partial(_composed_cupy, padding=padding)
    if k is not None:
        _RUNNERS[k] = runner
    return runner(x, w, bias)


def _composed_torch(x: Any, w: Any, bias: Any, *, padding: int) -> Any:
    import torch

    return torch.nn.functional.max_pool2d(torch.relu_(conv2d(x, w, bias, padding=padding)), 2)


def _composed_cupy(x: Any, w: Any, bias: Any, *, padding: int) -> Any:
    import cupy

    y = conv2d(x, w, bias, padding=padding)
    cupy.maximum(y, 0, out=y)
    n, m, ph, pw = y.shape[0], y.shape[1], y.shape[2] // 2, y.shape[3] // 2
    return y[:, :, : 2 * ph, : 2 * pw].reshape(n, m, ph, 2, pw, 2).max(axis=(3, 5))


def _fused(x: Any, w: Any, bias: Any, *, problem: ConvProblem, layer: Any, knobs: dict[str, Any], library: str) -> Any:
    """The chapter's fused kernel on every image of ``x``, in the caller's library and stream."""
    import contextlib

    import cupy

    shape = (problem.n, problem.m, problem.out_h // 2, problem.out_w // 2)
    if library == "torch":
        import torch

        device = x.get_device()
        result = torch.empty(shape, dtype=torch.float32, device=x.device)
        context = cupy_stream(stream_handle(device), device)
        x, w, bias, out = (cupy.from_dlpack(a) for a in (x, w, bias, result))
    else:
        result = out = cupy.empty(shape, dtype=cupy.float32)
        context = contextlib.nullcontext()
    with context:
        layer.run(x, w, bias, problem, out, knobs)
    return result


#: Choices whose last launch adds the bias as it writes the output (:func:`convkit.cuda.compile.epilogue_bias`).
EPILOGUE_CHOICES = (
    dispatch.Choice("convkit", "fp32_igemm", '{"splits":4,"stages":3,"tile":"64x64"}', "fp32"),
    dispatch.Choice(
        "convkit", "cuconv_tiled", '{"filters_per_thread":1,"splits":3,"threads":128,"tile":"64x32"}', "cuconv"
    ),
    dispatch.Choice("convkit", "fp32_winograd", '{"gemm_tile":"64x64","m":2,"stages":3}', "fp32"),
)


def edge_check() -> None:
    """:func:`conv2d` with a bias on shapes no block divides (a 1-element output, C = M = 1, stride 2, an
    unaligned input), each call twice (recorded, then replayed through the driver), and the choices that add
    the bias in their last launch, each recorded and replayed; all against float64, raising AssertionError on
    a mismatch. compute-sanitizer runs it (``scripts/edge_launch.py conv2d``)."""
    import cupy
    import numpy as np

    from convkit.core import reference

    rng = np.random.default_rng(0)

    def operands(p: ConvProblem) -> tuple[Any, Any, Any, Any]:
        x = rng.standard_normal(p.input_shape).astype(np.float32)
        w = rng.standard_normal(p.filter_shape).astype(np.float32)
        b = rng.standard_normal(p.m).astype(np.float32)
        return x, w, b, reference.conv2d(x, w, pad=p.pad, stride=p.stride) + b[None, :, None, None]

    for p in (ConvProblem(1, 1, 1, 1, 1, 1, 1), ConvProblem(2, 3, 5, 7, 9, 3, 3, pad=1, stride=2),
              ConvProblem(1, 7, 9, 9, 33, 1, 1), ConvProblem(3, 2, 11, 6, 5, 5, 5, pad=2)):  # fmt: skip
        x, w, b, ref = operands(p)
        shifted = cupy.empty(x.size + 1, dtype=cupy.float32)[1:].reshape(x.shape)
        shifted[...] = cupy.asarray(x)
        for xs in (cupy.asarray(x), shifted):
            for _ in range(2):
                y = conv2d(xs, cupy.asarray(w), cupy.asarray(b), stride=p.stride, padding=p.pad)
                err = reference.relative_error(y.get(), ref)
                assert err < 1e-5, f"conv2d on {p}: relative error {err:.2e}"
    p = ConvProblem(3, 37, 9, 11, 19, 3, 3, pad=1)
    x, w, b, ref = (cupy.asarray(a) if i < 3 else a for i, a in enumerate(operands(p)))
    for choice in EPILOGUE_CHOICES:
        out = cupy.full(p.output_shape, cupy.nan, dtype=cupy.float32)
        found = _run(choice, x, w, b, p, out)
        assert found.bias_added, f"{choice.variant}: no launch added the bias"
        again = cupy.full(p.output_shape, cupy.nan, dtype=cupy.float32)
        plan = Plan.record(found, (x, w, out, b))
        block = cupy.empty(max(plan.scratch_bytes, 1), dtype=cupy.uint8)
        bases = (x.data.ptr, w.data.ptr, again.data.ptr, b.data.ptr, block.data.ptr)
        plan.replay(bases, cupy.cuda.get_current_stream())
        for y in (out, again):
            err = reference.relative_error(y.get(), ref)
            assert err < 1e-4, f"{choice.variant} with its bias in the epilogue: relative error {err:.2e}"
