"""convkit's ops as PyTorch operators on the GPU: opcheck, the fake implementation's shapes and errors,
torch.compile of a patched network with no graph break, CUDA-graph capture and replay with new inputs, and two
threads on two streams."""

from __future__ import annotations

import copy
import threading

import pytest

from convkit.core.problem import ConvProblem

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _fp32_references():
    """PyTorch's own convolutions (the references, and the layers convkit leaves to PyTorch) in FP32: its default
    lets cuDNN use TF32."""
    import torch

    before = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32 = before


LAYERS = [ConvProblem.same(2, 16, 12, 12, 24, 3), ConvProblem.same(1, 64, 7, 7, 32, 1),
          ConvProblem(3, 5, 17, 19, 7, 3, 3, pad=1, stride=2)]  # fmt: skip


def _tensors(problem: ConvProblem, seed: int = 0):
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(problem.input_shape, device="cuda", generator=g)
    w = torch.randn(problem.filter_shape, device="cuda", generator=g)
    b = torch.randn(problem.m, device="cuda", generator=g)
    return x, w, b


def _reference(x, w, b, problem: ConvProblem):
    import torch

    return torch.nn.functional.conv2d(x.double(), w.double(), b.double(), stride=problem.stride,
                                      padding=problem.pad).float()  # fmt: skip


def _error(a, b) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


@pytest.mark.parametrize("problem", LAYERS, ids=lambda p: p.key)
def test_opcheck(problem):
    import torch

    from convkit.op.torch_ops import ops

    x, w, b = _tensors(problem)
    torch.library.opcheck(ops().conv2d.default, (x, w, b, problem.stride, problem.pad, "tf32x3"))
    torch.library.opcheck(ops().conv2d.default, (x, w, None, problem.stride, problem.pad, "ieee"))


def test_the_fake_implementation_gives_the_shape_and_names_the_bad_argument():
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from convkit.op.torch_ops import ops

    conv = ops().conv2d
    with FakeTensorMode():
        x, w = torch.empty(2, 3, 9, 11, device="cuda"), torch.empty(5, 3, 3, 3, device="cuda")
        assert conv(x, w, None, 2, 1, "tf32x3").shape == (2, 5, 5, 6)
        assert ops().conv2d_relu_pool(x, w, torch.empty(5, device="cuda"), 1).shape == (2, 5, 4, 5)
        with pytest.raises(TypeError, match="x must be float32"):
            conv(x.half(), w, None, 1, 0, "tf32x3")
        with pytest.raises(ValueError, match="channels"):
            conv(x, torch.empty(5, 4, 3, 3, device="cuda"), None, 1, 0, "tf32x3")
        with pytest.raises(ValueError, match="bias"):
            conv(x, w, torch.empty(4, device="cuda"), 1, 0, "tf32x3")
        with pytest.raises(ValueError, match="padding"):
            conv(x, w, None, 1, -1, "tf32x3")
        with pytest.raises(ValueError, match="input_precision"):
            conv(x, w, None, 1, 0, "tf32")
        with pytest.raises(ValueError, match="contiguous"):
            conv(x.transpose(2, 3), w, None, 1, 0, "tf32x3")


def _small_network():
    import torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(16, 32, 3, padding=1, stride=2),
        torch.nn.ReLU(), torch.nn.Conv2d(32, 32, 1), torch.nn.Conv2d(32, 16, 5, bias=False), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Conv2d(16, 8, 3, padding=1, groups=2),
    )  # fmt: skip
    return net.cuda().eval()


def test_a_patched_network_compiles_into_one_graph():
    import torch

    import convkit

    net = _small_network()
    in_float64 = copy.deepcopy(net).double()
    x = torch.randn(4, 3, 24, 24, device="cuda")
    with torch.no_grad():
        expected = in_float64(x.double()).float()
        outcome = convkit.patch(net)
        assert outcome["8"] == "grouped convolution"  # stays with PyTorch, and the patcher says so
        eager = net(x)
        explained = torch._dynamo.explain(net)(x)
        assert explained.graph_break_count == 0, explained.break_reasons
        compiled = torch.compile(net, fullgraph=True)
        y = compiled(x)
        y2 = compiled(x * 2)
        expected2 = in_float64(x.double() * 2).float()
    assert _error(eager, expected) < 1e-5 and _error(y, expected) < 1e-5
    assert _error(y2, expected2) < 1e-5


