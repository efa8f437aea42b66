"""The FP32-ceiling kernels on the GPU: every tuning candidate against float64 on random shapes, the
Winograd tiles' errors, subnormal values kept, the cuBLAS peer, and argument errors raised before any launch."""

from __future__ import annotations

import pytest

from convkit.bench.measure import CHECK_ONLY, measure_problem
from convkit.core import reference
from convkit.core.problem import ConvProblem
from convkit.families import fp32 as family
from convkit.families.fp32 import edges as fp32_edges
from convkit.families.fp32 import launch, winograd
from convkit.families.registry import Kernels
from convkit.families.tf32x3 import edges as tf32x3_edges
from convkit.libs import cublas
from convkit.op.cases import Case, params_text

pytestmark = pytest.mark.gpu


def _random_problems(count: int, seed: int) -> list[ConvProblem]:
    """Batch 1..8, odd sizes, C and M from 1, stride 1 or 2, every padding below the filter."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        r = int(rng.choice([1, 3, 5, 7]))
        p = ConvProblem(int(rng.integers(1, 9)), int(rng.integers(1, 40)), int(rng.integers(r, 30)),
                        int(rng.integers(r, 30)), int(rng.integers(1, 150)), r, r, pad=int(rng.integers(0, r)),
                        stride=int(rng.choice([1, 2])))  # fmt: skip
        if p.out_h >= 1 and p.out_w >= 1:
            out.append(p)
    return out


@pytest.mark.parametrize("problem", _random_problems(24, seed=7), ids=lambda p: f"{p.label}-p{p.pad}-s{p.stride}")
def test_every_candidate_matches_float64(problem):
    kernels = Kernels(family.VARIANTS, family.PEERS)
    todo = [Case("convkit", family.IGEMM, params_text(k.to_params())) for k in launch.candidates(problem)]
    if family.winograd_supports(problem):
        todo += [
            Case("convkit", family.WINOGRAD, params_text(k.to_params())) for k in winograd.winograd_candidates(problem)
        ]
    if cublas.supports(problem):
        todo.append(Case(cublas.IMPL, cublas.VARIANT))
    rows = list(measure_problem(problem, todo, kernels, seed=1, timing=CHECK_ONLY))
    failed = [(r["variant"], r["params"], r["status"], r["rel_err"], r["note"]) for r in rows if r["status"] != "ok"]
    assert not failed, failed


def test_edge_shapes():
    fp32_edges.edge_check()
    tf32x3_edges.edge_check()  # the same design's edge launches on the 3xTF32 kernel


def test_winograd_error_is_a_transform_methods():
    import cupy

    p = ConvProblem.same(2, 64, 28, 28, 64, 3)
    rng = cupy.random.default_rng(0)
    x, w = (
        rng.standard_normal(p.input_shape, dtype=cupy.float32),
        rng.standard_normal(p.filter_shape, dtype=cupy.float32),
    )
    ref = reference.conv2d(x.get(), w.get(), pad=1, stride=1)
    runs = {m: winograd.conv2d_winograd(x, w, pad=1, launch=winograd.WinogradLaunch(m)).get() for m in (2, 4)}
    errors = {m: reference.relative_error(y, ref) for m, y in runs.items()}
    assert errors[2] < errors[4] < reference.TRANSFORM_TOLERANCE, errors
    direct = reference.relative_error(launch.conv2d_implicit_gemm(x, w, pad=1).get(), ref)
    assert direct < reference.DIRECT_TOLERANCE


def test_subnormal_values_are_kept():
    """A filter of 1.0 gives subnormal inputs back bit for bit, as cuDNN does: a build that flushes subnormals to
    zero (CuPy's RawModule appends -ftz=true to each) gives zeros."""
    import cupy
    import numpy as np

    bits = np.array([0x00000001, 0x80000001, 0x00400000, 0x007FFFFF, 0x00800000, 0x3F800000], dtype=np.uint32)
    x = cupy.asarray(bits.view(np.float32).reshape(1, 1, 1, -1))
    out = launch.conv2d_implicit_gemm(x, cupy.ones((1, 1, 1, 1), dtype=cupy.float32)).get()
    assert (out.view(np.uint32).ravel() == bits).all(), out.view(np.uint32).ravel()


def test_argument_errors_before_launch():
    import cupy

    x = cupy.zeros((1, 4, 8, 8), dtype=cupy.float32)
    w = cupy.zeros((4, 4, 3, 3), dtype=cupy.float32)
    with pytest.raises(TypeError, match="x must be float32"):
        launch.conv2d_implicit_gemm(x.astype(cupy.float64), w)
    with pytest.raises(ValueError, match="C-contiguous"):
        launch.conv2d_implicit_gemm(x.transpose(0, 1, 3, 2), w)
    with pytest.raises(ValueError, match="tile"):
        launch.conv2d_implicit_gemm(x, w, launch=launch.ImplicitGemmLaunch("32x32"))
    with pytest.raises(ValueError, match="no F"):
        winograd.conv2d_winograd(x, cupy.zeros((4, 4, 2, 2), dtype=cupy.float32))
