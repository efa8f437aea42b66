"""The cuConv chapter's numbers from results rows: speedups, headlines, kernel tables (CPU)."""

from __future__ import annotations

import math
import shutil

import pandas as pd
import pytest

from convkit.book.chapter import DEFAULT_RECORDED_GPU
from convkit.core.problem import ConvProblem
from convkit.papers import cuconv
from convkit.papers.cuconv import claims
from convkit.papers.cuconv import results as cr
from convkit.papers.paper import FINDING_COLUMNS
from convkit.study.checkout import results_dir
from convkit.study.results import load_results


def _frame(rows):
    records = []
    for label, impl, variant, us, status in rows:
        p = ConvProblem.from_label(label)
        records.append({"label": label, **p.as_dict(), "impl": impl, "variant": variant, "status": status,
                        "time_ms_median": us / 1e3 if us else math.nan})  # fmt: skip
    return pd.DataFrame(records)


def test_speedups_take_the_best_correct_cudnn_algorithm_and_variant():
    frame = _frame([
        ("7-1-1-32-832", "convkit", "cuconv_paper", 36.0, "ok"),
        ("7-1-1-32-832", "convkit", "cuconv_tiled", 12.0, "ok"),
        ("7-1-1-32-832", "cudnn", "IMPLICIT_PRECOMP_GEMM", 24.0, "ok"),
        ("7-1-1-32-832", "cudnn", "FFT", 1.0, "wrong"),  # a wrong result never counts as fastest
        ("7-1-1-32-832", "pytorch", "cudnn.benchmark", 30.0, "ok"),
        ("7-8-1-32-832", "convkit", "cuconv_paper", 50.0, "ok"),
        ("7-8-1-32-832", "convkit", "cuconv_tiled", 40.0, "ok"),
        ("7-8-1-32-832", "cudnn", "IMPLICIT_GEMM", 20.0, "ok"),
        ("7-8-1-32-832", "pytorch", "cudnn.benchmark", 16.0, "ok"),  # faster than cuDNN alone: the best library
    ])  # fmt: skip
    t = cr.speedup_table(frame).set_index("label")
    assert t.loc["7-1-1-32-832", "best_cudnn"] == "IMPLICIT_PRECOMP_GEMM"
    assert t.loc["7-1-1-32-832", "speedup_best"] == pytest.approx(2.0)
    assert t.loc["7-1-1-32-832", "speedup_paper"] == pytest.approx(24 / 36)
    assert t.loc["7-1-1-32-832", "best_variant"] == "tiled"
    assert t.loc["7-8-1-32-832", "batch"] == 8 and t.loc["7-8-1-32-832", "best_lib_us"] == pytest.approx(16.0)
    assert t.loc["7-8-1-32-832", "speedup_best"] == pytest.approx(16 / 40)
    assert t.loc["7-8-1-32-832", "cudnn_speedup_best"] == pytest.approx(20 / 40)
    h = cr.headlines(t.reset_index())
    assert h.loc["share faster (%)", "our best: over the best library"] == pytest.approx(50.0)
    assert h.loc["share faster (%)", "paper (V100, over cuDNN alone)"] == "8.31"
    assert h.loc["largest speed-up, any batch (x)", f"our best ({cr.AS_THE_PAPER})"] == pytest.approx(2.0)
    assert "met" not in h.columns and len(h.columns) <= 8


def test_short_kernel_names():
    assert (
        cr.short_kernel_name("void implicit_convolve_sgemm<float, float, 1024>(int, int)") == "implicit_convolve_sgemm"
    )
    assert cr.short_kernel_name("void winograd_nonfused::winogradForwardData4x4<float, float>(P)") == (
        "winogradForwardData4x4"
    )
    assert cr.short_kernel_name("tiled_gemm") == "tiled_gemm"


