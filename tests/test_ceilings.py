"""The ceilings chapter on the recorded H100 results (CPU): what notebook 00 shows is computed here."""

from __future__ import annotations

import math

import pytest

from convkit import chapter
from convkit.papers import ceilings
from convkit.papers.ceilings import results as ceilings_results
from convkit.papers.ceilings.measure import CHASE_FOOTPRINTS, COLUMNS, EXPERIMENT, KEY_COLUMNS, measurements
from convkit.roofline import CEILINGS_EXPERIMENT, ceilings_summary

H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(scope="module")
def recorded():
    return chapter.results("ceilings", "recorded")


def test_recorded_mode_reads_the_h100_results(recorded):
    assert not recorded.measured_now
    table = chapter.provenance_table(recorded)
    assert len(table) >= 1
    assert set(table["gpu"]) == {H100}
    for key in ("driver", "cuda_runtime", "nvrtc", "cupy", "cudnn", "convkit_commit", "date"):
        assert all(table[key].astype(str).str.len() > 0), key


def test_verdict_and_table(recorded):
    s = ceilings_summary(recorded.frame)
    verdict = ceilings_results.ceilings_verdict(s, H100)
    assert "Copy bandwidth" in verdict and "Launch floor" in verdict and "come from" not in verdict
    assert "come from NVIDIA T4" in ceilings_results.ceilings_verdict(s, "NVIDIA T4")
    table = ceilings_results.ceilings_table(recorded.frame)
    assert "load_latency" not in table.index and {"copy_bandwidth", "sgemm", "fp32_fma_peak"} <= set(table.index)
    assert chapter.ceilings("recorded") == s


def test_paper_declares_the_chapter():
    paper = ceilings.PAPER
    assert (paper.name, paper.experiment, paper.notebook, paper.sources) == ("ceilings", "ceilings", "00_ceilings",
                                                                            ("ceilings",))  # fmt: skip
    assert EXPERIMENT == CEILINGS_EXPERIMENT and not paper.variants and paper.edge_check is not None
    assert KEY_COLUMNS == ("measurement", "metric") and set(KEY_COLUMNS) <= set(COLUMNS)
    with pytest.raises(TypeError, match="no options"):
        paper.measure(".", batches=(1,))


def test_quick_measurements_are_a_subset():
    full, quick = [name for name, _ in measurements()], [name for name, _ in measurements(quick=True)]
    assert set(quick) < set(full) and len(full) == 6 + len(CHASE_FOOTPRINTS)
    assert full[:3] == ["properties", "sm_clock_measured", "launch_floor"]


def test_resolve_device():
    assert chapter.resolve_device("recorded") == "recorded"
    with pytest.raises(ValueError, match="device must be"):
        chapter.resolve_device("tpu")


def test_unknown_recorded_gpu_names_what_exists():
    with pytest.raises(FileNotFoundError, match="nvidia-h100-80gb-hbm3"):
        chapter.ceilings("recorded", recorded_gpu="no-such-gpu")


def test_summary_has_no_nan(recorded):
    assert all(not math.isnan(v) for v in ceilings_summary(recorded.frame).values())
