"""Every notebook executed by papermill in recorded mode, then the book built from them and read the way a
reader meets it (CPU)."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from convkit.book.reproduce import NotebookFailure, run_notebook, select_notebooks
from convkit.study.checkout import project_root

pytestmark = pytest.mark.slow

PAGES = ["intro", "rerun", "bibliography"]


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
        assert "H100 80GB HBM3" in text, f"{page.name} does not show its provenance"


def test_cuconv_chapter_shows_the_paper_beside_the_measurements(built_book):
    _, _, html = built_book
    text = (html / "notebooks" / "03_cuconv.html").read_text()
    for needle in ("8.31", "2.29", "Table 3", "WINOGRAD", "not supported", "Result"):
        assert needle in text, needle


def test_lu2020_chapter_shows_the_paper_beside_the_measurements(built_book):
    _, _, html = built_book
    text = (html / "notebooks" / "02_lu2020.html").read_text()
    for needle in ("loads per 5x5 window", "cupyx.ndimage", "stack frame", "requests / output (ncu)", "Result"):
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


class ReaderView(HTMLParser):
    """What a page shows outside collapsed sections (``<details>``): code inputs, table rows, the first table
    and the first result box (an admonition), and every table cell's text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.collapsed = self.skip = 0
        self.inputs = self.rows = 0
        self.words: list[str] = []
        self.shown: list[str] = []  # the words outside collapsed sections
        self.first_table = self.first_box = None
        self.cells: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        cls = dict(attrs).get("class") or ""
        self.collapsed += tag == "details"
        self.skip += tag in ("script", "style")
        if not self.collapsed:
            self.inputs += tag == "div" and "cell_input" in cls
            self.rows += tag == "tr"
            if tag == "table" and self.first_table is None:
                self.first_table = len(self.words)
            if "admonition" in cls and self.first_box is None:
                self.first_box = len(self.words)
        if tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        self.collapsed -= tag == "details"
        self.skip -= tag in ("script", "style")
        if tag in ("td", "th") and self._cell is not None:
            self.cells.append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self.skip:
            return
        if self._cell is not None:
            self._cell.append(data)
        self.words += data.split()
        if not self.collapsed:
            self.shown += data.split()


def _read(page: Path) -> ReaderView:
    view = ReaderView()
    view.feed(page.read_text())
    return view


CHAPTER_ROWS = 80  # table rows a chapter shows before its collapsed appendix
TEAM_WORDS = re.compile(r"\bissue \d|issue'?s targets?|\(issue\b|\btarget met\b", re.I)
MACHINE_PATH = re.compile(r"(?<![\w:/.~-])/(?:[\w.-]+/){2,}[\w.-]+")


def test_every_page_reads_as_a_reader_meets_it(built_book):
    _, executed, html = built_book
    for page in [html / "intro.html", *(html / "notebooks" / f"{p.stem}.html" for p in executed)]:
        view = _read(page)
        text = " ".join(view.words)
        assert view.inputs == 0, f"{page.name}: {view.inputs} code inputs shown"
        assert not MACHINE_PATH.search(text), f"{page.name}: machine path {MACHINE_PATH.search(text).group()}"
        assert not TEAM_WORDS.search(text), f"{page.name}: words for the team: {TEAM_WORDS.search(text).group()}"
        bad = [c for c in view.cells if c.lower() in ("nan", "<na>", "none") or c.startswith(('{"', "{'"))]
        assert not bad, f"{page.name}: raw cells {bad[:3]}"
        if page.name == "intro.html":
            assert "8.31" in text and view.first_table is not None, "intro: no findings table"
            continue
        assert view.rows <= CHAPTER_ROWS, f"{page.name}: {view.rows} table rows outside collapsed sections"
        assert view.first_box is not None, f"{page.name}: no result box"
        assert view.first_table is None or view.first_box < view.first_table, f"{page.name}: box after a table"


#: Spellings of a library case other than its one name (convkit.study.tables.LIBRARY_NAMES, the notation page's
#: "best library"): raw ids and enum names where a reader looks. The paper's own enum names stay in collapsed
#: method sections and where a paper's table is quoted (written without the "cuDNN " prefix).
OTHER_SPELLINGS = re.compile(
    r"PyTorch \(cuDNN\)|PyTorch \(cudnn\.benchmark\)|\bpytorch cudnn\.benchmark|"
    r"WINOGRAD NONFUSED|IMPLICIT PRECOMP GEMM|"
    r"\bcuDNN (?:IMPLICIT_(?:PRECOMP_)?GEMM|FFT_TILING|WINOGRAD(?:_NONFUSED)?|DIRECT)\b"
)


