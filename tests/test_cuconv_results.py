"""The cuConv chapter's numbers from results rows: speedups, headlines, kernel tables (CPU)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from convkit.chapter import DEFAULT_RECORDED_GPU
from convkit.papers.cuconv import results as cr
from convkit.paths import results_dir
from convkit.problem import ConvProblem
from convkit.results import load_results


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
        ("7-8-1-32-832", "convkit", "cuconv_paper", 50.0, "ok"),
        ("7-8-1-32-832", "convkit", "cuconv_tiled", 40.0, "ok"),
        ("7-8-1-32-832", "cudnn", "IMPLICIT_GEMM", 20.0, "ok"),
    ])  # fmt: skip
    t = cr.speedup_table(frame).set_index("label")
    assert t.loc["7-1-1-32-832", "best_cudnn"] == "IMPLICIT_PRECOMP_GEMM"
    assert t.loc["7-1-1-32-832", "speedup_best"] == pytest.approx(2.0)
    assert t.loc["7-1-1-32-832", "speedup_paper"] == pytest.approx(24 / 36)
    assert t.loc["7-1-1-32-832", "best_variant"] == "tiled"
    assert t.loc["7-8-1-32-832", "fig_label"] == "7-32-832" and t.loc["7-8-1-32-832", "batch"] == 8
    h = cr.headlines(t.reset_index())
    assert h.loc["share faster than best cuDNN (%)", "best variant (H100)"] == pytest.approx(50.0)
    assert h.loc["share faster than best cuDNN (%)", "paper (V100)"] == 8.31
    assert h.loc["max speedup", "met"] == "no" and h.loc["batch 1: geometric-mean speedup", "met"] == "yes"


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
    assert "8.31" in cr.verdict(table) or "8.31%" in cr.verdict(table)
    kernels, _ = load_results(directory, "cuconv_kernels")
    for name in cr.PAPER_KERNEL_TOTALS_US:
        kt = cr.kernel_table(kernels, name)
        assert ("convkit paper", "total") in kt.index
        assert kt.shape[1] == len(cr.PAPER_KERNEL_TOTALS_US[name]["cuConv"])
    assert ("cuDNN WINOGRAD", "not supported") in cr.kernel_table(kernels, "Table 4 (3x3)").index
    assert not cr.blocks_table(kernels).empty
