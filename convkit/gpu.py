"""Whether a GPU is here, and the CuPy handles that the GPU paths share.

``import convkit`` never imports CuPy; the GPU modules call :func:`require_cupy` at first use,
so a machine without a GPU (CI, a reader building the book) runs every CPU path.
"""

from __future__ import annotations

import functools
import re
from typing import Any


class GPUUnavailableError(RuntimeError):
    """Raised when a GPU path is used where CuPy or a CUDA device is missing."""


@functools.cache
def gpu_status() -> tuple[bool, str]:
    """(True, device name) when CuPy imports and sees a CUDA device, else (False, why not)."""
    try:
        import cupy
    except Exception as exc:  # ImportError, or a broken CUDA install raising at import
        return False, f"CuPy is not importable ({type(exc).__name__}: {exc})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return False, f"CuPy finds no CUDA device ({type(exc).__name__}: {exc})"
    if count < 1:
        return False, "CuPy finds no CUDA device"
    return True, device_name()


def has_gpu() -> bool:
    """True when CuPy imports and a CUDA device is present."""
    return gpu_status()[0]


def require_cupy() -> Any:
    """Import and return CuPy, or raise :class:`GPUUnavailableError` saying why it is missing."""
    ok, why = gpu_status()
    if not ok:
        raise GPUUnavailableError(f"this needs a CUDA GPU: {why}")
    import cupy

    return cupy


def device_name() -> str:
    """The current device's marketing name, e.g. ``NVIDIA H100 80GB HBM3``."""
    import cupy

    name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def compute_capability() -> tuple[int, int]:
    """(major, minor) of the current device."""
    import cupy

    cc = cupy.cuda.Device().compute_capability  # e.g. "90"
    return int(cc[:-1]), int(cc[-1])


def gpu_slug(name: str) -> str:
    """A directory name for a GPU: ``NVIDIA H100 80GB HBM3`` -> ``nvidia-h100-80gb-hbm3``."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def sm_count(default: int = 132) -> int:
    """Multiprocessors of the current device; ``default`` (an H100's) where there is no GPU, for planning."""
    if not has_gpu():
        return default
    import cupy

    return int(cupy.cuda.Device().attributes["MultiProcessorCount"])
