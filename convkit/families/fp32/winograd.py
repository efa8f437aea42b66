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

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from convkit.core.memo import memoize
from convkit.core.problem import ConvProblem
from convkit.cuda.arrays import check_conv_args, output_for
from convkit.cuda.launch import KernelLaunch
from convkit.cuda.launch import launch as launch_kernel
from convkit.cuda.operands import epilogue_bias, float32_regions, most_images_within, regions_bytes
from convkit.families.fp32.launch import ImplicitGemmLaunch, default_knobs, gemm, tiles_fitting
from convkit.libs.cudnn import WORKSPACE_LIMIT_BYTES

#: The tiles (m, r) the kernels are built for: F(2x2, 3x3), F(4x4, 3x3), F(6x6, 3x3), F(2x2, 5x5) and
#: F(4x4, 5x5). The larger the tile, the fewer the products and the larger the transforms' rounding.
TILES: tuple[tuple[int, int], ...] = ((2, 3), (4, 3), (6, 3), (2, 5), (4, 5))
#: How ``winograd_transforms`` lays V and U out for the products (``kernels/winograd.cu``'s TransformLayout): plain
#: (the implicit GEMMs), the filters split into TF32 planes (the 3xTF32 GEMM reading them presplit), or both split into
#: the split-ahead wgmma kernel's operands (:class:`convkit.families.tf32x3.wgmma_winograd.WgmmaWinogradLaunch`), or its
#: filters split and its inputs one FP32 plane (which that kernel splits as it stages them).
PLAIN, FILTERS_SPLIT, WGMMA_OPERANDS, WGMMA_FP32_INPUTS = 0, 1, 2, 3
#: The most shared memory a ``winograd_output`` block may take: what any GPU gives a block without asking.
OUTPUT_SHARED_LIMIT = 48 * 1024
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


@memoize()
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


