"""Where convkit.conv2d's host time per call goes, part by part, beside PyTorch's conv2d (a probe: prints, records
nothing). Each part is timed alone as the recorded host cost is timed (queued behind a stream-holding kernel).
    python3 scripts/host_probe.py [LABEL ...]   # cuConv labels input-batch-filter-filters-depth ('same' padding)
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from typing import Any

import torch

import convkit
from convkit.core.problem import ConvProblem
from convkit.cuda.timing import CudaEventClock
from convkit.op import conv
from convkit.op.interop import cupy_stream, torch_signature
from convkit.papers.summary.overhead import host_per_call_ms

clock = CudaEventClock()


def per_call_us(fn: Callable[[], Any]) -> float:
    """Microseconds of host time per call of ``fn``, as the recorded host cost times it
    (:func:`convkit.papers.summary.overhead.host_per_call_ms`: calls queued behind a stream-holding kernel, the
    median of the repeats)."""
    return 1e3 * statistics.median(host_per_call_ms({"fn": fn}, clock.hold)["fn"])


def closure(fn: Callable[..., Any], name: str) -> Any:
    """The value ``fn``'s closure holds under ``name`` (a runner's recorded plan), or None."""
    for cell_name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True):
        if cell_name == name:
            return cell.cell_contents
    return None


def probe(label: str) -> None:
    """Print each part of a call of ``label`` (PyTorch tensors, with a bias) beside PyTorch's whole call."""
    h, n, r, m, c = map(int, label.split("-"))
    problem = ConvProblem.same(n, c, h, h, m, r)
    x = torch.randn(problem.input_shape, device="cuda")
    w = torch.randn(problem.filter_shape, device="cuda")
    b = torch.randn((problem.m,), device="cuda")
    s, p = problem.stride, problem.pad
    F = torch.nn.functional.conv2d
    with torch.no_grad(), cupy_stream():
        for _ in range(3):
            convkit.conv2d(x, w, b, stride=s, padding=p)
            F(x, w, b, stride=s, padding=p)
        choice = conv.implementation(problem)
        _, runner = conv.known("conv2d", x, w, b, s, p)
        parts = {
            "convkit.conv2d": per_call_us(lambda: convkit.conv2d(x, w, b, stride=s, padding=p)),
            "F.conv2d": per_call_us(lambda: F(x, w, b, stride=s, padding=p)),
            "runner": per_call_us(lambda: runner(x, w, b)),
            "signature": per_call_us(lambda: torch_signature(x, w, b, s, p)),
            "known": per_call_us(lambda: conv.known("conv2d", x, w, b, s, p)),
            "new_empty": per_call_us(lambda: x.new_empty(problem.output_shape)),
            "cupy_stream": per_call_us(lambda: cupy_stream(0)),
            "data_ptr x4": per_call_us(lambda: (x.data_ptr(), w.data_ptr(), b.data_ptr(), x.data_ptr())),
        }
        plan = closure(runner, "plan")
        steps = []
        if plan is not None:
            stream = cupy_stream(0)
            out = x.new_empty(problem.output_shape)
            scratch = torch.empty(max(plan.scratch_bytes, plan.zeroed_bytes, 1), dtype=torch.uint8, device="cuda")
            if plan.zeroed_bytes:
                scratch.zero_()  # left zero by the launches
            p0 = scratch.data_ptr()
            bases = (x.data_ptr(), w.data_ptr(), out.data_ptr(), b.data_ptr(), p0, p0)
            parts["plan.replay"] = per_call_us(lambda: plan.replay(bases, stream))
            for i, step in enumerate(plan.steps):
                steps.append(type(step.bound if step.bound is not None else step.call).__name__)
                if step.bound is not None:
                    parts[f"step {i} {steps[-1]}"] = per_call_us(lambda f=step.bound: f(bases, stream.ptr))
            steps.append(f"scratch {plan.scratch_bytes} zeroed {plan.zeroed_bytes}")
            if choice.impl == "cublas":
                from convkit.libs.cublas import torch_handle, torch_replay_handle

                parts["torch_handle"] = per_call_us(lambda: torch_handle(0, stream.ptr))
                parts["torch_replay_handle"] = per_call_us(lambda: torch_replay_handle(0, stream.ptr))
                parts.update(sgemm_parts(problem, x, w, out, stream))
        parts["is_compiling"] = per_call_us(torch.compiler.is_compiling)
    print(f"{label}: {choice.impl}/{choice.variant} steps={steps}")
    for name, us in parts.items():
        print(f"  {name:24s} {us:7.2f} us")


def sgemm_parts(problem: ConvProblem, x: Any, w: Any, out: Any, stream: Any) -> dict[str, float]:
    """The 1x1 layer's SGEMM alone, on convkit's handle for ``stream``: through ctypes as a replay calls it, and
    through CuPy's Cython binding (which sets the handle's stream to CuPy's current one, ``stream`` here): whether
    the host time is cuBLAS's own or the call's."""
    from cupy_backends.cuda.libs import cublas

    from convkit.libs.cublas import _call_sgemm, _handle, _sgemm_args

    n, c, h, wd = problem.input_shape
    args = _sgemm_args(_handle(0, stream.ptr), x.data_ptr(), w.data_ptr(), out.data_ptr(), n, c, h * wd, problem.m)
    with stream:
        return {
            "sgemm, ctypes": per_call_us(lambda: _call_sgemm(list(args))),
            "sgemm, CuPy's Cython": per_call_us(lambda: cublas.sgemmStridedBatched(*args)),
        }


def dispatch_costs() -> None:
    """torch.library.custom_op against define/impl: one call of an operator whose body is ``torch.empty_like``
    (timed alone as "direct"), through each registration."""
    x = torch.randn(8, device="cuda")

    def body(x):
        return torch.empty_like(x)

    @torch.library.custom_op("ckprobe::a", mutates_args=())
    def a(x: torch.Tensor) -> torch.Tensor:
        return body(x)

    lib = torch.library.Library("ckprobe2", "DEF")
    lib.define("b(Tensor x) -> Tensor")
    lib.impl("b", body, "CUDA")
    lib.define("c(Tensor x) -> Tensor")
    lib.impl("c", body, "CompositeExplicitAutograd")
    print("dispatch (per call, us):")
    for name, fn in (
        ("direct", lambda: body(x)),
        ("custom_op", lambda: torch.ops.ckprobe.a.default(x)),
        ("define/impl CUDA", lambda: torch.ops.ckprobe2.b.default(x)),
        ("define/impl CompositeExplicit", lambda: torch.ops.ckprobe2.c.default(x)),
    ):
        with torch.no_grad():
            print(f"  {name:30s} {per_call_us(fn):7.2f}")


if __name__ == "__main__":
    labels = sys.argv[1:] or [
        "56-1-3-64-64",
        "56-1-1-64-64",
        "14-1-1-1024-256",
        "27-1-5-256-96",
        "224-1-3-64-1",
        "56-32-3-256-256",
        "224-8-3-64-64",
        "14-64-3-256-256",
        "56-8-3-256-256",
    ]
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    for label in labels:
        try:
            probe(label)
        except Exception as exc:
            print(f"{label}: {type(exc).__name__}: {exc}")
    dispatch_costs()
