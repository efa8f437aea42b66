"""NVIDIA NPP's 2-D filter, the image-processing library a CUDA user picks first: ``nppiFilter_32f_C1R_Ctx``.

NPP ships with the CUDA toolkit (``libnppif``) and as the ``nvidia-npp-cu12`` / ``nvidia-npp`` wheels; it is
called here through ctypes, its stream context filled by hand (NPP 12.9+ no longer fills one for the caller).

Semantics, as :func:`impulse_response` measures them: ``dst(y, x) = sum_{i,j} kernel[i][j] * src(y + anchor_y
- i, x + anchor_x - j)``, a true convolution of the coefficients as stored (the documentation's "stored in
reverse order") in which coefficient (anchor_y, anchor_x) multiplies the source pixel under the destination
pixel; a cross-correlation with ``w`` passes ``w`` flipped, with the anchor at the centre. The 7x7 path
reads the window's pixels outside the region of interest, as documented; the 3x3 and 5x5 paths do not
(:func:`border_response`), so "same" zero padding takes a grown region: :func:`correlate` says how, and its
copies count in its time (a user needs them too).
"""

from __future__ import annotations

import ctypes
import glob
import os
from typing import Any

from convkit.core.memo import memoize

#: The peer's name in results rows.
IMPL, VARIANT = "npp", "filter"


class NppiSize(ctypes.Structure):
    _fields_ = [("width", ctypes.c_int), ("height", ctypes.c_int)]


class NppiPoint(ctypes.Structure):
    _fields_ = [("x", ctypes.c_int), ("y", ctypes.c_int)]


class NppStreamContext(ctypes.Structure):
    _fields_ = [
        ("hStream", ctypes.c_void_p), ("nCudaDeviceId", ctypes.c_int), ("nMultiProcessorCount", ctypes.c_int),
        ("nMaxThreadsPerMultiProcessor", ctypes.c_int), ("nMaxThreadsPerBlock", ctypes.c_int),
        ("nSharedMemPerBlock", ctypes.c_size_t), ("nCudaDevAttrComputeCapabilityMajor", ctypes.c_int),
        ("nCudaDevAttrComputeCapabilityMinor", ctypes.c_int), ("nStreamFlags", ctypes.c_uint),
        ("nReserved0", ctypes.c_int),
    ]  # fmt: skip


def _candidates() -> list[str]:
    """Where ``libnppif`` may be: the NPP wheels, CuPy's CUDA, the toolkit."""
    found = []
    try:
        import nvidia.npp  # type: ignore[import-not-found]

        for root in nvidia.npp.__path__:
            found += sorted(glob.glob(os.path.join(root, "lib", "libnppif.so*")))
    except ImportError:
        pass
    roots = [os.environ.get("CUDA_PATH", ""), "/usr/local/cuda"]
    try:
        import cupy

        roots.insert(0, cupy.cuda.get_cuda_path() or "")
    except ImportError:
        pass
    for root in filter(None, roots):
        found += sorted(glob.glob(os.path.join(root, "lib64", "libnppif.so*")))
        found += sorted(glob.glob(os.path.join(root, "targets", "*", "lib", "libnppif.so*")))
    return found


@memoize()
def library() -> ctypes.CDLL:
    """``libnppif`` (its ``libnppc`` loaded first); raises OSError naming where it looked."""
    tried = _candidates()
    for path in tried:
        core = path.replace("libnppif", "libnppc")
        try:
            if os.path.exists(core):
                ctypes.CDLL(core, mode=ctypes.RTLD_GLOBAL)
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        lib.nppiFilter_32f_C1R_Ctx.restype = ctypes.c_int
        lib.nppiFilter_32f_C1R_Ctx.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int, NppiSize,
                                               ctypes.c_void_p, NppiSize, NppiPoint, NppStreamContext]  # fmt: skip
        return lib
    raise OSError(f"NPP's libnppif not found (looked at {tried or 'the NPP wheels, CuPy CUDA and /usr/local/cuda'})")


def available() -> bool:
    """Whether NPP's filter library loads here."""
    try:
        library()
        return True
    except OSError:
        return False


@memoize()
def _device_fields(device: int) -> tuple[int, ...]:
    import cupy

    attrs = cupy.cuda.runtime.getDeviceProperties(device)
    return (attrs["multiProcessorCount"], attrs["maxThreadsPerMultiProcessor"], attrs["maxThreadsPerBlock"],
            attrs["sharedMemPerBlock"], attrs["major"], attrs["minor"])  # fmt: skip


def stream_context() -> NppStreamContext:
    """The context of CuPy's current stream and device, filled by hand."""
    import cupy

    device = cupy.cuda.runtime.getDevice()
    stream = cupy.cuda.get_current_stream()
    sms, per_sm, per_block, shared, major, minor = _device_fields(device)
    flags = cupy.cuda.runtime.streamGetFlags(stream.ptr) if stream.ptr else 0
    return NppStreamContext(stream.ptr or None, device, sms, per_sm, per_block, shared, major, minor, flags, 0)


