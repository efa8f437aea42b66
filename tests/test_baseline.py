"""The baseline chapter on the recorded H100 results (CPU): what the chapter shows is computed here."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
from findings_check import assert_findings_in_lines  # tests/findings_check.py

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
    assert "cuDNN implicit GEMM, precomputed" in set(table["best legacy algorithm"])
    status = baseline_results.status_table(recorded.frame)
    assert status.loc["cuDNN direct", "not supported"] == len(ANCHORS) and "ran, checked" in status.columns


def test_no_quoted_times_only_this_run(recorded):
    summary = baseline_results.baseline_summary(recorded.frame)
    assert not any("quoted" in c for c in summary.columns) and summary.index.name == "layer"
    assert list(summary.index) == [a.problem.label for a in ANCHORS]  # one name per layer: its label
    assert (summary["best_lib_us"] <= summary["pytorch_us"]).all()
    origins = baseline_results.origins_table(summary)
    assert origins.loc["7-1-1-256-832", "where it comes from"] == "the cuConv paper's Table 3, layer A"


def _copy(tmp_path):
    for name in ("baseline", "ceilings"):
        for suffix in ("csv", "json"):
            shutil.copy(H100_DIR / f"{name}.{suffix}", tmp_path / f"{name}.{suffix}")
    return tmp_path


def test_result_box_and_findings_follow_the_recorded_values(recorded, tmp_path):
    directory = _copy(tmp_path)
    lines = baseline_results.result_lines(recorded.frame, chapter.ceilings("recorded"))
    assert len(lines) == 5 and "**1.00x**" in lines[0]
    assert "224-1-5-256-256 (the toy CNN's convolution, with same padding, 1.43x)" in lines[1]
    assert "DIRECT and WINOGRAD never run" in lines[2] and "direct kernel" in lines[3]
    assert not any("specification" in line or "anchor" in line or "set out" in line for line in lines)
    row = baseline_results.findings(directory)
    assert [list(r) for r in row] == [[*FINDING_COLUMNS, "section", "claims"]]
    assert row[0]["section"] == "baseline-legacy-pytorch"
    assert row[0]["best library on the H100"].endswith("within 1.25x on 15 of 17")
    assert row[0]["efficiency"].endswith("% of the floor")
    assert_findings_in_lines(row, lines)
    # PyTorch twice as slow on the toy CNN layer: it no longer wins there
    frame = pd.read_csv(directory / "baseline.csv", dtype=str, keep_default_na=False)
    toy = (frame["label"] == "224-1-5-256-256") & (frame["impl"] == "pytorch")
    frame.loc[toy, "time_ms_median"] = "7.5"
    frame.to_csv(directory / "baseline.csv", index=False)
    edited = baseline_results.result_lines(load_results(directory, "baseline")[0], chapter.ceilings("recorded"))
    assert "toy CNN" not in edited[1] and edited != lines
    assert baseline_results.findings(directory)[0]["best library on the H100"].endswith("within 1.25x on 16 of 17")
    assert_findings_in_lines(baseline_results.findings(directory), edited)


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
    assert kinds.count("best legacy cuDNN algorithm") == kinds.count("direct kernel (convkit)") == len(ANCHORS)
    assert kinds.count("PyTorch (cuDNN autotuned)") == len(ANCHORS)
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
    assert isinstance(spec, Launch) and spec.to_params() == {"threads": 256}
    assert spec.grid(problem) == (-(-2 * 5 * 17 * 13 // 256),) and spec.block(problem) == (256,)
    with pytest.raises(ValueError, match=r"threads must be an int in 1\.\.1024"):
        DirectLaunch(0).can_implement(problem)
