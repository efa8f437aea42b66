"""The 3xTF32 implicit GEMM on the GPU: every tuning candidate against float64 on random shapes, the split
bit for bit against its NumPy rule, its error beside the FP32 SIMT kernel's as K grows, and adversarial
inputs (a wide dynamic range, values on TF32's rounding ties, all positive, values near the bottom of FP32's range
whose small parts are subnormal)."""

from __future__ import annotations

import numpy as np
import pytest
from test_fp32_gpu import _random_problems

from convkit.bench.measure import CHECK_ONLY, measure_problem
from convkit.core import reference
from convkit.core.gpu import has_tf32_tensor_cores
from convkit.core.problem import ConvProblem
from convkit.families import tf32x3 as family
from convkit.families.fp32.launch import conv2d_implicit_gemm
from convkit.families.registry import Kernels
from convkit.families.tf32x3 import launch
from convkit.families.tf32x3.launch import conv2d_tf32x3
from convkit.families.tf32x3.rounding import split_tf32
from convkit.op.cases import Case, params_text
from convkit.papers.tf32x3 import accuracy

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _tensor_cores():
    if not has_tf32_tensor_cores():
        pytest.skip("this GPU (or CONVKIT_PTX_ARCH) has no TF32 tensor cores: the family declines it")


@pytest.mark.parametrize("problem", _random_problems(24, seed=11), ids=lambda p: f"{p.label}-p{p.pad}-s{p.stride}")
def test_every_candidate_matches_float64(problem):
    todo = [Case("convkit", family.IGEMM, params_text(k.to_params())) for k in launch.launch_candidates(problem)]
    rows = list(measure_problem(problem, todo, Kernels(family.VARIANTS), seed=2, timing=CHECK_ONLY))
    failed = [(r["params"], r["status"], r["rel_err"], r["note"]) for r in rows if r["status"] != "ok"]
    assert not failed, failed


def test_the_kernel_splits_as_the_numpy_rule_bit_for_bit():
    """1x1, one channel, one filter of 1.0: each output is big(x) + small(x), which float32 holds exactly."""
    import cupy

    bits = np.array([0x3F800000, 0x3F801000, 0xBF801000, 0x3F800FFF, 0x3F801001, 0x3FFFF000, 0x3FFFFFFF,
                     0x3F800001, 0x4B7FFFFF, 0x33D6BF95, 0xC2F6E979, 0x00800000, 0x3EAAAAAB, 0x00000000],
                    dtype=np.uint32)  # fmt: skip
    x = bits.view(np.float32).reshape(1, 1, 1, -1)
    out = conv2d_tf32x3(cupy.asarray(x), cupy.ones((1, 1, 1, 1), dtype=cupy.float32)).get().ravel()
    big, small = split_tf32(x.ravel())
    assert (out.view(np.uint32) == (big + small).view(np.uint32)).all(), (out, big + small)


def test_weights_split_ahead_are_split_as_the_numpy_rule_bit_for_bit():
    """1x1, one channel, input pixels of 1.0 and a filter per value: each output is that filter's big part plus its
    small part as the tensor core reads it (split_weights_tf32x3 splits by the loop's rule), which float32 holds."""
    import cupy

    bits = np.array([0x3F800000, 0x3F801000, 0xBF801000, 0x3F800FFF, 0x3F801001, 0x3FFFF000, 0x3FFFFFFF,
                     0x3F800001, 0x4B7FFFFF, 0x33D6BF95, 0xC2F6E979, 0x00800000, 0x3EAAAAAB, 0x00000000],
                    dtype=np.uint32)  # fmt: skip
    w = bits.view(np.float32).reshape(-1, 1, 1, 1)
    spec = launch.TensorCoreGemmLaunch("64x64", stages=2, warp="64x32", weights="split")
    out = conv2d_tf32x3(cupy.ones((1, 1, 1, 4), dtype=cupy.float32), cupy.asarray(w), launch=spec).get()
    big, small = split_tf32(w.ravel())
    assert (out[0, :, 0, 0].view(np.uint32) == (big + small).view(np.uint32)).all(), (out[0, :, 0, 0], big + small)