def test_convkit_conv2d_called_in_a_compiled_function_is_one_graph_node():
    import torch

    import convkit

    p = LAYERS[0]
    x, w, b = _tensors(p)

    @torch.compile(fullgraph=True)
    def f(x, w, b):
        return torch.relu(convkit.conv2d(x, w, b, padding=p.pad)) * 2

    with torch.no_grad():
        y = f(x, w, b)
    assert _error(y, torch.relu(_reference(x, w, b, p)) * 2) < 1e-5


def test_a_first_call_inside_a_compiled_function_after_importing_convkit_before_pytorch():
    """In a fresh process, convkit imported before PyTorch and first called inside torch.compile(fullgraph=True):
    PyTorch's import registered the operators (tracing cannot), so the call is one node of the graph."""
    import subprocess
    import sys

    code = (
        "import convkit, torch\n"
        "x, w = torch.randn(2, 8, 9, 9, device='cuda'), torch.randn(4, 8, 3, 3, device='cuda')\n"
        "f = torch.compile(lambda x, w: convkit.conv2d(x, w, padding=1) * 2, fullgraph=True, backend='eager')\n"
        "torch.backends.cudnn.allow_tf32 = False\n"
        "ref = torch.nn.functional.conv2d(x.double(), w.double(), padding=1) * 2\n"
        "print(float(((f(x, w) - ref).norm() / ref.norm()).item()))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=50)
    assert run.returncode == 0, run.stderr[-2000:]
    assert float(run.stdout.split()[-1]) < 1e-5


def test_reduce_overhead_runs_a_patched_network():
    import torch

    import convkit

    net = _small_network()
    in_float64 = copy.deepcopy(net).double()
    convkit.patch(net)
    compiled = torch.compile(net, mode="reduce-overhead")
    with torch.no_grad():
        for i in range(4):  # warm-up, capture, replays
            x = torch.randn(2, 3, 24, 24, device="cuda")
            y = compiled(x).clone()
            assert _error(y, in_float64(x.double()).float()) < 1e-5, i


@pytest.mark.watchdog(60)
@pytest.mark.parametrize("problem", [*LAYERS, ConvProblem.same(4, 256, 14, 14, 256, 1),
                                     ConvProblem.same(1, 512, 7, 7, 512, 3)], ids=lambda p: p.key)  # fmt: skip
def test_a_captured_graph_replays_with_new_inputs(problem):
    import torch

    import convkit

    x, w, b = _tensors(problem)
    static_x = x.clone()
    with torch.no_grad():
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm-up: tuning, builds and recordings happen here
            for _ in range(2):
                convkit.conv2d(static_x, w, b, stride=problem.stride, padding=problem.pad)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_y = convkit.conv2d(static_x, w, b, stride=problem.stride, padding=problem.pad)
        for seed in (1, 2):
            new_x, _, _ = _tensors(problem, seed)
            static_x.copy_(new_x)
            graph.replay()
            torch.cuda.synchronize()
            assert _error(static_y, _reference(new_x, w, b, problem)) < 1e-5, seed


@pytest.mark.watchdog(60)
def test_two_threads_on_two_streams():
    import torch

    import convkit

    problem = ConvProblem.same(8, 64, 28, 28, 64, 3)
    inputs = [_tensors(problem, seed) for seed in range(2)]
    with torch.no_grad():
        convkit.conv2d(*inputs[0], padding=1)  # the choice and the recording, once
    results: dict[int, float] = {}

    def work(i: int) -> None:
        x, w, b = inputs[i]
        stream = torch.cuda.Stream()
        with torch.no_grad(), torch.cuda.stream(stream):
            for _ in range(50):
                y = convkit.conv2d(x, w, b, padding=1)
            stream.synchronize()
        results[i] = _error(y, _reference(x, w, b, problem))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.keys() == {0, 1} and max(results.values()) < 1e-5, results
