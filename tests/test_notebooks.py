"""Notebooks are committed canonical, thin and without outputs, with the parameters every chapter takes."""

from __future__ import annotations

import ast

import nbformat
import pytest

from convkit.study.checkout import notebooks_dir

NOTEBOOKS = sorted(notebooks_dir().glob("*.ipynb"))
PARAMETERS = {"device", "quick", "recorded_gpu", "repo_url", "repo_ref"}


def test_notebooks_are_numbered_in_reading_order():
    assert [p.stem for p in NOTEBOOKS] == ["00_ceilings", "01_baseline", "02_lu2020", "03_cuconv", "04_toy_cnn",
                                           "05_chang2022", "06_fp32", "07_tf32x3", "08_summary"]  # fmt: skip


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_canonical_and_clean(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.nbformat == 4 and nb.nbformat_minor >= 5
    assert all(c.get("id") for c in nb.cells), "every cell has an id"
    assert nb.cells[0].cell_type == "markdown", "the first cell states the claim"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, "committed without outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_one_parameters_cell_with_the_chapter_parameters(path):
    nb = nbformat.read(path, as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1
    assigned = {t.id for node in ast.parse(tagged[0].source).body for t in node.targets}
    assert assigned == PARAMETERS
    # the Colab cell acts only on Colab
    assert any('"google.colab" in sys.modules' in c.source for c in nb.cells if c.cell_type == "code")
