"""What runs on a problem (convkit.op.cases: the supported variants, every cuDNN algorithm, PyTorch, the peers) and
the variant bookkeeping (CPU); measuring itself is in the GPU tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from convkit.bench.measure import variant_checks
from convkit.core.problem import ConvProblem
from convkit.core.reference import DIRECT_TOLERANCE, TRANSFORM_TOLERANCE
from convkit.cuda.launch import KernelLaunch
from convkit.families.baseline.launch import DirectLaunch
from convkit.families.registry import Kernels, Variant
from convkit.libs import pytorch
from convkit.libs.cudnn import FORWARD_ALGORITHMS
from convkit.op.cases import Case, cases, tolerance_for


def _noop(*args, **knobs):
    return None


@dataclass(frozen=True)
class Tile(KernelLaunch):
    """A launch of one knob, as a tuned variant's."""

    tile: int = 0
    kind: ClassVar[str] = "test_tile"


SMALL = Variant("small_only", _noop, default=lambda p: DirectLaunch(64), applies_to=lambda p: p.c < 100)
TUNED = Variant("tuned", _noop, default=lambda p: Tile(1), candidates=lambda p: [Tile(1), Tile(2)],
                launch_from=Tile.from_params, tolerance=1e-4)  # fmt: skip
PEER = Variant("peer", _noop, impl="cupyx", applies_to=lambda p: p.c == 1)


def test_cases_are_the_supported_variants_then_every_cudnn_algorithm():
    problem = ConvProblem.from_label("7-2-1-32-832")
    found = cases(problem, [SMALL, TUNED], pytorch=False)
    assert [c.variant for c in found] == ["tuned", *FORWARD_ALGORITHMS]
    assert {c.impl for c in found} == {"convkit", "cudnn"}
    small = cases(ConvProblem.from_label("7-1-1-32-64"), [SMALL], cudnn=False)
    assert small == [Case("convkit", "small_only", '{"threads":64}')]


def test_tuning_gives_a_case_per_candidate_and_peers_come_last():
    problem = ConvProblem.same(1, 1, 64, 64, 1, 5)
    found = cases(problem, [TUNED], cudnn=False, tune=True, peers=[PEER])
    assert [(c.impl, c.variant, c.params) for c in found] == [
        ("convkit", "tuned", '{"tile":1}'), ("convkit", "tuned", '{"tile":2}'), ("cupyx", "peer", "{}")]  # fmt: skip


def test_pytorch_second_opinion_comes_last_when_asked():
    found = cases(ConvProblem.from_label("7-2-1-32-832"), [], pytorch=True)
    assert (found[-1].impl, found[-1].variant) == ("pytorch", pytorch.VARIANT)
    default = cases(ConvProblem.from_label("7-2-1-32-832"), [])
    assert (default[-1].impl == "pytorch") == pytorch.available()


def test_tolerances_follow_the_method():
    kernels = Kernels((TUNED,), (PEER,))
    assert tolerance_for(Case("convkit", "tuned"), kernels) == 1e-4
    assert tolerance_for(Case("cupyx", "peer"), kernels) == DIRECT_TOLERANCE
    assert tolerance_for(Case("cudnn", "WINOGRAD")) == TRANSFORM_TOLERANCE
    assert tolerance_for(Case("cudnn", "IMPLICIT_GEMM")) == DIRECT_TOLERANCE
    assert tolerance_for(Case("pytorch", pytorch.VARIANT)) == TRANSFORM_TOLERANCE
    with pytest.raises(KeyError):
        kernels["nope"]


def test_variant_checks_cover_each_supported_variant_once():
    problems = [ConvProblem.from_label("7-1-1-32-64"), ConvProblem.from_label("7-1-1-32-832")]
    checks = list(variant_checks([SMALL, TUNED], problems))
    assert [(p.label, [c.variant for c in todo]) for p, todo in checks] == [
        ("7-1-1-32-64", ["small_only", "tuned"]), ("7-1-1-32-832", ["tuned"])]  # fmt: skip
