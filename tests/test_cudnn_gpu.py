"""Every cuDNN forward algorithm against the reference, through the benchmark's own checks (GPU)."""

from __future__ import annotations

import pytest

from convkit.bench import measure
from convkit.core.problem import ConvProblem
from convkit.core.reference import TRANSFORM_TOLERANCE
from convkit.libs import cudnn
from convkit.op.cases import cases

pytestmark = pytest.mark.gpu

PROBLEMS = [
    ConvProblem(1, 3, 17, 23, 5, 3, 3, pad=1),
    ConvProblem(2, 1, 31, 29, 7, 5, 5, pad=2),
    ConvProblem(1, 16, 9, 9, 1, 1, 1),
    ConvProblem(3, 5, 2, 3, 4, 5, 5, pad=2),
    ConvProblem(1, 7, 13, 11, 6, 3, 5, pad=1, stride=2),
    ConvProblem.from_label("7-1-1-32-832"),
]


def test_cudnn_is_found_with_a_version():
    assert cudnn.version() is not None, cudnn.library_origin()
    assert cudnn.version().startswith("9."), cudnn.version()


def test_heuristic_ranking_names_known_algorithms():
    ranking = cudnn.CudnnConvolution(PROBLEMS[0]).heuristic_ranking()
    assert ranking and all(algo in cudnn.FORWARD_ALGORITHMS for algo, _ in ranking)


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: f"{p.label}-p{p.pad}-s{p.stride}")
def test_every_algorithm_is_right_or_says_why_not(problem):
    todo = cases(problem, ())
    rows = list(measure.measure_problem(problem, todo, measure.Kernels(), timing={"min_reps": 3, "max_reps": 5,
                                                                                 "budget_ms": 5}))  # fmt: skip
    assert [r["variant"] for r in rows] == [c.variant for c in todo]
    for row in rows:
        assert row["status"] in ("ok", "not_supported", "workspace_too_large"), row
        if row["status"] == "ok":
            assert float(row["rel_err"]) < TRANSFORM_TOLERANCE
            assert float(row["time_ms_median"]) > 0
    assert any(r["status"] == "ok" for r in rows if r["impl"] == "cudnn"), rows
