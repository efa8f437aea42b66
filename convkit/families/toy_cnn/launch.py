"""Launchers for ``kernels/toy_cnn.cu``: Grisett's fused conv 5x5 + bias + ReLU + 2x2 max-pool layer.

The layer: ``out = maxpool2x2(relu(conv(x, w) + bias))`` on a pre-padded single image, valid
convolution. The course lab's instance (:data:`LAB_LAYER`) is 256 -> 256 channels on a 228x228
input (224x224 padded by 2), 256 x 112 x 112 out, 164.4 GFLOP.

Variants, selectable by name (the chapter's Table 2 ladder, then past the report):

- ``v0``: fused baseline, one thread per pooled output, everything from global memory.
- ``v1``: + the input window staged in shared memory (Figure 1's tile size, from the block shape).
- ``v2``: + the 2x2 max-pool unrolled (Figures 3-4).
- ``v3``: + ``const`` index helpers.
- ``v4``: + ``#pragma unroll`` on the 5x5 loops.
- ``tiled``: register tiling (8 channels x 2x4 outputs per thread), weights and input windows staged
  in shared memory through a cp.async double buffer, 16-byte copies, the pool in the epilogue.
- ``unfused`` (not a ladder step): ``tiled``'s convolution written out, then ``bias_relu_pool``:
  what fusion saves.

The report's variants take a ``block`` (x, y, z) and a ``grid`` (x, y, z) at run time, as in its
Table 3 (a :class:`ToyLadderLaunch`); ``tiled`` and ``unfused`` take a :class:`ToyTiledLaunch`
(compile-time tile sizes); ``unfused``'s second kernel is a :class:`ToyEpilogueLaunch`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from convkit.core.gpu import shared_memory_limits
from convkit.core.problem import ConvProblem
from convkit.cuda.arrays import check_conv_args
from convkit.cuda.launch import ElementwiseLaunch, KernelLaunch, staged_row_stride
from convkit.cuda.launch import launch as launch_kernel

KERNEL_SIZE = 5  # the lab's filters
POOL = 2  # 2x2 max-pool, stride 2
#: The course lab's layer: C = M = 256, 228x228 pre-padded input, 5x5 filters, no further padding.
LAB_LAYER = ConvProblem(n=1, c=256, h=228, w=228, m=256, r=KERNEL_SIZE, s=KERNEL_SIZE)
#: Smaller layers of the chapter (pre-padded inputs): 64 and 128 channels, and one no tile divides.
SMALL_LAYERS: tuple[ConvProblem, ...] = (
    ConvProblem(n=1, c=64, h=116, w=116, m=64, r=KERNEL_SIZE, s=KERNEL_SIZE),
    ConvProblem(n=1, c=128, h=60, w=60, m=128, r=KERNEL_SIZE, s=KERNEL_SIZE),
    ConvProblem(n=1, c=48, h=101, w=75, m=40, r=KERNEL_SIZE, s=KERNEL_SIZE),
)
#: The report's ladder (Table 2), in order, then the study's steps past it.
LADDER: tuple[str, ...] = ("v0", "v1", "v2", "v3", "v4")
VARIANTS: tuple[str, ...] = (*LADDER, "tiled", "unfused")
#: The report's best launch (its Table 1): block (16, 8, 4), grid (7, 14, 96).
REPORT_BEST_BLOCK = (16, 8, 4)
REPORT_BEST_GRID = (7, 14, 96)
#: The report's Table 3 on the T4: (grid, block, seconds, GFLOP/s).
REPORT_TABLE3: tuple[tuple[tuple[int, int, int], tuple[int, int, int], float, float], ...] = (
    ((7, 7, 96), (16, 16, 4), 0.098102, 1675.98), ((7, 7, 128), (16, 16, 4), 0.09838, 1671.24),
    ((7, 7, 64), (16, 16, 4), 0.098417, 1670.61), ((7, 7, 256), (16, 16, 2), 0.100585, 1634.6),
    ((7, 7, 128), (16, 16, 2), 0.100996, 1627.95), ((7, 7, 192), (16, 16, 2), 0.101129, 1625.81),
    ((7, 7, 384), (16, 16, 1), 0.110262, 1491.15), ((7, 7, 256), (16, 16, 1), 0.110603, 1486.55),
    ((7, 7, 512), (16, 16, 1), 0.110737, 1484.75),
)  # fmt: skip
#: The report's Table 2 on the T4: variant -> (seconds, GFLOP/s).
REPORT_TABLE2: dict[str, tuple[float, float]] = {
    "v0": (0.468, 351.33), "v1": (0.104, 1577.44), "v2": (0.098, 1679.26),
    "v3": (0.0976, 1684.91), "v4": (0.0977, 1682.32),
}  # fmt: skip
#: The report's Table 1: its best configuration's time (s) and GFLOP/s.
REPORT_TABLE1 = (0.097117, 1692.98)
#: Register cap the tiled kernel is built for: 64 accumulators + 16 inputs + 8 weights fit in 128.
TILED_REGISTERS = 128
_FLOAT = 4


@dataclass(frozen=True)
class ToyTiledLaunch(KernelLaunch):
    """Compile-time tile of ``toy_fused_tiled`` (a :class:`convkit.cuda.launch.Launch`).

    Args:
        bm: output channels per block (a multiple of 8: 8 per thread).
        tile_h: convolution rows per block (a multiple of 2).
        tile_w: convolution columns per block (a multiple of 4).
        ck: input channels per pipeline stage.
        fuse_pool: False builds the plain convolution (``unfused``'s first kernel). Not a knob: the
            variant says it, and :meth:`to_params` leaves it out.
    """

    bm: int = 64
    tile_h: int = 16
    tile_w: int = 16
    ck: int = 4
    fuse_pool: bool = True

    kind: ClassVar[str] = "toy_tiled"
    knobs: ClassVar[tuple[str, ...]] = ("bm", "tile_h", "tile_w", "ck")
    source: ClassVar[str] = "toy_cnn"

    def __post_init__(self) -> None:
        for name, value, multiple in (("bm", self.bm, 8), ("tile_h", self.tile_h, 2), ("tile_w", self.tile_w, 4),
                                      ("ck", self.ck, 1)):  # fmt: skip
            if not isinstance(value, int) or isinstance(value, bool) or value < multiple or value % multiple:
                raise ValueError(f"{name} must be a positive multiple of {multiple}, got {value!r}")
        if self.pixel_threads % 32:
            raise ValueError(f"tile {self.tile_h}x{self.tile_w} gives {self.pixel_threads} threads per channel "
                             "group; it must be a multiple of 32 (one warp, one group)")  # fmt: skip
        if self.threads > 512:
            raise ValueError(f"{self.threads} threads per block; at most 512 keep {TILED_REGISTERS} registers each")

    @property
    def pixel_threads(self) -> int:
        """Threads per channel group: one per 2x4 outputs of the tile."""
        return (self.tile_h // 2) * (self.tile_w // 4)

    @property
    def threads(self) -> int:
        return (self.bm // 8) * self.pixel_threads

    @property
    def min_blocks(self) -> int:
        """Blocks per SM promised to ptxas (``__launch_bounds__``): keeps the register cap at 128."""
        return max(1, 65536 // (self.threads * TILED_REGISTERS))

    @property
    def in_stride(self) -> int:
        """Row stride (floats) of the staged input, as the kernel's ``in_stride()`` computes it."""
        return tiled_in_stride(self.tile_w)

    def kernel_name(self, problem: Any = None) -> str:
        return "toy_fused_tiled"

    def options(self, problem: Any = None) -> tuple[str, ...]:
        """NVRTC ``-D`` options building the kernel for this tile (the same for every problem)."""
        return (f"-DTOY_BM={self.bm}", f"-DTOY_TILE_H={self.tile_h}", f"-DTOY_TILE_W={self.tile_w}",
                f"-DTOY_CK={self.ck}", f"-DTOY_MIN_BLOCKS={self.min_blocks}",
                f"-DTOY_FUSE_POOL={int(self.fuse_pool)}")  # fmt: skip

    def grid(self, problem: ConvProblem) -> tuple[int, int, int]:
        """Blocks: convolution tiles across, down, and output-channel blocks."""
        return (math.ceil(problem.out_w / self.tile_w), math.ceil(problem.out_h / self.tile_h),
                math.ceil(problem.m / self.bm))  # fmt: skip

    def block(self, problem: Any = None) -> tuple[int]:
        return (self.threads,)

    def shared_bytes(self, problem: Any = None) -> int:
        """Dynamic shared memory (the same for every problem): two stages of ``ck`` input windows and
        ``ck`` x 25 x ``bm`` weights."""
        in_floats = (self.tile_h + KERNEL_SIZE - 1) * self.in_stride
        return 2 * self.ck * (in_floats + KERNEL_SIZE * KERNEL_SIZE * self.bm) * _FLOAT

    def can_implement(self, problem: ConvProblem) -> None:
        """The kernel is built for the lab's 5x5 filters; the tile itself was checked when it was made."""
        if (problem.r, problem.s) != (KERNEL_SIZE, KERNEL_SIZE):
            raise ValueError(f"the tiled layer runs 5x5 filters, got {problem.r}x{problem.s}")


@dataclass(frozen=True)
class ToyLadderLaunch(KernelLaunch):
    """The report's launch of a ladder variant ``toy_<variant>``: its (x, y, z) block and grid, chosen at run time
    as in the report's Table 3 (no grid: the report's for the block, :func:`report_grid`). The block's x and y
    cover pooled columns and rows, z output channels; the grid's z strides over the channels."""

    variant: str
    block_shape: tuple[int, int, int] = REPORT_BEST_BLOCK
    grid_shape: tuple[int, int, int] | None = None

    kind: ClassVar[str] = "toy_ladder"
    source: ClassVar[str] = "toy_cnn"

    def to_params(self) -> dict[str, list[int]]:
        """The launch as a results row records it (the variant has its own column)."""
        return {"block": list(self.block_shape)} | ({"grid": list(self.grid_shape)} if self.grid_shape else {})

    @classmethod
    def from_params(cls, params: Mapping[str, Any], **fixed: Any) -> ToyLadderLaunch:
        """The launch recorded as ``params`` (``block`` and ``grid`` as lists), its variant ``fixed``."""
        cls.check_knobs(params, ("block", "grid"))
        grid = tuple(params["grid"]) if "grid" in params else None
        return cls(**fixed, block_shape=tuple(params["block"]), grid_shape=grid)

    def kernel_name(self, problem: Any = None) -> str:
        return f"toy_{self.variant}"

    def options(self, problem: Any = None) -> tuple[str, ...]:
        return ()

    def grid(self, problem: ConvProblem) -> tuple[int, int, int]:
        return self.grid_shape if self.grid_shape is not None else report_grid(problem, self.block_shape)

    def block(self, problem: Any = None) -> tuple[int, int, int]:
        return self.block_shape

    def shared_bytes(self, problem: Any = None) -> int:
        """The staged input window of Figure 1 (``v0`` stages nothing)."""
        if self.variant == "v0":
            return 0
        tile_h, tile_w = shared_tile_shape(self.block_shape)
        return tile_h * tile_w * _FLOAT

    def can_implement(self, problem: ConvProblem) -> None:
        """Raise ValueError naming the block or grid that cannot run (or cannot cover) ``problem``'s layer."""
        if self.variant not in LADDER:
            raise ValueError(f"a ladder launch's variant must be one of {LADDER}, got {self.variant!r}")
        for name, dims in (("block", self.block_shape), ("grid", self.grid_shape or (1, 1, 1))):
            if len(dims) != 3 or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in dims):
                raise ValueError(f"{name} must be three positive ints (x, y, z), got {dims!r}")
        (bx, by, bz), grid = self.block_shape, self.grid(problem)
        if bx * by * bz > 1024 or bz > 64:
            raise ValueError(f"block {self.block_shape} has {bx * by * bz} threads (at most 1024, z at most 64)")
        if grid[2] > 65535 or grid[1] > 65535:
            raise ValueError(f"grid {grid}: y and z must be at most 65535")
        ph, pw = pooled_shape(problem)
        if grid[0] * bx < pw or grid[1] * by < ph:
            covered = f"{grid[0] * bx} x {grid[1] * by}"
            raise ValueError(f"grid {grid} x block {self.block_shape} covers {covered} pooled columns x rows; the "
                             f"output has {pw} x {ph} (only channels are strided over)")  # fmt: skip


