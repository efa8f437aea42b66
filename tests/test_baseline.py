"""The baseline chapter on the recorded H100 results (CPU): what notebook 01 shows is computed here."""

from __future__ import annotations

import pytest

from convkit import chapter
from convkit.compile import Launch
from convkit.papers import baseline
from convkit.papers.baseline import results as baseline_results
from convkit.papers.baseline.anchors import ANCHORS, QUICK_ANCHORS, anchors
from convkit.papers.baseline.direct import DirectLaunch
from convkit.problem import ConvProblem
from convkit.tables import status_counts


@pytest.fixture(scope="module")
def recorded():
    return chapter.results("baseline", "recorded")


def test_recorded_mode_reads_the_h100_results(recorded):
    assert not recorded.measured_now
    table = chapter.provenance_table(recorded)
    assert len(table) >= 1
    assert set(table["gpu"]) == {"NVIDIA H100 80GB HBM3"}
    for key in ("driver", "cuda_runtime", "nvrtc", "cupy", "cudnn", "convkit_commit", "date"):
        assert all(table[key].astype(str).str.len() > 0), key


def test_baseline_summary_covers_every_anchor(recorded):
    summary = baseline_results.baseline_summary(recorded.frame)
    assert set(summary["label"]) == {a.problem.label for a in ANCHORS}
    assert (summary["direct_us"] > 0).all() and (summary["best_cudnn_us"] > 0).all()
    statuses = status_counts(recorded.frame)
    assert statuses.loc["cudnn DIRECT", "not_supported"] == len(ANCHORS)  # not implemented on Hopper
    assert statuses.loc["convkit direct", "ok"] == len(ANCHORS)
    assert "direct kernel" in baseline_results.baseline_verdict(summary)
    assert list(baseline_results.baseline_table(summary).columns)[:2] == ["best_cudnn", "best_cudnn_us"]


def test_roofline_points_pair_cudnn_with_direct(recorded):
    points = baseline_results.roofline_points(recorded.frame)
    kinds = [kind for *_, kind in points]
    assert kinds.count("best cuDNN algorithm") == kinds.count("convkit direct") == len(ANCHORS)
    assert all(gflops > 0 and intensity > 0 for _, intensity, gflops, _ in points)


def test_every_recorded_ok_row_was_checked(recorded):
    ok = recorded.frame[recorded.frame["status"] == "ok"]
    assert (ok["rel_err"] < 1e-3).all()
    direct_methods = ok[~ok["variant"].isin(["FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"])]
    assert (direct_methods["rel_err"] < 1e-5).all()


def test_paper_declares_the_chapter():
    paper = baseline.PAPER
    assert (paper.name, paper.experiment, paper.notebook, paper.sources) == ("baseline", "baseline", "01_baseline",
                                                                            ("direct",))  # fmt: skip
    assert [v.name for v in paper.variants] == ["direct"]
    assert paper.problems(False) == [a.problem for a in ANCHORS] and len(paper.problems(True)) == 4
    assert anchors(True) == QUICK_ANCHORS and all(a.problem.flops < 1e9 for a in QUICK_ANCHORS)
    samples = paper.sample_problems()
    assert any(p.stride == 2 for p in samples) and any(p.c == 1 for p in samples) and any(p.m == 1 for p in samples)
    assert [c.params for _, todo in paper.checks() for c in todo] == ['{"threads":256}'] * len(samples)


def test_direct_launch_follows_the_protocol():
    spec = DirectLaunch()
    problem = ConvProblem.same(2, 3, 17, 13, 5, 3)
    assert isinstance(spec, Launch) and spec.as_params() == {"threads": 256}
    assert spec.grid(problem) == (-(-2 * 5 * 17 * 13 // 256),) and spec.block(problem) == (256,)
    with pytest.raises(ValueError, match=r"threads must be an int in 1\.\.1024"):
        DirectLaunch(0).can_implement(problem)
