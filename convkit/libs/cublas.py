"""The GEMM peer of 1x1 convolutions: cuBLAS SGEMM in true FP32 (TF32 off).

In NCHW a 1x1 convolution at stride 1 without padding is a batch of GEMMs, Y[n] = W . X[n]
(M x C times C x H*W), which cuBLAS runs as one strided-batched SGEMM with no layout transform:
in cuBLAS's column-major terms, Y[n]^T (HW x M) = X[n]^T (HW x C) . W^T (C x M), the filters
shared by every image (stride 0).
"""

from __future__ import annotations

import threading
from typing import Any

from convkit.core.memo import memoize
from convkit.core.problem import ConvProblem
from convkit.cuda.record import enqueue

#: The peer's name in results rows (impl ``cublas``).
IMPL, VARIANT = "cublas", "sgemm"


def supports(problem: ConvProblem) -> bool:
    """True for a 1x1 convolution at stride 1 without padding: a GEMM per image."""
    return problem.r == problem.s == 1 and problem.stride == 1 and problem.pad == 0


def conv1x1(x: Any, w: Any, out: Any) -> None:
    """Enqueue ``out[n] = w . x[n]`` for every image on the current stream (cuBLAS, FP32 math).

    Args:
        x: float32 C-contiguous ``cupy.ndarray`` (N, C, H, W).
        w: float32 C-contiguous ``cupy.ndarray`` (M, C, 1, 1).
        out: float32 C-contiguous ``cupy.ndarray`` (N, M, H, W).
    """
    n, c, h, wd = x.shape
    enqueue(_sgemm, (x, w, out, n, c, h * wd, w.shape[0]))


def _pointer(a: Any) -> int:
    return a if isinstance(a, int) else a.data.ptr


@memoize()
def _scalars() -> tuple[Any, Any]:
    import numpy as np

    return np.ones(1, np.float32), np.zeros(1, np.float32)


def _sgemm_args(handle: int, x: int, w: int, out: int, n: int, c: int, hw: int, m: int) -> tuple[Any, ...]:
    """``sgemmStridedBatched``'s arguments for :func:`conv1x1` on device pointers."""
    from cupy_backends.cuda.libs import cublas

    one, zero = _scalars()
    return (handle, cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, hw, m, c, one.ctypes.data, x, hw, c * hw, w, c, 0,
            zero.ctypes.data, out, hw, m * hw, n)  # fmt: skip


class StridedSgemm:
    """The strided-batched SGEMM of :func:`conv1x1`, as :func:`convkit.cuda.record.enqueue` calls it (arrays or
    device pointers) and as a recorded plan binds it (:meth:`bind`); both on a handle of convkit's own per
    device and stream, set up once (:func:`_handle`), so a call is the one cuBLAS call."""

    def __call__(self, args: tuple[Any, ...], stream: Any = None) -> None:
        import cupy
        from cupy_backends.cuda.libs import cublas

        # CuPy's wrapper, as measured on the GPU: a first (recorded) call runs inside ``with stream``, so the
        # stream it sets the handle to is the one the call was asked for; replays go through ctypes (bind)
        x, w, out, n, c, hw, m = args
        handle = _handle(cupy.cuda.runtime.getDevice(), (stream or cupy.cuda.get_current_stream()).ptr)
        cublas.sgemmStridedBatched(*_sgemm_args(handle, _pointer(x), _pointer(w), _pointer(out), n, c, hw, m))

    def bind(self, template: tuple[Any, ...], slots: tuple[tuple[int, int, int], ...], handle_of: Any = None) -> Any:
        """A replay of this call whose array arguments come from ``slots`` (index, base, byte offset), on the
        device it was recorded on, on the handle ``handle_of(device, stream)`` (default: convkit's own)."""
        import cupy

        device = cupy.cuda.runtime.getDevice()
        handle_of = handle_of or _handle
        x, w, out = (0 if a is None else _pointer(a) for a in template[:3])
        fixed = list(_sgemm_args(0, x, w, out, *template[3:]))
        where = {0: 7, 1: 10, 2: 14}  # x, w and out among sgemmStridedBatched's arguments
        filled = [(where[index], base, offset) for index, base, offset in slots]

        def replay(bases: tuple[int, ...], stream: int) -> None:
            args = fixed.copy()
            args[0] = handle_of(device, stream)  # a handle already on ``stream``
            for index, base, offset in filled:
                args[index] = bases[base] + offset
            _call_sgemm(args)

        return replay


