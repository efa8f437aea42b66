"""Where the study's files live in a checkout: the recorded results, the notebooks, the book."""

from __future__ import annotations

import os
from pathlib import Path

#: The directory above the package: the checkout of an editable install.
_CHECKOUT = Path(__file__).resolve().parents[2]


def project_root() -> Path:
    """The checkout the study runs from.

    ``$CONVKIT_ROOT`` if set; else the nearest directory, from the working directory upwards, that
    holds both ``results/`` and ``notebooks/`` (papermill runs notebooks from ``notebooks/``, Colab
    from the clone); else the directory above the package (an editable install).
    """
    if env := os.environ.get("CONVKIT_ROOT"):
        return Path(env).resolve()
    here = Path.cwd().resolve()
    for candidate in (here, *here.parents):
        if (candidate / "results").is_dir() and (candidate / "notebooks").is_dir():
            return candidate
    return _CHECKOUT


def notebooks_dir() -> Path:
    return project_root() / "notebooks"


def book_dir() -> Path:
    return project_root() / "book"


def results_dir() -> Path:
    """``results/`` under the project root (recorded measurements, one folder per GPU)."""
    return project_root() / "results"
