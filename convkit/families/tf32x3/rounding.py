"""The 3xTF32 split in NumPy, bit for bit as the kernel does it: for the tests and the chapter's error analysis.

TF32 keeps FP32's 8 exponent bits and 10 of its 23 mantissa bits. The big part rounds the 13 dropped bits to
nearest, ties away from zero (``cvt.rna.tf32.f32``), which on the sign-magnitude bits is: add half of the
dropped range, then clear it (a carry into the exponent is the correct rounding up to the next binade). The
small part is the rest, ``a - big`` (exact in float32), which the tensor core reads as TF32 by dropping the
same 13 bits: truncated toward zero. Weights split ahead of the loop are split by the same rule: rounding their
small part as well would change nothing but a tie's direction (with big rounded to nearest, what TF32 drops of the
small part is at most half its last place).
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: Mantissa bits TF32 drops from FP32's 23.
DROPPED_BITS = 13


def round_tf32(a: Any) -> np.ndarray:
    """``a`` (float32) rounded to TF32, to nearest with ties away from zero, as float32 (finite values)."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    half, mask = np.uint32(1 << (DROPPED_BITS - 1)), np.uint32((1 << DROPPED_BITS) - 1)
    return ((bits + half) & ~mask).view(np.float32)


def truncate_tf32(a: Any) -> np.ndarray:
    """``a`` (float32) as the tensor core reads it as TF32: the 13 dropped bits cleared (toward zero)."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    return (bits & ~np.uint32((1 << DROPPED_BITS) - 1)).view(np.float32)


def split_tf32(a: Any) -> tuple[np.ndarray, np.ndarray]:
    """(big, small) as the tensor cores see them: ``big = tf32(a)`` rounded to nearest, ``small`` the rest
    (``a - big``, exact in float32) truncated to TF32."""
    a = np.asarray(a, dtype=np.float32)
    big = round_tf32(a)
    return big, truncate_tf32(a - big)


def product_tf32x3(a: Any, b: Any) -> np.ndarray:
    """What 3xTF32 forms for ``a * b`` (elementwise, in float64): big*big + big*small + small*big."""
    (ab, as_), (bb, bs) = split_tf32(a), split_tf32(b)
    ab, as_, bb, bs = (v.astype(np.float64) for v in (ab, as_, bb, bs))
    return ab * bb + ab * bs + as_ * bb
