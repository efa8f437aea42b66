"""Executing the study's notebooks with papermill, and building the book from them.

Notebooks live in ``notebooks/`` without outputs; executed copies go to ``book/notebooks/``
(ignored by git), where Jupyter Book picks them up with execution off.
"""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convkit.book.reproduction import REPRODUCTION_TABLE, reproduction_markdown
from convkit.book.run_times import minutes_text, run_times, run_times_store
from convkit.study.checkout import book_dir, notebooks_dir
from convkit.study.results import ResultStore, recorded_gpu_name

DEVICE_MODES = ("auto", "gpu", "recorded")


@dataclass
class NotebookFailure(Exception):
    """A notebook failed: which one, which cell, and the error papermill saw."""

    notebook: str
    cell: str
    error: str

    def __str__(self) -> str:
        return f"notebook {self.notebook} failed in {self.cell}: {self.error}"


#: Chapters that are no paper's, after the papers': (name, notebook stem).
CLOSING_CHAPTERS = (("summary", "08_summary"),)


def selected(only: str | None = None) -> list[tuple[str, Path]]:
    """(chapter name, notebook) of the registered papers in reading order, then :data:`CLOSING_CHAPTERS`; ``only``
    keeps those whose stem equals it or starts with it, or whose paper it names (``"00"``, ``"03_cuconv"``,
    ``"cuconv"``)."""
    from convkit.papers import PAPERS

    books = [(p.name, notebooks_dir() / f"{p.notebook}.ipynb") for p in PAPERS]
    books += [(name, notebooks_dir() / f"{stem}.ipynb") for name, stem in CLOSING_CHAPTERS]
    if only:
        books = [(name, b) for name, b in books if only in (name, b.name) or b.stem.startswith(only)]
        if not books:
            raise ValueError(f"--only {only!r} matches no notebook in {notebooks_dir()}")
    missing = [b.name for _, b in books if not b.is_file()]
    if missing:
        raise FileNotFoundError(f"registered notebooks missing from {notebooks_dir()}: {missing}")
    return books


def select_notebooks(only: str | None = None) -> list[Path]:
    """The notebooks :func:`selected` selects, in reading order."""
    return [book for _, book in selected(only)]


def executed_dir() -> Path:
    return book_dir() / "notebooks"


def run_notebook(
    path: Path,
    *,
    device: str = "auto",
    quick: bool = False,
    output_dir: Path | None = None,
    progress_bar: bool = True,
    recorded_gpu: str | None = None,
) -> Path:
    """Execute one notebook with papermill, parameters ``device`` and ``quick`` (and ``recorded_gpu``, the results
    folder shown where not measuring, where given); returns the executed copy."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    if device not in DEVICE_MODES:
        raise ValueError(f"device must be one of {DEVICE_MODES}, got {device!r}")
    output_dir = output_dir or executed_dir()
    output_dir.mkdir(parents=True, exist_ok=True)
    out = output_dir / path.name
    try:
        papermill.execute_notebook(
            str(path), str(out),
            parameters={"device": device, "quick": quick, **({"recorded_gpu": recorded_gpu} if recorded_gpu else {})},
            cwd=str(path.parent), kernel_name="python3", progress_bar=progress_bar,
        )  # fmt: skip
    except PapermillExecutionError as exc:
        raise NotebookFailure(path.name, f"cell {exc.cell_index} (execution count {exc.exec_count})",
                              f"{exc.ename}: {exc.evalue}") from None  # fmt: skip
    hide_parameters(out)
    return out


#: Cell tags papermill gives the parameters it injects; the book removes those cells (a reader needs no
#: ``device = "recorded"``), as it removes the notebook's own parameters cell (tagged in the notebook).
INJECTED = "injected-parameters"
REMOVED = "remove-cell"


def hide_parameters(path: Path) -> None:
    """Tag the cell papermill injected in the executed notebook ``path`` so the book leaves it out."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    changed = False
    for cell in nb.cells:
        tags = cell.metadata.setdefault("tags", [])
        if INJECTED in tags and REMOVED not in tags:
            tags.append(REMOVED)
            changed = True
    if changed:
        nbformat.write(nb, path)


