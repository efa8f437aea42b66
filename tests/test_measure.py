"""What the benchmark plans to measure, and the variant bookkeeping (CPU); measuring itself is in the GPU tests."""

from __future__ import annotations

import pytest

from convkit.bench import measure
from convkit.core.problem import ConvProblem
from convkit.core.reference import DIRECT_TOLERANCE, TRANSFORM_TOLERANCE
from convkit.libs import pytorch
from convkit.libs.cudnn import FORWARD_ALGORITHMS
from convkit.op.cases import Case


def _noop(*args, **knobs):
    return None


SMALL = measure.Variant("small_only", _noop, lambda p: {"threads": 64}, supports=lambda p: p.c < 100)
TUNED = measure.Variant("tuned", _noop, candidates=lambda p: [{"tile": 1}, {"tile": 2}], tolerance=1e-4)
PEER = measure.Variant("peer", _noop, impl="cupyx", supports=lambda p: p.c == 1)


def test_cases_are_the_supported_variants_then_every_cudnn_algorithm():
    problem = ConvProblem.from_label("7-2-1-32-832")
    cases = measure.cases(problem, [SMALL, TUNED], pytorch=False)
    assert [c.variant for c in cases] == ["tuned", *FORWARD_ALGORITHMS]
    assert {c.impl for c in cases} == {"convkit", "cudnn"}
    small = measure.cases(ConvProblem.from_label("7-1-1-32-64"), [SMALL], cudnn=False)
    assert small == [Case("convkit", "small_only", '{"threads":64}')]


def test_tuning_gives_a_case_per_candidate_and_peers_come_last():
    problem = ConvProblem.same(1, 1, 64, 64, 1, 5)
    cases = measure.cases(problem, [TUNED], cudnn=False, tune=True, peers=[PEER])
    assert [(c.impl, c.variant, c.params) for c in cases] == [
        ("convkit", "tuned", '{"tile":1}'), ("convkit", "tuned", '{"tile":2}'), ("cupyx", "peer", "{}")]  # fmt: skip


def test_pytorch_second_opinion_comes_last_when_asked():
    cases = measure.cases(ConvProblem.from_label("7-2-1-32-832"), [], pytorch=True)
    assert (cases[-1].impl, cases[-1].variant) == ("pytorch", pytorch.VARIANT)
    default = measure.cases(ConvProblem.from_label("7-2-1-32-832"), [])
    assert (default[-1].impl == "pytorch") == pytorch.available()


def test_tolerances_follow_the_method():
    kernels = measure.Kernels((TUNED,), (PEER,))
    assert measure.tolerance_for(Case("convkit", "tuned"), kernels) == 1e-4
    assert measure.tolerance_for(Case("cupyx", "peer"), kernels) == DIRECT_TOLERANCE
    assert measure.tolerance_for(Case("cudnn", "WINOGRAD")) == TRANSFORM_TOLERANCE
    assert measure.tolerance_for(Case("cudnn", "IMPLICIT_GEMM")) == DIRECT_TOLERANCE
    assert measure.tolerance_for(Case("pytorch", pytorch.VARIANT)) == TRANSFORM_TOLERANCE
    with pytest.raises(KeyError):
        kernels["nope"]


def test_variant_checks_cover_each_supported_variant_once():
    problems = [ConvProblem.from_label("7-1-1-32-64"), ConvProblem.from_label("7-1-1-32-832")]
    checks = list(measure.variant_checks([SMALL, TUNED], problems))
    assert [(p.label, [c.variant for c in cases]) for p, cases in checks] == [
        ("7-1-1-32-64", ["small_only", "tuned"]), ("7-1-1-32-832", ["tuned"])]  # fmt: skip
