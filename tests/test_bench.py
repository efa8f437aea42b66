"""What the benchmark plans to measure (CPU); measuring itself is in test_cudnn_gpu.py."""

from __future__ import annotations

import pytest

from convkit import bench, pytorch
from convkit.cudnn import FORWARD_ALGORITHMS
from convkit.problem import ConvProblem


def test_cases_are_every_variant_then_every_cudnn_algorithm():
    problem = ConvProblem.from_label("7-2-1-32-832")  # batch 2: the Chang 2022 kernels do not apply
    cases = bench.cases(problem, pytorch=False)
    supported = [name for name, v in bench.VARIANTS.items() if v.supports(problem)]
    assert supported == ["direct", "cuconv_paper", "cuconv_fused", "cuconv_split", "cuconv_tiled"]
    assert [c.variant for c in cases] == [*supported, *FORWARD_ALGORITHMS]
    assert {c.impl for c in cases} == {"convkit", "cudnn"}
    assert len(FORWARD_ALGORITHMS) == 8


def test_pytorch_second_opinion_comes_last_when_asked():
    cases = bench.cases(ConvProblem.from_label("7-2-1-32-832"), pytorch=True)
    assert (cases[-1].impl, cases[-1].variant) == ("pytorch", pytorch.VARIANT)
    default = bench.cases(ConvProblem.from_label("7-2-1-32-832"))
    assert (default[-1].impl == "pytorch") == pytorch.available()


def test_cases_without_cudnn_and_unknown_variants():
    problem = ConvProblem.from_label("7-1-3-384-192")
    assert [c.variant for c in bench.cases(problem, ["direct"], cudnn=False)] == ["direct"]
    with pytest.raises(ValueError, match="unknown variants"):
        bench.cases(problem, ["nope"])
