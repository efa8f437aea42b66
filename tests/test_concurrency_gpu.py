"""convkit.conv2d where inference servers put it (GPU): the two launches that hung on two streams (a split layer
from two threads, two graphs of one replayed at once), CuPy threads sharing a plan, and the soak's short form.
Each test that can hang runs under the watchdog (tests/hang_watchdog.py): a hang fails it within 60 s."""

from __future__ import annotations

import json
import threading

import pytest

from convkit.core.problem import ConvProblem

pytestmark = pytest.mark.gpu

#: The two layers of the report: a shipped split launch (chang_multi_async, 33 and 66 splits) each.
SPLIT_5X5 = ConvProblem.from_key("14-1-5-512-512-p2-s1")
SPLIT_3X3 = ConvProblem.from_key("7-1-3-512-512-p1-s1")


@pytest.fixture(autouse=True)
def _fp32_references():
    import torch

    before = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32 = before


@pytest.fixture(autouse=True)
def _h100_split_choices(tmp_path, monkeypatch):
    """The H100's shipped split launches of the two layers, forced through the user's cache on any GPU (the
    watchdog runs each test in a fresh process: nothing chose before)."""
    from convkit.core.shipped import shipped_path
    from convkit.op import dispatch
    from convkit.op.interop import gpu_name

    h100 = dispatch.read_table(shipped_path("nvidia-h100-80gb-hbm3"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    gpu = gpu_name()
    dispatch.write_table(dispatch.cache_path(gpu), gpu, {p.key: h100[p.key] for p in (SPLIT_5X5, SPLIT_3X3)})


def _split_choice(problem: ConvProblem) -> None:
    """Assert that ``problem`` runs as a channel split (the case that hung); skip where this GPU cannot launch it."""
    from convkit.cuda.launch import with_dynamic_shared
    from convkit.cuda.nvrtc import load_kernel
    from convkit.families.chang2022.ranking import multi_launch
    from convkit.op.conv import implementation

    choice = implementation(problem)
    assert choice.variant.startswith("chang_multi") and json.loads(choice.params).get("split", 1) > 1, choice
    launch = multi_launch(json.loads(choice.params))
    try:
        launch.can_implement(problem)
        with_dynamic_shared(load_kernel(launch.source, launch.kernel_name(problem), options=launch.options(problem)),
                            launch.shared_bytes(problem), "the H100's launch")  # fmt: skip
    except ValueError as error:
        pytest.skip(f"this GPU cannot run the H100's split launch of {problem.key}: {error}")


def _tensors(problem: ConvProblem, seed: int):
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    x, w = (torch.randn(s, device="cuda", generator=g) for s in (problem.input_shape, problem.filter_shape))
    b = torch.randn(problem.m, device="cuda", generator=g)
    ref = torch.nn.functional.conv2d(x.double(), w.double(), b.double(), stride=problem.stride, padding=problem.pad)
    return x, w, b, ref


def _error(y, ref) -> float:
    return float((y.double() - ref).norm() / ref.norm())


@pytest.mark.watchdog(60)
def test_a_split_layer_from_two_threads_on_two_streams():
    import torch

    import convkit

    _split_choice(SPLIT_5X5)
    inputs = [_tensors(SPLIT_5X5, seed) for seed in range(2)]
    with torch.no_grad():
        convkit.conv2d(*inputs[0][:3], padding=2)  # the choice and the recording, once
    torch.cuda.synchronize()
    errors: dict[int, list[float]] = {}

    def work(i: int) -> None:
        x, w, b, ref = inputs[i]
        stream, found = torch.cuda.Stream(), []
        with torch.no_grad(), torch.cuda.stream(stream):
            for _ in range(50):
                y = convkit.conv2d(x, w, b, padding=2)
                found.append(_error(y, ref))  # synchronises the stream: the hang showed here
        errors[i] = found

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors.keys() == {0, 1} and max(max(e) for e in errors.values()) < 1e-5, errors


@pytest.mark.watchdog(60)
def test_two_graphs_of_a_split_layer_replayed_at_once_on_two_streams():
    import torch

    import convkit

    _split_choice(SPLIT_3X3)
    inputs = [_tensors(SPLIT_3X3, seed) for seed in range(4)]
    graphs = []
    with torch.no_grad():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            convkit.conv2d(*inputs[0][:3], padding=1)
        torch.cuda.current_stream().wait_stream(side)
        for x, w, b, _ in inputs[:2]:
            graph, static_x = torch.cuda.CUDAGraph(), x.clone()
            with torch.cuda.graph(graph, pool=torch.cuda.graph_pool_handle()):
                static_y = convkit.conv2d(static_x, w, b, padding=1)
            graphs.append((graph, static_x, static_y))
    torch.cuda.synchronize()
    streams = [torch.cuda.Stream() for _ in graphs]
    for replay in range(20):
        outputs = []
        for i, (graph, static_x, static_y) in enumerate(graphs):
            with torch.cuda.stream(streams[i]):
                x = inputs[i][0] if replay % 2 == 0 else inputs[i + 2][0]
                static_x.copy_(x)
                static_y.fill_(float("nan"))
                graph.replay()
                outputs.append(static_y.clone())
        torch.cuda.synchronize()
        for i, y in enumerate(outputs):
            x = inputs[i][0] if replay % 2 == 0 else inputs[i + 2][0]
            ref = torch.nn.functional.conv2d(x.double(), inputs[i][1].double(), inputs[i][2].double(), padding=1)
            assert _error(y, ref) < 1e-5, (replay, i)


@pytest.mark.watchdog(60)
def test_cupy_threads_on_one_stream_and_on_four():
    """A CuPy call's runner is per stream: threads on one stream share it (a lock keeps its launch parameters
    whole), threads on four streams each record their own; the split layer's counters are each stream's."""
    import cupy

    import convkit
    from convkit.core import reference

    _split_choice(SPLIT_3X3)
    p = SPLIT_3X3
    rng = cupy.random.default_rng(0)
    sets = []
    for _ in range(4):
        x = rng.standard_normal(p.input_shape, dtype=cupy.float32)
        w = rng.standard_normal(p.filter_shape, dtype=cupy.float32)
        b = rng.standard_normal(p.m, dtype=cupy.float32)
        ref = reference.conv2d(x.astype(cupy.float64), w.astype(cupy.float64), pad=1)
        sets.append((x, w, b, ref + b.astype(cupy.float64)[None, :, None, None]))

    def work(i: int, stream, errors: dict[int, float]) -> None:
        x, w, b, ref = sets[i]
        with stream:
            found = 0.0
            for _ in range(30):
                y = convkit.conv2d(x, w, b, padding=1)
                found = max(found, float(cupy.linalg.norm((y - ref).ravel()) / cupy.linalg.norm(ref.ravel())))
            stream.synchronize()
        errors[i] = found

    common = cupy.cuda.Stream(non_blocking=True)
    for streams in ([common] * 4, [cupy.cuda.Stream(non_blocking=True) for _ in range(4)]):
        errors: dict[int, float] = {}
        threads = [threading.Thread(target=work, args=(i, streams[i], errors)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors.keys() == {0, 1, 2, 3} and max(errors.values()) < 1e-5, (streams[0] is streams[1], errors)


def test_the_soak_in_short(tmp_path):
    """The concurrency soak's short form: every case recorded, none wrong, none hung, the control included (the
    driver's own watchdog kills a case silent for 60 s and records it as hung)."""
    import csv

    from convkit.papers.summary import concurrency
    from convkit.papers.summary.concurrency.driver import run

    run(tmp_path, short=True, progress=None)
    with open(tmp_path / "concurrency_short.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["implementation"] for r in rows} >= {concurrency.CONTROL}
    assert len(rows) == len({(r["problem"], r["implementation"], r["mode"]) for r in rows}) >= 9
    bad = [r for r in rows if r["wrong"] != "0" or r["hung"] != "0" or r["note"] or int(r["calls"]) == 0]
    assert not bad, bad
