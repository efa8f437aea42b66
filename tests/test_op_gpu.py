"""convkit.conv2d on the GPU: against float64 with CuPy arrays and PyTorch tensors in and out, bias, a stream
of the caller's, recorded and unrecorded problems; every kind of recorded choice through its first call and
its replays (fresh operands, an unaligned input)."""

from __future__ import annotations

import json

import pytest

from convkit.core import reference
from convkit.core.problem import ConvProblem
from convkit.core.reference import TRANSFORM_TOLERANCE
from convkit.core.shipped import shipped_path
from convkit.op import conv as op
from convkit.op import dispatch
from convkit.op.fused import conv2d_relu_pool

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
    for _ in range(2):  # the first call records, the second replays
        y = op.conv2d(x, w, b, stride=problem.stride, padding=problem.pad)
        assert isinstance(y, cupy.ndarray) and y.shape == problem.output_shape
        assert reference.relative_error(y.get(), ref) < TRANSFORM_TOLERANCE


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: f"{p.label}-p{p.pad}-s{p.stride}")
def test_torch_in_torch_out_on_a_stream_of_the_callers(problem):
    torch = pytest.importorskip("torch")
    x, w, b, ref = _inputs(problem)
    xt, wt, bt = (torch.from_dlpack(a) for a in (x, w, b))
    stream = torch.cuda.Stream()
    for _ in range(2):
        with torch.no_grad(), torch.cuda.stream(stream):
            y = op.conv2d(xt, wt, bt, stride=problem.stride, padding=problem.pad)
        stream.synchronize()
        assert isinstance(y, torch.Tensor) and tuple(y.shape) == problem.output_shape
        assert reference.relative_error(y.cpu().numpy(), ref) < TRANSFORM_TOLERANCE


def _smallest_recorded_choices() -> dict[str, tuple[ConvProblem, dispatch.Choice]]:
    """Per implementation in the H100's shipped table, its smallest problem and the recorded choice."""
    table = dispatch.read_table(shipped_path("nvidia-h100-80gb-hbm3"))
    found: dict[str, tuple[ConvProblem, dispatch.Choice]] = {}
    for k, choice in table.items():
        problem = ConvProblem.from_key(k.split("@")[0])  # "<key>@ieee": the choice a narrower precision gets
        name = f"{choice.impl}-{choice.variant}"
        if name not in found or problem.flops < found[name][0].flops:
            found[name] = (problem, choice)
    # the 3xTF32 kernel split (partial planes and their sum) and not
    found["convkit-igemm_tf32x3-split"] = (
        ConvProblem.same(2, 64, 14, 14, 48, 3),
        dispatch.Choice(
            "convkit", "igemm_tf32x3", '{"splits":3,"stages":3,"tile":"64x64"}', "tf32x3", precision="tf32x3"
        ),
    )
    found["convkit-igemm_tf32x3-unsplit"] = (ConvProblem.same(1, 32, 9, 9, 16, 1), dispatch.Choice(
        "convkit", "igemm_tf32x3", "", "tf32x3", precision="tf32x3"))  # fmt: skip
    return dict(sorted(found.items()))


RECORDED = _smallest_recorded_choices()


@pytest.mark.parametrize("name", [n for n in RECORDED if n.split("-")[0] in ("convkit", "cublas")])
@pytest.mark.parametrize("library", ["cupy", "torch"])
def test_every_kind_of_choice_replays_on_fresh_operands(name, library, monkeypatch):
    import cupy

    problem, choice = RECORDED[name]
    monkeypatch.setattr(op, "RUNNERS", {})
    monkeypatch.setattr(op, "choose", lambda p, gpu, precision="tf32x3": choice)
    convert = lambda a: a  # noqa: E731
    if library == "torch":
        torch = pytest.importorskip("torch")
        convert = torch.from_dlpack
    for _ in range(3):  # first call, then replays with new pointers each time
        x, w, b, ref = _inputs(problem)
        y = op.conv2d(convert(x), convert(w), convert(b), stride=problem.stride, padding=problem.pad)
        got = cupy.asnumpy(cupy.from_dlpack(y))
        assert reference.relative_error(got, ref) < TRANSFORM_TOLERANCE, (name, json.loads(choice.params or "{}"))
    assert len(op.RUNNERS) == 1


