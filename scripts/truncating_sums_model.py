"""A model of 3xTF32 on tensor cores that truncate as they add, on the CPU (prints; records nothing).

Each k8 product of TF32 parts is exact (two 11-bit significands), and each add into the accumulator rounds toward
zero to FP32, as the H100's wgmma was measured to behave: summed over K in the tensor cores, the error grows with K
(this model: 2.1e-5 at K = 2,304; the H100: 1.6e-5). A K-tile of 32 summed apart and added in FP32 (round to
nearest) is the staged sum of ``kernels/wgmma_tf32x3.cu``; the model compares the order of its 12 products:
interleaved per k-step (small * big, big * small, big * big, as CUTLASS's fast-FP32 GEMM issues them) against the
small products of every k-step first, then big * big (what the kernel issues).
    python3 scripts/truncating_sums_model.py
"""

from __future__ import annotations

import numpy as np

TILE, STEP = 32, 8  # the kernel's K-tile and wgmma k-step


def round_tf32(a: np.ndarray) -> np.ndarray:
    """FP32 rounded to TF32 (10 explicit mantissa bits), ties away from zero, as the kernels split."""
    bits = a.astype(np.float32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


def toward_zero(v: np.ndarray) -> np.ndarray:
    """float64 to FP32, rounded toward zero."""
    f = v.astype(np.float32)
    over = np.abs(f.astype(np.float64)) > np.abs(v)
    f[over] = np.nextafter(f[over], np.float32(0))
    return f


def error(k: int, order: str, tile: int = TILE, m: int = 64, p: int = 256, seed: int = 1) -> float:
    """Norm-wise error against float64 of an M x P x K product of standard normals, each ``tile`` of K summed
    in the tensor cores in ``order`` (``"interleaved"`` or ``"small first"``) and the tiles added in FP32."""
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal((k, p)).astype(np.float32), rng.standard_normal((m, k)).astype(np.float32)
    xb, wb = round_tf32(x), round_tf32(w)
    xs, ws = round_tf32(x - xb), round_tf32(w - wb)
    total = np.zeros((m, p), np.float32)
    for start in range(0, k, tile):
        steps = [slice(s, s + STEP) for s in range(start, min(k, start + tile), STEP)]
        small = [pair for s in steps for pair in ((ws[:, s], xb[s]), (wb[:, s], xs[s]))]
        big = [(wb[:, s], xb[s]) for s in steps]
        if order == "interleaved":
            products = [pair for i in range(len(steps)) for pair in (*small[2 * i : 2 * i + 2], big[i])]
        else:
            products = small + big
        tile_sum = np.zeros((m, p), np.float32)
        for a, b in products:
            tile_sum = toward_zero(tile_sum.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64))
        total = total + tile_sum  # FP32, round to nearest
    exact = w.astype(np.float64) @ x.astype(np.float64)
    return float(np.linalg.norm(total - exact) / np.linalg.norm(exact))


if __name__ == "__main__":
    for k in (288, 1152, 2304, 4608):
        staged = f"interleaved {error(k, 'interleaved'):.2e}, small first {error(k, 'small first'):.2e}"
        print(f"K = {k:5d}: staged, {staged}; summed in the tensor cores {error(k, 'interleaved', tile=k):.2e}")
