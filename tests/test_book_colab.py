"""What a Colab runtime meets (CPU): ``ncu`` failing never stops a chapter, a notebook runs with Colab's defaults,
and a fork names its repository in one command."""

from __future__ import annotations

import json
import shutil
import stat

import nbformat
import pytest
import yaml

from convkit.book import chapter, reproduce
from convkit.study.checkout import book_dir, notebooks_dir, results_dir

RECORDED = results_dir() / chapter.DEFAULT_RECORDED_GPU


def fake_ncu(folder, code: int):
    """An ``ncu`` on the PATH that prints a counter-permission error and exits with ``code``."""
    folder.mkdir(exist_ok=True)
    ncu = folder / "ncu"
    ncu.write_text(f"#!/bin/sh\necho '==ERROR== ERR_NVGPUCTRPERM: no access to the GPU performance counters' >&2\n"
                   f"exit {code}\n")  # fmt: skip
    ncu.chmod(ncu.stat().st_mode | stat.S_IEXEC)
    return folder


@pytest.mark.parametrize("code", [1, 0], ids=["ncu-exits-1", "ncu-writes-nothing"])
def test_a_failing_ncu_on_the_path_falls_back_to_the_recorded_profile(code, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", f"{fake_ncu(tmp_path / 'bin', code)}:{__import__('os').environ['PATH']}")
    assert shutil.which("ncu") == str(tmp_path / "bin" / "ncu")
    measured = tmp_path / "this-gpu"
    measured.mkdir()
    monkeypatch.setattr(chapter, "resolve_device", lambda device: "gpu")
    monkeypatch.setattr(chapter, "results_directory", lambda mode, gpu=chapter.DEFAULT_RECORDED_GPU: (
        measured if mode == "gpu" else results_dir() / gpu))  # fmt: skip
    shown = chapter.kernel_profile("toy_cnn", "auto")
    assert len(shown.frame) and not shown.measured_now and shown.directory == RECORDED
    out = capsys.readouterr().out
    assert "ncu could not profile here" in out and f"recorded on {chapter.DEFAULT_RECORDED_GPU}" in out
    assert not list(measured.iterdir()), "nothing half-written where the failed profile would have gone"


@pytest.mark.slow
def test_a_chapter_runs_with_colab_s_defaults_and_a_failing_ncu(tmp_path, monkeypatch):
    """The fused layer's notebook, executed as papermill executes it, with ``quick = True`` (Colab's default) and
    an ``ncu`` on the PATH that fails: every cell runs, the recorded numbers and profile are shown."""
    monkeypatch.setenv("PATH", f"{fake_ncu(tmp_path / 'bin', 1)}:{__import__('os').environ['PATH']}")
    path = notebooks_dir() / "04_toy_cnn.ipynb"
    out = reproduce.run_notebook(path, device="recorded", quick=True, output_dir=tmp_path / "out",
                                 progress_bar=False)  # fmt: skip
    nb = nbformat.read(out, as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    shown = json.dumps([o.get("data", {}) for o in outputs])
    assert "NVIDIA H100 80GB HBM3" in shown, "the recorded results' provenance is shown"
    retina = [o for o in outputs if "image/png" in o.get("data", {})]
    assert retina and all(o.get("metadata", {}).get("image/png", {}).get("width") for o in retina), (
        "figures are 2x PNG (retina: the width halves the pixels)"
    )


def test_quick_reads_the_full_recorded_results_without_a_gpu():
    assert chapter.results("toy_cnn", "recorded", quick=True).experiment == "toy_cnn"


def test_a_fork_names_its_repository_once(tmp_path):
    book, notebooks = tmp_path / "book", tmp_path / "notebooks"
    shutil.copytree(book_dir(), book, ignore=shutil.ignore_patterns("_build", "notebooks"))
    shutil.copytree(notebooks_dir(), notebooks)
    fork = "https://github.com/someone/convkit-fork"
    changed = reproduce.set_repository(fork + "/", book=book, notebooks=notebooks)
    assert book / "_config.yml" in changed and len(changed) == 1 + len(list(notebooks.glob("*.ipynb")))
    config = yaml.safe_load((book / "_config.yml").read_text())
    assert config["repository"]["url"] == fork and reproduce.repository_url(book) == fork
    assert config["launch_buttons"] == yaml.safe_load((book_dir() / "_config.yml").read_text())["launch_buttons"]
    for path in sorted(notebooks.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        namespace: dict[str, object] = {}
        exec(next(c.source for c in nb.cells if "parameters" in c.metadata.get("tags", [])), namespace)
        assert namespace["repo_url"] == fork, path.name
        original = (notebooks_dir() / path.name).read_text().splitlines()
        assert len(path.read_text().splitlines()) == len(original), "only the parameter's line changed"
    assert reproduce.set_repository(fork, book=book, notebooks=notebooks) == []
    changed = reproduce.set_repository(fork, branch="release-1", book=book, notebooks=notebooks)
    assert len(changed) == 1 + len(list(notebooks.glob("*.ipynb"))) and reproduce.repository_branch(book) == "release-1"
    for path in sorted(notebooks.glob("*.ipynb")):
        cells = nbformat.read(path, as_version=4).cells
        namespace: dict[str, object] = {}
        exec(next(c.source for c in cells if "parameters" in c.metadata.get("tags", [])), namespace)
        assert namespace["repo_ref"] == "release-1", path.name
    with pytest.raises(ValueError, match="https address"):
        reproduce.set_repository("git@github.com:someone/convkit.git", book=book, notebooks=notebooks)


def test_the_rerun_page_s_links_follow_the_configured_branch():
    assert reproduce.repository_branch() == yaml.safe_load((book_dir() / "_config.yml").read_text())["repository"][
        "branch"]  # fmt: skip
