"""``convkit.conv2d``: the study's kernels as one op, for CuPy arrays and PyTorch CUDA tensors.

Per GPU and problem the op runs the fastest implementation the study checked and recorded
(:mod:`convkit.op.dispatch`): one of convkit's kernels, or the library where the library was faster (PyTorch's
``conv2d`` for tensors, cuDNN's recorded algorithm for CuPy arrays, cuBLAS for 1x1 layers). A problem with no
recorded choice is tuned on first use (every registered kernel, cuDNN and the peers, checked and timed once,
the fastest kept in the user's cache), or, with tuning off, runs the FP32 chapter's implicit GEMM, which takes
every filter size, stride and padding.

It takes what ``torch.nn.functional.conv2d`` takes. Arguments are checked before anything is allocated or launched,
and every error names the argument. Not supported, and said so (NotImplementedError or ValueError naming the
argument; convkit never runs another library in place of what was asked): autograd (tensors that require a gradient
while grad mode is on), ``channels_last`` tensors, groups and dilation, a stride or padding that differs between
height and width (``convkit.patch`` leaves such layers to PyTorch).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

from convkit.core import shipped
from convkit.core.arguments import check_arguments, conv_geometry, describe
from convkit.core.memo import memoize
from convkit.core.precision import DEFAULT_INPUT_PRECISION, INPUT_PRECISIONS, check_input_precision
from convkit.core.problem import ConvProblem
from convkit.cuda.launch import ElementwiseLaunch
from convkit.cuda.operands import ConvArgs, new_workspace
from convkit.cuda.plan import Plan
from convkit.cuda.zeroed import capturing, cupy_graph_owned, cupy_zeroed, torch_replay_resolver
from convkit.op import dispatch, torch_ops
from convkit.op.interop import cupy_stream, gpu_name, signature_function

#: What runs a problem no table records: the FP32 chapter's implicit GEMM (any filter, stride, padding).
FALLBACK = dispatch.Choice("convkit", "fp32_igemm", "", "fp32", source="heuristic")


def tuning_enabled() -> bool:
    """Whether a problem no table records is tuned on first use (``CONVKIT_TUNE=0`` turns it off, as
    ``torch.backends.cudnn.benchmark = False`` does for PyTorch); off, it runs :data:`FALLBACK`."""
    return os.environ.get("CONVKIT_TUNE", "1") != "0"


@memoize()
def choose(problem: ConvProblem, gpu: str, input_precision: str = DEFAULT_INPUT_PRECISION) -> dispatch.Choice:
    """The implementation of ``problem`` on ``gpu``, found once per process and then remembered: the user's
    cache, then the shipped table, else tuned now (:func:`convkit.op.tune.tune`, kept in the cache) or, with
    tuning off, :data:`FALLBACK`."""
    found = dispatch.lookup(problem, gpu, input_precision)
    if found is None and tuning_enabled():
        from convkit.op.tune import tune

        found = tune(problem, gpu, input_precision)
    return found or FALLBACK


@dataclass(frozen=True)
class BiasLaunch(ElementwiseLaunch):
    """``add_bias`` in ``kernels/bias.cu``: the bias added to the output in place."""

    kind: ClassVar[str] = "bias"
    source: ClassVar[str] = "bias"
    kernel: ClassVar[str] = "add_bias"
    max_blocks: ClassVar[int] = 65535  # grid-stride beyond


#: The runner of each call signature seen (:func:`torch_signature`, :func:`cupy_signature`): a replayed plan or the
#: library, so that a repeated call does no checks but a few attribute reads and no lookups but this one.
RUNNERS: dict[tuple[Any, ...], Callable[[Any, Any, Any], Any]] = {}


def implementation(problem: ConvProblem, input_precision: str = DEFAULT_INPUT_PRECISION) -> dispatch.Choice:
    """What :func:`conv2d` runs ``problem`` with on this GPU (tuning it first if nothing records it)."""
    return choose(problem, gpu_name(), check_input_precision(input_precision))


#: The op's name in a call's signature, per input precision (the default's is plain, as it always was).
_SIGNATURE_OP = {p: "conv2d" if p == DEFAULT_INPUT_PRECISION else f"conv2d@{p}" for p in INPUT_PRECISIONS}


def conv2d(
    x: Any,
    w: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
    *,
    input_precision: str = DEFAULT_INPUT_PRECISION,
) -> Any:
    """Cross-correlation of NCHW ``x`` with MCRS ``w`` (plus ``bias``), as ``torch.nn.functional.conv2d`` takes it,
    by the fastest implementation recorded for this GPU and problem.

    Args:
        x: float32 (N, C, H, W) or unbatched (C, H, W), a CuPy array or a PyTorch CUDA tensor, contiguous.
        w: float32 (M, C, R, S), the same library and device as ``x``.
        bias: optional float32 (M,).
        stride: window step, an int or a pair.
        padding: zero padding, an int, a pair, ``"valid"`` (none) or ``"same"`` (stride 1: the output as large as
            the input).
        dilation, groups: as PyTorch's; convkit's kernels run 1 only.
        input_precision: the kernels it may run (:mod:`convkit.core.precision`): ``"tf32x3"`` (the default)
            FP32 FMA kernels and FP32-accurate kernels on TF32 tensor cores, ``"ieee"`` FP32 FMA only. Whatever
            runs was checked against float64 within the direct methods' bar (1e-5) when it was chosen.

    Returns:
        the output (N, M, P, Q), or (M, P, Q) for an unbatched ``x``, as the caller's type, enqueued on the caller's
        current stream.

    Raises:
        NotImplementedError naming the argument where PyTorch would run the call but convkit has no kernel for it:
        dilation or groups above 1, a stride or padding that differs between height and width, ``"same"``
        padding that pads one side more than the other (an even or non-square filter). convkit never runs
        another library in its place; call ``torch.nn.functional.conv2d`` for these (``convkit.patch`` leaves such
        layers to PyTorch). TypeError or ValueError, naming the argument, for what PyTorch refuses too and for
        operands convkit does not take (another dtype, non-contiguous, channels_last, requiring a gradient).

    The first call of a signature (shapes, geometry, device, stream, the operands' 16-byte alignment) checks the
    arguments, picks the implementation and records its launches; later calls replay them
    (:mod:`convkit.cuda.plan`), checking only what can change between calls of one signature.
    """
    if torch_ops.compiling():  # torch.compile is tracing: one node of its graph, the registered operator
        stride, padding = conv_geometry(tuple(w.shape), stride, padding, dilation, groups)
        if x.dim() == 3:
            return torch_ops.traced_conv2d(x.unsqueeze(0), w, bias, stride, padding, input_precision).squeeze(0)
        return torch_ops.traced_conv2d(x, w, bias, stride, padding, input_precision)
    return conv2d_eager(x, w, bias, stride, padding, input_precision, dilation, groups)


def conv2d_eager(
    x: Any, w: Any, bias: Any, stride: Any, padding: Any, input_precision: str, dilation: Any = 1, groups: Any = 1
) -> Any:
    """:func:`conv2d` as it runs outside ``torch.compile`` (and inside ``torch.ops.convkit.conv2d``)."""
    op = _SIGNATURE_OP.get(input_precision, "conv2d@?")
    if dilation != 1 or groups != 1:  # a signature of its own (a pair of ones included)
        op = (op, _hashable(dilation), _hashable(groups))
    k, runner = known(op, x, w, bias, stride, padding)
    if runner is not None:
        return runner(x, w, bias)
    return _first_call(x, w, bias, stride, padding, k, input_precision, dilation, groups)


torch_ops.EAGER["conv2d"] = conv2d_eager


def replay_if_known(x: Any, w: Any, bias: Any, stride: int, padding: int) -> Any:
    """:func:`conv2d`'s output where this call's signature has run before, else None (nothing enqueued)."""
    _, runner = known("conv2d", x, w, bias, stride, padding)
    return runner(x, w, bias) if runner is not None else None


def _hashable(value: Any) -> Any:
    """``value`` as a signature holds it: a list (PyTorch takes ``stride=[2, 2]``) as a tuple."""
    return tuple(value) if isinstance(value, list) else value


def known(op: Any, x: Any, w: Any, bias: Any, stride: Any, padding: Any) -> tuple[Any, Any]:
    """(the signature of this call of ``op``, its runner if the signature has run before); the signature is
    None where a check fails or the arrays are of no known library (the first-call checks then say why)."""
    keyer = signature_function(type(x))
    k = keyer(x, w, bias, stride, padding) if keyer is not None else None
    if k is None:
        return None, None
    k = (op, *k)
    try:
        return k, RUNNERS.get(k)
    except TypeError:  # a list among the geometry: its tuple
        k = (op, *keyer(x, w, bias, _hashable(stride), _hashable(padding)))
        return k, RUNNERS.get(k)


def _first_call(
    x: Any,
    w: Any,
    bias: Any,
    stride: Any,
    padding: Any,
    k: tuple[Any, ...] | None,
    input_precision: str,
    dilation: Any = 1,
    groups: Any = 1,
) -> Any:
    """Check, choose, run (recording the launches) and keep the runner under ``k`` for the next calls."""
    precision = check_input_precision(input_precision)
    xd, wd = describe("x", x), describe("w", w)
    bd = describe("bias", bias) if bias is not None else None
    unbatched = len(xd.shape) == 3
    if unbatched:  # (C, H, W): one image, as PyTorch takes it
        x = x[None]
        xd = describe("x", x)
    if len(wd.shape) == 4:  # else check_arguments names w
        stride, padding = conv_geometry(wd.shape, stride, padding, dilation, groups)
    problem = check_arguments(xd, wd, bd, stride=stride, padding=padding)
    choice = choose(problem, gpu_name(), precision)
    make = torch_runner if xd.library == "torch" else _cupy_runner
    runner, out = make(choice, problem, x, w, bias)
    if unbatched:  # the runner of the one-image batch, its image taken out again
        runner, out = partial(_one_image, runner), out[0]
    if k is not None:
        RUNNERS[k] = runner
    return out


def _one_image(batched: Any, x: Any, w: Any, bias: Any) -> Any:
    """A call of an unbatched (C, H, W) signature: ``batched``, the runner of its one-image batch."""
    return batched(x[None], w, bias)[0]


def record_plan(
    choice: dispatch.Choice, problem: ConvProblem, x: Any, w: Any, bias: Any, out: Any, blas_handle: Any = None
) -> Plan:
    """Enqueue a convkit or cuBLAS choice (and the bias) on CuPy arrays into ``out`` and return the plan that
    replays it (its cuBLAS calls on ``blas_handle``'s handles, where given). The launch gets the operands it
    declares (:class:`~convkit.cuda.operands.ConvArgs`): its workspace, allocated here (scratch, or the stream's
    zeroed state), and the bias where it adds it as it writes the output; elsewhere the op adds the bias after it."""
    from convkit.cuda.record import recording
    from convkit.families import variants_by_name
    from convkit.libs import cublas

    with recording() as found:
        if choice.impl == "cublas":
            cublas.conv1x1(x, w, out)
            workspace, zeroed, added = None, False, False
        else:
            variant = variants_by_name()[choice.variant]
            launch = launch_of_choice(choice, variant, problem)
            workspace, zeroed = new_workspace(launch, problem), launch.zeroed_workspace
            added = bias is not None and launch.adds_bias(problem)
            variant.run(ConvArgs(x, w, out, bias if added else None, workspace), problem, launch)
        if bias is not None and not added:
            _add_bias(out, bias, problem)
    args = ConvArgs(x, w, out, bias, workspace)
    return Plan.record(found, args, zeroed_workspace=zeroed, blas_handle=blas_handle)


def launch_of_choice(choice: dispatch.Choice, variant: Any, problem: ConvProblem) -> Any:
    """The launch a convkit ``choice`` (of ``variant``) runs ``problem`` with: its recorded knobs, or where it records
    none the knobs the package ships for this GPU."""
    return variant.launch_of(json.loads(choice.params)) if choice.params else variant.launch(problem, _shipped_knobs())


def _shipped_knobs() -> Any:
    """The knobs the package ships for this GPU (a variant run where no choice records its knobs)."""
    return shipped.knob_table(gpu_name())


def _add_bias(out: Any, bias: Any, problem: ConvProblem) -> None:
    """Enqueue ``out += bias`` per filter (CuPy arrays) with ``kernels/bias.cu``."""
    import cupy

    from convkit.cuda.launch import launch

    plane = problem.out_h * problem.out_w
    launch(BiasLaunch(), problem, (out, bias, cupy.int32(problem.m), cupy.int64(plane), cupy.int64(out.size)))


def _runs_here(choice: dispatch.Choice) -> dispatch.Choice:
    """``choice`` where convkit runs it (its kernels, cuBLAS), else the fallback kernel."""
    return choice if dispatch.path_of(choice.impl) != "pytorch" else FALLBACK


# ---------------------------------------------------------------------------------------------
# PyTorch tensors

#: Scratch kept between calls, up to this size (larger is allocated per call): by a CuPy plan (its calls run in
#: order on one stream, part of a CuPy call's signature) and per PyTorch stream (each stream's calls run in order).
KEPT_SCRATCH_BYTES = 16 << 20


def _scratch(nbytes: int, allocate: Callable[[int], Any]) -> Callable[[], Any]:
    """What a CuPy replay calls for its scratch block: None, the block kept (up to :data:`KEPT_SCRATCH_BYTES`), or
    a fresh one."""
    if not nbytes:
        return lambda: None
    if nbytes <= KEPT_SCRATCH_BYTES:
        kept = allocate(nbytes)
        return lambda: kept
    return lambda: allocate(nbytes)


def _fresh(block: Any) -> tuple[int, Any]:
    """(pointer, owner) of a block made for one call (a PyTorch tensor)."""
    return block.data_ptr(), block


def torch_runner(choice: dispatch.Choice, problem: ConvProblem, x: Any, w: Any, bias: Any) -> tuple[Any, Any]:
    """(the runner, the output of this first call) of a PyTorch call signature running ``choice`` (the summary's
    host cost of each path forces one here: :mod:`convkit.papers.summary.overhead`). The runner serves every
    stream (a tensor call's signature has none): each call enqueues on PyTorch's current stream (CUDA-graph
    capture runs on a stream of its own). Its scratch is the stream's block (:data:`KEPT_SCRATCH_BYTES` at most;
    larger from PyTorch's caching allocator per call), its zeroed kernel state (split counters) the stream's own;
    under capture both come from the graph's own pool (:mod:`convkit.cuda.zeroed`), so that no two launches in
    flight share them. cuBLAS runs on convkit's handle for the thread and stream, and under capture on PyTorch's
    handle and workspace, so that a captured call synchronises and builds nothing. A lock keeps two threads from
    rewriting one plan's launch parameters at once."""
    import cupy
    import torch

    from convkit.libs.cublas import torch_handle, torch_replay_handle

    torch_ops.ops()  # registered once PyTorch calls: torch.compile may trace a call next

    stride, padding = problem.stride, problem.pad
    if dispatch.path_of(choice.impl) == "pytorch":  # the library was fastest: PyTorch's own cuDNN
        # what F.conv2d calls, bias included, cuDNN autotuned, in FP32 whatever torch.backends.cudnn.allow_tf32 says
        # (PyTorch's default is TF32), through a direct binding (torch.ops.aten's costs microseconds of Python)
        convolution, strides, pads, ones, zeros = torch._convolution, [stride] * 2, [padding] * 2, [1, 1], [0, 0]

        def library(x: Any, w: Any, bias: Any) -> Any:  # (..., groups, benchmark, deterministic, cudnn, allow_tf32)
            return convolution(x, w, bias, strides, pads, ones, False, zeros, 1, True, False, True, False)

        return library, library(x, w, bias)
    device = x.get_device()
    stream = cupy_stream(device)
    shape, where = problem.output_shape, x.device
    out = torch.empty(shape, dtype=torch.float32, device=where)
    with cupy.cuda.Device(device), stream:
        # detached: under torch.no_grad a parameter still requires grad, and DLPack refuses such a tensor
        operands = [None if a is None else cupy.from_dlpack(a.detach()) for a in (x, w, out, bias)]
        plan = record_plan(choice, problem, *operands[:2], operands[3], operands[2], blas_handle=torch_replay_handle)
    if choice.impl == "cublas":  # PyTorch's handle made now: under capture cuBLAS cannot create one
        torch_handle(device, stream.ptr)
    scratch_bytes, none = plan.scratch_bytes, lambda stream: (0, None)
    if scratch_bytes > KEPT_SCRATCH_BYTES:  # a block per call: the GPU time of such a layer dwarfs an allocation
        scratch_block = lambda stream: _fresh(torch.empty(scratch_bytes, dtype=torch.uint8, device=where))  # noqa: E731
    else:  # the stream's block, kept (its calls run in order), or under capture the graph's own
        scratch_block = torch_replay_resolver(device, scratch_bytes, zeroed=False) if scratch_bytes else none
    zeroed_block = torch_replay_resolver(device, plan.zeroed_bytes) if plan.zeroed_bytes else none
    lock = threading.Lock()

    def replay(x: Any, w: Any, bias: Any) -> Any:
        out = x.new_empty(shape)
        stream = cupy_stream(device)
        scratch, kept = scratch_block(stream.ptr)
        zeroed, owner = zeroed_block(stream.ptr)
        bases = (x.data_ptr(), w.data_ptr(), out.data_ptr(), 0 if bias is None else bias.data_ptr(), scratch, zeroed)
        with lock:
            plan.replay(bases, stream)
        del owner, kept  # enqueued: a block made for this call may go back to its pool (a graph's, under capture)
        return out

    return replay, out


# ---------------------------------------------------------------------------------------------
# CuPy arrays


@memoize(for_each_device=True)
def _cudnn_convolution(problem: ConvProblem) -> Any:
    """cuDNN's descriptors of ``problem``, made once per device."""
    from convkit.libs.cudnn import CudnnConvolution

    return CudnnConvolution(problem)


def _cupy_runner(choice: dispatch.Choice, problem: ConvProblem, x: Any, w: Any, bias: Any) -> tuple[Any, Any]:
    import cupy

    shape = problem.output_shape
    out = cupy.empty(shape, dtype=cupy.float32)
    if choice.impl == "cudnn":  # cuDNN's recorded algorithm, its descriptors made once per problem
        conv = _cudnn_convolution(problem)

        def library(x: Any, w: Any, bias: Any) -> Any:
            out = cupy.empty(shape, dtype=cupy.float32)
            conv.forward(choice.variant, x, w, out)
            if bias is not None:
                _add_bias(out, bias, problem)
            return out

        return library, library(x, w, bias)
    plan = record_plan(_runs_here(choice), problem, x, w, bias, out)
    new_scratch = _scratch(plan.scratch_bytes, lambda n: cupy.empty(n, dtype=cupy.uint8))
    scratch_bytes, zeroed_bytes = plan.scratch_bytes, plan.zeroed_bytes
    current_stream = cupy.cuda.get_current_stream
    lock = threading.Lock()  # two threads on one stream share this runner (a CuPy call's signature has the stream)

    def replay(x: Any, w: Any, bias: Any) -> Any:
        out = cupy.empty(shape, dtype=cupy.float32)
        stream = current_stream()
        block = new_scratch()
        if scratch_bytes and capturing(stream.ptr):  # the graph's own, not the block this stream's eager calls keep
            block = cupy_graph_owned(scratch_bytes)
        zeroed = cupy_zeroed(stream.ptr, zeroed_bytes).data.ptr if zeroed_bytes else 0  # the stream's, or the graph's
        bases = (x.data.ptr, w.data.ptr, out.data.ptr, 0 if bias is None else bias.data.ptr,
                 0 if block is None else block.data.ptr, zeroed)  # fmt: skip
        with lock:
            plan.replay(bases, stream)
        return out

    return replay, out