def test_an_unaligned_input_gets_its_own_recording(monkeypatch):
    import cupy

    problem = ConvProblem(2, 8, 12, 12, 16, 1, 1, pad=0)  # 1x1 with H*W % 4 == 0: 16-byte copies when aligned
    monkeypatch.setattr(op, "RUNNERS", {})
    monkeypatch.setattr(op, "choose", lambda p, gpu, precision="tf32x3": op.FALLBACK)
    x, w, b, ref = _inputs(problem)
    shifted = cupy.empty(x.size + 1, dtype=cupy.float32)[1:].reshape(x.shape)
    shifted[...] = x
    for operand in (x, shifted, x, shifted):
        y = op.conv2d(operand, w, b)
        assert reference.relative_error(y.get(), ref) < 1e-5
    assert len(op.RUNNERS) == 2


def test_autograd_is_refused_by_name():
    torch = pytest.importorskip("torch")
    x = torch.zeros((1, 2, 5, 5), device="cuda", requires_grad=True)
    w = torch.zeros((3, 2, 3, 3), device="cuda")
    with pytest.raises(ValueError, match="x requires a gradient"):
        op.conv2d(x, w)


def test_a_patched_network_computes_what_pytorch_does():
    torch = pytest.importorskip("torch")
    torchvision = pytest.importorskip("torchvision")
    from convkit.op.patch import patch

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


@pytest.mark.parametrize("problem", [ConvProblem(2, 3, 14, 12, 8, 5, 5), ConvProblem(1, 4, 10, 9, 6, 3, 3, pad=1)],
                         ids=["fused-5x5", "composed-3x3"])  # fmt: skip
@pytest.mark.parametrize("library", ["cupy", "torch"])
def test_conv2d_relu_pool_matches_float64(problem, library):
    import cupy

    x, w, b, _ = _inputs(problem)
    conv = reference.conv2d(x.get(), w.get(), pad=problem.pad) + b.get()[None, :, None, None]
    ref = reference.max_pool2x2(reference.relu(conv))
    convert = (lambda a: a) if library == "cupy" else pytest.importorskip("torch").from_dlpack
    for _ in range(2):  # the choice is made once per signature, then reused
        y = conv2d_relu_pool(convert(x), convert(w), convert(b), padding=problem.pad)
        assert reference.relative_error(cupy.asnumpy(cupy.from_dlpack(y)), ref) < 1e-5


def _epilogue_cases():
    from convkit.families.cuconv.launch import CuconvLaunch
    from convkit.families.fp32.launch import ImplicitGemmLaunch
    from convkit.families.fp32.winograd import WinogradLaunch

    split = ConvProblem(2, 37, 9, 11, 19, 3, 3, pad=1)
    # two images a pass, three passes: every pass's output transform adds the bias to its images
    passes = WinogradLaunch(2, "64x64", workspace_limit=WinogradLaunch(2).pass_bytes(
        ConvProblem(2, 6, 10, 10, 7, 3, 3, pad=1)))  # fmt: skip
    return {
        "igemm-split": (split, "fp32_igemm", ImplicitGemmLaunch("64x64", splits=4), True),
        "igemm-whole": (split, "fp32_igemm", ImplicitGemmLaunch("64x64"), False),
        "tf32x3-split": (split, "igemm_tf32x3", None, True),
        "cuconv-planes": (split, "cuconv_paper", CuconvLaunch("paper", 128), True),
        "cuconv-tiled-split": (split, "cuconv_tiled", CuconvLaunch.tiled("64x32", splits=3), True),
        "winograd-passes": (ConvProblem(5, 6, 10, 10, 7, 3, 3, pad=1), "fp32_winograd", passes, True),
    }


