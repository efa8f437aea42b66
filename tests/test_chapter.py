"""The chapter helpers on the recorded H100 results (CPU): what the notebooks show is computed here."""

from __future__ import annotations

import math

import pytest

from convkit import chapter
from convkit.problem import ConvProblem
from convkit.suites import ANCHORS


@pytest.fixture(scope="module")
def ceilings():
    return chapter.ceilings("recorded")


@pytest.fixture(scope="module")
def baseline():
    return chapter.baseline("recorded")


def test_recorded_mode_reads_the_h100_results(ceilings, baseline):
    for results in (ceilings, baseline):
        assert not results.measured_now
        table = chapter.provenance_table(results)
        assert len(table) >= 1
        assert set(table["gpu"]) == {"NVIDIA H100 80GB HBM3"}
        for key in ("driver", "cuda_runtime", "nvrtc", "cupy", "cudnn", "convkit_commit", "date"):
            assert all(table[key].astype(str).str.len() > 0), key


def test_ceilings_summary_is_complete_and_plausible(ceilings):
    s = chapter.ceilings_summary(ceilings.frame)
    assert all(not math.isnan(v) for v in s.values()), s
    assert s["sgemm_tflops"] < s["fp32_theoretical_tflops"] * 1.01
    assert s["fma_tflops"] < s["fp32_theoretical_tflops"] * 1.01
    assert s["dram_latency_cycles"] > s["l2_latency_cycles"]
    assert "Copy bandwidth" in chapter.ceilings_verdict(s, "NVIDIA H100 80GB HBM3")


def test_floors_use_the_recorded_launch_floor_else_the_assumed_launch(ceilings):
    import pandas as pd

    problem = ConvProblem.same(1, 1, 28, 28, 32, 3)
    recorded = chapter.ceilings_summary(ceilings.frame)
    assert 1.0 < recorded["launch_us"] < 20.0  # the H100's, measured in notebook 00
    without = ceilings.frame[ceilings.frame["measurement"] != "launch_floor"]  # a GPU recorded before it
    assumed = chapter.ceilings_summary(without)
    launch = {"metric": "launch_floor", "measurement": "launch_floor", "value": 3.7, "unit": "us", "status": "ok"}
    measured = chapter.ceilings_summary(pd.concat([without, pd.DataFrame([launch])], ignore_index=True))
    assert measured["launch_us"] == 3.7 and "launch_us" not in assumed
    assert chapter.floor_us(problem, measured) - chapter.floor_us(problem, assumed) == pytest.approx(0.7)
    assert "3.7 us, an empty kernel measured" in chapter.launch_text(measured)
    assert "3 us, assumed" in chapter.launch_text(assumed)
    assert "Launch floor" in chapter.ceilings_verdict(measured, "NVIDIA H100 80GB HBM3")


def test_baseline_summary_covers_every_anchor(baseline):
    summary = chapter.baseline_summary(baseline.frame)
    assert set(summary["label"]) == {a.problem.label for a in ANCHORS}
    assert (summary["direct_us"] > 0).all() and (summary["best_cudnn_us"] > 0).all()
    statuses = chapter.baseline_status(baseline.frame)
    assert statuses.loc["cudnn DIRECT", "not_supported"] == len(ANCHORS)  # not implemented on Hopper
    assert statuses.loc["convkit direct", "ok"] == len(ANCHORS)
    assert "direct kernel" in chapter.baseline_verdict(summary)


def test_every_recorded_ok_row_was_checked(baseline):
    ok = baseline.frame[baseline.frame["status"] == "ok"]
    assert (ok["rel_err"] < 1e-3).all()
    direct_methods = ok[~ok["variant"].isin(["FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"])]
    assert (direct_methods["rel_err"] < 1e-5).all()


def test_resolve_device():
    assert chapter.resolve_device("recorded") == "recorded"
    with pytest.raises(ValueError, match="device must be"):
        chapter.resolve_device("tpu")


def test_unknown_recorded_gpu_names_what_exists():
    with pytest.raises(FileNotFoundError, match="nvidia-h100-80gb-hbm3"):
        chapter.ceilings("recorded", recorded_gpu="no-such-gpu")
