"""Winograd's minimal filtering F(m x m, r x r): the transform matrices, exact, and a float64 model.

Toom-Cook on the points ``0, 1, -1, 2, -2, 1/2, -1/2`` (as many as the tile needs) and infinity.
A linear convolution of an m-tap and an r-tap polynomial is ``E_n^-1 [(E_r g) * (E_m h)]``, E_k
evaluating a polynomial of k coefficients at the points (at infinity: its leading coefficient);
correlation is its transpose, so one output tile is ``Y = AT [(G g G^T) * (BT d BT^T)] AT^T`` with
``AT = E_m^T``, ``G = E_r`` and ``BT = E_n^-T``. Each row of ``BT`` is scaled to integers and ``G``'s
row by the inverse (Lavin and Gray's arrangement), which keeps the input transform exact in FP32.
The CUDA kernels (``kernels/winograd.cu``) take these matrices as compile-time constants.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import cache

import numpy as np

#: The tiles (m, r) the kernels are built for: F(2x2, 3x3), F(4x4, 3x3), F(6x6, 3x3), F(2x2, 5x5) and
#: F(4x4, 5x5). The larger the tile, the fewer the products and the larger the transforms' rounding.
TILES: tuple[tuple[int, int], ...] = ((2, 3), (4, 3), (6, 3), (2, 5), (4, 5))
#: The finite interpolation points, in the order tiles take them.
POINTS: tuple[Fraction, ...] = tuple(Fraction(p) for p in (0, 1, -1, 2, -2, Fraction(1, 2), Fraction(-1, 2)))


def _evaluation(points: tuple[Fraction, ...], k: int) -> list[list[Fraction]]:
    """E_k: (len(points) + 1) x k, a k-coefficient polynomial at each point, then its leading coefficient."""
    rows = [[p**j for j in range(k)] for p in points]
    return [*rows, [Fraction(int(j == k - 1)) for j in range(k)]]


def _inverse(a: list[list[Fraction]]) -> list[list[Fraction]]:
    """Exact inverse by Gauss-Jordan elimination."""
    n = len(a)
    aug = [row[:] + [Fraction(int(i == j)) for j in range(n)] for i, row in enumerate(a)]
    for col in range(n):
        pivot = next(r for r in range(col, n) if aug[r][col] != 0)
        aug[col], aug[pivot] = aug[pivot], aug[col]
        inv = 1 / aug[col][col]
        aug[col] = [v * inv for v in aug[col]]
        for r in range(n):
            if r != col and aug[r][col] != 0:
                factor = aug[r][col]
                aug[r] = [v - factor * u for v, u in zip(aug[r], aug[col], strict=True)]
    return [row[n:] for row in aug]


@cache
def matrices(m: int, r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(AT, G, BT) of F(m, r) as float64 arrays: m x a, a x r and a x a for a tile of a = m + r - 1.

    Raises ValueError if the tile needs more points than :data:`POINTS` holds.
    """
    alpha = m + r - 1
    if m < 1 or r < 1 or alpha - 1 > len(POINTS):
        raise ValueError(f"F({m}, {r}) needs {alpha - 1} finite points; convkit has {len(POINTS)}")
    points = POINTS[: alpha - 1]
    at = [list(col) for col in zip(*_evaluation(points, m), strict=True)]
    g = _evaluation(points, r)
    bt = [list(col) for col in zip(*_inverse(_evaluation(points, alpha)), strict=True)]
    for i, row in enumerate(bt):  # integer rows of BT, the scale moved into G
        scale = math.lcm(*(v.denominator for v in row))
        bt[i] = [v * scale for v in row]
        g[i] = [v / scale for v in g[i]]
    return tuple(np.array([[float(v) for v in row] for row in mat]) for mat in (at, g, bt))  # type: ignore[return-value]


def tile_count(p: int, q: int, m: int) -> tuple[int, int]:
    """Output tiles of m x m that cover a P x Q output plane."""
    return math.ceil(p / m), math.ceil(q / m)


def correlate_tile(d: np.ndarray, g: np.ndarray, m: int) -> np.ndarray:
    """One tile by the transforms in float64: the m x m correlation of an a x a input ``d`` with ``g``."""
    at, gm, bt = matrices(m, g.shape[0])
    return at @ ((gm @ g @ gm.T) * (bt @ d @ bt.T)) @ at.T


def cuda_initializer(matrix: np.ndarray) -> str:
    """A C initializer of float literals for a matrix, row by row: ``{{1.0f, 0.0f}, {...}}``."""
    return "{" + ", ".join("{" + ", ".join(f"{float(np.float32(v))!r}f" for v in row) + "}" for row in matrix) + "}"


def kernel_tables() -> str:
    """The preprocessor block of ``kernels/winograd.cu`` that defines WG_AT, WG_G and WG_BT for each of
    :data:`TILES` (the kernel file holds it verbatim; a test keeps the two equal)."""
    blocks = []
    for i, (m, r) in enumerate(TILES):
        at, g, bt = matrices(m, r)
        blocks.append(f"{'#elif' if i else '#if'} CONVKIT_WG_M == {m} && CONVKIT_WG_R == {r}\n"
                      f"#define WG_AT {cuda_initializer(at)}\n#define WG_G {cuda_initializer(g)}\n"
                      f"#define WG_BT {cuda_initializer(bt)}")  # fmt: skip
    unbuilt = '#error "no transform matrices for this F(m, r): see convkit.families.fp32.winograd.TILES"'
    return "\n".join(blocks) + f"\n#else\n{unbuilt}\n#endif\n"
