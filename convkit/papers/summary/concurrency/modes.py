"""The soak's worker: each mode of :mod:`convkit.papers.summary.concurrency` run in this process, every output
against float64, one report line per case started and per row (:func:`worker`)."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Iterable
from dataclasses import asdict
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.papers.summary.concurrency import (
    CALLS,
    CONTROL,
    MESSAGE,
    NETWORK_CALLS,
    NETWORK_MODE,
    PATCHED,
    REPLAYS,
    SoakCase,
    bar,
    implementation_name,
)


def _torch_sets(problem: ConvProblem, owners: int, seed: int) -> list[list[tuple[Any, ...]]]:
    """Per owner (thread or graph), three (x, w, bias, float64 reference) sets of its own."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    sets = []
    for _ in range(owners):
        own = []
        w = torch.randn(problem.filter_shape, device="cuda", generator=g)
        b = torch.randn(problem.m, device="cuda", generator=g)
        for _ in range(3):
            x = torch.randn(problem.input_shape, device="cuda", generator=g)
            ref = torch.nn.functional.conv2d(x.double(), w.double(), b.double(), stride=problem.stride,
                                             padding=problem.pad)  # fmt: skip
            own.append((x, w, b, ref, ref.norm()))
        sets.append(own)
    torch.cuda.synchronize()
    return sets


def _torch_error(y: Any, ref: Any, norm: Any) -> Any:
    """Relative error against float64 as a 0-d tensor on the current stream (no host sync)."""
    return (y.double() - ref).norm() / norm


def _count(errors: Iterable[float], tolerance: float) -> tuple[int, int, float]:
    """(calls, wrong, largest error) of a list of errors; NaN counts as wrong."""
    errors = list(errors)
    wrong = sum(1 for e in errors if not e <= tolerance)
    finite = [e for e in errors if e == e]
    return len(errors), wrong, max(finite, default=math.nan)


def in_threads(work: Callable[[int], list[float]], threads: int) -> list[float]:
    """``work(i)`` on ``threads`` threads at once; their errors; re-raises the first thread's exception."""
    results: dict[int, Any] = {}

    def run(i: int) -> None:
        try:
            results[i] = work(i)
        except BaseException as error:  # handed to the main thread
            results[i] = error

    started = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in started:
        t.start()
    for t in started:
        t.join()
    errors = []
    for i in range(threads):
        if isinstance(results[i], BaseException):
            raise results[i]
        errors += results[i]
    return errors


def _torch_threads(call: Callable[..., Any], problem: ConvProblem, threads: int, calls: int) -> list[float]:
    import torch

    sets = _torch_sets(problem, threads, seed=1)
    with torch.no_grad():
        call(*sets[0][0][:3])  # the choice and the recording, once, before the threads
    torch.cuda.synchronize()

    def work(i: int) -> list[float]:
        stream, errors = torch.cuda.Stream(), []
        with torch.no_grad(), torch.cuda.stream(stream):
            for j in range(calls):
                x, w, b, ref, norm = sets[i][j % 3]
                y = call(x, w, b)
                errors.append(_torch_error(y, ref, norm))
                y.fill_(math.nan)  # poisoned before the allocator hands its memory out again
            return torch.stack(errors).cpu().tolist()

    return in_threads(work, threads)


def _torch_graphs(call: Callable[..., Any], problem: ConvProblem, graphs: int, replays: int) -> list[float]:
    """``graphs`` graphs, each captured in its own pool, replayed at once on a stream each."""
    import torch

    sets = _torch_sets(problem, graphs, seed=2)
    with torch.no_grad():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up: tuning, builds and recordings happen here, as PyTorch advises
            for own in sets:
                call(*own[0][:3])
        torch.cuda.current_stream().wait_stream(side)
        captured = []
        for own in sets:
            graph, static_x = torch.cuda.CUDAGraph(), own[0][0].clone()
            with torch.cuda.graph(graph, pool=torch.cuda.graph_pool_handle()):
                static_y = call(static_x, own[0][1], own[0][2])
            captured.append((graph, static_x, static_y))
        torch.cuda.synchronize()
        streams = [torch.cuda.Stream() for _ in range(graphs)]
        errors: list[list[Any]] = [[] for _ in range(graphs)]
        for r in range(replays):
            for i, (graph, static_x, static_y) in enumerate(captured):
                with torch.cuda.stream(streams[i]):
                    x, _, _, ref, norm = sets[i][r % 3]
                    static_x.copy_(x)
                    static_y.fill_(math.nan)
                    graph.replay()
                    errors[i].append(_torch_error(static_y, ref, norm))
        torch.cuda.synchronize()
    return [e for own in errors for e in torch.stack(own).cpu().tolist()]


