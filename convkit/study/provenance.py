"""Provenance: which GPU, driver, toolkit, libraries and code produced a set of results."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

from convkit.cuda.timing import TIMING_METHOD

_REPO = Path(__file__).resolve().parents[2]


def convkit_commit() -> str:
    """The commit measured: ``$CONVKIT_COMMIT`` (set where the tree travels without .git), else git's.

    A ``+dirty`` suffix marks uncommitted changes to tracked files.
    """
    if env := os.environ.get("CONVKIT_COMMIT"):
        return env
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=_REPO, capture_output=True, text=True,
                             check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=_REPO,
                               capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def nvidia_smi(field: str, gpu: str | None = None) -> str:
    """``nvidia-smi``'s ``field`` (``driver_version``, ``uuid``) of GPU ``gpu`` (an index or UUID; default the
    first), or "unknown" where it cannot say."""
    select = ["-i", gpu] if gpu is not None else []
    try:
        out = subprocess.run(["nvidia-smi", *select, f"--query-gpu={field}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True).stdout  # fmt: skip
        return out.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def ncu_version(ncu: str | None = None) -> str:
    """Nsight Compute's version as ``ncu --version`` ends (``Version 2025.3.1.0 (build ...)``) for ``ncu`` (default the
    one on the PATH): "not installed" where there is none, "unknown" where it does not say."""
    ncu = ncu or shutil.which("ncu")
    if ncu is None:
        return "not installed"
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    lines = out.strip().splitlines()
    return lines[-1] if lines else "unknown"


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def collect(ncu: str | None = None) -> dict[str, Any]:
    """Everything a results file must say about where it came from (``ncu``: the Nsight Compute that profiled, where
    not the PATH's). Needs the GPU."""
    from convkit._version import __version__
    from convkit.core.gpu import compute_capability, device_name, require_cupy
    from convkit.libs import cudnn, pytorch
    from convkit.libs import cvcuda as cvcuda_filter

    cupy = require_cupy()
    major, minor = compute_capability()
    nvrtc = cupy.cuda.nvrtc.getVersion()
    return {
        "gpu": device_name(),
        "compute_capability": f"{major}.{minor}",
        "driver": nvidia_smi("driver_version"),
        "cuda_driver_api": _cuda_version(cupy.cuda.runtime.driverGetVersion()),
        "cuda_runtime": _cuda_version(cupy.cuda.runtime.runtimeGetVersion()),
        "nvrtc": f"{nvrtc[0]}.{nvrtc[1]}",
        "cupy": cupy.__version__,
        "cudnn": cudnn.version() or "not found",
        "cudnn_origin": cudnn.library_origin(),
        "pytorch": pytorch.version() or "not installed",
        "cvcuda": cvcuda_filter.version() or "not installed",
        "profiler": ncu_version(ncu),
        "convkit": __version__,
        "convkit_commit": convkit_commit(),
        "python": platform.python_version(),
        "host": platform.node(),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "timing_method": TIMING_METHOD,
    }
