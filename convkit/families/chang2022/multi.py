"""Chang 2022, section 3.2: the multi-channel launches (the stride-fixed block) and the H100's ranking of them.

``kernels/chang2022.cu`` has three multi-channel kernels, each launched by a frozen dataclass of its
compile-time block and channel split:

- ``chang_multi`` (:class:`TiledMultiLaunch`): the stride-fixed block. :func:`paper_multi_config` gives the
  paper's launch (one pixel per thread on a 32-pixel line, 4-byte copies); the H100's are 2-D tiles of
  4-pixel strips with 16-byte copies and channels split over blocks for small maps, summed in the same launch.
- ``chang_pointwise`` (:class:`PointwiseMultiLaunch`): the stride-fixed block as a GEMM tile at 1x1.
- ``chang_broadcast`` (:class:`BroadcastMultiLaunch`): at 3x3 and 5x5 on maps up to 112x112, a filter's 7x7
  outputs per thread with the input broadcast to a warp's 32 filters.

:func:`ranked_multi_configs` ranks the H100's candidates by a simple cost model (the tuning measures
them all). Everything here is arithmetic, tested on the CPU;
:func:`convkit.families.chang2022.launch.conv2d_multi` launches them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from convkit.core.problem import ConvProblem
from convkit.cuda.launch import KernelLaunch, staged_row_stride
from convkit.families.chang2022.model import BLOCKS_PER_SM, FLOAT_BYTES, WARP, LatencyModel

#: Grid dimensions y and z: at most 65535 blocks each.
MAX_GRID_YZ = 65535


class _ChannelSplit(KernelLaunch):
    """What the multi-channel launches share: their channels in segments of ``ck``, split over ``split``
    blocks per output tile."""

    ck: int
    split: int
    threads: int
    #: The kernel ``to_params`` names beside the fields (None for ``chang_multi``, recorded without one).
    params_kernel: str | None = None
    #: The workspace is the splits' counters: kernel state, zero when a launch starts and left zero.
    zeroed_workspace: ClassVar[bool] = True

    def split_channels(self, problem: ConvProblem) -> int:
        """Channels per split, a multiple of ``ck``."""
        return math.ceil(math.ceil(problem.c / self.split) / self.ck) * self.ck

    def splits(self, problem: ConvProblem) -> int:
        """Splits that get channels (rounding the channels per split up to ``ck`` can leave fewer)."""
        return math.ceil(problem.c / self.split_channels(problem))

    def segments(self, problem: ConvProblem) -> int:
        """Segments of ``ck`` channels a block sums (a double-buffered block of one segment needs one buffer)."""
        return math.ceil(self.split_channels(problem) / self.ck)

    def check_block(self) -> None:
        """Raise ValueError unless the block is whole warps (at most 1024 threads) and ``ck``, ``split`` positive."""
        if self.threads % WARP or self.threads > 1024:
            raise ValueError(f"{self.threads} threads per block: whole warps, at most 1024")
        if self.ck < 1 or self.split < 1:
            raise ValueError("ck and split must be positive")

    # The Launch protocol (convkit.cuda.launch.Launch); each launch gives its grid, threads and shared_bytes_for.

    #: The file under ``kernels/`` that defines the kernels.
    source = "chang2022"

    def block(self, problem: ConvProblem) -> tuple[int, ...]:
        return (self.threads,)

    def shared_bytes(self, problem: ConvProblem) -> int:
        """Dynamic shared memory on ``problem``: its filter size, its block's segments (``shared_bytes_for``)."""
        return self.shared_bytes_for(problem.r, self.segments(problem))

    def to_params(self) -> dict[str, Any]:
        fields = super().to_params()
        return fields if self.params_kernel is None else {"kernel": self.params_kernel, **fields}

    def workspace_bytes(self, problem: ConvProblem) -> int:
        """With ``split`` above 1, three int32 counters per output tile (the splits' coordination, zero before
        and after the launch)."""
        splits = self.splits(problem)
        return 0 if splits == 1 else 4 * 3 * (math.prod(self.grid(problem)) // splits)

    def can_implement(self, problem: ConvProblem) -> None:
        """Raise ValueError if the grid is too large for ``problem``: y and z hold at most 65535 blocks."""
        grid = self.grid(problem)
        if grid[1] > MAX_GRID_YZ or grid[2] > MAX_GRID_YZ:
            raise ValueError(f"grid {grid}: y and z must be at most 65535 (use a larger tile or fewer splits)")


def _min_blocks(threads: int, registers: int = 128) -> int:
    """``__launch_bounds__`` blocks per SM that leave ptxas ``registers`` or more per thread."""
    return max(1, 65536 // (threads * registers))


@dataclass(frozen=True)
class TiledMultiLaunch(_ChannelSplit):
    """Compile-time block of ``chang_multi`` and its channel split.

    Args:
        bm: filters per block (the paper's N_f), a multiple of 8.
        tile_h, tile_w: output rows and pixels per line (P_x) per block.
        rpt: output rows per thread.
        px: adjacent pixels per thread (1: the paper's one pixel per thread; 4).
        ck: channels per segment (8: 32 x K x K bytes of each filter).
        split: blocks sharing one output tile's channels (above 1: the first to start zeroes it, all add).
        rows16: 16-byte copies of input rows where the map width allows.
    """

    kind: ClassVar[str] = "chang_multi_tiled"

    bm: int = 64
    tile_h: int = 1
    tile_w: int = 32
    rpt: int = 1
    px: int = 1
    ck: int = 8
    split: int = 1
    rows16: bool = False

    def __post_init__(self) -> None:
        if self.bm < 8 or self.bm % 8:
            raise ValueError(f"bm must be a positive multiple of 8, got {self.bm!r}")
        if self.px not in (1, 4):
            raise ValueError(f"px must be 1 or 4, got {self.px!r}")
        if self.tile_w % 4 or self.tile_w % self.px or self.tile_h % self.rpt or self.tile_h < 1:
            raise ValueError(f"tile {self.tile_h}x{self.tile_w} must be whole threads of {self.rpt}x{self.px}, "
                             "and 4-wide")  # fmt: skip
        self.check_block()

    @property
    def threads(self) -> int:
        return (self.bm // 8) * (self.tile_h // self.rpt) * (self.tile_w // self.px)

    #: Registers per thread the block is built for (``__launch_bounds__``).
    registers = 128

    @property
    def min_blocks(self) -> int:
        """``__launch_bounds__`` blocks per SM: keeps ptxas at 128 registers or more per thread."""
        return _min_blocks(self.threads)

    def in_stride(self) -> int:
        """Staged input row stride (floats), as the kernel computes it."""
        width = self.tile_w + 8
        return staged_row_stride(width, self.tile_w // 4, self.rpt) if self.px == 4 else width

    def shared_bytes_for(self, k: int, segments: int = 2) -> int:
        """Dynamic shared memory for K x K filters: two stages (one for a block of one segment) of ``ck`` input
        windows and ``ck`` x K x K x (bm + 4) weights."""
        stage = self.ck * (self.tile_h + k - 1) * self.in_stride() + self.ck * k * k * (self.bm + 4)
        return min(2, segments) * stage * FLOAT_BYTES

    def options(self, problem: ConvProblem) -> tuple[str, ...]:
        return (f"-DCM_K={problem.r}", f"-DCM_BM={self.bm}", f"-DCM_TILE_H={self.tile_h}", f"-DCM_TILE_W={self.tile_w}",
                f"-DCM_RPT={self.rpt}", f"-DCM_PX={self.px}", f"-DCM_CK={self.ck}",
                f"-DCM_MIN_BLOCKS={self.min_blocks}")  # fmt: skip

    def grid(self, problem: ConvProblem) -> tuple[int, int, int]:
        return (math.ceil(problem.w / self.tile_w), math.ceil(problem.h / self.tile_h),
                math.ceil(problem.m / self.bm) * self.splits(problem))  # fmt: skip

    def kernel_name(self, problem: ConvProblem) -> str:
        return "chang_multi"

    def kernel_args(self, problem: ConvProblem, x: Any, w: Any) -> tuple[int, ...]:
        """The kernel's integer arguments: 16-byte copies of input rows where the width and ``x`` allow."""
        p = problem
        rows16 = self.rows16 and p.w % 4 == 0 and x.data.ptr % 16 == 0
        return p.c, p.h, p.w, p.m, self.split_channels(p), int(rows16)


#: The paper's P_x: 32 pixels, 128 bytes of a feature-map line.
PAPER_PX = 32
#: Channels per segment: 8 x K x K floats, the paper's 32 bytes at 1x1 and a multiple of 32 bytes for any K.
SEGMENT_CHANNELS = 8
#: N_f cap: 8 filters per thread, 32 pixels per line, 1024 threads.
MAX_PAPER_BM = 256


def paper_multi_config(problem: ConvProblem, model: LatencyModel, *,
                       blocks_per_sm: int = BLOCKS_PER_SM) -> TiledMultiLaunch:  # fmt: skip
    """The paper's section 3.2 rule: S_B = 8 channels (32 bytes at 1x1), P_x = 32 pixels, and the
    smallest N_f (a multiple of 8) with P_x x N_f x S_B/4 x K x K FMAs per segment >= C_FMA per block,
    capped by the half-shared-memory bound (two segments in flight) and by M."""
    k = problem.r
    fma_req = model.fma_requirement_per_sm / blocks_per_sm
    stage_limit = model.figures.shared_bytes_per_sm // blocks_per_sm
    bm = max(8, math.ceil(fma_req / (PAPER_PX * SEGMENT_CHANNELS * k * k) / 8) * 8)
    bm = min(bm, MAX_PAPER_BM, math.ceil(problem.m / 8) * 8)
    while bm > 8 and TiledMultiLaunch(bm=bm).shared_bytes_for(k) > stage_limit:
        bm -= 8
    return TiledMultiLaunch(bm=bm, tile_h=1, tile_w=PAPER_PX, rpt=1, px=1, ck=SEGMENT_CHANNELS)


#: Tiles :func:`multi_config` chooses from, most reuse per staged byte first: (bm, tile_h, tile_w, rpt, ck).
#: Two rows per thread (8 filters x 2 x 4 pixels: each staged weight feeds 8 FMAs, not 4) build without
#: spills at 1x1, 3x3 and 5x5 (118-125 registers, sm_75 and sm_90, NVCC 13). The last four
#: are for maps of a few tiles: small blocks and short segments, so that the channels split over
#: many blocks and each thread's serial share stays small.
MULTI_TILES: tuple[tuple[int, int, int, int, int], ...] = (
    (32, 32, 32, 2, 8), (16, 32, 32, 2, 8), (64, 16, 16, 1, 8), (32, 16, 32, 1, 8), (16, 16, 32, 2, 8),
    (64, 8, 16, 1, 8), (32, 16, 16, 1, 8), (16, 16, 32, 1, 8), (32, 8, 16, 1, 8), (64, 8, 8, 1, 8),
    (32, 8, 8, 1, 8), (16, 8, 8, 1, 8), (32, 8, 8, 1, 4), (16, 8, 8, 1, 4), (8, 8, 16, 1, 4),
)  # fmt: skip


@dataclass(frozen=True)
class PointwiseMultiLaunch(_ChannelSplit):
    """Compile-time block of ``chang_pointwise`` (1x1 filters: the stride-fixed block as a GEMM tile).

    Args:
        bm: filters per block.
        bp: pixels per block, of the flattened H x W map.
        tm, tp: filters and pixels per thread (4 or 8).
        ck: channels per segment (8: the paper's 32 bytes of each filter; 16: 64 bytes).
        split: blocks sharing one output tile's channels (above 1: the first to start zeroes it, all add).
        stages: segments in flight (a ring of shared-memory buffers; the paper double-buffers: 2).
    """

    bm: int = 128
    bp: int = 128
    tm: int = 8
    tp: int = 8
    ck: int = 8
    split: int = 1
    stages: int = 3

    def __post_init__(self) -> None:
        if self.tm not in (4, 8) or self.tp not in (4, 8):
            raise ValueError(f"tm and tp must be 4 or 8, got {self.tm!r} and {self.tp!r}")
        if self.bm % self.tm or self.bp % self.tp or self.bm < 1 or self.bp < 1:
            raise ValueError(f"block {self.bm}x{self.bp} must be whole threads of {self.tm}x{self.tp}")
        self.check_block()
        if self.stages < 2:
            raise ValueError(f"stages must be 2 or more, got {self.stages!r}")

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bp // self.tp)

    @property
    def registers(self) -> int:
        """Registers per thread the block is built for: 128, but an 8 x 8 tile of 128 threads spills there."""
        return 168 if self.tm * self.tp == 64 and self.threads < 256 else 128

    def shared_bytes_for(self, k: int = 1, segments: int | None = None) -> int:
        """Dynamic shared memory (``k`` is 1): ``stages`` buffers (fewer for a block of fewer ``segments``) of
        ``ck`` x ``bp`` pixels and ``ck`` x (``bm`` + 4) weights."""
        buffers = self.stages if segments is None else min(self.stages, segments)
        return buffers * self.ck * (self.bp + self.bm + 4) * FLOAT_BYTES

    def options(self, problem: ConvProblem) -> tuple[str, ...]:
        return (f"-DCP_BM={self.bm}", f"-DCP_BP={self.bp}", f"-DCP_TM={self.tm}", f"-DCP_TP={self.tp}",
                f"-DCP_CK={self.ck}", f"-DCP_STAGES={self.stages}",
                f"-DCP_MIN_BLOCKS={_min_blocks(self.threads, self.registers)}")  # fmt: skip

    def grid(self, problem: ConvProblem) -> tuple[int, int, int]:
        """Filter blocks fastest: the blocks of one pixel tile run together and share it through L2."""
        return math.ceil(problem.m / self.bm), math.ceil(problem.h * problem.w / self.bp), self.splits(problem)

    params_kernel = "pointwise"
    kind: ClassVar[str] = "chang_multi_pointwise"

    def kernel_name(self, problem: ConvProblem) -> str:
        return "chang_pointwise"

    def can_implement(self, problem: ConvProblem) -> None:
        """Raise ValueError for filters larger than 1x1, or a grid too large (:meth:`_ChannelSplit.can_implement`)."""
        if problem.r != 1 or problem.s != 1:
            raise ValueError(f"config {self} is for 1x1 filters; w is {problem.r}x{problem.s}")
        super().can_implement(problem)

    def kernel_args(self, problem: ConvProblem, x: Any, w: Any) -> tuple[int, ...]:
        """The kernel's integer arguments, the pixels flattened: 16-byte copies where P % 4 == 0 and ``x`` allows."""
        p = problem
        vec16 = (p.h * p.w) % 4 == 0 and x.data.ptr % 16 == 0
        return p.c, p.h * p.w, p.m, self.split_channels(p), int(vec16)


#: Tiles of ``chang_pointwise`` the H100 launch chooses from at 1x1: (bm, bp, tm, tp, ck), the
#: 128 x 128 GEMM tile of 8 x 8 per thread down to 4 x 4 per thread and one-warp blocks for layers
#: of a few blocks.
POINTWISE_TILES: tuple[tuple[int, int, int, int, int], ...] = (
    (128, 128, 8, 8, 8), (128, 128, 8, 8, 16), (128, 64, 8, 8, 8), (64, 128, 8, 8, 8), (64, 64, 8, 8, 16),
    (64, 64, 4, 8, 16), (64, 64, 4, 4, 16), (32, 64, 4, 4, 16), (32, 32, 4, 4, 32), (32, 32, 4, 4, 8),
    (16, 32, 4, 4, 4),
)  # fmt: skip


@dataclass(frozen=True)
class BroadcastMultiLaunch(_ChannelSplit):
    """Compile-time block of ``chang_broadcast`` (3x3 and 5x5: a filter per thread, the input broadcast
    to a warp's 32 filters).

    Args:
        filters: filters per block, one per thread of each tile (whole warps).
        tiles: output tiles per block (their warps share the staged weights).
        tile_h, tile_w: outputs per thread: one filter's tile_h x tile_w tile.
        ck: channels per segment, a multiple of 4 (16-byte copies of each filter's segment).
        split: blocks sharing one output tile's channels (above 1: the first to start zeroes it, all add).
    """

    filters: int = 64
    tiles: int = 1
    tile_h: int = 7
    tile_w: int = 7
    ck: int = 4
    split: int = 1

    #: Registers per thread the block is built for (``__launch_bounds__``): 49 accumulators, 25 weights.
    registers = 128

    def __post_init__(self) -> None:
        if self.filters < WARP or self.filters % WARP or self.tiles < 1 or self.threads > 1024:
            raise ValueError(f"filters ({self.filters!r}) must be whole warps and tiles ({self.tiles!r}) positive, "
                             "at most 1024 threads")  # fmt: skip
        if self.tile_h < 1 or self.tile_w < 1 or self.tile_h * self.tile_w > 64:
            raise ValueError(f"tile {self.tile_h}x{self.tile_w}: 1 to 64 outputs per thread")
        if self.ck < 4 or self.ck % 4:
            raise ValueError(f"ck must be a positive multiple of 4, got {self.ck!r}")
        self.check_block()

    @property
    def threads(self) -> int:
        return self.filters * self.tiles

    def in_stride(self, k: int) -> int:
        """Staged input row stride (floats): whole float4s."""
        return math.ceil((self.tile_w + k - 1) / 4) * 4

    def weight_stride(self, k: int) -> int:
        """Staged floats per filter row: the segment, padded to an odd number of float4s."""
        seg = self.ck * k * k
        return seg if (seg // 4) % 2 else seg + 4

    def shared_bytes_for(self, k: int, segments: int = 2) -> int:
        """Dynamic shared memory for K x K filters: two stages (one for a block of one segment) of ``ck`` input
        windows per tile and ``filters`` weight rows; at least the block's sums on their way out (a tile per
        thread, an odd number of floats apart)."""
        windows = self.tiles * self.ck * (self.tile_h + k - 1) * self.in_stride(k)
        stages = min(2, segments) * (windows + self.filters * self.weight_stride(k))
        sums = self.threads * (self.tile_h * self.tile_w | 1)
        return max(stages, sums) * FLOAT_BYTES

    def options(self, problem: ConvProblem) -> tuple[str, ...]:
        return (f"-DCB_K={problem.r}", f"-DCB_FILTERS={self.filters}", f"-DCB_TILES={self.tiles}",
                f"-DCB_TILE_H={self.tile_h}", f"-DCB_TILE_W={self.tile_w}", f"-DCB_CK={self.ck}",
                f"-DCB_MIN_BLOCKS={_min_blocks(self.threads, self.registers)}")  # fmt: skip

    def tile_count(self, problem: ConvProblem) -> int:
        """Output tiles of tile_h x tile_w in the map."""
        return math.ceil(problem.h / self.tile_h) * math.ceil(problem.w / self.tile_w)

    def grid(self, problem: ConvProblem) -> tuple[int, int, int]:
        """Filter blocks fastest: the blocks of one tile run together and share its input through L2."""
        return (
            math.ceil(problem.m / self.filters),
            math.ceil(self.tile_count(problem) / self.tiles),
            self.splits(problem),
        )

    params_kernel = "broadcast"
    kind: ClassVar[str] = "chang_multi_broadcast"

    def kernel_name(self, problem: ConvProblem) -> str:
        return "chang_broadcast"

    def kernel_args(self, problem: ConvProblem, x: Any, w: Any) -> tuple[int, ...]:
        """The kernel's integer arguments: 16-byte pieces of each filter's segment where C % 4 == 0 and ``w``
        allows."""
        p = problem
        vec16 = p.c % 4 == 0 and w.data.ptr % 16 == 0
        return p.c, p.h, p.w, p.m, self.split_channels(p), int(vec16)


#: Blocks of ``chang_broadcast`` the H100 launch chooses from at 3x3 and 5x5: (filters, tiles, tile_h,
#: tile_w, ck); one tile per block for maps of a few tiles, two or four (twice or four times the warps
#: per SM for the same staged weights) for larger maps. The 4 x 7 tiles double the threads on 7x7 and
#: 14x14 maps (an eighth of the rows wasted), so that fewer channel splits, each adding into the output,
#: fill the SMs. The 2 x 7 and 1 x 7 tiles are for the small layers, whose time is the chain of one
#: thread's work (7x7 tiles: 1,764 FMAs a segment at 3x3), not the GPU's throughput.
BROADCAST_TILES: tuple[tuple[int, int, int, int, int], ...] = (
    (128, 1, 7, 7, 4), (64, 1, 7, 7, 4), (32, 1, 7, 7, 4), (64, 1, 7, 7, 8), (64, 2, 7, 7, 4), (32, 4, 7, 7, 4),
    (128, 2, 7, 7, 4), (64, 2, 4, 7, 4), (128, 2, 4, 7, 4), (64, 1, 2, 7, 4), (32, 1, 1, 7, 4),
)  # fmt: skip
#: Maps (in 7x7 tiles) up to which the H100 launch tries ``chang_broadcast``: on 224x224 and 512x512 maps
#: (1024 tiles and more) it ran 4-11% slower than ``chang_multi``'s 16 x 32 tiles with 256 and 512 channels, 18-42%
#: with 64, on the H100.
BROADCAST_MAX_TILES = 256
#: Any of the three launches of the multi-channel kernels.
ChangMultiLaunch = TiledMultiLaunch | PointwiseMultiLaunch | BroadcastMultiLaunch
