"""Where the study's files live: the CUDA sources, the recorded results, the notebooks, the book."""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent.parent


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
    return _PACKAGE_DIR.parent


def kernels_dir() -> Path:
    """The ``kernels/`` directory: the checkout's, or the copy a wheel ships in ``convkit/_kernels``."""
    for candidate in (_PACKAGE_DIR.parent / "kernels", _PACKAGE_DIR / "_kernels"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"no kernels/ directory beside {_PACKAGE_DIR}")




def notebooks_dir() -> Path:
    return project_root() / "notebooks"


def book_dir() -> Path:
    return project_root() / "book"


def replace_text(path: Path, text: str) -> None:
    """Write ``path`` through a temporary file and a rename: a kill leaves the old or the new file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