def test_one_name_per_library_case(built_book):
    _, executed, html = built_book
    for page in [html / "intro.html", *(html / "notebooks" / f"{p.stem}.html" for p in executed)]:
        shown = " ".join(_read(page).shown)
        found = sorted(set(OTHER_SPELLINGS.findall(shown)))
        assert not found, f"{page.name}: {found}"


#: Number formats the notation page states: thousands separated by commas (years, powers of two, GPU model numbers
#: and ranges apart), speed-ups to two decimals, no Python lists in prose.
BARE_THOUSANDS = re.compile(r"(?<![\w.,/+#×–-])(\d{4,})(?![\w,³²/×–-]|\.\d| ?x ?\d| Ti\b)")
MANY_DECIMALS = re.compile(r"(?<![\w.])\d+\.\d{3,}x\b")
PYTHON_LIST = re.compile(r"\[\d+(?:\.\d+)?(?:, \d+(?:\.\d+)?)+\]")


def number_format_breaks(text: str) -> list[str]:
    """The numbers of ``text`` written otherwise than the notation page says, each with its surroundings."""
    found = [m for m in BARE_THOUSANDS.finditer(text)
             if not (1900 <= int(m.group(1)) <= 2099 or int(m.group(1)) & (int(m.group(1)) - 1) == 0)]  # fmt: skip
    found += [*MANY_DECIMALS.finditer(text), *PYTHON_LIST.finditer(text)]
    return [text[max(0, m.start() - 30) : m.end() + 10] for m in found]


def test_number_format_breaks_are_found():
    assert number_format_breaks("the largest error of 7138 checked runs") != []
    assert number_format_breaks("ConvNeXt-Tiny (0.999x)") != []
    assert number_format_breaks("sizes [28, 56, 112]") != []
    ok = "7,138 runs, 1.25x, 8192³, 1024 x 1024, GTX 1080 Ti, 2022, 56-1-3-256-256, pages 4013–4021"
    assert number_format_breaks(ok) == []


def test_numbers_are_written_as_the_notation_page_says(built_book):
    _, executed, html = built_book
    pages = [html / "intro.html", html / "reproduces.html", *(html / "notebooks" / f"{p.stem}.html" for p in executed)]
    for page in pages:
        breaks = number_format_breaks(" ".join(_read(page).shown))
        assert not breaks, f"{page.name}: {breaks[:3]}"


def test_the_bibliography_labels_entries_by_author_and_year(built_book):
    _, _, html = built_book
    labels = re.findall(r'fn-bracket">\[</span>(.*?)<span', (html / "bibliography.html").read_text())
    author_year = re.compile(r"[^\W\d][^,]*(?: et al\.| and [^,]+)?, (?:\d{4}|n\.d\.)|NVIDIA [\w-]+")
    assert len(labels) >= 10 and all(author_year.fullmatch(label) for label in labels), labels
    assert labels == sorted(labels, key=str.lower)


def test_launch_buttons_open_committed_notebooks(built_book):
    _, executed, html = built_book
    tracked = set(subprocess.run(["git", "ls-files", "notebooks"], cwd=project_root(), capture_output=True,
                                 text=True, check=True).stdout.split())  # fmt: skip
    for path in executed:
        page = (html / "notebooks" / f"{path.stem}.html").read_text()
        links = re.findall(r'href="https://colab\.research\.google\.com/github/[^/]+/[^/]+/blob/[^/]+/([^"]+)"', page)
        assert links, f"{path.stem}: no Colab launch button"
        assert all(link in tracked for link in links), (path.stem, links)


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
def test_every_page_renders_in_a_headless_browser(built_book, tmp_path):
    _, executed, html = built_book
    for page in [html / "intro.html", html / "rerun.html", *(html / "notebooks" / f"{p.stem}.html" for p in executed)]:
        shot = tmp_path / f"{page.stem}.png"
        subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--window-size=1280,4000", f"--screenshot={shot}", page.as_uri()],
                       check=True, capture_output=True, timeout=120)  # fmt: skip
        assert shot.stat().st_size > 20_000, page.name