_sgemm = StridedSgemm()


def _handle(device: int, stream: int) -> int:
    """convkit's cuBLAS handle on ``device`` (the current one) for ``stream`` in this thread: cuBLAS handles are
    not for two threads at once (each keeps its workspace), so two threads on one stream get two."""
    return _thread_handle(device, stream, threading.get_ident())


@memoize()
def _thread_handle(device: int, stream: int, thread: int) -> int:
    """convkit's cuBLAS handle on ``device`` (the current one) for ``stream`` and ``thread``, made on first use:
    FP32 math (no TF32 tensor cores), host pointer mode."""
    from cupy_backends.cuda.libs import cublas

    handle = cublas.create()
    cublas.setStream(handle, stream)
    cublas.setMathMode(handle, cublas.CUBLAS_DEFAULT_MATH)
    cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
    return handle


def torch_replay_handle(device: int, stream: int) -> int:
    """The cuBLAS handle a PyTorch replay calls on, on ``stream`` (PyTorch's current one): convkit's own for this
    thread and stream (:func:`_handle`: set up once, so a call is one lookup) where ``stream`` runs eagerly, and
    PyTorch's (:func:`torch_handle`: its workspace, nothing made) while ``stream`` is captured into a CUDA graph.
    Fetching and resetting PyTorch's handle cost 2 to 4 us a call on the H100, the lookup here under 1 us
    (``scripts/host_probe.py``)."""
    from cupy.cuda.runtime import streamIsCapturing

    if stream and streamIsCapturing(stream):
        return torch_handle(device, stream)
    return _handle(device, stream)


def torch_handle(device: int, stream: int) -> int:
    """PyTorch's cuBLAS handle of this thread and ``device``, on its current stream (``stream``) with PyTorch's
    workspace for it, as a captured CUDA graph needs: no handle made and no workspace allocated in a call. Set to
    FP32 math (no TF32, whatever ``torch.backends.cuda.matmul.allow_tf32`` says) and host pointers for each call:
    PyTorch sets its own modes again before its next one."""
    handle = _torch_blas_handle()()
    math_mode, pointer_mode = _raw_modes()
    math_mode(handle, 0)  # CUBLAS_DEFAULT_MATH
    pointer_mode(handle, 0)  # CUBLAS_POINTER_MODE_HOST
    return handle


@memoize()
def _torch_blas_handle() -> Any:
    import torch

    return torch.cuda.current_blas_handle


@memoize()
def _library() -> Any:
    """The cuBLAS this process loaded (CuPy's and PyTorch's: one soname, one copy), through ctypes."""
    import ctypes

    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "/libcublas.so" in line}
    return ctypes.CDLL(sorted(paths)[0] if paths else "libcublas.so")


def _call_sgemm(args: Any) -> None:
    """``cublasSgemmStridedBatched`` on ``args`` (:func:`_sgemm_args`'s), its handle already on its stream."""
    status = _raw_sgemm()(*args)
    if status:
        raise RuntimeError(f"cublasSgemmStridedBatched failed: cublasStatus_t {status}")


@memoize()
def _raw_sgemm() -> Any:
    """``cublasSgemmStridedBatched`` called through ctypes (returns the status): CuPy's wrapper sets the handle's
    stream to CuPy's current one first, and refuses to run while a stream is captured into a CUDA graph; a
    replay's handle is on its stream already."""
    import ctypes

    fn = _library().cublasSgemmStridedBatched
    p, i, ll = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
    fn.argtypes = [p, i, i, i, i, i, p, p, i, ll, p, i, ll, p, p, i, ll, i]
    fn.restype = ctypes.c_int
    return fn


@memoize()
def _raw_modes() -> tuple[Any, Any]:
    """``cublasSetMathMode`` and ``cublasSetPointerMode_v2`` through ctypes (host-side settings, allowed while
    a stream is captured)."""
    import ctypes

    lib = _library()
    math_mode, pointer_mode = lib.cublasSetMathMode, lib.cublasSetPointerMode_v2
    for fn in (math_mode, pointer_mode):
        fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_int], ctypes.c_int
    return math_mode, pointer_mode
