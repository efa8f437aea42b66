"""Where the library's files live (the CUDA sources, the user's cache), and writing a file so that a kill leaves it
whole."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent.parent


def kernels_dir() -> Path:
    """The ``kernels/`` directory: the checkout's, or the copy a wheel ships in ``convkit/_kernels``."""
    for candidate in (_PACKAGE_DIR.parent / "kernels", _PACKAGE_DIR / "_kernels"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"no kernels/ directory beside {_PACKAGE_DIR}")


def cache_dir(home: str | Path | None = None) -> Path:
    """convkit's folder in the user's cache (``$XDG_CACHE_HOME/convkit``, else ``~/.cache/convkit``; under ``home``
    for a process started with ``XDG_CACHE_HOME=home``); not created."""
    return Path(home or os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "convkit"


def replace_text(path: Path, text: str | bytes) -> None:
    """Write ``path`` (text, or bytes as they are) through a temporary file of this writer's own and a rename: a kill
    leaves the old or the new file, and processes writing it at once (workers building one kernel, two tuning
    processes) each write theirs whole."""
    path = Path(path)
    mode = "wb" if isinstance(text, bytes) else "w"
    with tempfile.NamedTemporaryFile(mode, dir=path.parent, suffix=".tmp", delete=False) as tmp:
        tmp.write(text)
    try:
        os.replace(tmp.name, path)
    except OSError:
        os.unlink(tmp.name)
        raise