def filter_raw(src: Any, src_step: int, dst: Any, dst_step: int, size: tuple[int, int], kernel: Any,
               ksize: tuple[int, int], anchor: tuple[int, int]) -> None:  # fmt: skip
    """``nppiFilter_32f_C1R_Ctx`` on device pointers (ints): ``size`` and ``ksize`` as (height, width), ``anchor``
    as (y, x), steps in bytes; raises RuntimeError with NPP's status."""
    status = library().nppiFilter_32f_C1R_Ctx(
        src, src_step, dst, dst_step, NppiSize(size[1], size[0]), kernel, NppiSize(ksize[1], ksize[0]),
        NppiPoint(anchor[1], anchor[0]), stream_context(),
    )  # fmt: skip
    if status < 0:
        raise RuntimeError(f"nppiFilter_32f_C1R_Ctx failed with NPP status {status}")


def correlate(x: Any, w: Any, out: Any) -> None:
    """Cross-correlation of a (1, 1, H, W) image with one odd K x K filter, zero "same" padding, into ``out``.

    NPP's 3x3 and 5x5 paths do not read the source outside the region of interest the way the 7x7 path does
    (:func:`border_response`), so the region is grown by a ring of K // 2 pixels: the image goes into a zero
    border of 2 (K // 2), NPP filters the grown region, and the ring is cut away. The copies, the flipped
    filter and the filter are all enqueued, and all timed: a user needs the same steps.
    """
    import cupy

    k = w.shape[-1]
    h, wd = x.shape[-2:]
    half = k // 2
    source = cupy.zeros((h + 4 * half, wd + 4 * half), dtype=cupy.float32)
    source[2 * half : 2 * half + h, 2 * half : 2 * half + wd] = x[0, 0]
    grown = cupy.empty((h + 2 * half, wd + 2 * half), dtype=cupy.float32)
    flipped = cupy.ascontiguousarray(w[0, 0, ::-1, ::-1])
    width = source.shape[1]
    filter_raw(source.data.ptr + (half * width + half) * 4, width * 4, grown.data.ptr, grown.shape[1] * 4,
               grown.shape, flipped.data.ptr, (k, k), (half, half))  # fmt: skip
    out[0, 0] = grown[half : half + h, half : half + wd]


def border_response(k: int, *, size: int = 16) -> dict[str, float]:
    """What NPP makes of a source pixel just outside the region of interest (the row above it): a K x K filter
    of ones over a zero image whose only 1 lies one row above the region, at its middle column. A filter that
    reads its window outside the region (as documented) puts 1s in row 0; returns the sums of the output's
    first row and of the whole output. Needs the GPU."""
    import cupy

    pad = k
    src = cupy.zeros((size + 2 * pad, size + 2 * pad), dtype=cupy.float32)
    src[pad - 1, pad + size // 2] = 1.0
    kernel = cupy.ones((k, k), dtype=cupy.float32)
    dst = cupy.zeros((size, size), dtype=cupy.float32)
    width = src.shape[1]
    filter_raw(src.data.ptr + (pad * width + pad) * 4, width * 4, dst.data.ptr, size * 4, (size, size),
               kernel.data.ptr, (k, k), (k // 2, k // 2))  # fmt: skip
    return {"first_row": float(dst[0].sum()), "total": float(dst.sum())}


def impulse_response(k: int, anchor: tuple[int, int], *, size: int = 32) -> dict[tuple[int, int], float]:
    """Where each coefficient of a K x K kernel (numbered 1..K^2 in row-major order) lands when NPP filters a
    one-hot image (the pixel at the centre, a zero border of K around the region): offset (dy, dx) of the
    output from the impulse -> the coefficient found there. Needs the GPU."""
    import cupy

    pad = k
    src = cupy.zeros((size + 2 * pad, size + 2 * pad), dtype=cupy.float32)
    centre = size // 2
    src[pad + centre, pad + centre] = 1.0
    kernel = cupy.arange(1, k * k + 1, dtype=cupy.float32).reshape(k, k)
    dst = cupy.full((size, size), cupy.nan, dtype=cupy.float32)
    step = src.shape[1] * 4
    filter_raw(src.data.ptr + (pad * src.shape[1] + pad) * 4, step, dst.data.ptr, size * 4, (size, size),
               kernel.data.ptr, (k, k), anchor)  # fmt: skip
    out = cupy.asnumpy(dst)
    ys, xs = out.nonzero()
    return {(int(y) - centre, int(x) - centre): float(out[y, x]) for y, x in zip(ys, xs, strict=True)}
