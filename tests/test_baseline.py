"""The baseline chapter on the recorded H100 results (CPU): what notebook 01 shows is computed here."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from convkit.book import chapter
from convkit.core.problem import ConvProblem
from convkit.cuda.launch import Launch
from convkit.families.baseline.launch import DirectLaunch
from convkit.papers import baseline
from convkit.papers.baseline import results as baseline_results
from convkit.papers.baseline.anchors import ANCHORS, QUICK_ANCHORS, anchors
from convkit.papers.paper import FINDING_COLUMNS
from convkit.study.results import load_results
from convkit.study.tables import status_counts

H100_DIR = chapter.results_directory("recorded")


@pytest.fixture(scope="module")
def recorded():
    return chapter.results("baseline", "recorded")


def test_baseline_summary_covers_every_anchor(recorded):
    summary = baseline_results.baseline_summary(recorded.frame)
    assert set(summary["label"]) == {a.problem.label for a in ANCHORS}
    assert (summary["direct_us"] > 0).all() and (summary["best_cudnn_us"] > 0).all()
    statuses = status_counts(recorded.frame)
    assert statuses.loc["cudnn DIRECT", "not_supported"] == len(ANCHORS)  # not implemented on Hopper
    assert statuses.loc["convkit direct", "ok"] == len(ANCHORS)
    table = baseline_results.comparison_table(summary)
    assert list(table.columns)[:3] == ["best legacy algorithm", "legacy (us)", "PyTorch (us)"]
    assert "IMPLICIT PRECOMP GEMM" in set(table["best legacy algorithm"])
    status = baseline_results.status_table(recorded.frame)
    assert status.loc["cuDNN DIRECT", "not supported"] == len(ANCHORS) and "ran, checked" in status.columns


def test_quoted_anchors_sit_beside_pytorch_measured_in_the_same_run(recorded):
    summary = baseline_results.baseline_summary(recorded.frame)
    quoted = baseline_results.quoted_table(summary)
    assert list(quoted.columns[:3]) == ["PyTorch, quoted (us)", "PyTorch, same run (us)", "quoted / same run"]
    ratio = quoted["quoted / same run"]
    assert ratio.max() > 1.25 and abs(ratio.median() - 1) < 0.1  # small layers apart, large ones agree
    text = baseline_results.quoted_text(summary)
    apart = int(((ratio > 1.25) | (ratio < 0.8)).sum())
    assert f"on {apart} they are {ratio[ratio > 1.25].min():.2f}x to {ratio.max():.2f}x apart" in text
    assert "the comparison that counts" in text


def _copy(tmp_path):
    for name in ("baseline", "ceilings"):
        for suffix in ("csv", "json"):
            shutil.copy(H100_DIR / f"{name}.{suffix}", tmp_path / f"{name}.{suffix}")
    return tmp_path


def test_result_box_and_findings_follow_the_recorded_values(recorded, tmp_path):
    directory = _copy(tmp_path)
    lines = baseline_results.result_lines(recorded.frame)
    assert len(lines) in range(3, 6) and "**1.00x**" in lines[0] and "toy CNN conv (1.43x)" in lines[1]
    assert "DIRECT and WINOGRAD never run" in lines[2] and "direct kernel" in lines[3]
    row = baseline_results.findings(directory)
    assert [list(r) for r in row] == [list(FINDING_COLUMNS)]
    assert row[0]["best library on the H100"] == "PyTorch faster by >1.25x on 2 of 17"
    assert row[0]["efficiency"].endswith("% (best legacy, median)")
    # PyTorch twice as slow on the toy CNN layer: it no longer wins there
    frame = pd.read_csv(directory / "baseline.csv", dtype=str, keep_default_na=False)
    toy = (frame["label"] == "224-1-5-256-256") & (frame["impl"] == "pytorch")
    frame.loc[toy, "time_ms_median"] = "7.5"
    frame.to_csv(directory / "baseline.csv", index=False)
    edited = baseline_results.result_lines(load_results(directory, "baseline")[0])
    assert "toy CNN conv" not in edited[1] and edited != lines
    assert baseline_results.findings(directory)[0]["best library on the H100"] == "PyTorch faster by >1.25x on 1 of 17"


def test_floors_place_every_anchor(recorded):
    summary = baseline_results.baseline_summary(recorded.frame)
    floors = baseline_results.floors_table(summary, recorded.frame, chapter.ceilings("recorded"))
    assert len(floors) == len(ANCHORS) and set(floors["bound by"]) <= {"launch", "memory", "arithmetic"}
    assert (floors["best legacy (%)"] <= 100).all() and (floors["direct kernel (%)"] > 0).all()
    assert "median" in baseline_results.floors_text(floors)


def test_findings_are_registered():
    assert baseline.PAPER.findings is baseline_results.findings


def test_roofline_points_pair_cudnn_with_direct(recorded):
    points = baseline_results.roofline_points(recorded.frame)
    kinds = [kind for *_, kind in points]
    assert kinds.count("best legacy cuDNN algorithm") == kinds.count("convkit direct kernel") == len(ANCHORS)
    assert kinds.count("PyTorch, quoted by the specification") == len(ANCHORS)
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