@pytest.mark.parametrize("problem", [p for p in _random_problems(24, seed=13) if p.stride == 1 and p.r == p.s
                                     and p.r in (3, 5)][:8], ids=lambda p: f"{p.label}-p{p.pad}")  # fmt: skip
def test_every_winograd_candidate_matches_float64(problem):
    """3xTF32 Winograd at every tuning candidate (its filters split in the loop and ahead), within the transform
    methods' bar of float64."""
    todo = [Case("convkit", family.WINOGRAD, params_text(k.to_params()))
            for k in launch.winograd_launch_candidates(problem)]  # fmt: skip
    rows = list(measure_problem(problem, todo, Kernels(family.VARIANTS), seed=3, timing=CHECK_ONLY))
    failed = [(r["params"], r["status"], r["rel_err"], r["note"]) for r in rows if r["status"] != "ok"]
    assert rows and not failed, failed


def _errors(p: ConvProblem, x: np.ndarray, w: np.ndarray) -> dict[str, float]:
    import cupy

    ref = reference.conv2d(x, w, pad=p.pad, stride=p.stride)
    xs, ws = cupy.asarray(x), cupy.asarray(w)
    return {
        "tf32x3": reference.relative_error(conv2d_tf32x3(xs, ws, pad=p.pad).get(), ref),
        "fp32": reference.relative_error(conv2d_implicit_gemm(xs, ws, pad=p.pad).get(), ref),
    }


#: Input channels of the layers on which both 3xTF32 kernels' error is followed as K = 9 C grows (27 to 4608).
K_GROWTH_CHANNELS = (3, 32, 128, 512)


def k_growth_inputs(channels: int) -> tuple[ConvProblem, np.ndarray, np.ndarray]:
    """(the 3x3 layer of ``channels`` input channels, its x and w, float32) on which the error is followed."""
    rng = np.random.default_rng(channels)
    p = ConvProblem.same(2, channels, 24, 24, 64, 3)
    x = rng.standard_normal(p.input_shape, dtype=np.float32)
    return p, x, rng.standard_normal(p.filter_shape, dtype=np.float32)


@pytest.mark.parametrize("channels", K_GROWTH_CHANNELS)
def test_the_error_stays_a_direct_fp32_methods_as_k_grows(channels):
    """K = 9 C from 27 to 4608: under the direct bar, and for K >= 256 no worse than 1.5x the SIMT kernel's
    (the median over the study's layers is the chapter's measure)."""
    err = _errors(*k_growth_inputs(channels))
    print(f"K={9 * channels}: {err}")
    assert err["tf32x3"] < reference.DIRECT_TOLERANCE, err
    if 9 * channels >= 256:
        assert err["tf32x3"] <= 1.5 * err["fp32"], err


#: The hard inputs both 3xTF32 kernels are checked on: the accuracy experiment's but the standard normal ones.
HARD_INPUTS = accuracy.INPUTS[1:]
#: The layer they are checked on.
HARD_LAYER = ConvProblem.same(2, 64, 20, 20, 32, 3)


def hard_inputs(kind: str, p: ConvProblem = HARD_LAYER, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """x and w of ``p`` (float32, NumPy) of one of :data:`HARD_INPUTS`, as the accuracy experiment makes them."""
    return accuracy.make_inputs(p, kind, seed, np)


@pytest.mark.parametrize("inputs", HARD_INPUTS)
def test_adversarial_inputs(inputs):
    err = _errors(HARD_LAYER, *hard_inputs(inputs))
    print(f"{inputs}: {err}")
    assert err["tf32x3"] < reference.DIRECT_TOLERANCE and err["fp32"] < reference.DIRECT_TOLERANCE, err


def test_argument_errors_before_launch():
    import cupy

    x = cupy.zeros((1, 3, 8, 8), dtype=cupy.float32)
    with pytest.raises(ValueError, match="stages must be one of"):
        conv2d_tf32x3(x, cupy.zeros((4, 3, 3, 3), dtype=cupy.float32), launch=launch.TensorCoreGemmLaunch(stages=9))
    with pytest.raises(TypeError, match="w"):
        conv2d_tf32x3(x, cupy.zeros((4, 3, 3, 3), dtype=cupy.float64))
