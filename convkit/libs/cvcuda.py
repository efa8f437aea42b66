"""NVIDIA CV-CUDA's 2-D convolution, the image-processing library for GPU pipelines: ``cvcuda.conv2d``.

CV-CUDA ships as the ``cvcuda-cu12`` / ``cvcuda-cu13`` wheels (about 128 MB). Its ``conv2d`` takes a batch of
images of varying shape (``ImageBatchVarShape``), one float kernel per image (as a batch of K x K images) and
each kernel's anchor, (-1, -1) for the centre; the border here is constant zero, which is "same" zero padding.

Semantics, as :func:`impulse_response` measures them: ``dst(y, x) = sum_{i,j} kernel[i][j] * src(y - a_y + i,
x - a_x + j)`` with the anchor at the centre, the cross-correlation OpenCV's ``filter2D`` computes, so a
convolution's filter goes in as it is (:data:`FLIPS` says whether the coefficients are reversed).
"""

from __future__ import annotations

from typing import Any

from convkit.core.memo import memoize

#: The peer's name in results rows (impl ``cvcuda``).
IMPL, VARIANT = "cvcuda", "conv2d"
#: Whether conv2d applies its coefficients reversed (a true convolution); tests/test_image_peers_gpu.py checks it.
FLIPS = False


@memoize()
def available() -> bool:
    """Whether CV-CUDA imports here."""
    try:
        import cvcuda  # noqa: F401
    except Exception:
        return False
    return True


def version() -> str | None:
    """CV-CUDA's version, or None where it does not import."""
    if not available():
        return None
    import cvcuda

    return str(getattr(cvcuda, "__version__", "?"))


def _images(*planes: Any) -> Any:
    """A CV-CUDA batch of single-channel float32 images wrapping CuPy planes (no copy)."""
    import cvcuda

    batch = cvcuda.ImageBatchVarShape(len(planes))
    for plane in planes:
        batch.pushback(cvcuda.as_image(plane, cvcuda.Format.F32))
    return batch


def filter_raw(src: Any, kernel: Any, dst: Any) -> None:
    """``cvcuda.conv2d_into`` of 2-D CuPy planes: ``kernel`` (K x K, as stored), the anchor at its centre, a
    constant zero border, on the current CuPy stream."""
    import cupy
    import cvcuda

    anchor = cvcuda.as_tensor(cupy.full((1, 2), -1, dtype=cupy.int32), "NC")
    stream = cvcuda.as_stream(cupy.cuda.get_current_stream().ptr)
    cvcuda.conv2d_into(_images(dst), _images(src), _images(kernel), anchor, cvcuda.Border.CONSTANT, stream=stream)


def correlate(x: Any, w: Any, out: Any) -> None:
    """Cross-correlation of a (1, 1, H, W) image with one odd K x K filter, zero "same" padding, into ``out``
    (CuPy arrays, contiguous), on the current stream."""
    import cupy

    kernel = cupy.ascontiguousarray(w[0, 0, ::-1, ::-1] if FLIPS else w[0, 0])
    filter_raw(x[0, 0], kernel, out[0, 0])


def impulse_response(k: int, *, size: int = 32) -> dict[tuple[int, int], float]:
    """Where each coefficient of a K x K kernel (numbered 1..K^2 in row-major order) lands when CV-CUDA filters
    a one-hot image (the pixel at the centre): offset (dy, dx) of the output from the impulse -> the
    coefficient found there. Needs the GPU."""
    import cupy

    src = cupy.zeros((size, size), dtype=cupy.float32)
    centre = size // 2
    src[centre, centre] = 1.0
    kernel = cupy.arange(1, k * k + 1, dtype=cupy.float32).reshape(k, k)
    dst = cupy.full((size, size), cupy.nan, dtype=cupy.float32)
    filter_raw(src, kernel, dst)
    out = cupy.asnumpy(dst)
    ys, xs = out.nonzero()
    return {(int(y) - centre, int(x) - centre): float(out[y, x]) for y, x in zip(ys, xs, strict=True)}
