"""Launchers for ``kernels/implicit_gemm.cu`` and ``kernels/winograd.cu``: the FP32 kernels past the papers.

- :func:`conv2d_implicit_gemm`: any filter size, stride and padding, as one implicit GEMM
  (:class:`ImplicitGemmLaunch`: a block tile, a pipeline depth and split-K), plus ``sum_planes``
  (:class:`SplitSumLaunch`) where the reduction is split.
- :func:`conv2d_winograd`: F(m x m, r x r) for stride 1 (:class:`WinogradLaunch`): the filter and input
  transforms, the a*a products as one batched implicit GEMM, the output transform; as many images at a time
  as fit the 1 GiB workspace every algorithm is allowed.

:func:`default_knobs` and :func:`candidates` are each kernel's heuristic and the launches a tuning run
(:mod:`convkit.study.tuning`) measures.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar

from convkit.core.gpu import sm_count
from convkit.core.problem import ConvProblem
from convkit.cuda.arrays import check_conv_args, output_for
from convkit.cuda.launch import ElementwiseLaunch, KernelLaunch
from convkit.cuda.launch import launch as launch_kernel
from convkit.cuda.operands import epilogue_bias, float32_regions, regions_bytes
from convkit.libs.cudnn import WORKSPACE_LIMIT_BYTES

#: Block tiles "BMxBN" (filters x positions): threads = BM * BN / 64 (warps of 32 x 64, 8 x 8 a thread).
TILES: tuple[str, ...] = ("128x128", "128x64", "64x128", "64x64")
#: The reduction's slice depth (BK in the kernel): split points are multiples of it.
SLICE_K = 8
#: Fewest reduction elements one split takes: below this, partial planes cost more than they save.
MIN_K_PER_SPLIT = 32
#: Pipeline depths the kernel builds (shared-memory stages of the cp.async pipeline).
STAGES = (2, 3, 4)
#: Static shared memory a block may use (the kernel's static_assert).
STATIC_SHARED_BYTES = 48 * 1024
#: The kernel computes offsets into x and w, and divides output positions, in 32-bit integers.
MAX_OPERAND_ELEMENTS = 2**31 - 1


def tile_shape(tile: str) -> tuple[int, int, int]:
    """(BM, BN, threads) of a block tile such as ``"128x64"``; raises ValueError naming ``tile``."""
    if tile not in TILES:
        raise ValueError(f"tile must be one of {TILES}, got {tile!r}")
    bm, bn = (int(v) for v in tile.split("x"))
    return bm, bn, bm * bn // 64


def stage_bytes(tile: str) -> int:
    """Shared memory of one pipeline stage: the weight slice (rows padded by 4) and the input slice."""
    bm, bn, _ = tile_shape(tile)
    return 4 * SLICE_K * (bm + 4 + bn)


def vector_width(problem: ConvProblem, aligned: bool = True) -> int:
    """4 where the im2col matrix is the input itself with rows of whole float4s (1x1, stride 1, no
    padding, H*W a multiple of 4, x 16-byte ``aligned``): the kernel then copies 16 bytes of positions
    at a time; else 1."""
    p = problem
    one_by_one = p.r == p.s == 1 and p.stride == 1 and p.pad == 0
    return 4 if one_by_one and aligned and (p.h * p.w) % 4 == 0 else 1


#: Small problems no tile divides, on which the generic GPU test checks every variant (the 3xTF32 kernel's too):
#: batch 1..8, odd sizes, C = 1, M = 1, stride 2, each padding, 1x1 with H*W a multiple of 4 and not, 3x3, 5x5, 7x7.
SAMPLE_PROBLEMS = (
    ConvProblem(1, 7, 13, 11, 5, 3, 3, pad=1), ConvProblem(3, 1, 9, 9, 1, 3, 3, pad=0),
    ConvProblem(2, 19, 16, 16, 33, 1, 1), ConvProblem(1, 5, 7, 9, 70, 1, 1),
    ConvProblem(2, 9, 15, 12, 10, 3, 3, pad=1, stride=2), ConvProblem(8, 3, 12, 12, 4, 5, 5, pad=2),
    ConvProblem(1, 6, 17, 10, 3, 7, 7, pad=3, stride=2), ConvProblem(2, 130, 6, 6, 129, 3, 3, pad=2),
    ConvProblem(1, 11, 5, 5, 7, 5, 5, pad=1), ConvProblem(1, 300, 4, 4, 64, 1, 1),
    ConvProblem(5, 2, 10, 10, 66, 1, 1, stride=2), ConvProblem(4, 17, 14, 14, 24, 3, 3, pad=1),
)  # fmt: skip


def k_per_split(problem: ConvProblem, splits: int, slice_k: int = SLICE_K) -> int:
    """Reduction elements per split: C*R*S / splits rounded up to whole slices of ``slice_k``."""
    k = problem.c * problem.r * problem.s
    return slice_k * math.ceil(math.ceil(k / splits) / slice_k)


@dataclass(frozen=True)
class ImplicitGemmLaunch(KernelLaunch):
    """One launch of ``implicit_gemm`` (a :class:`convkit.cuda.launch.Launch`).

    ``splits`` asks for that many reduction splits; whole slices make it :meth:`effective_splits`.
    ``batch`` independent GEMMs of the same shape run in one launch (Winograd's transformed points);
    ``unaligned`` says x is not 16-byte aligned (4-byte copies then). Neither is a knob, so neither is
    recorded.
    """

    tile: str = "128x128"
    splits: int = 1
    stages: int = 3
    batch: int = 1
    unaligned: bool = False

    kind: ClassVar[str] = "fp32_igemm"
    knobs: ClassVar[tuple[str, ...]] = ("tile", "splits", "stages")
    source: ClassVar[str] = "implicit_gemm"
    #: The kernel's slice depth (BK): split points are multiples of it.
    slice_k: ClassVar[int] = SLICE_K
    #: Whether the kernel takes the op's bias as its last argument and adds it as it stores (the FP32 kernel does
    #: not: at 128 registers its 128x128 tile with 7x7 filters would spill).
    stores_bias: ClassVar[bool] = False

    def kernel_name(self, problem: ConvProblem) -> str:
        return self.source

    def options(self, problem: ConvProblem) -> tuple[str, ...]:
        bm, bn, _ = tile_shape(self.tile)
        macros = {"BM": bm, "BN": bn, "R": problem.r, "S": problem.s, "VEC": vector_width(problem, not self.unaligned),
                  "STAGES": self.stages}  # fmt: skip
        return tuple(f"-DCONVKIT_{k}={v}" for k, v in macros.items())

    def effective_splits(self, problem: ConvProblem) -> int:
        """Splits that each reduce at least one slice (``splits`` rounded to whole slices)."""
        k = problem.c * problem.r * problem.s
        return math.ceil(k / k_per_split(problem, self.splits, self.slice_k))

    def grid(self, problem: ConvProblem) -> tuple[int, ...]:
        bm, bn, _ = tile_shape(self.tile)
        positions = problem.n * problem.out_h * problem.out_w
        return math.ceil(positions / bn), math.ceil(problem.m / bm), self.batch * self.effective_splits(problem)

    def block(self, problem: ConvProblem) -> tuple[int, ...]:
        return (tile_shape(self.tile)[2],)

    def shared_bytes(self, problem: ConvProblem) -> int:
        return 0  # static shared memory

    def workspace_elements(self, problem: ConvProblem) -> int:
        """float32 elements of partial planes (0 when the launch writes the output directly)."""
        splits = self.effective_splits(problem)
        return 0 if splits == 1 else splits * math.prod(problem.output_shape)

    def weight_elements(self, problem: ConvProblem) -> int:
        """float32 elements of the weights as the kernel reads them where :meth:`prepare_weights` rewrites them
        (0: it reads ``w`` itself, as this kernel does)."""
        return 0

    def prepare_weights(self, problem: ConvProblem, w: Any, planes: Any) -> Any:
        """Enqueue what makes the weights the kernel reads into ``planes`` (:meth:`weight_elements` of them) and
        return them; ``w`` itself where the kernel reads it as it is."""
        return w

    def workspace_bytes(self, problem: ConvProblem) -> int:
        """The partial planes and the rewritten weights, float32, each region aligned."""
        return regions_bytes([n for n in (self.workspace_elements(problem), self.weight_elements(problem)) if n])

    def adds_bias(self, problem: ConvProblem) -> bool:
        """Split, the sum of the partial planes adds it; unsplit, the kernel's own store where it takes a bias
        (:attr:`stores_bias`); a batch of GEMMs (Winograd's points) takes none."""
        return self.effective_splits(problem) > 1 or (self.stores_bias and self.batch == 1)

    def check_pipeline(self) -> None:
        """Raise ValueError naming ``stages`` where the kernel builds no such pipeline."""
        if self.stages not in STAGES:
            raise ValueError(f"stages must be one of {STAGES}, got {self.stages!r}")
        if self.stages * stage_bytes(self.tile) > STATIC_SHARED_BYTES:
            raise ValueError(f"stages={self.stages} of tile {self.tile} need more than 48 KiB of shared memory")

    def can_implement(self, problem: ConvProblem) -> None:
        """Raise ValueError naming the knob (or the problem's size) the kernel cannot run."""
        tile_shape(self.tile)
        self.check_pipeline()
        most = math.ceil(problem.c * problem.r * problem.s / self.slice_k)
        if not isinstance(self.splits, int) or not 1 <= self.splits <= most:
            raise ValueError(f"splits must be an int in 1..{most} (C*R*S / {self.slice_k}), got {self.splits!r}")
        if self.batch > 1 and self.effective_splits(problem) > 1:
            raise ValueError("a batch of GEMMs runs unsplit: splits must be 1")
        positions = (problem.n, problem.out_h, problem.out_w)
        for name, shape in (("x", problem.input_shape), ("w", problem.filter_shape), ("N*P*Q", positions)):
            if math.prod(shape) > MAX_OPERAND_ELEMENTS:
                raise ValueError(f"{name} has {math.prod(shape)} elements; the kernel takes at most "
                                 f"{MAX_OPERAND_ELEMENTS}")  # fmt: skip
        if (need := 4 * (self.workspace_elements(problem) + self.weight_elements(problem))) > WORKSPACE_LIMIT_BYTES:
            raise ValueError(f"splits={self.splits} need {need >> 20} MiB of workspace, over the "
                             f"{WORKSPACE_LIMIT_BYTES >> 20} MiB every algorithm is allowed")  # fmt: skip
        grid = self.grid(problem)
        if grid[1] > 65535 or grid[2] > 65535:
            raise ValueError(f"M = {problem.m} filters or {grid[2]} splits x batch exceed the grid's 65535")


@dataclass(frozen=True)
class SplitSumLaunch(ElementwiseLaunch):
    """``sum_planes`` in ``implicit_gemm.cu``: the output as the sum of the split-K partial planes; ``early``:
    launched to start as the split kernel ends (:class:`~convkit.cuda.driver.EarlyLaunch`), waiting for its planes."""

    early: bool | None = None

    kind: ClassVar[str] = "fp32_split_sum"
    source: ClassVar[str] = "implicit_gemm"
    kernel: ClassVar[str] = "sum_planes"
    max_blocks: ClassVar[int] = 65535  # grid-stride beyond

    def starts_early(self, problem: ConvProblem) -> bool:
        return bool(self.early)


def tiles_fitting(problem: ConvProblem) -> list[str]:
    """Tiles that are not mostly padding on ``problem``: BM at most 2M (64 always fits), BN likewise."""
    positions = problem.n * problem.out_h * problem.out_w
    fit = []
    for tile in TILES:
        bm, bn, _ = tile_shape(tile)
        if (bm == 64 or bm <= 2 * problem.m) and (bn == 64 or bn <= 2 * positions):
            fit.append(tile)
    return fit


def tile_blocks(problem: ConvProblem, tile: str) -> int:
    """Blocks of one split: position tiles x filter tiles."""
    return math.prod(ImplicitGemmLaunch(tile).grid(problem)[:2])


def splits_for(
    problem: ConvProblem, tile: str, target_blocks: int, kind: type[ImplicitGemmLaunch] = ImplicitGemmLaunch
) -> int:
    """Splits that bring the tile's grid to about ``target_blocks``, each at least :data:`MIN_K_PER_SPLIT` deep."""
    k = problem.c * problem.r * problem.s
    wanted = math.ceil(target_blocks / tile_blocks(problem, tile))
    splits = max(1, min(wanted, k // MIN_K_PER_SPLIT))
    return kind(tile, splits).effective_splits(problem)


def default_knobs(
    problem: ConvProblem, sms: int = 132, kind: type[ImplicitGemmLaunch] = ImplicitGemmLaunch
) -> ImplicitGemmLaunch:
    """The heuristic launch of ``kind`` (the FP32 kernel's, or a kernel of its design): the largest fitting tile
    that gives every SM a block by itself; else the smallest tile with the reduction split to about four
    blocks an SM."""
    for tile in tiles_fitting(problem):
        if tile_blocks(problem, tile) >= sms:
            return kind(tile)
    tile = "64x64"
    return kind(tile, splits_for(problem, tile, 4 * sms, kind))


def candidates(
    problem: ConvProblem, sms: int = 132, kind: type[ImplicitGemmLaunch] = ImplicitGemmLaunch
) -> list[ImplicitGemmLaunch]:
    """Launches a tuning run measures, the heuristic's first: every fitting tile unsplit (3 and 4 stages
    for the 128x128 tile), and where a tile gives under two waves, split to one, two and four waves."""
    out = [default_knobs(problem, sms, kind)]
    for tile in tiles_fitting(problem):
        out.append(kind(tile))
        if tile == "128x128":
            out.append(kind(tile, stages=4))
        if tile_blocks(problem, tile) < 2 * sms:
            out += [kind(tile, splits_for(problem, tile, waves * sms, kind)) for waves in (1, 2, 4)]
    return list(dict.fromkeys(out))


def conv2d_implicit_gemm(
    x: Any,
    w: Any,
    *,
    pad: int = 0,
    stride: int = 1,
    launch: ImplicitGemmLaunch | None = None,
    out: Any = None,
    bias: Any = None,
    workspace: Any = None,
    kind: type[ImplicitGemmLaunch] = ImplicitGemmLaunch,
) -> Any:
    """Convolution (cross-correlation) of NCHW ``x`` with MCRS ``w`` as one implicit GEMM.

    Args:
        x, w, pad, stride, out: as for :func:`convkit.families.baseline.launch.conv2d_direct`.
        launch: tile, pipeline stages and splits; default :func:`default_knobs` of ``kind``.
        bias, workspace: as :class:`convkit.cuda.operands.ConvArgs` gives them (the bias is added as the output is
            written: by the sum of the partial planes where split, else by a kernel that :attr:`stores_bias`).
        kind: the kernel of this design that runs it where no ``launch`` says (the FP32 one, or 3xTF32's).

    Returns:
        the output ``cupy.ndarray`` (N, M, P, Q), enqueued on the current stream.
    """
    problem = check_conv_args(x, w, pad=pad, stride=stride)
    spec = launch or default_knobs(problem, sm_count(), kind)
    if not isinstance(spec, ImplicitGemmLaunch):
        raise TypeError(f"launch must be an ImplicitGemmLaunch, got {type(spec).__name__}")
    spec.can_implement(problem)  # before anything is allocated or launched
    epilogue = epilogue_bias(bias, spec.adds_bias(problem), f"the {spec.kind} launch {spec.to_params()}")
    out = output_for(out, problem)
    gemm(spec, problem, x, w, out, bias=epilogue, workspace=workspace)
    return out


def gemm_args(spec: ImplicitGemmLaunch, p: ConvProblem, strides: tuple[int, int, int] = (0, 0, 0)) -> tuple[int, ...]:
    """The kernel's integer arguments after its three pointers: the problem's sizes, padding and stride, the
    reduction elements per split and the splits (int), then the batch's strides of x, w and out in floats
    (long long)."""
    return (p.n, p.c, p.h, p.w, p.m, p.out_h, p.out_w, p.pad, p.stride, k_per_split(p, spec.splits, spec.slice_k),
            spec.effective_splits(p), *strides)  # fmt: skip


def gemm(
    spec: ImplicitGemmLaunch,
    p: ConvProblem,
    x: Any,
    w: Any,
    out: Any,
    strides: tuple[int, int, int] = (0, 0, 0),
    *,
    bias: Any = None,
    workspace: Any = None,
) -> None:
    """Enqueue ``spec`` on ``p`` into ``out`` (through partial planes in ``workspace`` and ``sum_planes`` where
    split), adding ``bias`` (a kernel argument from :func:`~convkit.cuda.operands.epilogue_bias`) as the output is
    written: by ``sum_planes``, or by the kernel's store where it :attr:`~ImplicitGemmLaunch.stores_bias`."""
    import cupy

    bias = cupy.uint64(0) if bias is None else bias
    if x.data.ptr % 16:
        spec = dataclasses.replace(spec, unaligned=True)
    splits = spec.effective_splits(p)
    regions = [n for n in (spec.workspace_elements(p), spec.weight_elements(p)) if n]
    carved = float32_regions(workspace, regions) if regions else []
    temp = carved[0] if splits > 1 else out
    if spec.weight_elements(p):
        w = spec.prepare_weights(p, w, carved[-1])
    dims = gemm_args(spec, p, strides)
    own = (bias if splits == 1 else cupy.uint64(0),) if spec.stores_bias else ()  # split: sum_planes adds it
    launch_kernel(spec, p, (x, w, temp, *(cupy.int32(v) for v in dims[:-3]), *(cupy.int64(v) for v in dims[-3:]),
                            *own))  # fmt: skip
    if splits > 1:
        sum_splits(p, temp, out, splits, bias)


def sum_splits(p: ConvProblem, planes: Any, out: Any, splits: int, bias: Any, early: bool | None = None) -> None:
    """Enqueue :class:`SplitSumLaunch` (``early``: launched as the split kernel ends): ``out`` as the sum of the
    ``splits`` partial planes in ``planes`` (each ``out``'s size), ``bias`` added (a kernel argument, from
    :func:`~convkit.cuda.operands.epilogue_bias`)."""
    import cupy

    sums = (planes, out, cupy.int32(splits), cupy.int64(out.size), bias, cupy.int32(p.m), cupy.int64(p.out_h * p.out_w))
    launch_kernel(SplitSumLaunch(early=early), p, sums)


# ---------------------------------------------------------------------------------------------
# Winograd