@dataclass(frozen=True)
class ToyEpilogueLaunch(ElementwiseLaunch):
    """``unfused``'s second kernel, ``bias_relu_pool``: bias, ReLU and the 2x2 max-pool of a written-out
    convolution, a grid-stride loop over the pooled outputs."""

    kind: ClassVar[str] = "toy_epilogue"
    source: ClassVar[str] = "toy_cnn"
    kernel: ClassVar[str] = "bias_relu_pool"
    max_blocks: ClassVar[int] = 65535 * 8

    def elements(self, problem: ConvProblem) -> int:
        """The pooled outputs."""
        return math.prod(layer_output_shape(problem))


#: Tiles the sweep measures on the H100 (the fastest correct one is the chapter's ``tiled``).
TILED_CANDIDATES: tuple[ToyTiledLaunch, ...] = tuple(ToyTiledLaunch(*knobs) for knobs in (
    (64, 16, 16, 4), (64, 16, 16, 2), (64, 8, 32, 4), (32, 16, 16, 4), (128, 16, 16, 2), (64, 32, 16, 2),
    (64, 32, 16, 4), (32, 32, 16, 4), (32, 32, 32, 2), (64, 16, 32, 2), (32, 16, 32, 4), (16, 32, 32, 4),
))  # fmt: skip


