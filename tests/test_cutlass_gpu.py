"""The CUTLASS peer on the GPU: every kernel against float64 on layers no tile divides, through the sweeps' own
check (output poisoned first), and its time taken without the layout transforms."""

from __future__ import annotations

import pytest

from convkit.bench.measure import CHECK_ONLY, measure_problem
from convkit.core.problem import ConvProblem
from convkit.families.registry import Kernels
from convkit.libs import cutlass
from convkit.op.cases import variant_case

pytestmark = pytest.mark.gpu

PROBLEMS = [
    ConvProblem.same(1, 64, 14, 14, 32, 3), ConvProblem(3, 8, 17, 13, 12, 3, 3, pad=1, stride=2),
    ConvProblem.same(2, 128, 7, 7, 260, 1), ConvProblem(1, 16, 20, 20, 8, 5, 5, pad=0),
]  # fmt: skip


@pytest.fixture(autouse=True)
def _built():
    if not cutlass.available():
        pytest.skip("the CUTLASS peer needs the nvidia-cutlass wheel (pip install convkit[cutlass]) and nvcc")


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: f"{p.label}-p{p.pad}-s{p.stride}")
def test_every_kernel_matches_float64(problem):
    todo = [variant_case(peer, problem) for peer in cutlass.PEERS if peer.supports(problem)]
    assert todo, "no CUTLASS kernel takes the problem"
    rows = list(measure_problem(problem, todo, Kernels((), cutlass.PEERS), seed=4, timing=CHECK_ONLY))
    failed = [(r["variant"], r["status"], r["rel_err"], r["note"]) for r in rows if r["status"] != "ok"]
    assert not failed, failed