def test_recorded_results_give_every_table_and_headline():
    directory = results_dir() / DEFAULT_RECORDED_GPU
    frame, _ = load_results(directory, "cuconv")
    table = cr.speedup_table(frame)
    assert len(table) == 616 and table["speedup_best"].notna().all()
    kernels, _ = load_results(directory, "cuconv_kernels")
    for name in cr.PAPER_KERNEL_TOTALS_US:
        kt = cr.kernel_table(kernels, name)
        assert ("the paper's design", "total") in kt.index
        assert kt.shape[1] == len(cr.PAPER_KERNEL_TOTALS_US[name]["cuConv"])
    assert ("cuDNN WINOGRAD", "not supported") in cr.kernel_table(kernels, "Table 4 (3x3)").index
    assert not cr.blocks_table(kernels).empty
    blocks = cr.blocks_comparison(kernels)
    assert len(blocks) == 6 and list(blocks["paper's blocks (V100)"][:3]) == [256, 16, 4]
    totals = cr.totals_table(kernels, "Table 4 (3x3)")
    assert totals.loc["cuDNN Winograd", "7-1-3-384-192: H100 (us)"] == "not supported"
    rows = cr.kernel_rows(kernels, "Table 4 (3x3)")
    assert list(rows.columns) == ["time (us)"] and rows.index.names == ["layer", "implementation", "kernel"]
    assert math.isnan(rows.loc[("7-1-3-384-192", "cuDNN Winograd", "not supported"), "time (us)"])
    assert rows.loc[("7-1-3-384-192", "the paper's design", "total"), "time (us)"] == pytest.approx(
        cr.kernel_table(kernels, "Table 4 (3x3)").loc[("the paper's design", "total"), "7-1-3-384-192"]
    )
    assert cr.in_words("cuDNN IMPLICIT_PRECOMP_GEMM") == "cuDNN implicit GEMM, precomputed"
    assert list(blocks.index.get_level_values("layer")[:3]) == ["7-1-1-256-832"] * 3


def _copy(tmp_path):
    for path in (results_dir() / DEFAULT_RECORDED_GPU).glob("*"):
        if path.name.startswith(("cuconv", "ceilings")):
            shutil.copy(path, tmp_path / path.name)
    return tmp_path


def _edit(directory, experiment, where, column, value):
    path = directory / f"{experiment}.csv"
    frame = pd.read_csv(path, keep_default_na=False, dtype=str)
    hits = where(frame)
    assert hits.sum() == 1
    frame.loc[hits, column] = value
    frame.to_csv(path, index=False)


def _precomp_on_table3_a(frame):
    return (
        (frame["table"] == "Table 3 (1x1)") & (frame["config"] == "A") & (frame["variant"] == "IMPLICIT_PRECOMP_GEMM")
    )


def test_result_box_and_paper_items_follow_the_recorded_files(tmp_path):
    directory = _copy(tmp_path)
    lines = claims.result_lines(directory)
    assert 3 <= len(lines) <= 5 and "4.8x" in lines[-2]
    assert "107.3 to 22.4 us (4.8x)" in claims.design_change_text(directory)
    items = claims.paper_items(directory)
    assert len(items) == 9 and items["ours (H100)"].str.len().gt(0).all()
    _edit(directory, "cuconv_kernels", _precomp_on_table3_a, "time_us", "53.645")
    changed = claims.result_lines(directory)
    assert "2.0x" in changed[-2] and changed[-2] != lines[-2]
    assert "107.3 to 53.6 us (2.0x)" in claims.design_change_text(directory)


def test_findings_rows_follow_the_recorded_files(tmp_path):
    directory = _copy(tmp_path)
    rows = claims.findings(directory)
    assert rows and all(set(row) == {*FINDING_COLUMNS, "section", "claims"} for row in rows)
    before = rows[0]["paper's design on the H100"]
    assert rows[0]["paper's number"] == "8.31% (V100)" and before.startswith("3.4% (4.7% as the paper compares")
    frame = pd.read_csv(directory / "cuconv.csv", keep_default_na=False, dtype=str)
    label = frame[(frame["variant"] == "cuconv_paper")].iloc[0]["label"]
    _edit(directory, "cuconv", lambda f: (f["label"] == label) & (f["variant"] == "cuconv_paper"), "time_ms_median",
          "0.0001")  # fmt: skip
    assert claims.findings(directory)[0]["paper's design on the H100"] != before
    assert cuconv.PAPER.findings is not None and cuconv.PAPER.findings(directory)[0] == claims.findings(directory)[0]


def test_findings_give_the_result_box_numbers():
    import re
    from pathlib import Path

    directory = results_dir() / DEFAULT_RECORDED_GPU
    box = "\n".join(claims.result_lines(directory))
    notebook = (Path(__file__).parents[1] / "notebooks" / "03_cuconv.ipynb").read_text()
    for row in claims.findings(directory):
        assert f"({row['section']})=" in notebook
        for column in ("paper's number", "paper's design on the H100", "our best on the H100", "efficiency"):
            for number in re.findall(r"\d[\d,.]*(?:x|%| us)", row[column]):
                assert number in box, (column, number)
