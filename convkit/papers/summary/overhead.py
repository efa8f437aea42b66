"""What ``convkit.conv2d`` costs the host per call, beside PyTorch's ``conv2d``: ``results/<gpu>/conv2d_overhead.csv``.

Per layer, for ``convkit`` and ``pytorch`` (PyTorch tensors in and out, TF32 off, cuDNN autotuned), and for the
parts of convkit's per-call path (:data:`CASES`):

- ``host_per_call``: the wall time of :data:`CALLS` calls queued behind a kernel that holds the stream,
  divided by :data:`CALLS`. The GPU is busy holding, so nothing waits on it: this is pure host cost (argument
  checks, dispatch, conversions, the launches). convkit and PyTorch take turns, so that a busy moment of the
  host falls on both.
- ``gpu``: the GPU time of one call, CUDA events after warm-up, median of repeats (the study's timing).

Layers: small ones, where the host sets the pace, and large ones, where the GPU does (:func:`layers`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.op import dispatch
from convkit.op.cases import Case
from convkit.op.interop import cupy_stream
from convkit.study.sweep import fixed_sweep

EXPERIMENT = "conv2d_overhead"
#: Calls queued per host-cost measurement, and how long the stream is held while they are queued.
CALLS, HOLD_MS = 200, 100.0
#: How many times each host-cost measurement is repeated (the median is recorded).
HOST_REPEATS = 9


def layers() -> list[ConvProblem]:
    """Twenty-four layers: the study's small layers at batch 1 (where launch cost dominates) and large ones."""
    same = ConvProblem.same
    small = [same(1, c, h, h, m, r) for c, h, m, r in ((832, 7, 32, 1), (256, 14, 1024, 1), (64, 56, 64, 1),
             (192, 7, 384, 3), (384, 13, 384, 3), (48, 7, 128, 5), (64, 56, 64, 3), (256, 28, 128, 3),
             (16, 28, 32, 5), (96, 27, 256, 5), (1, 224, 64, 3), (1, 1024, 32, 5))]  # fmt: skip
    large = [same(n, c, h, h, m, r) for n, c, h, m, r in ((32, 256, 56, 256, 3), (64, 1024, 14, 256, 1),
             (64, 96, 27, 256, 5), (8, 64, 224, 64, 3), (32, 128, 112, 128, 3), (256, 512, 7, 2048, 1),
             (16, 512, 28, 512, 3), (128, 64, 56, 256, 1), (32, 192, 28, 96, 5), (64, 256, 14, 256, 3),
             (8, 256, 56, 256, 3), (1, 256, 224, 256, 5))]  # fmt: skip
    return small + large


#: What is timed per layer: each implementation's host cost per call and GPU time, and the parts of convkit's host
#: cost: finding the call's recorded plan (``host_lookup``: its signature and one dictionary lookup, nothing
#: enqueued), running it (``host_replay``: the output, the launches), and the call through the registered operator
#: ``torch.ops.convkit.conv2d`` (``host_operator``: what a torch.compile'd graph pays per convolution).
CASES = [Case(impl, variant) for impl in ("convkit", "pytorch") for variant in ("host_per_call", "gpu")] + [
    Case("convkit", part) for part in ("host_lookup", "host_replay", "host_operator")
]


def _calls(problem: ConvProblem) -> dict[Case, Callable[[], Any]]:
    """One call of each case on fresh PyTorch tensors (no gradient); convkit's first call made (its plan recorded)."""
    import torch

    from convkit.core.precision import DEFAULT_INPUT_PRECISION
    from convkit.op import torch_ops
    from convkit.op.conv import conv2d, known

    x = torch.randn(problem.input_shape, device="cuda")
    w = torch.randn(problem.filter_shape, device="cuda")
    b = torch.randn((problem.m,), device="cuda")
    s, p = problem.stride, problem.pad
    convkit = lambda: conv2d(x, w, b, stride=s, padding=p)  # noqa: E731
    pytorch = lambda: torch.nn.functional.conv2d(x, w, b, stride=s, padding=p)  # noqa: E731
    convkit()
    _, runner = known("conv2d", x, w, b, s, p)
    operator = torch_ops.ops().conv2d.default
    return {Case("convkit", "host_per_call"): convkit, Case("convkit", "gpu"): convkit,
            Case("pytorch", "host_per_call"): pytorch, Case("pytorch", "gpu"): pytorch,
            Case("convkit", "host_lookup"): lambda: known("conv2d", x, w, b, s, p),
            Case("convkit", "host_replay"): lambda: runner(x, w, b),
            Case("convkit", "host_operator"): lambda: operator(x, w, b, s, p, DEFAULT_INPUT_PRECISION)}  # fmt: skip