@dataclass(frozen=True)
class WinogradLaunch(KernelLaunch):
    """F(m x m, r x r) and the launch of its batched GEMM (``gemm_tile``, ``stages``), as many images a pass
    as fit ``workspace_limit``. The products run on :attr:`gemm_kind`: the FP32 implicit GEMM here, the 3xTF32
    one in :class:`convkit.families.tf32x3.launch.TensorCoreWinogradLaunch`."""

    m: int = 2
    gemm_tile: str = "128x128"
    stages: int = 3
    threads: int = 256
    workspace_limit: int = WORKSPACE_LIMIT_BYTES  # bytes; below it, fewer images a pass (the tests' edge shapes)

    kind: ClassVar[str] = "fp32_winograd"
    knobs: ClassVar[tuple[str, ...]] = ("m", "gemm_tile", "stages")
    source: ClassVar[str] = "winograd"
    #: The kernel of the a*a products (a batch of GEMMs, one a transformed point).
    gemm_kind: ClassVar[type[ImplicitGemmLaunch]] = ImplicitGemmLaunch

    def options(self, problem: ConvProblem) -> tuple[str, ...]:
        return (f"-DCONVKIT_WG_M={self.m}", f"-DCONVKIT_WG_R={problem.r}")

    def tiles(self, problem: ConvProblem) -> tuple[int, int, int, int]:
        """(tiles_h, tiles_w, T, t_pad): output tiles per plane, over the batch, and padded to a float4."""
        th, tw = math.ceil(problem.out_h / self.m), math.ceil(problem.out_w / self.m)
        t = problem.n * th * tw
        return th, tw, t, 4 * math.ceil(t / 4)

    def alpha(self, problem: ConvProblem) -> int:
        return self.m + problem.r - 1

    def gemm_problem(self, problem: ConvProblem) -> ConvProblem:
        """One transformed point's product as a 1x1 convolution: V[xi] (M x C) times U[xi] (C x t_pad)."""
        t_pad = self.tiles(problem)[3]
        return ConvProblem(1, problem.c, 1, t_pad, problem.m, 1, 1)

    def gemm_launch(self, problem: ConvProblem) -> ImplicitGemmLaunch:
        return self.gemm_kind(self.gemm_tile, 1, self.stages, batch=self.alpha(problem) ** 2)

    def can_implement(self, problem: ConvProblem) -> None:
        """Raise ValueError naming what F(m, r) cannot run: another stride, a non-square or unbuilt filter."""
        p = problem
        if p.stride != 1:
            raise ValueError(f"Winograd runs stride 1 only, got stride={p.stride}")
        if p.r != p.s or (self.m, p.r) not in TILES:
            raise ValueError(f"no F({self.m}, {p.r}x{p.s}) kernel; convkit builds {TILES} (m, r)")
        if p.c > 65535 or p.m > 65535:
            raise ValueError("C and M must be at most 65535 (one grid row each)")
        if (staged := self.output_shared_bytes()) > OUTPUT_SHARED_LIMIT:
            raise ValueError(f"threads={self.threads} is too many for F({self.m}): the output transform's tiles "
                             f"need {staged} bytes of shared memory, over {OUTPUT_SHARED_LIMIT}")  # fmt: skip
        if self.images_per_pass(p) < 1:
            need = self.pass_bytes(dataclasses.replace(p, n=1))
            raise ValueError(f"F({self.m}, {p.r}x{p.r}) needs {need} bytes of workspace for one image, over the "
                             f"{self.workspace_limit} every algorithm is allowed (cuDNN's too)")  # fmt: skip
        self.check_products(dataclasses.replace(p, n=self.pass_images(p)))

    def check_products(self, problem: ConvProblem) -> None:
        """Raise ValueError naming what the products' kernel cannot run on one pass of ``problem``'s images."""
        self.gemm_launch(problem).can_implement(self.gemm_problem(problem))

    def enqueue_transforms(self, problem: ConvProblem, w: Any, v: Any, x: Any, u: Any, with_filters: bool) -> None:
        """Enqueue ``winograd_transforms`` on one pass of images (``problem``, ``x`` its images): U from ``x`` into
        ``u``, and (``with_filters``: the first pass) V from ``w`` into ``v``, laid out as :meth:`transform_layout`
        says."""
        import cupy

        p, i32 = problem, cupy.int32
        th, tw, t, t_pad = self.tiles(p)
        filters, _ = self.transform_items(p, with_filters)
        launch_kernel(_TransformLaunch("winograd_transforms", self, with_filters), p,
                      (w, v, x, u, i32(p.m), i32(p.c), i32(p.h), i32(p.w), i32(p.pad), i32(th), i32(tw), i32(t),
                       i32(t_pad), cupy.int64(filters), i32(self.transform_layout())))  # fmt: skip

    def enqueue_products(self, problem: ConvProblem, u: Any, v: Any, prod: Any) -> None:
        """Enqueue the a*a products of one pass of images (``problem``): ``prod[xi] = v[xi] . u[xi]``, as one
        batched GEMM of :attr:`gemm_kind`."""
        t_pad = self.tiles(problem)[3]
        strides = (problem.c * t_pad, problem.m * self.filter_row(problem), problem.m * t_pad)
        gemm(self.gemm_launch(problem), self.gemm_problem(problem), u, v, prod, strides)

    def enqueue_output(self, problem: ConvProblem, prod: Any, y: Any, epilogue: Any) -> None:
        """Enqueue ``winograd_output`` on one pass of images: ``y`` from the products ``prod``, adding ``epilogue``
        (the bias as :func:`~convkit.cuda.operands.epilogue_bias` gives it)."""
        import cupy

        p, i32 = problem, cupy.int32
        th, tw, t, t_pad = self.tiles(p)
        launch_kernel(_TransformLaunch("winograd_output", self), p,
                      (prod, y, i32(p.m), i32(p.out_h), i32(p.out_w), i32(th), i32(tw), i32(t), i32(t_pad),
                       epilogue))  # fmt: skip

    def images_per_pass(self, problem: ConvProblem) -> int:
        """The most images whose transforms and products fit the workspace limit together (at most N; 0 when
        not even one does): a larger batch is transformed and multiplied that many images at a time."""
        return most_images_within(problem, self.pass_bytes, self.workspace_limit)

    def pass_bytes(self, problem: ConvProblem) -> int:
        """Bytes of V, U and the products together, for all of ``problem``'s images at once."""
        return 4 * sum(self.workspace_elements(problem))

    def workspace_bytes(self, problem: ConvProblem) -> int:
        """Bytes of V, U and the products of one pass of images (:meth:`images_per_pass`), each region aligned."""
        return regions_bytes(self.workspace_elements(dataclasses.replace(problem, n=self.pass_images(problem))))

    def pass_images(self, problem: ConvProblem) -> int:
        """Images transformed and multiplied at a time: :meth:`images_per_pass`, at least one."""
        return max(1, self.images_per_pass(problem))

    def adds_bias(self, problem: ConvProblem) -> bool:
        """The output transform adds it."""
        return True

    def workspace_elements(self, problem: ConvProblem) -> tuple[int, int, int]:
        """float32 elements of V (:meth:`filter_elements`), U (:meth:`input_elements`) and the products (points x M
        x t_pad)."""
        points, t_pad = self.alpha(problem) ** 2, self.tiles(problem)[3]
        return self.filter_elements(problem), self.input_elements(problem), points * problem.m * t_pad

    def input_elements(self, problem: ConvProblem) -> int:
        """The transformed inputs U: points x C x t_pad."""
        return self.alpha(problem) ** 2 * problem.c * self.tiles(problem)[3]

    def filter_row(self, problem: ConvProblem) -> int:
        """Floats of a transformed filter's row in V (V[xi][m] holds C of them)."""
        return problem.c

    def filter_elements(self, problem: ConvProblem) -> int:
        """The transformed filters V: points x M x :meth:`filter_row`."""
        return self.alpha(problem) ** 2 * problem.m * self.filter_row(problem)

    def transform_layout(self) -> int:
        """How the transforms lay V and U out for the products: :data:`PLAIN` here."""
        return PLAIN

    def transform_shared_bytes(self, problem: ConvProblem) -> int:
        """Dynamic shared memory of a ``winograd_transforms`` block: none here."""
        return 0

    def output_shared_bytes(self) -> int:
        """Dynamic shared memory of a ``winograd_output`` block: its tiles' m x m outputs on their way to the output's
        rows, and where each tile goes (8 + 4 + 4 bytes)."""
        return self.threads * (self.m * self.m * 4 + 16)

    def transform_items(self, problem: ConvProblem, with_filters: bool = True) -> tuple[int, int]:
        """(filter items, input items) of ``winograd_transforms`` on one pass of ``problem``'s images: a thread each
        per filter and channel (of :meth:`filter_row`; none on a pass after the first: V is made), and per channel
        and padded tile."""
        return (problem.m * self.filter_row(problem) if with_filters else 0), problem.c * self.tiles(problem)[3]


