"""Whether a GPU is here, and the CuPy handles that the GPU paths share.

``import convkit`` never imports CuPy; the GPU modules call :func:`require_cupy` at first use,
so a machine without a GPU (CI, a reader building the book) runs every CPU path.
"""

from __future__ import annotations

import os
import re
from typing import Any

from convkit.core.memo import memoize

#: The setting that builds every kernel as PTX for an older virtual architecture (``compute_75``: the Colab
#: T4's code paths, ``__CUDA_ARCH__`` = 750), JIT-compiled for the GPU in hand, with that architecture's
#: shared-memory limits enforced: how the T4's paths run on an H100.
PTX_ARCH_ENV = "CONVKIT_PTX_ARCH"
#: Shared memory per block (opt-in) and per SM, in bytes, of the architectures a PTX build stands in for.
PTX_SHARED_LIMITS: dict[str, tuple[int, int]] = {"compute_75": (65536, 65536)}


class GPUUnavailableError(RuntimeError):
    """Raised when a GPU path is used where CuPy or a CUDA device is missing."""


@memoize()
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


def ptx_arch() -> str | None:
    """The virtual architecture every kernel is built for (:data:`PTX_ARCH_ENV`), or None: the GPU's own.

    Raises ValueError for an architecture whose limits convkit does not know.
    """
    arch = os.environ.get(PTX_ARCH_ENV) or None
    if arch is not None and arch not in PTX_SHARED_LIMITS:
        raise ValueError(f"{PTX_ARCH_ENV}={arch!r}: convkit knows {sorted(PTX_SHARED_LIMITS)}")
    return arch


def device_name() -> str:
    """The current device's marketing name, e.g. ``NVIDIA H100 80GB HBM3``; with :data:`PTX_ARCH_ENV` set, the
    architecture it runs as (``NVIDIA H100 80GB HBM3 as compute_75``), so its results and tuning stay apart."""
    import cupy

    name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    arch = ptx_arch()
    return f"{name} as {arch}" if arch else name


#: An H100's shared memory (per block with opt-in, per SM), for planning where there is no GPU.
H100_SHARED_LIMITS = (232448, 233472)


def shared_memory_limits() -> tuple[int, int]:
    """(bytes of shared memory a block may opt in to, bytes per SM) of the GPU the kernels are built for: the
    device's own (an H100's where there is no GPU, for planning), or those of the :func:`ptx_arch` it stands
    in for where smaller."""
    own = H100_SHARED_LIMITS
    if has_gpu():
        import cupy

        attrs = cupy.cuda.Device().attributes
        own = int(attrs["MaxSharedMemoryPerBlockOptin"]), int(attrs["MaxSharedMemoryPerMultiprocessor"])
    arch = ptx_arch()
    if arch is None:
        return own
    block, sm = PTX_SHARED_LIMITS[arch]
    return min(own[0], block), min(own[1], sm)


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


#: FP32 lanes per SM by compute capability (CUDA C++ Programming Guide, arithmetic throughput table).
FP32_LANES_PER_SM = {(6, 0): 64, (6, 1): 128, (7, 0): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128,
                     (8, 7): 128, (8, 9): 128, (9, 0): 128, (10, 0): 128, (12, 0): 128}  # fmt: skip


def build_target() -> str:
    """What convkit builds its kernels for here, as a refusal names it: :data:`PTX_ARCH_ENV`'s virtual architecture,
    else this GPU's ``sm_XY``, else "no GPU"."""
    return ptx_arch() or ("sm_{}{}".format(*compute_capability()) if has_gpu() else "no GPU")


#: The first compute capability with TF32 tensor cores (``mma.sync ... tf32``).
TF32_CAPABILITY = (8, 0)


def has_tf32_tensor_cores() -> bool:
    """Whether this GPU, as convkit builds for it (:data:`PTX_ARCH_ENV` included), has TF32 tensor cores (False
    where there is no GPU)."""
    arch = ptx_arch()
    if arch is not None:
        return int(arch.split("_")[1]) >= 10 * TF32_CAPABILITY[0] + TF32_CAPABILITY[1]
    return has_gpu() and compute_capability() >= TF32_CAPABILITY
