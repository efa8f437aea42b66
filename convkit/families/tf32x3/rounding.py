"""The 3xTF32 split in NumPy, bit for bit as the kernel does it (``cvt.rna.tf32.f32``): for the tests and
the chapter's error analysis.

TF32 keeps FP32's 8 exponent bits and 10 of its 23 mantissa bits. ``cvt.rna`` rounds the 13 dropped bits to
nearest, ties away from zero, which on the sign-magnitude bits is: add half of the dropped range, then clear
it (a carry into the exponent is the correct rounding up to the next binade).
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


def split_tf32(a: Any) -> tuple[np.ndarray, np.ndarray]:
    """(big, small): ``big = tf32(a)``, ``small = tf32(a - big)`` (``a - big`` is exact in float32)."""
    a = np.asarray(a, dtype=np.float32)
    big = round_tf32(a)
    return big, round_tf32(a - big)


def product_tf32x3(a: Any, b: Any) -> np.ndarray:
    """What 3xTF32 forms for ``a * b`` (elementwise, in float64): big*big + big*small + small*big."""
    (ab, as_), (bb, bs) = split_tf32(a), split_tf32(b)
    ab, as_, bb, bs = (v.astype(np.float64) for v in (ab, as_, bb, bs))
    return ab * bb + ab * bs + as_ * bb