@dataclass(frozen=True)
class _TransformLaunch(KernelLaunch):
    """One of winograd.cu's transform launches: ``winograd_transforms`` (the filters' and the inputs' in one grid,
    :meth:`WinogradLaunch.transform_items`; ``with_filters`` False on a pass after the first) or
    ``winograd_output`` (a thread per filter and tile)."""

    kernel: str
    spec: WinogradLaunch
    with_filters: bool = True
    kind: ClassVar[str] = "fp32_winograd_transform"
    source: ClassVar[str] = "winograd"

    def to_params(self) -> dict[str, Any]:
        return self.spec.to_params()

    def kernel_name(self, problem: ConvProblem) -> str:
        return self.kernel

    def options(self, problem: ConvProblem) -> tuple[str, ...]:
        return self.spec.options(problem)

    def grid(self, problem: ConvProblem) -> tuple[int, ...]:
        threads = self.spec.threads
        if self.kernel == "winograd_transforms":  # grid-stride beyond 65535 blocks
            return (min(math.ceil(sum(self.spec.transform_items(problem, self.with_filters)) / threads), 65535),)
        return math.ceil(self.spec.tiles(problem)[2] / threads), problem.m

    def block(self, problem: ConvProblem) -> tuple[int, ...]:
        return (self.spec.threads,)

    def shared_bytes(self, problem: ConvProblem) -> int:
        if self.kernel == "winograd_transforms":
            return self.spec.transform_shared_bytes(problem)
        return self.spec.output_shared_bytes()

    def can_implement(self, problem: ConvProblem) -> None:
        self.spec.can_implement(problem)


