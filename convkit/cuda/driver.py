"""The CUDA driver's launch calls through ctypes (and CuPy's Cython binding where it has one): a kernel's
parameters as the driver takes them, ``cuLaunchKernel``, and ``cuLaunchKernelEx`` for a programmatic dependent launch
(:class:`EarlyLaunch`). :mod:`convkit.cuda.plan` binds recorded launches to these; :mod:`convkit.cuda.record`'s
:class:`~convkit.cuda.record.KernelCall` launches early through them.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from typing import Any

from convkit.core.memo import memoize


@memoize()
def driver_library() -> Any:
    """The CUDA driver (CuPy and PyTorch have loaded it already)."""
    lib = ctypes.WinDLL("nvcuda.dll") if sys.platform == "win32" else ctypes.CDLL("libcuda.so.1")
    lib.cuLaunchKernel.restype = ctypes.c_int  # arguments go as prebuilt ctypes objects: no per-call conversion
    lib.cuLaunchKernelEx.restype = ctypes.c_int
    lib.cuOccupancyMaxActiveClusters.restype = ctypes.c_int
    lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    return lib


def c_value(arg: Any) -> Any:
    """The ctypes value a kernel parameter takes for ``arg`` as CuPy would pass it; raises TypeError for a
    kind it does not know (the step then keeps CuPy's launch)."""
    import cupy
    import numpy as np

    if arg is None or isinstance(arg, cupy.ndarray):  # a slot, or an array the plan keeps
        return ctypes.c_uint64(0 if arg is None else arg.data.ptr)
    if isinstance(arg, np.generic):
        kinds = {np.dtype(np.int32): ctypes.c_int32, np.dtype(np.int64): ctypes.c_int64,
                 np.dtype(np.uint32): ctypes.c_uint32, np.dtype(np.uint64): ctypes.c_uint64,
                 np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double}  # fmt: skip
        if arg.dtype in kinds:
            return kinds[arg.dtype](arg.item())
    elif isinstance(arg, bool):
        return ctypes.c_bool(arg)
    elif isinstance(arg, int):  # CuPy passes a Python int as int64, a float as double
        return ctypes.c_int64(arg)
    elif isinstance(arg, float):
        return ctypes.c_double(arg)
    raise TypeError(f"no driver parameter for {type(arg).__name__}")


def parameters(args: tuple[Any, ...]) -> tuple[list[Any], Any]:
    """The ctypes values of a kernel's ``args`` (:func:`c_value`) and the parameter buffer pointing into them."""
    values = [c_value(arg) for arg in args]
    return values, (ctypes.c_void_p * len(values))(*(ctypes.addressof(v) for v in values))


#: ``CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`` (cuda.h's CUlaunchAttributeID).
PROGRAMMATIC_STREAM_SERIALIZATION = 6


class _LaunchAttribute(ctypes.Structure):  # CUlaunchAttribute: its id, padding to 8 bytes, a 64-byte value
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_int), ("value", ctypes.c_int * 16)]


class _LaunchConfig(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(_LaunchAttribute)),
                ("count", ctypes.c_uint)]  # fmt: skip


class EarlyLaunch:
    """``cuLaunchKernelEx`` of a kernel with programmatic stream serialization (Hopper's programmatic dependent
    launch): the kernel may start while the one ahead of it in the stream still runs, once that one's blocks have
    each let it or exited, and waits for that one's writes itself before reading them (``griddepcontrol.wait``:
    ``kernels/wgmma_tf32x3.cu``'s ``wait_for_previous_kernel``). Its start then overlaps the end of that kernel: a
    launch's latency saved where a small kernel (a weights' split) comes before it. Inside a captured CUDA graph the
    dependency becomes a programmatic edge. The configuration is built once; a call sets only the stream."""

    def __init__(self, call: Any):
        self._attribute = _LaunchAttribute(PROGRAMMATIC_STREAM_SERIALIZATION)
        self._attribute.value[0] = 1  # programmaticStreamSerializationAllowed
        grid, block = (*call.grid, 1, 1)[:3], (*call.block, 1, 1)[:3]
        dims = ctypes.c_uint * 3
        self._config = _LaunchConfig(dims(*grid), dims(*block), call.shared, None, ctypes.pointer(self._attribute), 1)
        self._function = ctypes.c_void_p(call.function.ptr)

    def __call__(self, stream: int, params: int) -> None:
        """Launch on ``stream`` (a handle) with the parameter buffer at ``params``."""
        lib = driver_library()
        self._config.stream = stream or None
        status = lib.cuLaunchKernelEx(ctypes.byref(self._config), self._function, ctypes.c_void_p(params), None)
        check(lib, status, "cuLaunchKernelEx")


def max_active_clusters(function: int, grid: tuple[int, ...], block: tuple[int, ...], shared: int) -> int:
    """``cuOccupancyMaxActiveClusters``: the most clusters of the kernel ``function`` (a ``CUfunction``, built with its
    cluster's size, ``__cluster_dims__``, and opted in to ``shared`` bytes of dynamic shared memory) resident on the
    current GPU at once, launched with ``grid``, ``block`` and ``shared``. A cluster's blocks run in one GPC, so the
    count depends on how the GPU's SMs lie in GPCs, not on their number alone."""
    lib = driver_library()
    dims = ctypes.c_uint * 3
    config = _LaunchConfig(dims(*(*grid, 1, 1)[:3]), dims(*(*block, 1, 1)[:3]), shared, None, None, 0)
    count = ctypes.c_int()
    status = lib.cuOccupancyMaxActiveClusters(ctypes.byref(count), ctypes.c_void_p(function), ctypes.byref(config))
    check(lib, status, "cuOccupancyMaxActiveClusters")
    return count.value


@memoize()
def cython_launch() -> Callable[..., None] | None:
    """CuPy's ``launchKernel`` (f, grid x y z, block x y z, shared bytes, stream, parameters, extra), which raises
    CuPy's CUDADriverError naming the failure; None where this CuPy has none."""
    try:
        from cupy_backends.cuda.api.driver import launchKernel
    except ImportError:
        return None
    return launchKernel


def ctypes_launch(function: int, *args: int) -> None:
    """``cuLaunchKernel`` through ctypes, with :func:`cython_launch`'s arguments."""
    lib = driver_library()
    *dims, stream, params, extra = args
    unsigned = (ctypes.c_uint(d) for d in dims)
    status = lib.cuLaunchKernel(ctypes.c_void_p(function), *unsigned, ctypes.c_void_p(stream or None),
                                ctypes.c_void_p(params), ctypes.c_void_p(extra or None))  # fmt: skip
    check(lib, status, "cuLaunchKernel")


def check(lib: Any, status: int, call: str) -> None:
    """Raise RuntimeError naming the driver's error where ``status`` (of ``call``) is one."""
    if status:
        name = ctypes.c_char_p()
        lib.cuGetErrorName(status, ctypes.byref(name))
        raise RuntimeError(f"{call} failed: {(name.value or b'?').decode()} ({status})")
