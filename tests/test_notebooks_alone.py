"""Each notebook run alone, as Colab runs it (one notebook, a fresh clone, no other chapter's results): in recorded
mode on a results folder holding only its own chapter's files and the ceilings, every notebook executes; on a GPU
without TF32 tensor cores (a folder whose 3xTF32 sweep lacks the 3xTF32 kernel, as a T4's run records it) the
3xTF32 chapter shows the book's recorded run and says so."""

from __future__ import annotations

import json
import shutil

import pytest

from convkit.book.chapter import DEFAULT_RECORDED_GPU
from convkit.study.checkout import notebooks_dir, results_dir

pytestmark = pytest.mark.slow

#: Each notebook's own experiments (file-name prefixes in a results folder); every chapter reads the ceilings too.
OWN = {"00_ceilings": ("ceilings",), "01_baseline": ("baseline",), "02_lu2020": ("lu2020",),
       "03_cuconv": ("cuconv",), "04_toy_cnn": ("toy_cnn",), "05_chang2022": ("chang2022",), "06_fp32": ("fp32",),
       "07_tf32x3": ("tf32x3",),
       "08_summary": ("networks", "conv2d_overhead", "precisions", "concurrency")}  # fmt: skip


def _checkout(root, gpu: str, prefixes: tuple[str, ...], source: str = DEFAULT_RECORDED_GPU):
    """A checkout at ``root``: the notebooks, and results/<gpu>/ with the recorded files of ``prefixes`` only."""
    shutil.copytree(notebooks_dir(), root / "notebooks")
    folder = root / "results" / gpu
    folder.mkdir(parents=True)
    for path in (results_dir() / source).glob("*"):
        if path.is_file() and path.name.startswith((*prefixes, "ceilings")):
            shutil.copy(path, folder / path.name)
    return folder


def _execute(root, notebook: str, monkeypatch, **parameters) -> dict:
    import papermill

    monkeypatch.setenv("CONVKIT_ROOT", str(root))
    out = root / "out.ipynb"
    papermill.execute_notebook(str(root / "notebooks" / f"{notebook}.ipynb"), str(out),
                               parameters={"device": "recorded", "quick": False, **parameters},
                               cwd=str(root / "notebooks"), kernel_name="python3", progress_bar=False)  # fmt: skip
    return json.loads(out.read_text())


def _html(nb: dict) -> str:
    return "".join(str(o.get("data", {}).get("text/html", "")) + str(o.get("data", {}).get("text/markdown", ""))
                   for c in nb["cells"] for o in c.get("outputs", []))  # fmt: skip


@pytest.mark.parametrize("notebook", sorted(OWN), ids=str)
def test_a_notebook_runs_alone_without_the_other_chapters_results(notebook, tmp_path, monkeypatch):
    _checkout(tmp_path, DEFAULT_RECORDED_GPU, OWN[notebook])
    nb = _execute(tmp_path, notebook, monkeypatch)
    if notebook == "08_summary":
        assert "No chapter&#x27;s sweep is recorded" in _html(nb) or "No chapter's sweep is recorded" in _html(nb)


def test_the_tf32x3_chapter_on_a_gpu_without_tf32_tensor_cores_shows_the_recorded_run(tmp_path, monkeypatch):
    import pandas as pd

    _checkout(tmp_path, DEFAULT_RECORDED_GPU, OWN["07_tf32x3"])
    t4 = _checkout(tmp_path / "t4", "tesla-t4", ())  # the ceilings only, then its 3xTF32 sweep without the kernel
    shutil.move(str(t4), tmp_path / "results" / "tesla-t4")
    sweep = pd.read_csv(results_dir() / DEFAULT_RECORDED_GPU / "tf32x3.csv", keep_default_na=False, dtype=str)
    sweep[sweep["variant"] != "igemm_tf32x3"].to_csv(tmp_path / "results" / "tesla-t4" / "tf32x3.csv", index=False)
    shutil.copy(results_dir() / DEFAULT_RECORDED_GPU / "tf32x3.json", tmp_path / "results" / "tesla-t4")
    nb = _execute(tmp_path, "07_tf32x3", monkeypatch, recorded_gpu="tesla-t4")
    assert "no TF32 tensor cores" in _html(nb) and "recorded run" in _html(nb)
