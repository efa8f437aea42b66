"""The chapter API the notebooks call, over every registered paper, in recorded mode (CPU)."""

from __future__ import annotations

import pytest

from convkit import chapter
from convkit.papers import PAPERS


@pytest.mark.parametrize("paper", PAPERS, ids=lambda p: p.name)
def test_every_paper_reads_its_recorded_sweep(paper):
    results = chapter.results(paper.name, "recorded")
    assert not results.measured_now and len(results.frame)
    assert set(results.frame["experiment"]) == {paper.experiment}
    assert results.directory.name == chapter.DEFAULT_RECORDED_GPU
    table = chapter.provenance_table(results)
    assert len(table) and (table["gpu"] == "NVIDIA H100 80GB HBM3").all()


@pytest.mark.parametrize("paper", [p for p in PAPERS if p.profile is not None], ids=lambda p: p.name)
def test_every_profile_is_recorded(paper):
    profile = chapter.kernel_profile(paper.name, "recorded")
    assert set(profile.frame["experiment"]) == {paper.profile.experiment}


def test_ceilings_give_the_floors_numbers():
    ceil = chapter.ceilings("recorded")
    assert 2000 < ceil["copy_gbps"] < 4000 and 40 < ceil["fma_tflops"] < 80 and ceil["sm_count"] == 132


def test_unknown_names_and_modes_are_refused():
    with pytest.raises(ValueError, match="no paper 'nope'"):
        chapter.results("nope", "recorded")
    with pytest.raises(ValueError, match="device must be"):
        chapter.results("cuconv", "tpu")
    with pytest.raises(ValueError, match="no kernel profile"):
        chapter.kernel_profile("baseline", "recorded")
    with pytest.raises(FileNotFoundError, match="no recorded results for 'nowhere'"):
        chapter.results("cuconv", "recorded", recorded_gpu="nowhere")
