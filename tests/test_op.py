"""convkit.conv2d on the CPU: every argument error, named, before anything runs; the choice per problem."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from convkit.core import arguments as operands
from convkit.core.problem import ConvProblem
from convkit.op import conv as op
from convkit.op import dispatch, tune


def _operand(shape, **kw):
    base = {"library": "torch", "shape": shape, "dtype": "float32", "device": 0, "contiguous": True}
    return operands.Operand(**(base | kw))


X, W, B = _operand((2, 3, 9, 9)), _operand((4, 3, 3, 3)), _operand((4,))


def test_a_well_formed_call_describes_its_problem():
    assert operands.check_arguments(X, W, B, stride=2, padding=1) == ConvProblem(2, 3, 9, 9, 4, 3, 3, pad=1, stride=2)


def test_a_narrower_precision_takes_only_choices_it_allows_and_is_kept_apart(monkeypatch, tmp_path, fresh_choices):
    from convkit.core.precision import check_input_precision

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    gpu = "nvidia-h100-80gb-hbm3"
    p = ConvProblem(1, 3, 17, 19, 5, 3, 3, pad=1)  # recorded nowhere
    mine = dispatch.Choice("convkit", "igemm_tf32x3", "{}", "tf32x3", 1.0, "tuned", "tf32x3")
    simt = dispatch.Choice("convkit", "fp32_igemm", "{}", "fp32", 2.0, "tuned")
    dispatch.write_table(dispatch.cache_path(gpu), gpu, {p.key: mine})
    assert dispatch.lookup(p, gpu) == mine and dispatch.lookup(p, gpu, "ieee") is None
    dispatch.write_table(dispatch.cache_path(gpu), gpu, {p.key: mine, dispatch.table_key(p.key, "ieee"): simt})
    assert dispatch.table_key(p.key, "ieee") == p.key + "@ieee" and dispatch.lookup(p, gpu, "ieee") == simt
    dispatch.write_table(dispatch.cache_path(gpu), gpu, {p.key: simt})  # an FP32 FMA choice serves both
    assert dispatch.lookup(p, gpu, "ieee") == simt == dispatch.lookup(p, gpu)
    with pytest.raises(ValueError, match=r"input_precision must be one of \('tf32x3', 'ieee'\), got 'tf32'"):
        check_input_precision("tf32")


@pytest.mark.parametrize(
    ("x", "w", "bias", "options", "error", "named"),
    [
        (_operand((2, 3, 9, 9), dtype="float64"), W, None, {}, TypeError, "x must be float32"),
        (X, _operand((4, 3, 3, 3), device=None), None, {}, ValueError, "w must be on a CUDA device"),
        (X, _operand((4, 3, 3, 3), library="cupy"), None, {}, TypeError, "w is a cupy array but x is a torch"),
        (_operand((2, 3, 9, 9), requires_grad=True), W, None, {}, ValueError, "x requires a gradient"),
        (_operand((2, 3, 9, 9), channels_last=True, contiguous=False), W, None, {}, ValueError, "x is channels_last"),
        (_operand((2, 3, 9, 9), contiguous=False), W, None, {}, ValueError, "x must be contiguous"),
        (X, _operand((4, 3, 3, 3), device=1), None, {}, ValueError, "w is on device 1 but x is on device 0"),
        (_operand((3, 9, 9)), W, None, {}, ValueError, "x must be 4-D"),
        (X, _operand((4, 2, 3, 3)), None, {}, ValueError, "w has 2 channels but x has 3"),
        (X, W, _operand((5,)), {}, ValueError, "bias must have shape"),
        (X, W, None, {"stride": 0}, ValueError, "stride must be an int >= 1"),
        (X, W, None, {"padding": (1, 1)}, ValueError, "padding must be an int >= 0"),
        (_operand((2, 3, 2, 2)), W, None, {}, ValueError, "give no output"),
    ],
)
def test_bad_arguments_are_named(x, w, bias, options, error, named):
    with pytest.raises(error, match=named):
        operands.check_arguments(x, w, bias, **({"stride": 1, "padding": 0} | options))


@pytest.mark.parametrize(
    ("stride", "padding", "dilation", "groups", "filters", "found"),
    [
        (1, 0, 1, 1, (3, 3), (1, 0)),
        ((2, 2), [1, 1], (1, 1), 1, (3, 3), (2, 1)),
        ([1, 1], "same", 1, 1, (5, 5), (1, 2)),
        (1, "same", 1, 1, (1, 1), (1, 0)),
        (2, "valid", 1, 1, (3, 3), (2, 0)),
    ],
)
def test_f_conv2d_geometry_becomes_the_ints_the_kernels_run(stride, padding, dilation, groups, filters, found):
    assert operands.conv_geometry((8, 4, *filters), stride, padding, dilation, groups) == found


@pytest.mark.parametrize(
    ("options", "filters", "named"),
    [
        ({"groups": 2}, (3, 3), "groups=2"),
        ({"dilation": (2, 1)}, (3, 3), "dilation=(2, 1)"),
        ({"dilation": 2}, (3, 3), "dilation=2"),
        ({"stride": (1, 2)}, (3, 3), "stride=(1, 2)"),
        ({"padding": (0, 1)}, (3, 3), "padding=(0, 1)"),
        ({"padding": "same"}, (4, 4), "padding='same'"),
        ({"padding": "same"}, (3, 5), "padding='same'"),
    ],
)
def test_what_pytorch_runs_and_no_kernel_covers_is_named_not_run(options, filters, named):
    geometry = {"stride": 1, "padding": 0, "dilation": 1, "groups": 1} | options
    with pytest.raises(NotImplementedError, match=f"^{re.escape(named)}: .*torch.nn.functional.conv2d"):
        operands.conv_geometry((8, 4, *filters), **geometry)


@pytest.mark.parametrize(
    ("options", "error", "named"),
    [
        ({"groups": 0}, ValueError, "groups"),
        ({"stride": 0}, ValueError, "stride"),
        ({"stride": (1, 1, 1)}, TypeError, "stride"),
        ({"padding": -1}, ValueError, "padding"),
        ({"padding": "full"}, ValueError, "padding"),
        ({"padding": "same", "stride": 2}, ValueError, "padding='same'"),
        ({"dilation": 1.5}, TypeError, "dilation"),
    ],
)
def test_a_geometry_pytorch_refuses_too_is_named(options, error, named):
    geometry = {"stride": 1, "padding": 0, "dilation": 1, "groups": 1} | options
    with pytest.raises(error, match=re.escape(named)):
        operands.conv_geometry((8, 4, 3, 3), **geometry)


def test_an_argument_of_another_library_is_refused():
    import numpy as np

    with pytest.raises(TypeError, match=r"x must be a cupy\.ndarray or a torch\.Tensor"):
        operands.describe("x", np.zeros((1, 1, 3, 3), dtype=np.float32))


@pytest.fixture
def fresh_choices():
    """The op's remembered choices emptied before and after a test that fakes them."""
    op.choose.cache_clear()
    yield
    op.choose.cache_clear()


