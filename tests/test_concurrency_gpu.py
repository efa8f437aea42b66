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
#: A layer whose launches share scratch (Winograd's transforms), which a CuPy plan keeps for its stream's calls.
WINOGRAD = ConvProblem.from_key("7-8-5-128-48-p2-s1")


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
    forced = {p.key: h100[p.key] for p in (SPLIT_5X5, SPLIT_3X3, WINOGRAD)}
    dispatch.write_table(dispatch.cache_path(gpu), gpu, forced)


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


def _in_threads(work, threads: int) -> list:
    """``work(i)`` on ``threads`` threads at once; their results, or the first thread's exception raised here
    (self-contained: the same tests run on the code from before the fix, scripts/concurrency_device.sh)."""
    found: dict = {}

    def run(i: int) -> None:
        try:
            found[i] = work(i)
        except BaseException as error:  # handed to the test's thread
            found[i] = error

    started = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in started:
        t.start()
    for t in started:
        t.join()
    for result in found.values():
        if isinstance(result, BaseException):
            raise result
    return [found[i] for i in range(threads)]


def _cupy_sets(problem: ConvProblem, count: int, seed: int) -> list:
    """``count`` (x, w, bias, float64 reference) sets of CuPy arrays for ``problem``."""
    import cupy

    from convkit.core import reference

    rng, sets = cupy.random.default_rng(seed), []
    for _ in range(count):
        x = rng.standard_normal(problem.input_shape, dtype=cupy.float32)
        w = rng.standard_normal(problem.filter_shape, dtype=cupy.float32)
        b = rng.standard_normal(problem.m, dtype=cupy.float32)
        ref = reference.conv2d(x.astype(cupy.float64), w.astype(cupy.float64), pad=problem.pad)
        sets.append((x, w, b, ref + b.astype(cupy.float64)[None, :, None, None]))
    return sets


def _cupy_error(y, ref) -> float:
    import cupy

    return float(cupy.linalg.norm((y - ref).ravel()) / cupy.linalg.norm(ref.ravel()))


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

    def work(i: int) -> float:
        x, w, b, ref = inputs[i]
        stream, found = torch.cuda.Stream(), []
        with torch.no_grad(), torch.cuda.stream(stream):
            for _ in range(50):
                y = convkit.conv2d(x, w, b, padding=2)
                found.append(_error(y, ref))  # synchronises the stream: the hang showed here
        return max(found)

    assert max(_in_threads(work, 2)) < 1e-5


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
    for round in range(20):  # each round: new inputs, then 5 replays per graph enqueued back to back, interleaved
        chosen = [inputs[i] if round % 2 == 0 else (inputs[i + 2][0], *inputs[i][1:3], None) for i in range(2)]
        for i, (_, static_x, static_y) in enumerate(graphs):
            with torch.cuda.stream(streams[i]):
                static_x.copy_(chosen[i][0])
                static_y.fill_(float("nan"))
        for _ in range(5):
            for i, (graph, _, _) in enumerate(graphs):
                with torch.cuda.stream(streams[i]):
                    graph.replay()
        torch.cuda.synchronize()
        for i, (_, _, static_y) in enumerate(graphs):
            x, w, b, _ = chosen[i]
            ref = torch.nn.functional.conv2d(x.double(), w.double(), b.double(), padding=1)
            assert _error(static_y, ref) < 1e-5, (round, i)


@pytest.mark.watchdog(60)
def test_cupy_threads_on_one_stream_and_on_four():
    """A CuPy call's runner is per stream: threads on one stream share it (a lock keeps its launch parameters
    whole), threads on four streams each record their own; the split layer's counters are each stream's."""
    import cupy

    import convkit

    _split_choice(SPLIT_3X3)
    sets = _cupy_sets(SPLIT_3X3, 4, seed=0)

    def work(i: int, stream) -> float:
        x, w, b, ref = sets[i]
        with stream:
            found = max(_cupy_error(convkit.conv2d(x, w, b, padding=1), ref) for _ in range(30))
            stream.synchronize()
        return found

    common = cupy.cuda.Stream(non_blocking=True)
    for streams in ([common] * 4, [cupy.cuda.Stream(non_blocking=True) for _ in range(4)]):
        assert max(_in_threads(lambda i, s=streams: work(i, s[i]), 4)) < 1e-5, streams[0] is streams[1]


@pytest.mark.watchdog(60)
@pytest.mark.parametrize("problem", [SPLIT_3X3, WINOGRAD], ids=lambda p: p.key)
def test_cupy_graphs_captured_on_one_stream_run_at_once_beside_its_eager_calls(problem):
    """Two CuPy graphs captured on one stream own their scratch and split counters: launched at once on two other
    streams while the capturing stream runs eager calls (with the scratch and counters it keeps), every output
    holds."""
    import cupy

    import convkit

    if problem is SPLIT_3X3:
        _split_choice(problem)
    sets = _cupy_sets(problem, 3, seed=1)
    error = _cupy_error

    capture = cupy.cuda.Stream(non_blocking=True)
    with capture:
        convkit.conv2d(*sets[2][:3], padding=problem.pad)  # the choice and this stream's plan, before capture
        capture.synchronize()
        graphs = []
        for x, w, b, _ in sets[:2]:
            capture.begin_capture()
            y = convkit.conv2d(x, w, b, padding=problem.pad)
            graphs.append((capture.end_capture(), y))
    others = [cupy.cuda.Stream(non_blocking=True) for _ in graphs]
    bar = 1e-3 if problem is WINOGRAD else 1e-5
    for _ in range(10):
        eager = []
        for (graph, y), stream in zip(graphs, others, strict=True):
            with stream:
                y.fill(cupy.nan)
                graph.launch(stream)
        with capture:
            for _ in range(3):
                eager.append(convkit.conv2d(*sets[2][:3], padding=problem.pad))
        cupy.cuda.runtime.deviceSynchronize()
        assert max(error(y, ref) for (_, y), (_, _, _, ref) in zip(graphs, sets[:2], strict=True)) < bar
        assert max(error(y, sets[2][3]) for y in eager) < bar


def test_the_soak_in_short(tmp_path):
    """The concurrency soak's short form: every case recorded, none wrong, none hung, the control included (the
    driver's own watchdog kills a case silent for 60 s and records it as hung)."""
    import csv

    from convkit.papers.summary import concurrency
    from convkit.papers.summary.concurrency.driver import run

    run(tmp_path, short=True, progress=None)
    with open(tmp_path / "concurrency_quick.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["implementation"] for r in rows} >= {concurrency.CONTROL}
    assert len(rows) == len({(r["problem"], r["implementation"], r["mode"]) for r in rows}) >= 9
    bad = [r for r in rows if r["wrong"] != "0" or r["hung"] != "0" or r["note"] or int(r["calls"]) == 0]
    assert not bad, bad