def mode_line(device: str) -> str:
    """What a run with ``device`` (auto|gpu|recorded) will show, in one line: measured on this GPU (and where its
    results go), or the results recorded on the book's GPU, named, with their folder (and why no GPU measures)."""
    from convkit.book.chapter import DEFAULT_RECORDED_GPU, resolve_device
    from convkit.core.gpu import gpu_status

    if resolve_device(device) == "gpu":
        from convkit.core.gpu import device_name, gpu_slug

        name = device_name()
        return f"measuring on this GPU, {name} (results in results/{gpu_slug(name)}/, resuming what is there)"
    ok, why = gpu_status()
    reason = "as asked" if ok else f"no GPU here: {why}"
    name = recorded_gpu_name(DEFAULT_RECORDED_GPU)
    return f"showing the results recorded on the {name} (results/{DEFAULT_RECORDED_GPU}/; {reason})"


def reproduce(
    *,
    only: str | None = None,
    device: str = "auto",
    quick: bool = False,
    record_times: bool = False,
    recorded_gpu: str | None = None,
) -> list[Path]:
    """Run every selected notebook in order; stops at the first failure (raises NotebookFailure).

    ``record_times`` (measuring on a GPU only): each notebook's wall time, start to end of its execution, goes
    to ``results/<gpu>/notebook_runs.csv`` (one row per notebook and mode; a notebook already recorded in that
    mode is skipped, so an interrupted run resumes).
    """
    import time

    paths = select_notebooks(only)
    store = _run_times_store(device) if record_times else None
    mode = "quick" if quick else "full"
    done_keys: set[tuple[str, ...]] = set()
    if store:  # a failed run is measured again, its row replaced
        timed_here = ("notebook", mode, "1")
        store.drop(lambda row: (row["step"], row["mode"], row["gpus"]) == timed_here and row["status"] != "ok")
        done_keys = store.done_keys()
    done = []
    for i, path in enumerate(paths, 1):
        if (path.stem, "notebook", mode, "1") in done_keys:
            continue
        print(f"[{i}/{len(paths)}] {path.name} (device={device}{', quick' if quick else ''})", flush=True)
        start = time.perf_counter()
        try:
            done.append(run_notebook(path, device=device, quick=quick, recorded_gpu=recorded_gpu))
        except NotebookFailure as exc:
            if store:
                store.append({"notebook": path.stem, "step": "notebook", "mode": mode, "gpus": 1, "status": "error",
                              "note": str(exc)[:300], "wall_s": f"{time.perf_counter() - start:.1f}"})  # fmt: skip
            raise
        if store:
            store.append({"notebook": path.stem, "step": "notebook", "mode": mode, "gpus": 1, "status": "ok",
                          "wall_s": f"{time.perf_counter() - start:.1f}"})  # fmt: skip
    return done


def _run_times_store(device: str) -> ResultStore:
    """The store of notebook run times on this GPU (measuring only: a recorded run times nothing)."""
    from convkit.book import chapter
    from convkit.study import provenance

    if chapter.resolve_device(device) != "gpu":
        raise ValueError("record_times needs device 'gpu' (or 'auto' on a GPU): only a measuring run has a time")
    return run_times_store(chapter.results_directory("gpu"), provenance.collect())


#: The intro's findings table and the rerun page's chapter table, written from the recorded results at each
#: build (ignored by git).
FINDINGS_PAGE = "findings.md"
RERUN_PAGE = "rerun_chapters.md"
NODE_PAGE = "rerun_node.md"


def _repository(book: Path | None = None) -> dict[str, Any]:
    import yaml

    return dict(yaml.safe_load(((book or book_dir()) / "_config.yml").read_text())["repository"])


def repository_url(book: Path | None = None) -> str:
    """The study's repository, as ``book/_config.yml`` names it (the one place it is set; the notebooks'
    ``repo_url`` parameter copies it, and :func:`set_repository` changes both)."""
    return str(_repository(book)["url"]).rstrip("/")


def repository_branch(book: Path | None = None) -> str:
    """The branch the launch buttons and the rerun page's Colab links open (``book/_config.yml``)."""
    return str(_repository(book).get("branch") or "main")


#: The notebooks' parameters that name the repository a Colab runtime clones, and the branch (or tag, or commit).
REPO_PARAMETER, REF_PARAMETER = "repo_url", "repo_ref"


