"""The intro's findings table and each chapter's result box give the same numbers (CPU, recorded results).

For every paper with findings, the chapter's notebook is run from its parameters cell to the cell that shows its
result box, in recorded mode (no GPU), exactly as the book executes it; every number of the paper's findings rows
(the paper's number, its design, our best, the share of the floor, the best library) must appear in that box.
Each row's ``section`` label, where given, must be a target in the chapter's notebook.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
from pathlib import Path

import nbformat
import pytest

from convkit.book import chapter
from convkit.papers import PAPERS
from convkit.study.checkout import notebooks_dir

WITH_FINDINGS = [p for p in PAPERS if p.findings is not None]
#: The findings columns whose numbers the result box must give ("what changed" is the reason, in words).
NUMBER_COLUMNS = ("paper's number", "paper's design on the H100", "our best on the H100", "efficiency",
                  "best library on the H100")  # fmt: skip
#: Text that holds digits but no result: GPU names, layer labels, filter and tile sizes, precisions, years.
NOT_NUMBERS = re.compile(
    r"\b(?:RTX|GTX)\s*\d+(?:\s*Ti)?|\b[A-Z]+\d+[A-Za-z]*\b|\bsm_\d+|\bF\(\d[^)]*\)|\d+(?:-\d+){2,}(?:\s+[ps]\d+)*"
    r"|\b\d+\s*x\s*\d+(?:\s*x\s*\d+)?\b(?!\.)|\b(?:19|20)\d\d\b|\bV\d\b|\b\d+-bit\b|\b[3x]*TF32\b|\bFP\d+\b"
)
NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")


def numbers(text: str) -> set[str]:
    """The numbers of ``text`` as written (thousands separators dropped), leaving out GPU names, layer labels,
    sizes such as 5x5 and years."""
    return {n.replace(",", "").rstrip(".") for n in NUMBER.findall(NOT_NUMBERS.sub(" ", str(text)))}


def test_numbers_reads_results_not_names():
    assert numbers("2.34x (10.4 us) on 7-32-832 5x5, RTX 2080 Ti, 2022") == {"2.34", "10.4"}
    assert numbers("faster on 2 of 26 layers (41%), 3,003 GB/s on the H100") == {"2", "26", "41", "3003"}


def result_box_text(notebook: Path) -> str:
    """The text of ``notebook``'s result box, its cells run in recorded mode up to the one that shows it."""
    import matplotlib

    matplotlib.use("Agg")
    nb = nbformat.read(notebook, as_version=4)
    namespace: dict[str, object] = {"__name__": "chapter_head"}
    for cell in (c for c in nb.cells if c.cell_type == "code"):
        source = cell.source
        if "parameters" in cell.metadata.get("tags", []):
            source += "\ndevice = 'recorded'\nquick = False\n"
        tree = ast.parse(source)
        if "result_box(" not in source:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(tree, notebook.name, "exec"), namespace)
            continue
        *head, last = tree.body
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(ast.Module(head, type_ignores=[]), notebook.name, "exec"), namespace)
        shown = eval(compile(ast.Expression(last.value), notebook.name, "eval"), namespace)
        return repr(shown)
    raise AssertionError(f"{notebook.name} shows no result box")


def labels(notebook: Path) -> set[str]:
    """The MyST targets ``(label)=`` of ``notebook``'s markdown cells."""
    nb = nbformat.read(notebook, as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    return set(re.findall(r"^\(([\w.:-]+)\)=\s*$", text, re.M))


@pytest.mark.slow
@pytest.mark.parametrize("paper", WITH_FINDINGS, ids=lambda p: p.name)
def test_the_findings_give_the_numbers_of_the_chapters_result_box(paper, monkeypatch):
    notebook = notebooks_dir() / f"{paper.notebook}.ipynb"
    monkeypatch.chdir(notebook.parent)
    box = result_box_text(notebook)
    shown = numbers(box)
    missing = []
    for row in paper.findings(chapter.results_directory("recorded")):
        for column in NUMBER_COLUMNS:
            absent = sorted(numbers(row.get(column, "")) - shown)
            if absent:
                missing.append(f"{row['claim'][:50]!r}, {column}: {', '.join(absent)} (cell: {row[column]!r})")
    assert not missing, f"{paper.notebook}: findings numbers not in the result box:\n" + "\n".join(missing)


@pytest.mark.parametrize("paper", WITH_FINDINGS, ids=lambda p: p.name)
def test_each_findings_row_links_to_a_section_of_its_chapter(paper):
    notebook = notebooks_dir() / f"{paper.notebook}.ipynb"
    targets = labels(notebook)
    for row in paper.findings(chapter.results_directory("recorded")):
        section = row.get(chapter.FINDING_SECTION)
        if section:
            assert section in targets, f"{paper.notebook}: no target ({section})= for {row['claim']!r}"


def test_the_intro_table_links_each_claim_to_its_section():
    directory = chapter.results_directory("recorded")
    table = chapter.findings(directory)
    text = chapter.findings_markdown(directory)
    assert chapter.FINDING_SECTION in table.columns
    for section in table[chapter.FINDING_SECTION]:
        if section:
            assert f"<{section}>`" in text or f"{{ref}}`{section}`" in text, section
    assert chapter._linked("a claim", "") == "a claim"
    assert chapter._linked("a claim", "lu2020-single") == "{ref}`a claim <lu2020-single>`"
    assert chapter._linked("K <= 256", "x") == "K <= 256 ({ref}`x`)"
