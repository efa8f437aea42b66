"""Every registered kernel against float64 on its paper's sample problems (GPU), the way the sweeps check it.

One test per (paper, problem): each case's output is poisoned with NaN, the case runs once, and the
norm-wise relative error must stay under its variant's tolerance. Per-paper test files keep only
what is specific to their paper (tuning candidates, planners, argument errors).
"""

from __future__ import annotations

import pytest

from convkit.bench.measure import CHECK_ONLY
from convkit.core.gpu import gpu_status
from convkit.papers import PAPERS
from convkit.study.results import gpu_results_dir

pytestmark = pytest.mark.gpu


def _checks():
    """Each paper's checks; they pick knobs for this GPU, so without one there is a single (skipped) test."""
    if not gpu_status()[0]:
        yield pytest.param(None, None, None, id="no-gpu")
        return
    for paper in PAPERS:
        for problem, cases in paper.checks(paper.tuned(gpu_results_dir())):  # at this GPU's tuned knobs
            yield pytest.param(
                paper, problem, cases, id=f"{paper.name}-{problem.label}-p{problem.pad}-s{problem.stride}"
            )


def test_every_paper_with_kernels_has_sample_checks():
    for paper in PAPERS:
        if paper.variants:
            assert paper.checks(), paper.name
            checked = {c.variant for _, cases in paper.checks() for c in cases}
            runs_here = {v.name for v in paper.variants if any(v.supports(p) for p in paper.sample_problems())}
            assert checked == runs_here, paper.name


@pytest.mark.parametrize(("paper", "problem", "cases"), list(_checks()))
def test_variant_matches_float64(paper, problem, cases):
    rows = list(paper.rows(problem, cases, seed=0, timing=CHECK_ONLY))
    assert [(r["impl"], r["variant"], r["params"]) for r in rows] == [(c.impl, c.variant, c.params) for c in cases]
    failed = [(r["variant"], r["params"], r["status"], r["rel_err"], r["note"]) for r in rows if r["status"] != "ok"]
    assert not failed, failed