def _cupy_threads(problem: ConvProblem, threads: int, calls: int) -> list[float]:
    import cupy

    from convkit.op.conv import conv2d

    sets = [[tuple(cupy.asarray(a) for a in own[:4]) for own in t] for t in _torch_sets(problem, threads, seed=3)]
    s, p = problem.stride, problem.pad
    conv2d(*sets[0][0][:3], stride=s, padding=p)  # the choice, once; each stream records its own plan
    cupy.cuda.runtime.deviceSynchronize()

    def work(i: int) -> list[float]:
        stream, errors = cupy.cuda.Stream(non_blocking=True), []
        with stream:
            for j in range(calls):
                x, w, b, ref = sets[i][j % 3]
                y = conv2d(x, w, b, stride=s, padding=p)
                errors.append(cupy.linalg.norm((y.astype(cupy.float64) - ref).ravel()) / cupy.linalg.norm(ref.ravel()))
                y.fill(math.nan)
            return cupy.stack(errors).get().tolist()

    return in_threads(work, threads)


def _network_threads(patched: bool, threads: int, calls: int) -> list[float]:
    """A compiled ResNet-18 at batch 1 (patched, or PyTorch's own as the control) called from ``threads``
    threads, each output against the float64 network on the same input."""
    import copy

    import torch
    import torchvision

    import convkit

    torch.manual_seed(0)
    net = torchvision.models.resnet18().cuda().eval()
    in_float64 = copy.deepcopy(net).double()
    if patched:
        convkit.patch(net)
    compiled = torch.compile(net)
    g = torch.Generator(device="cuda").manual_seed(4)
    with torch.no_grad():
        sets = []
        for _ in range(threads):
            xs = [torch.randn(1, 3, 224, 224, device="cuda", generator=g) for _ in range(3)]
            sets.append([(x, ref, ref.norm()) for x in xs for ref in [in_float64(x.double())]])
        compiled(sets[0][0][0])  # compiled once, before the threads
    torch.cuda.synchronize()

    def work(i: int) -> list[float]:
        stream, errors = torch.cuda.Stream(), []
        with torch.no_grad(), torch.cuda.stream(stream):
            for j in range(calls):
                x, ref, norm = sets[i][j % 3]
                y = compiled(x)
                errors.append(_torch_error(y, ref, norm))
            return torch.stack(errors).cpu().tolist()

    return in_threads(work, threads)


def run_case(case: SoakCase, *, calls: int = CALLS, replays: int = REPLAYS) -> dict[str, Any]:
    """The row of one case, run in this process (a worker's: see the module doc)."""
    import torch

    from convkit.op.conv import conv2d

    if case.mode == NETWORK_MODE:
        errors = _network_threads(case.implementation == PATCHED, 2, min(calls, NETWORK_CALLS))
        tolerance = 1e-4  # a whole network's output: the patched layers' errors add up (PyTorch's own too)
    else:
        problem = ConvProblem.from_key(case.problem)
        s, p = problem.stride, problem.pad
        if case.implementation == CONTROL:

            def call(x: Any, w: Any, b: Any) -> Any:
                return torch.nn.functional.conv2d(x, w, b, stride=s, padding=p)
        else:

            def call(x: Any, w: Any, b: Any) -> Any:
                return conv2d(x, w, b, stride=s, padding=p)

        tolerance = bar(case.implementation)
        if case.mode == "threads4":
            errors = _torch_threads(call, problem, 4, calls)
        elif case.mode.startswith("graphs"):
            errors = _torch_graphs(call, problem, int(case.mode[-1]), replays)
        else:
            errors = _cupy_threads(problem, 4, calls)
    done, wrong, largest = _count(errors, tolerance)
    return {**asdict(case), "calls": done, "wrong": wrong, "hung": 0, "max_rel_err": f"{largest:.3e}"}


def _check_implementation(case: SoakCase) -> str:
    """Why ``case`` does not run the implementation it names on this GPU ("" where it does)."""
    if case.implementation.startswith("control") or case.mode == NETWORK_MODE:
        return ""
    from convkit.op.conv import implementation

    found = implementation_name(implementation(ConvProblem.from_key(case.problem)))
    return "" if found == case.implementation else f"the op chose {found}"


def worker(lines: Iterable[str], *, calls: int, replays: int) -> None:
    """Run the cases given as JSON lines, reporting each start and row on stdout (see :func:`run`)."""
    import torch

    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    for line in lines:
        case = SoakCase(**json.loads(line))
        print(MESSAGE + json.dumps({"start": asdict(case)}), flush=True)
        try:
            wrong_choice = _check_implementation(case)
            if wrong_choice:
                raise RuntimeError(wrong_choice)
            row = run_case(case, calls=calls, replays=replays)
        except Exception as error:  # recorded, and the soak goes on
            row = {**asdict(case), "calls": 0, "wrong": 0, "hung": 0, "note": f"{type(error).__name__}: {error}"[:300]}
        print(MESSAGE + json.dumps({"row": row}), flush=True)
