"""The Ozaki scheme II model (convkit.papers.tf32x3.ozaki), on the CPU: its rebuilding against Python's exact
integers, its scaling's bound, and its products exact where the inputs are small integers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from convkit.core.problem import ConvProblem
from convkit.papers.tf32x3 import ozaki


@pytest.mark.parametrize("n", [2, 5, 8, 10])
def test_rebuilt_matches_exact_integers(n):
    """Garner's digits, summed in float64, give back integers of either sign up to prod / 2 (exactly below 2^53)."""
    moduli = ozaki.MODULI[:n]
    product = math.prod(moduli)
    rng = np.random.default_rng(n)
    values = [int(v) for v in rng.integers(-(2**62), 2**62, 200)] if product > 2**64 else []
    values += [0, 1, -1, product // 2 - 1, -(product // 2), 12345, -98765]
    values += [int(v) % product - product // 2 for v in rng.integers(0, 2**62, 200)]
    values = [v for v in values if -(product // 2) <= v < product // 2]
    residues = [np.array([v % m for v in values], dtype=np.int64) for m in moduli]
    got = ozaki.rebuilt(residues, moduli)
    for value, back in zip(values, got, strict=True):
        assert back == pytest.approx(float(value), rel=n * 2.0**-52, abs=0.0), value
        if abs(value) < 2**53:
            assert back == value


@pytest.mark.parametrize("k", [1, 64, 1000, 4096])
def test_operand_bits_is_the_largest_within_the_moduli(k):
    for n in (4, 7, 9):
        moduli = ozaki.MODULI[:n]
        bits, half = ozaki.operand_bits(k, moduli), math.prod(moduli) // 2
        assert k << (2 * bits) < half <= k << (2 * bits + 2)


@pytest.mark.parametrize("scaling", ozaki.SCALINGS)
def test_small_integers_multiply_exactly(scaling):
    """Inputs of a few bits lose nothing to the scaling: the product is the exact one, rounded once to FP32."""
    rng = np.random.default_rng(3)
    w = rng.integers(-7, 8, (16, 96)).astype(np.float32)
    x = (rng.integers(-7, 8, (96, 40)) * 2.0**-5).astype(np.float32)
    exact = (w.astype(np.float64) @ x.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(ozaki.ozaki2_product(w, x, 5, scaling), exact)


def test_more_moduli_reach_fp32():
    problem = ConvProblem.same(1, 64, 8, 8, 16, 1)
    errors = [ozaki.model_error(problem, "wide range", n) for n in (5, 7, 9)]
    assert errors[0] > errors[1] > errors[2] and errors[2] < 1e-7 and errors[0] > 1e-5


def test_argument_errors():
    w, x = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match="scaling"):
        ozaki.scaled_operands(w, x, ozaki.MODULI[:4], "nearest")
    with pytest.raises(ValueError, match="1x1"):
        ozaki.model_error(ConvProblem.same(1, 4, 8, 8, 4, 3), "normal", 7)


def test_tensor_bound_share_counts_the_1x1_layers_past_their_memory_time():
    import pandas as pd

    big, small = ConvProblem.same(1, 2048, 64, 64, 2048, 1), ConvProblem.same(1, 16, 64, 64, 16, 1)
    table = pd.DataFrame({"problem": [big, small, ConvProblem.same(1, 64, 8, 8, 64, 3)]})
    ceilings = {"copy_gbps": 3000.0, "tf32_mma_peak_tflops": 300.0}
    assert ozaki.tensor_bound_share(table, ceilings, 3, "tf32_mma_peak_tflops") == 50.0  # the 3x3 one not counted
    assert math.isnan(ozaki.tensor_bound_share(table, ceilings, 8, "int8_mma_peak_tops"))


def test_model_lines_say_what_is_measured(monkeypatch):
    import pandas as pd

    model = pd.DataFrame({"label": "x", "C": 256, "inputs": "normal", "n": [7, 8], "error": [3e-6, 2e-5]})
    errors = pd.DataFrame({"FP32 implicit GEMM (ours), recorded": [1e-7, math.nan]})
    table = pd.DataFrame({"problem": [ConvProblem.same(1, 2048, 64, 64, 2048, 1)]})
    lines = ozaki.model_lines(model, errors, table, {"copy_gbps": 3000.0, "tf32_mma_peak_tflops": 300.0})
    assert "3.0e-06, within" in lines[0] and "2.0e-05, over" in lines[1] and "1.0e-07" in lines[2]
    assert "On 100% of this run's 1 1x1 layers" in lines[3] and "mma.sync" in lines[3]
    assert "not among this run's ceilings" in lines[4]
    more = ozaki.model_lines(model, errors, table, {"copy_gbps": 3000.0, "int8_mma_peak_tops": 1200.0})
    assert not any("three TF32 products" in line for line in more) and "on 100% of them" in more[3]


def test_model_table_without_recorded_errors():
    import pandas as pd

    model = pd.DataFrame([{"label": p.label, "C": p.c, "inputs": "normal", "n": 7, "error": 1e-7}
                          for p in ozaki.PROBLEMS])  # fmt: skip
    table = ozaki.model_table(model, pd.DataFrame())
    assert list(table.index.names) == ["K", "inputs"] and table.iloc[:, 0].tolist() == [1e-7] * 3
    assert table.iloc[:, 1:].isna().all().all()


def test_model_lines_take_hopper_s_instruction_where_measured():
    import pandas as pd

    model = pd.DataFrame({"label": "x", "C": 256, "inputs": "normal", "n": [8], "error": [2e-7]})
    table = pd.DataFrame({"problem": [ConvProblem.same(1, 2048, 64, 64, 2048, 1)]})
    ceilings = {"copy_gbps": 3000.0, "tf32_mma_peak_tflops": 300.0, "tf32_wgmma_peak_tflops": 450.0,
                "int8_mma_peak_tops": 600.0, "int8_wgmma_peak_tops": 1800.0}  # fmt: skip
    lines = ozaki.model_lines(model, pd.DataFrame(), table, ceilings)
    assert "measured wgmma rate" in lines[1] and "INT8 wgmma rate" in lines[2]