def conv2d_winograd(
    x: Any,
    w: Any,
    *,
    pad: int = 0,
    launch: WinogradLaunch | None = None,
    out: Any = None,
    bias: Any = None,
    workspace: Any = None,
) -> Any:
    """Convolution (cross-correlation, stride 1) of NCHW ``x`` with MCRS ``w`` by Winograd's F(m x m, r x r).

    Args:
        x: float32 ``cupy.ndarray`` (N, C, H, W), C-contiguous.
        w: float32 ``cupy.ndarray`` (M, C, R, R), C-contiguous, R in 3 or 5.
        pad: zero padding on every side.
        launch: the output tile m and the GEMM's launch (its class: the GEMM's kernel); default F(2x2, RxR) on
            128x128 GEMM tiles of the FP32 implicit GEMM.
        out: optional float32 output (N, M, P, Q).
        bias, workspace: as :class:`convkit.cuda.operands.ConvArgs` gives them (the output transform adds the bias;
            the workspace holds one pass's transforms and products).

    Returns:
        the output ``cupy.ndarray``, enqueued on the current stream. Its error is a transform method's.
    """

    problem = check_conv_args(x, w, pad=pad, stride=1)
    spec = launch or WinogradLaunch()
    if not isinstance(spec, WinogradLaunch):
        raise TypeError(f"launch must be a WinogradLaunch, got {type(spec).__name__}")
    spec.can_implement(problem)
    epilogue = epilogue_bias(bias, True, "a Winograd launch")
    out = output_for(out, problem)
    per_pass = spec.images_per_pass(problem)
    v, u, prod = float32_regions(workspace, spec.workspace_elements(dataclasses.replace(problem, n=per_pass)))
    for first in range(0, problem.n, per_pass):  # images in passes that fit the workspace limit
        p = dataclasses.replace(problem, n=min(per_pass, problem.n - first))
        spec.enqueue_transforms(p, w, v, x[first : first + p.n], u, with_filters=first == 0)
        spec.enqueue_products(p, u, v, prod)
        spec.enqueue_output(p, prod, out[first : first + p.n], epilogue)
    return out


def winograd_default(problem: ConvProblem, kind: type[WinogradLaunch] = WinogradLaunch) -> WinogradLaunch:
    """The heuristic launch of ``kind``: F(4x4, 3x3) for 3x3 filters, F(2x2, 5x5) for 5x5; the GEMM on the
    implicit GEMM's heuristic tile for the products of one pass of images."""
    spec = kind(4 if problem.r == 3 else 2)
    gemm = spec.gemm_problem(dataclasses.replace(problem, n=spec.pass_images(problem)))
    return kind(spec.m, default_knobs(gemm, kind=spec.gemm_kind).tile)


def winograd_fits(problem: ConvProblem) -> bool:
    """True where some built tile takes the filter with one image's workspace within the limit."""
    return any(r == problem.r and WinogradLaunch(m).images_per_pass(problem) >= 1 for m, r in TILES)


def winograd_candidates(problem: ConvProblem, kind: type[WinogradLaunch] = WinogradLaunch) -> list[WinogradLaunch]:
    """Launches of ``kind`` a tuning run measures: every built F(m, r) for the filter that fits one image, on
    each GEMM tile that fits the products of one pass."""
    out = [winograd_default(problem, kind)]
    for m, r in TILES:
        per_pass = kind(m).images_per_pass(problem)
        if r == problem.r and per_pass >= 1:
            gemm = kind(m).gemm_problem(dataclasses.replace(problem, n=per_pass))
            out += [kind(m, tile) for tile in tiles_fitting(gemm)]
    return list(dict.fromkeys(out))