def set_repository(
    url: str, *, branch: str | None = None, book: Path | None = None, notebooks: Path | None = None
) -> list[Path]:
    """Name ``url`` as the study's repository (a fork's address), and ``branch`` as the one it publishes:
    ``repository.url`` (and ``.branch``) in ``book/_config.yml`` and the ``repo_url`` (and ``repo_ref``) parameter
    of every notebook, each line rewritten in place; returns the files changed."""
    import json
    import re

    url = url.rstrip("/")
    if not re.fullmatch(r"https://[\w.-]+/[\w.-]+/[\w.-]+", url):
        raise ValueError(f"url must be a repository's https address (https://github.com/<owner>/<name>), got {url!r}")
    if branch is not None and not re.fullmatch(r"[\w./-]+", branch):
        raise ValueError(f"branch must be a git branch, tag or commit name, got {branch!r}")
    values = {"url": url, **({"branch": branch} if branch else {})}
    parameters = {REPO_PARAMETER: url, **({REF_PARAMETER: branch} if branch else {})}
    changed = []
    config = (book or book_dir()) / "_config.yml"
    text = new = config.read_text()
    for key, value in values.items():
        new = re.sub(rf"(?m)^(repository:\n(?:[ \t]+.*\n)*?[ \t]+{key}:[ \t]*).*$", rf"\g<1>{value}", new)
    if new != text:
        config.write_text(new)
        changed.append(config)
    for path in sorted((notebooks or notebooks_dir()).glob("*.ipynb")):
        nb = json.loads(path.read_text())
        edited = False
        for cell in nb["cells"]:
            if "parameters" not in cell.get("metadata", {}).get("tags", []):
                continue
            for i, line in enumerate(cell["source"]):
                for name, value in parameters.items():
                    m = re.match(rf'({name}\s*=\s*)"[^"]*"(.*)', line, re.S)
                    if m and line != (fixed := f'{m.group(1)}"{value}"{m.group(2)}'):
                        cell["source"][i], edited = fixed, True
        if edited:
            path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
            changed.append(path)
    return changed


def _full_run(paper: Any, directory: Path) -> str:
    """What a full run of ``paper`` measures, in words: its problems (declared, else as recorded) and cases."""
    from convkit.study.results import load_results

    if not (directory / f"{paper.experiment}.csv").is_file():
        return "see the chapter"
    frame, _ = load_results(directory, paper.experiment)
    if "label" not in frame:
        return f"{len(frame)} measurements"
    problems = len(paper.problems(False)) if paper.problems else frame["label"].nunique()
    tuned = ", tuned first" if paper.tuning else ""
    return f"{problems} problems, {len(frame):,} checked and timed cases{tuned}"


def chapter_experiments() -> dict[str, tuple[str, ...]]:
    """Each chapter's notebook stem -> the experiments its full run measures (sweep, tuning, and what its notebook
    measures beside them), for the run-time projection (:func:`convkit.book.run_times.full_times`)."""
    from convkit.papers import PAPERS
    from convkit.papers.summary import chapter as summary
    from convkit.papers.tf32x3 import accuracy

    beside = {"tf32x3": (accuracy.EXPERIMENT,)}
    found = {p.notebook: (p.experiment, *((p.tuning,) if p.tuning else ()), *beside.get(p.name, ())) for p in PAPERS}
    return found | {stem: summary.EXPERIMENTS for name, stem in CLOSING_CHAPTERS if name == "summary"}


def rerun_markdown(directory: Path, repo_url: str, branch: str = "main") -> str:
    """The rerun page's table: each chapter, a Colab link to its committed notebook, what a full run measures,
    the full run's wall time on this GPU (measured, ``notebook_runs.csv``, else projected from its recorded cases,
    marked, with a footnote giving the projection's check), the quick run's, and the quick run's time on a T4,
    estimated from the datasheets."""
    from convkit.book.run_times import full_times
    from convkit.papers import PAPERS
    from convkit.study.roofline import recorded_ceilings, slowdown_range

    ceilings = recorded_ceilings(Path(directory))
    low, high = slowdown_range(ceilings) if ceilings else (math.nan, math.nan)
    times = run_times(Path(directory))
    full = full_times(Path(directory), chapter_experiments())

    def t4(wall_s: float) -> str:
        if not ceilings:
            return "no ceilings recorded"
        shortest, longest = round(low * wall_s / 60), round(high * wall_s / 60)
        return f"about {max(1, longest)} min" if shortest == longest else f"{shortest}-{longest} min"

    def full_text(notebook: str) -> str:
        if notebook not in full:
            return "not timed"
        return minutes_text(full[notebook].seconds) + ("" if full[notebook].measured else ", projected¹")

    github = repo_url.removeprefix("https://github.com/")
    lines = ["| chapter | notebook (opens in Colab) | a full run measures | full run on the H100 | "
             "quick run on the H100 | quick run on a T4, estimated |", "|---|---|---|---|---|---|"]  # fmt: skip
    chapters = [(p.title, p.notebook, _full_run(p, Path(directory))) for p in PAPERS]
    chapters += [(name.capitalize(), stem, "see the chapter") for name, stem in CLOSING_CHAPTERS]
    for title, notebook, measures in chapters:
        path = f"notebooks/{notebook}.ipynb"
        colab = f"[{notebook}](https://colab.research.google.com/github/{github}/blob/{branch}/{path})"
        quick = times.get((notebook, "quick"))
        lines.append(f"| {title} | {colab} | {measures} | {full_text(notebook)} | "
                     f"{minutes_text(quick) if quick is not None else 'not timed'} | "
                     f"{t4(quick) if quick is not None else '–'} |")  # fmt: skip
    if all(notebook in full for _, notebook, _ in chapters):
        total = sum(full[notebook].seconds for _, notebook, _ in chapters)
        lines.append(f"| **All chapters** | | | **{minutes_text(total)}** | | |")
    return "\n".join(lines) + "\n" + _projection_note(full, {notebook: title for title, notebook, _ in chapters})


