"""The chapter API the notebooks call, over every registered paper, in recorded mode (CPU)."""

from __future__ import annotations

import pytest

from convkit.book import chapter
from convkit.papers import PAPERS
from convkit.study.checkout import results_dir


@pytest.mark.parametrize("paper", PAPERS, ids=lambda p: p.name)
def test_every_paper_reads_its_recorded_sweep(paper):
    results = chapter.results(paper.name, "recorded")
    assert not results.measured_now and len(results.frame)
    assert set(results.frame["experiment"]) == {paper.experiment}
    assert results.directory.name == chapter.DEFAULT_RECORDED_GPU
    table = chapter.provenance_table(results)
    assert len(table) and (table["gpu"] == "NVIDIA H100 80GB HBM3").all()
    for key in ("driver", "cuda_runtime", "nvrtc", "cupy", "cudnn", "convkit_commit", "date"):
        assert all(table[key].astype(str).str.len() > 0), key


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


@pytest.mark.parametrize("paper", [p for p in PAPERS if p.findings is not None], ids=lambda p: p.name)
def test_the_findings_follow_the_recorded_results(paper, tmp_path):
    """A changed measurement changes the book's findings: nothing in the table is typed by hand."""
    import shutil

    import pandas as pd

    directory = tmp_path / "gpu"
    shutil.copytree(chapter.results_directory("recorded"), directory)
    before = paper.findings(directory)
    assert before and all(row["paper's number"] for row in before)
    path = directory / f"{paper.experiment}.csv"
    frame = pd.read_csv(path, keep_default_na=False, dtype=str)
    if "impl" in frame:  # our kernels three times slower
        mine = frame["impl"] == "convkit"
        frame.loc[mine, "time_ms_median"] = (frame.loc[mine, "time_ms_median"].astype(float) * 3).map("{:.6g}".format)
    else:  # a ceiling half as high
        frame["value"] = [f"{float(v) / 2:.6g}" if v else v for v in frame["value"]]
    frame.to_csv(path, index=False)
    assert paper.findings(directory) != before


def test_the_intro_table_lists_every_claim():
    text = chapter.findings_markdown(chapter.results_directory("recorded"))
    assert "8.31" in text and "NVIDIA H100 80GB HBM3" in text
    assert text.count("\n|") >= 1 + sum(len(p.findings(chapter.results_directory("recorded")))
                                        for p in PAPERS if p.findings)  # fmt: skip


def test_across_gpus_text_counts_the_wins_per_gpu():
    import pandas as pd

    from convkit.book import chapter

    across = pd.DataFrame({"problem": ["a", "b", "c"], "H100: speed-up": [1.2, 0.9, 1.1],
                           "H200 (quick): speed-up": [0.8, 0.9, 1.5]})  # fmt: skip
    text = chapter.across_gpus_text(across)
    assert text.startswith("Of the 3 problems")
    assert "on 2 of them on the H100" in text and "on 1 of them on the H200 (quick)" in text


def test_a_failing_ncu_never_stops_a_run_the_recorded_profile_is_shown(monkeypatch, tmp_path, capsys):
    import shutil
    import subprocess

    from convkit.book import chapter, profile

    monkeypatch.setattr(chapter, "resolve_device", lambda device: "gpu")
    monkeypatch.setattr(chapter, "results_directory", lambda mode, gpu=chapter.DEFAULT_RECORDED_GPU: (
        tmp_path if mode == "gpu" else results_dir() / gpu))  # fmt: skip
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/ncu")

    def blocked(name, directory):
        raise subprocess.CalledProcessError(1, ["ncu"], "ERR_NVGPUCTRPERM")

    monkeypatch.setattr(profile, "profile", blocked)
    shown = chapter.kernel_profile("fp32")
    assert len(shown.frame) and not shown.measured_now
    assert "ncu could not profile here" in capsys.readouterr().out