def test_a_recorded_problem_runs_its_fastest_implementation_others_are_tuned_once(monkeypatch, tmp_path, fresh_choices):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    gpu = "nvidia-h100-80gb-hbm3"
    recorded, new = ConvProblem.same(1, 832, 7, 7, 32, 1), ConvProblem(1, 3, 17, 19, 5, 3, 3, pad=1)
    assert op.choose(recorded, gpu) == dispatch.lookup(recorded, gpu)
    tuned = dispatch.Choice("convkit", "fp32_igemm", "{}", "fp32", 2.0, "tuned")
    calls = []
    monkeypatch.setattr(tune, "tune", lambda p, g, precision: calls.append(p) or tuned)
    assert op.choose(new, gpu) == tuned and op.choose(new, gpu) == tuned and calls == [new]
    op.choose.cache_clear()
    monkeypatch.setenv("CONVKIT_TUNE", "0")
    assert op.choose(new, gpu) == op.FALLBACK


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({}, None),
        ({"groups": 2}, "grouped"),
        ({"dilation": (2, 2)}, "dilated"),
        ({"padding_mode": "reflect"}, "zeros"),
        ({"stride": (1, 2)}, "stride"),
        ({"padding": (1, 0)}, "padding"),
        ({"padding": "same", "stride": (1, 1)}, None),  # 3x3: one on every side
        ({"padding": "valid"}, None),
        ({"padding": "same", "stride": (1, 1), "weight": SimpleNamespace(shape=(8, 4, 2, 2))}, "padding"),
    ],
)
def test_which_layers_the_patch_takes(changes, why):
    from convkit.op.patch import unsupported

    weight = SimpleNamespace(shape=(8, 4, 3, 3))
    conv = SimpleNamespace(**({"groups": 1, "dilation": (1, 1), "padding_mode": "zeros", "stride": (2, 2),
                               "padding": (1, 1), "weight": weight} | changes))  # fmt: skip
    found = unsupported(conv)
    assert found is None if why is None else why in found


def test_the_host_cost_benchmark_covers_small_and_large_layers():
    from convkit.papers.summary import overhead

    found = overhead.layers()
    assert len(found) >= 20 and len(set(found)) == len(found)
    assert sum(p.flops < 1e9 for p in found) >= 10 and sum(p.flops > 20e9 for p in found) >= 5
    assert {(c.impl, c.variant) for c in overhead.CASES} == {
        (i, v) for i in ("convkit", "pytorch") for v in ("host_per_call", "gpu")
    } | {("convkit", part) for part in ("host_lookup", "host_replay", "host_operator")}


def test_the_operators_are_registered_as_soon_as_pytorch_is_imported_after_convkit(monkeypatch, tmp_path):
    """convkit imported first, PyTorch later: its import registers the operators (a first call inside a compiled
    function could not), and the hook then leaves the import system."""
    import sys

    from convkit.op import torch_ops

    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("IMPORTED = True\n")  # a stand-in, found as PyTorch would be
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    registered = []
    monkeypatch.setattr(torch_ops, "ops", lambda: registered.append(sys.modules["torch"].IMPORTED))
    torch_ops.register_if_torch_is_imported()
    torch_ops.register_if_torch_is_imported()  # one hook, however often convkit asks
    assert sum(isinstance(f, torch_ops._RegisterAfterTorch) for f in sys.meta_path) == 1 and registered == []
    import torch  # noqa: F401

    assert registered == [True]  # after PyTorch's module ran
    assert not any(isinstance(f, torch_ops._RegisterAfterTorch) for f in sys.meta_path)
    torch_ops.register_if_torch_is_imported()  # PyTorch imported now: registered at once
    assert registered == [True, True]
    monkeypatch.delitem(sys.modules, "torch")