def _titles() -> dict[str, str]:
    """Each chapter's name (as the command line names it) -> its title."""
    from convkit.papers import PAPERS

    return {p.name: p.title for p in PAPERS} | {name: name.capitalize() for name, _ in CLOSING_CHAPTERS}


def _projection_note(full: dict[str, Any], titles: dict[str, str]) -> str:
    """The footnote that says how the projected full times were projected, and how well the method does on the
    chapters whose full run was timed (each projected from the others)."""
    if all(t.measured for t in full.values()):
        return ""

    def named(stem: str) -> str:  # mid-sentence: "the baseline", as the prose names chapters
        return titles[stem][:1].lower() + titles[stem][1:] if titles[stem].startswith("The ") else titles[stem]

    checks = [(named(stem), t.seconds, t.check) for stem, t in full.items() if t.measured and t.check is not None]
    checked = "; ".join(f"{title}, {minutes_text(check)} projected against {minutes_text(wall)} measured "
                        f"({(check - wall) / wall:+.0%})" for title, wall, check in checks)  # fmt: skip
    return ("\n¹ Projected: no full run of this chapter was timed from nothing recorded (its results were recorded "
            "over several sittings, each resuming the last). Each recorded case counts the GPU time its timing loop "
            "ran (its repetitions times its median) plus the host time per case (inputs, the float64 reference, the "
            "check, compiling the launch) that the chapters timed in full spent on average. "
            + (f"The same projection of the chapters timed in full, each from the others: {checked}." if checks
               else "") + "\n")  # fmt: skip


def build_book(book: Path | None = None, *, device: str = "recorded", extra_args: tuple[str, ...] = ()) -> Path:
    """``jupyter-book build`` of ``book`` (default ``book/``); returns the HTML directory.

    The intro's findings table (:data:`FINDINGS_PAGE`) is computed first from the results the chapters
    show (``device``: this GPU's when measuring, else the recorded GPU's). Raises CalledProcessError when
    the build fails (warnings count as failures: a missing notebook or figure must not pass silently).
    """
    from convkit.book import chapter, node

    book = book or book_dir()
    directory = chapter.results_directory(chapter.resolve_device(device))
    if not (directory / "ceilings.csv").is_file():  # a GPU with quick runs only: the recorded findings
        directory = chapter.results_directory("recorded")
    print(f"book: the findings table and the run times from results/{directory.name}/ "
          f"({recorded_gpu_name(directory.name)})", flush=True)  # fmt: skip
    (book / FINDINGS_PAGE).write_text(chapter.findings_markdown(directory))
    recorded = chapter.results_directory("recorded")
    (book / REPRODUCTION_TABLE).write_text(reproduction_markdown(recorded))
    (book / RERUN_PAGE).write_text(rerun_markdown(directory, repository_url(book), repository_branch(book)))
    (book / NODE_PAGE).write_text(node.node_page(_titles()))
    exe = Path(sys.executable).with_name("jupyter-book")
    command = [str(exe)] if exe.exists() else [shutil.which("jupyter-book") or "jupyter-book"]
    subprocess.run([*command, "build", str(book), "--warningiserror", "--keep-going", *extra_args], check=True)
    return book / "_build" / "html"
