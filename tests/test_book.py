"""Every notebook executed by papermill in recorded mode, then the book built from them (CPU)."""

from __future__ import annotations

import re
import shutil

import nbformat
import pytest

from convkit.paths import book_dir
from convkit.reproduce import NotebookFailure, build_book, run_notebook, select_notebooks

pytestmark = pytest.mark.slow

PAGES = ["intro", "rerun", "bibliography"]


@pytest.fixture(scope="module")
def built_book(tmp_path_factory):
    """A copy of book/ with every notebook executed (recorded mode) and the HTML built."""
    book = tmp_path_factory.mktemp("site") / "book"
    shutil.copytree(book_dir(), book, ignore=shutil.ignore_patterns("_build", "notebooks"))
    executed = [
        run_notebook(nb, device="recorded", output_dir=book / "notebooks", progress_bar=False)
        for nb in select_notebooks()
    ]
    return book, executed, build_book(book)


def test_every_notebook_executes_without_errors(built_book):
    _, executed, _ = built_book
    assert [p.name for p in executed] == [p.name for p in select_notebooks()]
    for path in executed:
        nb = nbformat.read(path, as_version=4)
        outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
        assert not [o for o in outputs if o.output_type == "error"], path.name
        assert any("image/png" in o.get("data", {}) for o in outputs), f"{path.name} draws no figure"


def test_book_pages_exist_with_their_figures(built_book):
    _, executed, html = built_book
    for page in PAGES:
        assert (html / f"{page}.html").is_file(), page
    for path in executed:
        page = html / "notebooks" / f"{path.stem}.html"
        text = page.read_text()
        images = re.findall(r'<img[^>]*\bsrc="([^"]+)"', text)
        assert images, f"{page.name} shows no figure"
        for src in images:
            assert (page.parent / src).resolve().is_file(), f"{page.name}: missing {src}"
        assert "NVIDIA H100 80GB HBM3" in text, f"{page.name} does not show its provenance"


def test_cuconv_chapter_shows_the_paper_beside_the_measurements(built_book):
    _, _, html = built_book
    text = (html / "notebooks" / "03_cuconv.html").read_text()
    for needle in ("8.31", "2.29", "Table 3 (1x1)", "WINOGRAD", "not supported", "target"):
        assert needle in text, needle


def test_lu2020_chapter_shows_the_paper_beside_the_measurements(built_book):
    _, _, html = built_book
    text = (html / "notebooks" / "02_lu2020.html").read_text()
    for needle in ("loads per 5x5 window", "cupyx.ndimage", "stack frame", "requests / output (ncu)", "target"):
        assert needle in text, needle


def test_a_failing_notebook_names_itself_and_the_cell(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("device = 'auto'\nquick = False", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell("raise ValueError('planted failure')"),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "99_broken.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(NotebookFailure) as info:
        run_notebook(path, device="recorded", output_dir=tmp_path / "out", progress_bar=False)
    message = str(info.value)
    assert "99_broken.ipynb" in message and "planted failure" in message and "cell" in message
