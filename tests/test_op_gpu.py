"""convkit.conv2d on the GPU: against float64 with CuPy arrays and PyTorch tensors in and out, bias, a stream
of the caller's, recorded and unrecorded problems."""

from __future__ import annotations

import pytest

from convkit import op, reference
from convkit.problem import ConvProblem
from convkit.reference import TRANSFORM_TOLERANCE

pytestmark = pytest.mark.gpu

PROBLEMS = [
    ConvProblem.same(1, 832, 7, 7, 32, 1),  # recorded: cuConv's largest speed-up
    ConvProblem.same(8, 64, 56, 56, 64, 3),  # recorded
    ConvProblem(3, 5, 17, 19, 7, 3, 3, pad=1, stride=2),  # not recorded: the implicit GEMM
    ConvProblem(2, 4, 9, 11, 6, 5, 5, pad=0),
]


def _inputs(problem: ConvProblem):
    import cupy

    rng = cupy.random.default_rng(0)
    x = rng.standard_normal(problem.input_shape, dtype=cupy.float32)
    w = rng.standard_normal(problem.filter_shape, dtype=cupy.float32)
    b = rng.standard_normal((problem.m,), dtype=cupy.float32)
    ref = reference.conv2d(x.get(), w.get(), pad=problem.pad, stride=problem.stride) + b.get()[None, :, None, None]
    return x, w, b, ref


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: f"{p.label}-p{p.pad}-s{p.stride}")
def test_cupy_in_cupy_out(problem):
    import cupy

    x, w, b, ref = _inputs(problem)
    y = op.conv2d(x, w, b, stride=problem.stride, padding=problem.pad)
    assert isinstance(y, cupy.ndarray) and y.shape == problem.output_shape
    assert reference.relative_error(y.get(), ref) < TRANSFORM_TOLERANCE


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: f"{p.label}-p{p.pad}-s{p.stride}")
def test_torch_in_torch_out_on_a_stream_of_the_callers(problem):
    torch = pytest.importorskip("torch")
    x, w, b, ref = _inputs(problem)
    xt, wt, bt = (torch.from_dlpack(a) for a in (x, w, b))
    stream = torch.cuda.Stream()
    with torch.no_grad(), torch.cuda.stream(stream):
        y = op.conv2d(xt, wt, bt, stride=problem.stride, padding=problem.pad)
    stream.synchronize()
    assert isinstance(y, torch.Tensor) and tuple(y.shape) == problem.output_shape
    assert reference.relative_error(y.cpu().numpy(), ref) < TRANSFORM_TOLERANCE


def test_autograd_is_refused_by_name():
    torch = pytest.importorskip("torch")
    x = torch.zeros((1, 2, 5, 5), device="cuda", requires_grad=True)
    w = torch.zeros((3, 2, 3, 3), device="cuda")
    with pytest.raises(ValueError, match="x requires a gradient"):
        op.conv2d(x, w)


def test_a_patched_network_computes_what_pytorch_does():
    torch = pytest.importorskip("torch")
    torchvision = pytest.importorskip("torchvision")
    from convkit.torch import patch

    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    model = torchvision.models.squeezenet1_0(weights=None).cuda().eval()
    x = torch.randn(2, 3, 96, 96, device="cuda")
    with torch.no_grad():
        expected = model.features(x).double()
        outcome = patch(model)
        got = model.features(x).double()
    assert "convkit" in outcome.values()
    assert float((got - expected).norm() / expected.norm()) < TRANSFORM_TOLERANCE