@pytest.mark.parametrize("case", list(_epilogue_cases()))
def test_a_launch_that_declares_it_adds_the_bias_adds_it_as_it_writes_the_output(case):
    """A split sum or Winograd's transform back adds conv2d's bias as it writes the output (one launch fewer), on the
    workspace it declares; a launch whose output is written by its main kernel declares it does not, and refuses
    a bias."""
    import cupy

    from convkit.cuda.operands import ConvArgs, new_workspace
    from convkit.families import variants_by_name

    problem, name, launch, adds = _epilogue_cases()[case]
    variant = variants_by_name()[name]
    if launch is None:  # a split of the variant's own kind
        launch = variant.launch_of({"tile": "64x64", "splits": 4})
    assert launch.adds_bias(problem) is adds
    x, w, b, ref = _inputs(problem)
    out = cupy.full(problem.output_shape, cupy.nan, dtype=cupy.float32)
    args = ConvArgs(x, w, out, b, new_workspace(launch, problem))
    if not adds:
        with pytest.raises(ValueError, match=r"^bias: "):
            variant.run(args, problem, launch)
        variant.run(ConvArgs(x, w, out, None, args.workspace), problem, launch)
        op._add_bias(out, b, problem)
    else:
        variant.run(args, problem, launch)
    assert reference.relative_error(out.get(), ref) < TRANSFORM_TOLERANCE


def test_each_input_precision_tunes_within_itself_and_runs_what_it_chose(monkeypatch, tmp_path):
    """On a problem no table records: 'ieee' never chooses the 3xTF32 kernel, the default may; each request's
    choice is kept apart, and both outputs are within the direct bar of float64."""
    import cupy

    from convkit.core.reference import DIRECT_TOLERANCE

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    op.choose.cache_clear()
    problem = ConvProblem.same(4, 96, 20, 20, 80, 3)
    x, w, b, ref = _inputs(problem)
    try:
        for precision in ("ieee", "tf32x3"):
            y = op.conv2d(x, w, b, padding=1, input_precision=precision)
            assert reference.relative_error(y.get(), ref) < DIRECT_TOLERANCE, precision
        ieee, default = op.implementation(problem, "ieee"), op.implementation(problem)
        assert ieee.precision == "ieee" and ieee.variant != "igemm_tf32x3"
        assert default.precision in ("ieee", "tf32x3") and default.source == ieee.source == "tuned"
        with pytest.raises(ValueError, match="input_precision must be one of"):
            op.conv2d(x, w, b, padding=1, input_precision="tf32")
        cupy.cuda.get_current_stream().synchronize()
    finally:
        op.choose.cache_clear()


@pytest.mark.parametrize("problem", PROBLEMS[:2], ids=lambda p: f"{p.label}-p{p.pad}-s{p.stride}")
def test_parameters_that_require_grad_run_under_no_grad(problem):
    """A layer's own weight and bias (requires_grad) passed under torch.no_grad: DLPack refuses tensors that
    require grad, so the op hands it detached ones."""
    torch = pytest.importorskip("torch")
    x, w, b, ref = _inputs(problem)
    xt = torch.from_dlpack(x)
    wt, bt = (torch.nn.Parameter(torch.from_dlpack(a).clone()) for a in (w, b))
    with torch.no_grad():
        y = op.conv2d(xt, wt, bt, stride=problem.stride, padding=problem.pad)
    assert reference.relative_error(y.cpu().numpy(), ref) < TRANSFORM_TOLERANCE


def test_cupy_takes_f_conv2d_geometry_as_tensors_do():
    """The CuPy path takes PyTorch's geometry too: pairs, "same", an unbatched (C, H, W) image, each call twice
    (recorded, then replayed); dilation and groups are named, not run."""
    import cupy

    problem = ConvProblem(1, 5, 11, 13, 6, 3, 3, pad=1, stride=1)
    x, w, b, ref = _inputs(problem)
    for kwargs in ({"stride": (1, 1), "padding": [1, 1]}, {"padding": "same"}, {"padding": (1, 1), "dilation": 1}):
        for _ in range(2):
            y = op.conv2d(x[0], w, b, **kwargs)
            assert y.shape == ref.shape[1:]
            assert reference.relative_error(cupy.asnumpy(y), ref[0]) < 1e-5
    for kwargs, named in (
        ({"groups": 5}, "groups"),
        ({"dilation": (2, 2)}, "dilation"),
        ({"stride": (1, 2)}, "stride"),
    ):
        with pytest.raises(NotImplementedError, match=f"^{named}="):
            op.conv2d(x, w, b, **kwargs)
