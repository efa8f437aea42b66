"""Attributing profiled kernels to cases by marker kernels, and parsing ncu's raw CSV (CPU)."""

from __future__ import annotations

from convkit.book import profile

HEADER = '"ID","Kernel Name","gpu__time_duration.sum","launch__block_size","launch__grid_size",'
RAW = (
    HEADER
    + """"launch__registers_per_thread"
"","","nsecond","","",""
"0","scalar_prods","5,000","64","3456","32"
"1","profile_begin","1,024","1","1","16"
"2","tiled_gemm","11,008","256","216","79"
"3","sum_planes","3,744","256","74","32"
"4","profile_end","900","1","1","16"
"5","profile_begin","900","1","2","16"
"6","void implicit_convolve_sgemm<float, float, 1024>(int, int)","79,904","64","24","64"
"7","profile_end","900","1","1","16"
"""
)


def test_parse_and_attribute():
    kernels = profile.parse_ncu_raw_csv(RAW)
    assert [k["name"] for k in kernels][:3] == ["scalar_prods", "profile_begin", "tiled_gemm"]
    assert abs(kernels[2]["time_us"] - 11.008) < 1e-9 and kernels[2]["blocks"] == 216 and kernels[2]["registers"] == 79
    attributed = profile.attribute_kernels(kernels)
    assert [(case, i, k["name"]) for case, i, k in attributed] == [
        (0, 0, "tiled_gemm"),
        (0, 1, "sum_planes"),
        (1, 0, "void implicit_convolve_sgemm<float, float, 1024>(int, int)"),
    ]  # fmt: skip


def test_rows_keep_cases_that_ran_nothing():
    manifest = [{"label": "a", "impl": "convkit", "variant": "v", "status": "ok"},
                {"label": "a", "impl": "cudnn", "variant": "WINOGRAD", "status": "not_supported"},
                {"label": "a", "impl": "cudnn", "variant": "IMPLICIT_GEMM", "status": "ok"}]  # fmt: skip
    kernels = profile.parse_ncu_raw_csv(
        RAW.replace('"5","profile_begin","900","1","2"', '"5","profile_begin","900","1","3"')
    )
    rows = profile.rows_from(manifest, kernels)
    assert [(r["variant"], r["kernel_index"]) for r in rows] == [
        ("v", 0),
        ("v", 1),
        ("WINOGRAD", -1),
        ("IMPLICIT_GEMM", 0),
    ]


def test_profile_columns_add_the_metrics_before_the_note():
    from convkit.papers.paper import Profile

    assert profile.columns(Profile("x", list)) == profile.COLUMNS
    cols = profile.columns(Profile("x", list, ("dram__bytes_read.sum",)))
    assert cols[-3:] == ("dram__bytes_read_sum", "note", "run_id")


def test_the_hopper_metrics_are_asked_for_on_hopper_alone():
    """wgmma's instruction count and wait are Hopper's metrics: ncu refuses a metric it does not know, so elsewhere
    the profile leaves them out (their columns stay, empty)."""
    from convkit.papers.paper import Profile
    from convkit.papers.tf32x3 import PROFILE_METRICS

    spec = Profile("x", list, PROFILE_METRICS)
    on_hopper, on_ampere = profile.asked_metrics(spec, (9, 0)), profile.asked_metrics(spec, (8, 0))
    assert set(profile.HOPPER_ONLY_METRICS) <= set(on_hopper) and not set(profile.HOPPER_ONLY_METRICS) & set(on_ampere)
    assert set(on_hopper) - set(on_ampere) == set(profile.HOPPER_ONLY_METRICS)
    assert on_ampere[: len(profile.NCU_METRICS)] == profile.NCU_METRICS


def test_a_wgmma_kernels_tensor_share_counts_its_wgmma_instructions():
    """The 3xTF32 profile's tensor share of instructions: a kernel's wgmma instructions where it issued any, else
    its HMMA (mma.sync) ones; a profile without the wgmma count (recorded before it, or not on Hopper) as before."""
    import pandas as pd

    from convkit.papers.tf32x3 import profiled

    kernels = pd.DataFrame({
        "config": ["a", "a"], "impl": ["convkit", "convkit"], "variant": ["igemm_tf32x3", "igemm_wgmma_tf32x3"],
        "status": ["ok", "ok"], "time_us": [10.0, 5.0], "smsp__inst_executed_sum": [1000, 1000],
        "smsp__inst_executed_pipe_tensor_op_hmma_sum": [200, 0], "smsp__inst_executed_pipe_tensor_op_gmma_sum": [0, 50],
    })  # fmt: skip
    share = profiled.profile_table(kernels)["tensor share of instructions %"]
    assert list(share) == [20.0, 5.0]
    before = profiled.profile_table(kernels.drop(columns="smsp__inst_executed_pipe_tensor_op_gmma_sum"))
    assert list(before["tensor share of instructions %"]) == [20.0, 0.0]