def fitting_tiles() -> list[ToyTiledLaunch]:
    """The :data:`TILED_CANDIDATES` whose stages fit the shared memory a block may have on this GPU (all of them
    on the H100; fewer on a T4's 64 KiB)."""
    limit = shared_memory_limits()[0]
    return [tile for tile in TILED_CANDIDATES if tile.shared_bytes() <= limit]


def default_tile() -> ToyTiledLaunch:
    """The tile ``tiled`` runs with when none is given: the H100's best of :data:`TILED_CANDIDATES`
    (see results/), with fewer channels per stage where the GPU's shared memory is smaller (T4)."""
    per_sm = shared_memory_limits()[1]
    for ck in (4, 2, 1):
        tile = ToyTiledLaunch(64, 16, 16, ck)
        if 2 * tile.shared_bytes() <= per_sm or ck == 1:  # two blocks per SM
            return tile
    raise AssertionError("unreachable")


def tiled_in_stride(tile_w: int) -> int:
    """The kernel's staged-input row stride: conflict-free LDS.128 reads of 2x4-output threads."""
    return staged_row_stride(tile_w + KERNEL_SIZE - 1, tile_w // 4, 2)


def pooled_shape(problem: ConvProblem) -> tuple[int, int]:
    """(rows, columns) of the pooled output: half the valid convolution's, rounded down."""
    return problem.out_h // POOL, problem.out_w // POOL


def layer_output_shape(problem: ConvProblem) -> tuple[int, int, int, int]:
    """(1, M, pooled rows, pooled columns)."""
    return (problem.n, problem.m, *pooled_shape(problem))


def shared_tile_shape(block: Sequence[int]) -> tuple[int, int]:
    """The report's Figure 1: (SHARED_MEM_TILE_HEIGHT, SHARED_MEM_TILE_WIDTH) of a (x, y, z) block."""
    bx, by = block[0], block[1]
    return (by - 1) * POOL + POOL + KERNEL_SIZE - 1, (bx - 1) * POOL + POOL + KERNEL_SIZE - 1


def report_grid(problem: ConvProblem, block: Sequence[int], grid_z: int | None = None) -> tuple[int, int, int]:
    """The grid covering the pooled output with ``block``: pooled columns, rows, and ``grid_z``
    blocks of output channels (default: one pass, ceil(M / block z))."""
    ph, pw = pooled_shape(problem)
    bx, by, bz = block
    return math.ceil(pw / bx), math.ceil(ph / by), grid_z if grid_z is not None else math.ceil(problem.m / bz)


def block_shapes(problem: ConvProblem, *, max_threads: int = 1024) -> list[tuple[int, int, int]]:
    """The wider block sweep (the chapter's heatmap): x and y in 4..32, z in 1..8, at most
    ``max_threads`` threads, the pooled tile no larger than the output."""
    ph, pw = pooled_shape(problem)
    return [(bx, by, bz) for bz in (1, 2, 4, 8) for by in (2, 4, 8, 16, 32) for bx in (4, 8, 16, 32)
            if bx * by * bz <= max_threads and bx <= max(pw, 4) and by <= max(ph, 2)]  # fmt: skip


def check_layer_args(x: Any, w: Any, bias: Any) -> ConvProblem:
    """Validate the layer's arguments (before any launch) and describe its convolution.

    Args:
        x: float32 ``cupy.ndarray`` (1, C, H, W), C-contiguous: one pre-padded image.
        w: float32 ``cupy.ndarray`` (M, C, 5, 5), C-contiguous.
        bias: float32 ``cupy.ndarray`` (M,), contiguous, on the same device.

    Raises:
        TypeError, ValueError: naming the argument at fault.
    """
    import cupy

    problem = check_conv_args(x, w, pad=0, stride=1)
    if problem.n != 1:
        raise ValueError(f"x must hold one image (N = 1) as in the lab, got N = {problem.n}")
    if (problem.r, problem.s) != (KERNEL_SIZE, KERNEL_SIZE):
        raise ValueError(f"w must hold 5x5 filters, got {problem.r}x{problem.s}")
    if min(pooled_shape(problem)) < 1:
        raise ValueError(f"x of {problem.h}x{problem.w} gives no pooled output: each side needs at least 6 pixels")
    if not isinstance(bias, cupy.ndarray):
        raise TypeError(f"bias must be a cupy.ndarray on the GPU, got {type(bias).__module__}.{type(bias).__name__}")
    if bias.dtype != cupy.float32:
        raise TypeError(f"bias must be float32, got {bias.dtype}")
    if bias.shape != (problem.m,) or not bias.flags.c_contiguous:
        raise ValueError(f"bias must be contiguous with shape ({problem.m},), got {bias.shape}")
    if bias.device.id != x.device.id:
        raise ValueError(f"bias is on device {bias.device.id}, x on {x.device.id}")
    p = problem
    if max(p.c * p.h * p.w, p.m * p.c * KERNEL_SIZE**2, p.m * p.out_h * p.out_w) >= 2**31:
        raise ValueError("x, w or the output has 2^31 elements or more; the report's kernels index with int")
    return problem


def _output(out: Any, shape: tuple[int, ...]) -> Any:
    import cupy

    if out is None:
        return cupy.empty(shape, dtype=cupy.float32)
    if not isinstance(out, cupy.ndarray) or out.dtype != cupy.float32:
        raise TypeError("out must be a float32 cupy.ndarray")
    if tuple(out.shape) != shape or not out.flags.c_contiguous:
        raise ValueError(f"out must be C-contiguous with shape {shape}, got {out.shape}")
    return out


def conv_relu_pool(
    x: Any,
    w: Any,
    bias: Any,
    *,
    variant: str = "tiled",
    launch: ToyTiledLaunch | ToyLadderLaunch | None = None,
    out: Any = None,
) -> Any:
    """``maxpool2x2(relu(conv5x5(x, w) + bias))`` on the GPU, in one kernel (``unfused``: two).

    Args:
        x: float32 (1, C, H, W), the pre-padded image (valid convolution).
        w: float32 (M, C, 5, 5).
        bias: float32 (M,).
        variant: one of :data:`VARIANTS`.
        launch: ``v0``..``v4``'s block and grid (a :class:`ToyLadderLaunch` of that variant; default the report's
            best block); ``tiled``'s and ``unfused``'s tile (a :class:`ToyTiledLaunch`; default :func:`default_tile`).
        out: optional float32 (1, M, (H-4)//2, (W-4)//2) output.

    Returns:
        the pooled output, enqueued on the current stream.

    Example:
        >>> y = conv_relu_pool(x, w, b, variant="v2", launch=ToyLadderLaunch("v2", (16, 8, 4)))  # doctest: +SKIP
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    problem = check_layer_args(x, w, bias)
    out = _output(out, layer_output_shape(problem))
    ph, pw = pooled_shape(problem)
    import cupy

    p = problem
    if variant in LADDER:
        spec = launch if launch is not None else ToyLadderLaunch(variant)
        if not isinstance(spec, ToyLadderLaunch) or spec.variant != variant:
            raise TypeError(f"launch must be a ToyLadderLaunch of variant {variant!r}, got {spec!r}")
        spec.can_implement(problem)  # before the output is written
        launch_kernel(spec, p, (x, w, bias, out, *(cupy.int32(v) for v in (p.c, p.h, p.w, p.m, ph, pw))))
        return out
    tile = launch if launch is not None else default_tile()
    if not isinstance(tile, ToyTiledLaunch):
        raise TypeError(f"launch must be a ToyTiledLaunch for {variant!r}, got {type(tile).__name__}")
    if variant == "tiled":
        _launch_tiled(x, w, bias, out, problem, replace(tile, fuse_pool=True))
        return out
    conv = cupy.empty(p.m * p.out_h * p.out_w, dtype=cupy.float32)
    _launch_tiled(x, w, bias, conv, problem, replace(tile, fuse_pool=False))
    launch_kernel(ToyEpilogueLaunch(), p, (conv, bias, out, *(cupy.int32(v) for v in (p.m, p.out_h, p.out_w, ph, pw))))
    return out


def _launch_tiled(x: Any, w: Any, bias: Any, out: Any, problem: ConvProblem, tile: ToyTiledLaunch) -> None:
    import cupy

    p = problem
    oh, ow = pooled_shape(p) if tile.fuse_pool else (p.out_h, p.out_w)
    rows16 = p.w % 4 == 0 and x.data.ptr % 16 == 0  # 16-byte cp.async of whole input rows
    launch_kernel(tile, p, (x, w, bias, out, *(cupy.int32(v) for v in (p.c, p.h, p.w, p.m, oh, ow, int(rows16)))))
