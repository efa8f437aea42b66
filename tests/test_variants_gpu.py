"""Every registered kernel against float64 on its family's sample problems (GPU), the way the sweeps check it.

One test per (family, problem): each case's output is poisoned with NaN, the case runs once, and the norm-wise
relative error must stay under its variant's tolerance. The families come from the registry, so a family that
ships without a chapter is checked too; a chapter's tuning table, where one tunes the family, gives the launches.
A chapter whose kernels are no plain convolution (the fused layer) gives its own checks. Per-family test files keep
only what is specific to their kernels (tuning candidates, planners, argument errors).
"""

from __future__ import annotations

import pytest

from convkit.bench.measure import CHECK_ONLY, measure_problem, variant_checks
from convkit.core.gpu import gpu_status
from convkit.families import FAMILIES
from convkit.families.registry import Kernels
from convkit.papers import PAPERS
from convkit.study.results import gpu_results_dir

pytestmark = pytest.mark.gpu


def _checks():
    """Each family's checks, then each chapter's own; they pick launches for this GPU, so without one there is a
    single (skipped) test."""
    if not gpu_status()[0]:
        yield pytest.param(None, None, None, id="no-gpu")
        return
    tuned = {p.family.name: p.tuned(gpu_results_dir()) for p in PAPERS if p.family is not None}
    for family in FAMILIES:
        kernels = Kernels(family.variants, family.peers)
        for problem, cases in variant_checks(family.variants, family.sample_problems, tuned.get(family.name)):
            yield pytest.param(kernels, problem, cases, id=f"{family.name}-{problem.key}")
    for paper in (p for p in PAPERS if p.sample_checks is not None):
        for problem, cases in paper.checks(paper.tuned(gpu_results_dir())):
            yield pytest.param(paper, problem, cases, id=f"{paper.name}-{problem.key}")


@pytest.mark.parametrize(("measures", "problem", "cases"), list(_checks()))
def test_variant_matches_float64(measures, problem, cases):
    if isinstance(measures, Kernels):
        rows = list(measure_problem(problem, cases, measures, seed=0, timing=CHECK_ONLY))
    else:  # a chapter's own checks, measured its way
        rows = list(measures.rows(problem, cases, seed=0, timing=CHECK_ONLY))
    assert [(r["impl"], r["variant"], r["params"]) for r in rows] == [(c.impl, c.variant, c.params) for c in cases]
    failed = [(r["variant"], r["params"], r["status"], r["rel_err"], r["note"]) for r in rows if r["status"] != "ok"]
    assert not failed, failed
