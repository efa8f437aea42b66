"""Executing the study's notebooks with papermill, and building the book from them.

Notebooks live in ``notebooks/`` without outputs; executed copies go to ``book/notebooks/``
(ignored by git), where Jupyter Book picks them up with execution off.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from convkit.paths import book_dir, notebooks_dir

DEVICE_MODES = ("auto", "gpu", "recorded")


@dataclass
class NotebookFailure(Exception):
    """A notebook failed: which one, which cell, and the error papermill saw."""

    notebook: str
    cell: str
    error: str

    def __str__(self) -> str:
        return f"notebook {self.notebook} failed in {self.cell}: {self.error}"


def select_notebooks(only: str | None = None) -> list[Path]:
    """The registered papers' notebooks in reading order; ``only`` keeps those whose stem equals it or starts
    with it, or whose paper it names (``"00"``, ``"03_cuconv"``, ``"cuconv"``)."""
    from convkit.papers import PAPERS

    books = [(p.name, notebooks_dir() / f"{p.notebook}.ipynb") for p in PAPERS]
    if only:
        books = [(name, b) for name, b in books if only in (name, b.name) or b.stem.startswith(only)]
        if not books:
            raise ValueError(f"--only {only!r} matches no notebook in {notebooks_dir()}")
    missing = [b.name for _, b in books if not b.is_file()]
    if missing:
        raise FileNotFoundError(f"registered notebooks missing from {notebooks_dir()}: {missing}")
    return [b for _, b in books]


def executed_dir() -> Path:
    return book_dir() / "notebooks"


def run_notebook(
    path: Path, *, device: str = "auto", quick: bool = False, output_dir: Path | None = None, progress_bar: bool = True
) -> Path:
    """Execute one notebook with papermill, parameters ``device`` and ``quick``; returns the executed copy."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    if device not in DEVICE_MODES:
        raise ValueError(f"device must be one of {DEVICE_MODES}, got {device!r}")
    output_dir = output_dir or executed_dir()
    output_dir.mkdir(parents=True, exist_ok=True)
    out = output_dir / path.name
    try:
        papermill.execute_notebook(
            str(path), str(out), parameters={"device": device, "quick": quick},
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


def reproduce(*, only: str | None = None, device: str = "auto", quick: bool = False) -> list[Path]:
    """Run every selected notebook in order; stops at the first failure (raises NotebookFailure)."""
    paths = select_notebooks(only)
    done = []
    for i, path in enumerate(paths, 1):
        print(f"[{i}/{len(paths)}] {path.name} (device={device}{', quick' if quick else ''})", flush=True)
        done.append(run_notebook(path, device=device, quick=quick))
    return done


def build_book(book: Path | None = None, *, extra_args: tuple[str, ...] = ()) -> Path:
    """``jupyter-book build`` of ``book`` (default ``book/``); returns the HTML directory.

    Raises CalledProcessError when the build fails (warnings count as failures: a missing
    notebook or figure must not pass silently).
    """
    book = book or book_dir()
    exe = Path(sys.executable).with_name("jupyter-book")
    command = [str(exe)] if exe.exists() else [shutil.which("jupyter-book") or "jupyter-book"]
    subprocess.run([*command, "build", str(book), "--warningiserror", "--keep-going", *extra_args], check=True)
    return book / "_build" / "html"