def host_per_call_ms(calls: dict[str, Callable[[], Any]], hold: Callable[[float], None]) -> dict[str, list[float]]:
    """Milliseconds of host time per call of each of ``calls``, :data:`HOST_REPEATS` times: :data:`CALLS` calls
    queued behind ``hold`` (which keeps the stream busy for :data:`HOLD_MS`), wall clock divided by the calls.
    The implementations take turns, after an untimed round (:func:`convkit.cuda.timing.in_turns`)."""
    import torch

    from convkit.cuda.timing import in_turns

    def queued(call: Callable[[], Any]) -> float:
        torch.cuda.synchronize()
        hold(HOLD_MS)
        start = time.perf_counter()
        for _ in range(CALLS):
            call()
        taken = (time.perf_counter() - start) * 1e3 / CALLS
        torch.cuda.synchronize()
        return taken

    return in_turns(calls, queued, HOST_REPEATS, untimed_rounds=1)


def measure_rows(problem: ConvProblem, todo: list[Case]) -> list[dict[str, Any]]:
    """The rows of ``todo`` on ``problem`` (see the module doc), on PyTorch's current stream."""
    import torch

    from convkit.bench.rows import make_row
    from convkit.cuda.timing import CudaEventClock, Timing, benchmark

    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    calls = _calls(problem)
    rows = []
    with torch.no_grad(), cupy_stream():
        clock = CudaEventClock()
        for call in calls.values():  # first calls: compile, autotune, dispatch
            call()
        torch.cuda.synchronize()
        hosted = [case for case in todo if case.variant.startswith("host_")]
        host = host_per_call_ms({f"{c.impl} {c.variant}": calls[c] for c in hosted}, clock.hold)
        for case in todo:
            if case in hosted:
                timing = Timing(tuple(host[f"{case.impl} {case.variant}"]))
            else:
                timing = benchmark(calls[case], clock=clock)
            rows.append(make_row(problem, case, status="ok", timing=timing))
    return rows


#: Measure ``problems`` (default :func:`layers`) into ``<directory>/<experiment>.csv``, resuming.
measure = fixed_sweep(EXPERIMENT, layers, CASES, measure_rows)

#: The host cost of each path a call can take, whatever the table chooses: ``<directory>/conv2d_host_paths.csv``,
#: the op's replay forced onto each (``host_replay``, impl: the path) on a few small layers all of them run. The
#: shipped table weighs its choices by these (:func:`convkit.study.shipping.host_floors`): on a layer where the GPU
#: finishes before the host has issued the next call, a path that costs the host less is the faster one.
PATHS_EXPERIMENT = "conv2d_host_paths"
#: The paths, each as a choice the op runs: convkit's own kernels (the implicit GEMM and the op's bias launch: two
#: launches, as most of convkit's choices with a bias), one cuBLAS SGEMM and the bias launch, and PyTorch's own
#: convolution (where any library but cuBLAS was fastest, the op calls PyTorch's autotuned cuDNN).
PATHS = {"convkit": ("convkit", "fp32_igemm", "fp32"), "cublas": ("cublas", "sgemm", ""),
         "pytorch": ("pytorch", "cudnn.benchmark", "")}  # fmt: skip
PATH_CASES = [Case(path, "host_replay") for path in dispatch.PATHS]


def path_layers() -> list[ConvProblem]:
    """Three small 1x1 layers at batch 1 (every path runs a 1x1 layer at stride 1): the host sets their pace."""
    return [ConvProblem.same(1, c, h, h, m, 1) for c, h, m in ((832, 7, 32), (256, 14, 1024), (64, 56, 64))]


def measure_path_rows(problem: ConvProblem, todo: list[Case]) -> list[dict[str, Any]]:
    """The host cost per call of each path of ``todo`` on ``problem`` (a replay, with a bias, PyTorch tensors)."""
    import torch

    from convkit.bench.rows import make_row
    from convkit.cuda.timing import CudaEventClock, Timing
    from convkit.op.conv import torch_runner

    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    x = torch.randn(problem.input_shape, device="cuda")
    w = torch.randn(problem.filter_shape, device="cuda")
    b = torch.randn((problem.m,), device="cuda")
    calls = {}
    with torch.no_grad(), cupy_stream():
        for case in todo:
            impl, variant, paper = PATHS[case.impl]
            runner, _ = torch_runner(dispatch.Choice(impl, variant, paper=paper), problem, x, w, b)
            calls[case.impl] = lambda runner=runner: runner(x, w, b)
        torch.cuda.synchronize()
        host = host_per_call_ms(calls, CudaEventClock().hold)
    return [make_row(problem, case, status="ok", timing=Timing(tuple(host[case.impl]))) for case in todo]


#: Measure the paths' host cost on ``problems`` (default :func:`path_layers`) into ``<directory>/<experiment>.csv``.
measure_paths = fixed_sweep(PATHS_EXPERIMENT, path_layers, PATH_CASES, measure_path_rows)


if __name__ == "__main__":  # python -m convkit.papers.summary.overhead [--paths] [results folder]
    import sys

    arguments = sys.argv[1:]
    paths = arguments[:1] == ["--paths"]
    folder = Path(arguments[-1]) if arguments[paths:] else None
    (measure_paths if paths else measure)(folder)
