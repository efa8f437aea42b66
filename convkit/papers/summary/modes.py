"""The networks' modes beyond eager execution, for :mod:`convkit.papers.summary.inference`: the first forward with
an empty cache, ``torch.compile`` (wall time and graph breaks) and a captured CUDA graph (wall and GPU time), each
network as PyTorch runs it and patched, side by side; and the wall-clock and error helpers both use.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from convkit.bench.rows import error_text, timing_columns
from convkit.op.interop import cupy_stream

#: Wall-clock repeats of each forward, the networks taking turns.
WALL_REPS = 30


def relative_error(got: Any, ref: Any) -> float:
    """Norm-wise relative error of the tensor ``got`` against the float64 tensor ``ref``."""
    return float((got.double() - ref).norm() / ref.norm())


def wall_ms(forwards: dict[str, Callable[[], Any]]) -> dict[str, list[float]]:
    """Milliseconds of wall clock per forward (synchronized before and after), :data:`WALL_REPS` of each of
    ``forwards``, taking turns (:func:`convkit.cuda.timing.in_turns`)."""
    import torch

    from convkit.cuda.timing import in_turns

    def synchronized(forward: Callable[[], Any]) -> float:
        torch.cuda.synchronize()
        start = time.perf_counter()
        forward()
        torch.cuda.synchronize()
        return (time.perf_counter() - start) * 1e3

    return in_turns(forwards, synchronized, WALL_REPS)


def first_forward_seconds(model: Any, x: Any) -> float:
    """Seconds of the first forward of the patched ``model`` with convkit's user cache empty and nothing chosen
    or recorded in this process yet (what a new user waits: tuning what the package records no choice for)."""
    import os
    import tempfile

    import torch

    from convkit.op import conv

    conv.choose.cache_clear()
    conv.RUNNERS.clear()
    before = os.environ.get("XDG_CACHE_HOME")
    with tempfile.TemporaryDirectory() as empty:
        os.environ["XDG_CACHE_HOME"] = empty
        try:
            torch.cuda.synchronize()
            start = time.perf_counter()
            model(x)
            torch.cuda.synchronize()
            return time.perf_counter() - start
        finally:
            if before is None:
                del os.environ["XDG_CACHE_HOME"]
            else:
                os.environ["XDG_CACHE_HOME"] = before
            conv.choose.cache_clear()  # the next calls choose from the user's own cache again
            conv.RUNNERS.clear()


def captured(net: Any, x: Any) -> tuple[Any, Any, Any]:
    """``net``'s forward captured in a CUDA graph after a warm-up on a side stream: (graph, its input, its
    output), the input to be written in place before a replay."""
    import torch

    static_x = x.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            net(static_x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_y = net(static_x)
    return graph, static_x, static_y


def mode_rows(model: Any, patched: Any, x: Any, logits: Any, timing: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The torch.compile and CUDA-graph rows of both networks (``logits``: the float64 network's output); a
    mode that fails on this network is recorded with its error."""
    import torch

    from convkit.cuda.timing import CudaEventClock, Timing, benchmark

    nets = {"pytorch": model, "convkit": patched}
    try:
        compiled = {impl: torch.compile(net) for impl, net in nets.items()}
        errors = {impl: relative_error(net(x), logits) for impl, net in compiled.items()}  # compiles
        breaks = {impl: torch._dynamo.explain(net)(x).graph_break_count for impl, net in nets.items()}
        walls = wall_ms({impl: lambda net=net: net(x) for impl, net in compiled.items()})
        rows = [{"impl": impl, "variant": "compile_wall", "status": "ok", "rel_err": error_text(errors[impl]),
                 "graph_breaks": breaks[impl]} | timing_columns(Timing(tuple(walls[impl])))
                for impl in nets]  # fmt: skip
    except Exception as exc:  # recorded, and the graph mode goes on
        note = f"{type(exc).__name__}: {exc}"[:500]
        rows = [{"impl": impl, "variant": "compile_wall", "status": "error", "note": note} for impl in nets]
    finally:
        torch._dynamo.reset()
    yield from rows
    try:
        graphs = {impl: captured(net, x) for impl, net in nets.items()}
        walls = wall_ms({impl: graph.replay for impl, (graph, _, _) in graphs.items()})
        rows = []  # yielded once every measurement of the mode is in: an error leaves no half of a pair
        for impl, (graph, _, out) in graphs.items():
            with cupy_stream():
                gpu = benchmark(graph.replay, clock=CudaEventClock(), **timing)
            torch.cuda.synchronize()
            error = error_text(relative_error(out, logits))
            for variant, measured in (("graph_wall", Timing(tuple(walls[impl]))), ("graph_gpu", gpu)):
                rows.append({"impl": impl, "variant": variant, "status": "ok", "rel_err": error}
                            | timing_columns(measured))  # fmt: skip
        del graphs
    except Exception as exc:
        note = f"{type(exc).__name__}: {exc}"[:500]
        rows = [{"impl": impl, "variant": v, "status": "error", "note": note} for impl in nets
                for v in ("graph_wall", "graph_gpu")]  # fmt: skip
    yield from rows
