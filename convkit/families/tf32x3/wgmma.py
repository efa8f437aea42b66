"""Launcher for ``kernels/wgmma_tf32x3.cu``'s warp-specialised implicit GEMM in 3xTF32 on Hopper's warpgroup MMA
(sm_90a), and the call that runs it or the first wgmma kernel
(:class:`~convkit.families.tf32x3.wgmma_gemm.WgmmaGemmLaunch`).

:class:`WgmmaWsLaunch` runs ``implicit_gemm_wgmma_ws_tf32x3`` after the weights' split into its tiled layout
(:class:`SplitTiledLaunch`; or with ``weights="split in block"`` on w as given): a producer warpgroup stages K-tiles
ahead of two consumer warpgroups, each stage's turn kept by mbarriers. With ``inputs="split ahead"`` it runs
``implicit_gemm_wgmma_ws_nhwc_tf32x3`` instead, on the input split once per call into channels-last planes and the
weights tiled to match, by one launch (:class:`SplitAheadLaunch`), so that its producer copies rather than gathers.
:func:`conv2d_wgmma_tf32x3` runs either kernel's launch; both are tuning candidates of the variant
(:mod:`~convkit.families.tf32x3.wgmma_settings`; a recorded launch read back by :func:`launch_from_params`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from convkit.core.gpu import sm_count
from convkit.core.problem import ConvProblem
from convkit.cuda.arrays import check_conv_args, output_for
from convkit.cuda.launch import KernelLaunch
from convkit.cuda.launch import launch as launch_kernel
from convkit.cuda.operands import epilogue_bias, float32_regions, most_images_within, regions_bytes
from convkit.families.fp32.launch import MAX_OPERAND_ELEMENTS, sum_splits
from convkit.families.tf32x3.wgmma_gemm import WgmmaGemmLaunch
from convkit.families.tf32x3.wgmma_operands import (
    BLOCK_M,
    MAX_SPLITS,
    NARROW_FILTERS,
    PAIRED_CHANNELS,
    PIXEL_ROW_FILTERS,
    STAGED_ROWS_BYTES,
    TILE_K,
    WS_THREADS,
    WS_WIDTH,
    SplitAheadLaunch,
    SplitTiledLaunch,
    check_problem,
    filter_macros,
    filters_macro,
    input_plane_elements,
    k_tiles,
    k_tiles_a_split,
    tap_pairs_macro,
    tiled_elements,
    ws_stages,
)
from convkit.libs.cudnn import WORKSPACE_LIMIT_BYTES

#: Where the warp-specialised kernel's inputs come from: gathered and split by its producer (None: left out of the
#: recorded params, as before the knob), split ahead once per call into channels-last planes the producer copies, or
#: made channels last in FP32 (one plane: half the bytes), copied, then split by the consumers (``..._INPUTS_FP32``).
WS_INPUTS = (None, "split ahead", "split staged")


#: Where the warp-specialised kernel's weights are split: ahead, into tiled planes (None), or by its consumers
#: into the stages from w as given (``CONVKIT_WS_WEIGHTS_IN_BLOCK``).
WS_WEIGHTS = (None, "split in block")


#: The most blocks a cluster of the gathering kernel's K splits holds: the portable size (run at once, in one GPC).
MAX_CLUSTER = 8


@dataclass(frozen=True)
class WgmmaWsLaunch(KernelLaunch):
    """One launch of ``implicit_gemm_wgmma_ws_tf32x3``: warp-specialised, a producer warpgroup staging K-tiles (the
    weights by one bulk copy, the inputs gathered and split) :data:`WS_STAGES` ahead of two consumer warpgroups' staged
    products, each stage's turn kept by mbarriers; 128 filters by 128 pixels a block. ``schedule`` has one value: it
    tells its recorded params from :class:`WgmmaGemmLaunch`'s. ``in_flight``: a consumer's K-tiles of products running,
    1 or 2 (a K-tile's sums added as the next's products run, in registers the producer gives up). ``inputs``
    (:data:`WS_INPUTS`): None, gathered and split by the producer; ``"split ahead"``, channels last, copied
    (``implicit_gemm_wgmma_ws_nhwc_tf32x3``); ``"split staged"``, channels last in FP32, copied, then split by the
    consumers. ``persistent`` (None: not): a block an SM over the output tiles, its producer staging the next tile as
    its consumers store the last. ``filters`` (None: 128; not with inputs split as staged): 64 a block, each consumer
    multiplying every other K-tile on all 64, their sums then added; or with ``pingpong`` (persistent; None: not) every
    other output tile, one storing as the other multiplies; or 32 or 16 (inputs gathered, for layers of that few
    filters or grids of few tiles) with the block's pixels the products' rows and its filters their columns (N), each
    consumer multiplying its 64 pixels on all the filters. ``splits`` (inputs gathered, a block a tile; None: 1): K
    split over that many blocks a tile (:meth:`effective_splits`), each summing into a plane of partial outputs that
    ``sum_planes`` adds up with the bias, or with ``cluster`` (None: not; at most :data:`MAX_CLUSTER` splits; not at 64
    filters) the splits of a tile one thread-block cluster, whose blocks add their sums through each other's shared
    memory and store them with the bias: no planes, no second kernel (``CONVKIT_WS_CLUSTER``). ``early``
    (None: not): launched to start as the split before it ends (the weights', or with inputs split ahead the operands'),
    its producer waiting for the split's writes before its first copy of them
    (:class:`~convkit.cuda.driver.EarlyLaunch`); with K split, the sum launched as it ends. ``tap_pairs`` (inputs
    channels last, at most 16 channels; None: not): the input's rows 16 channels wide and a K-tile two taps of them,
    where 32 channels at one tap would leave half of each K-tile zeros (``CONVKIT_WS_TAP_PAIRS``). ``producer_halves``
    (inputs gathered; None: not): the producer's halves staging alternate K-tiles, two K-tiles of its loads in flight
    (``CONVKIT_WS_PRODUCER_HALVES``). ``weights`` (:data:`WS_WEIGHTS`; None: split ahead into tiled planes by a launch
    before): ``"split in block"``, w read as given and split by the consumers into the stages (a call one launch: at 16
    or 32 filters, inputs gathered, a block a tile of at most its stages' K-tiles, any K split over a cluster, not
    launched early; ``CONVKIT_WS_WEIGHTS_IN_BLOCK``). ``width`` (None: :data:`WS_WIDTH`, 128): the block's pixels, or 64
    with the inputs split ahead at 64 filters with ping-pong, a layer of few tiles in twice as many
    (``CONVKIT_WS_WIDTH``)."""

    schedule: str = "warp-specialised"
    in_flight: int = 1
    inputs: str | None = None
    persistent: bool | None = None
    filters: int | None = None
    splits: int | None = None
    early: bool | None = None
    pingpong: bool | None = None
    cluster: bool | None = None
    tap_pairs: bool | None = None
    producer_halves: bool | None = None
    weights: str | None = None
    width: int | None = None

    @property
    def block_filters(self) -> int:
        """The filters a block computes."""
        return self.filters or BLOCK_M

    @property
    def block_width(self) -> int:
        """The pixels a block computes."""
        return self.width or WS_WIDTH

    kind: ClassVar[str] = "tf32x3_wgmma_ws"
    source: ClassVar[str] = "wgmma_tf32x3"
    arch: ClassVar[str | None] = "sm_90a"

    def effective_splits(self, problem: ConvProblem) -> int:
        """The splits of K that each take at least one K-tile: ``splits`` K-tiles shared out in whole K-tiles."""
        return math.ceil(k_tiles(problem) / k_tiles_a_split(problem, self.splits or 1))

    @property
    def channels_last(self) -> bool:
        """Whether the inputs are made channels last ahead (split, or in FP32)."""
        return self.inputs in ("split ahead", "split staged")

    @property
    def input_planes(self) -> int:
        """The channels-last input's planes: big and small split ahead, else one in FP32."""
        return 2 if self.inputs == "split ahead" else 1

    def kernel_name(self, problem: ConvProblem) -> str:
        return "implicit_gemm_wgmma_ws_nhwc_tf32x3" if self.channels_last else "implicit_gemm_wgmma_ws_tf32x3"

    def options(self, problem: ConvProblem) -> tuple[str, ...]:
        persistent = ("-DCONVKIT_WS_PERSISTENT=1",) if self.persistent else ()
        fp32 = ("-DCONVKIT_WS_INPUTS_FP32=1",) if self.inputs == "split staged" else ()
        pingpong = ("-DCONVKIT_WS_PINGPONG=1",) if self.pingpong else ()
        cluster = (f"-DCONVKIT_WS_CLUSTER={self.effective_splits(problem)}",) if self.sums_in_cluster(problem) else ()
        halves = ("-DCONVKIT_WS_PRODUCER_HALVES=1",) if self.producer_halves else ()
        in_block = ("-DCONVKIT_WS_WEIGHTS_IN_BLOCK=1",) if self.weights_in_block else ()
        width = (f"-DCONVKIT_WS_WIDTH={self.width}",) if self.width else ()
        return (*filter_macros(problem), f"-DCONVKIT_WS_IN_FLIGHT={self.in_flight}", *persistent,
                *filters_macro(self.block_filters), *fp32, *pingpong, *cluster,
                *tap_pairs_macro(self.tap_pairs), *halves, *in_block, *width)  # fmt: skip

    @property
    def weights_in_block(self) -> bool:
        """Whether the kernel reads w as given and splits it in the block (no split ahead, no tiled planes)."""
        return self.weights == "split in block"

    def sums_in_cluster(self, problem: ConvProblem) -> bool:
        """Whether K is split and its splits' sums added across a cluster (not in planes of partial outputs)."""
        return bool(self.cluster) and self.effective_splits(problem) > 1

    def grid(self, problem: ConvProblem) -> tuple[int, ...]:
        pixel_blocks = math.ceil(problem.n * problem.out_h * problem.out_w / self.block_width)
        m_blocks = math.ceil(problem.m / self.block_filters)
        if self.persistent:
            return (min(pixel_blocks * m_blocks, sm_count()),)
        return (pixel_blocks, m_blocks, self.effective_splits(problem))

    def block(self, problem: ConvProblem) -> tuple[int, ...]:
        return (WS_THREADS,)

    def shared_bytes(self, problem: ConvProblem) -> int:
        """The stages (both operands' two planes, 32 floats a row; at 64 filters or fewer one more), 128 bytes of
        mbarriers, and at 64 filters the second consumer's sums (64 x 128 floats) for the first to add, else (at 128,
        or ping-pong) the consumer warps' rows on their way to the output (:data:`STAGED_ROWS_BYTES`)."""
        narrow = self.block_filters == NARROW_FILTERS
        count = ws_stages(self.block_filters)
        stages = count * (2 * self.block_filters + 2 * self.block_width) * TILE_K * 4
        return stages + 128 + (NARROW_FILTERS * WS_WIDTH * 4 if narrow and not self.pingpong else STAGED_ROWS_BYTES)

    def _regions(self, problem: ConvProblem) -> list[int]:
        if self.weights_in_block:  # (K whole or split over a cluster: no planes either)
            return []
        tiled = tiled_elements(problem, self.channels_last, self.block_filters, bool(self.tap_pairs))
        if self.channels_last:
            return [tiled, self.input_planes * input_plane_elements(problem, bool(self.tap_pairs))]
        splits = self.effective_splits(problem)
        planes = splits > 1 and not self.sums_in_cluster(problem)
        return [tiled, splits * math.prod(problem.output_shape)] if planes else [tiled]

    def workspace_bytes(self, problem: ConvProblem) -> int:
        """The weights split into their tiled planes (:func:`tiled_elements`; none split in the block), and with inputs
        channels last, the input's planes of a pass (:func:`input_plane_elements`; two split ahead, one in FP32), or
        with K split (but over a cluster), the splits' planes of partial outputs."""
        return regions_bytes(self._regions(dataclasses.replace(problem, n=self.pass_images(problem))))

    def pass_images(self, problem: ConvProblem) -> int:
        """Images a pass: with inputs channels last, the batch shared out evenly over the fewest passes whose workspace
        is within the 1 GiB every algorithm is allowed (cuDNN's too; :func:`most_images_within`, one image at least),
        else all."""
        if not self.channels_last:
            return problem.n
        most = most_images_within(problem, lambda p: regions_bytes(self._regions(p)), WORKSPACE_LIMIT_BYTES)
        return math.ceil(problem.n / math.ceil(problem.n / max(1, most)))  # (the batch over the fewest passes)

    @property
    def split_ahead(self) -> SplitAheadLaunch:
        """The launch that splits the inputs ahead, channels last, and the weights with them, as this one reads them."""
        return SplitAheadLaunch(self.input_planes == 2, bool(self.tap_pairs), self.block_filters)

    def operands(self, problem: ConvProblem, x: Any, w: Any, workspace: Any) -> tuple[Any, Any]:
        """Enqueue the splits into ``workspace`` (allocated where None): of ``w`` into its tiled planes (but split in
        the block: ``x`` and ``w`` as given), and with inputs split ahead, of ``x`` into its channels-last planes; the
        kernel's input and weight operands."""
        if self.weights_in_block:
            return x, w
        import cupy

        regions = float32_regions(workspace, self._regions(problem))
        if not self.channels_last:
            k = problem.c * problem.r * problem.s
            split = SplitTiledLaunch(filters=self.block_filters)
            launch_kernel(split, problem, (w, regions[0], cupy.int32(problem.m), cupy.int32(k)))
            return x, regions[0]
        tiled, planes = regions
        sizes = (cupy.int32(v) for v in (problem.n, problem.c, problem.h * problem.w))
        launch_kernel(self.split_ahead, problem, (x, planes, *sizes, w, tiled, cupy.int32(problem.m)))
        return planes, tiled

    def partials(self, problem: ConvProblem, workspace: Any) -> Any:
        """With K split, the splits' planes of partial outputs: ``workspace``'s last region (allocated where None)."""
        import cupy

        if workspace is None:
            return cupy.empty(self._regions(problem)[-1], dtype=cupy.float32)
        return float32_regions(workspace, self._regions(problem))[-1]

    def adds_bias(self, problem: ConvProblem) -> bool:
        return True

    def starts_early(self, problem: ConvProblem) -> bool:
        return bool(self.early)

    def can_implement(self, problem: ConvProblem) -> None:
        """As :func:`check_problem`; ValueError naming ``schedule``, ``in_flight``, ``inputs``, ``persistent``,
        ``filters``, ``splits``, ``early``, ``pingpong``, ``cluster``, ``tap_pairs``, ``producer_halves``, ``weights``
        or ``width`` where the kernel has no such setting (the weights split in the block: where a block has more
        K-tiles than stages, too), a pass's input split ahead where it is past the kernel's 32-bit indices, and the
        splits' partial outputs where they are."""
        if self.schedule != "warp-specialised":
            raise ValueError(f"schedule must be 'warp-specialised', got {self.schedule!r}")
        if self.in_flight not in (1, 2):
            raise ValueError(f"in_flight must be 1 or 2, got {self.in_flight!r}")
        if self.inputs not in WS_INPUTS:
            raise ValueError(f"inputs must be one of {WS_INPUTS}, got {self.inputs!r}")
        if self.persistent not in (None, True):
            raise ValueError(f"persistent must be None or True, got {self.persistent!r}")
        known = self.filters in (None, NARROW_FILTERS, *PIXEL_ROW_FILTERS)
        pixel_rows = self.filters in PIXEL_ROW_FILTERS  # (the gathering kernel alone, no ping-pong)
        staged = self.filters and self.inputs == "split staged"
        if not known or staged or (pixel_rows and (self.inputs or self.pingpong)):
            # (split as staged, both consumers split each stage together: they take every K-tile only at 128)
            raise ValueError(f"filters must be None, 64 with inputs gathered or split ahead, or 16 or 32 with inputs "
                             f"gathered and no ping-pong, got {self.filters!r}")  # fmt: skip
        split = type(self.splits) is int and 2 <= self.splits <= MAX_SPLITS
        if self.splits is not None and not (split and not (self.inputs or self.persistent)):
            raise ValueError(f"splits must be None, or an int in 2..{MAX_SPLITS} with the inputs gathered, a block "
                             f"a tile, got {self.splits!r}")  # fmt: skip
        if self.early not in (None, True):
            raise ValueError(f"early must be None or True, got {self.early!r}")
        narrow_persistent = self.filters == NARROW_FILTERS and self.persistent
        if self.pingpong not in (None, True) or (self.pingpong and not narrow_persistent):
            raise ValueError(f"pingpong must be None, or True at 64 filters, persistent, got {self.pingpong!r}")
        if self.cluster not in (None, True) or (self.cluster and (not self.splits or self.filters == NARROW_FILTERS)):
            raise ValueError(f"cluster must be None, or True with K split (not at 64 filters), got {self.cluster!r}")
        if self.tap_pairs not in (None, True) or (self.tap_pairs and not self.channels_last):
            raise ValueError(f"tap_pairs must be None, or True with the inputs channels last, got {self.tap_pairs!r}")
        # (its loads of two K-tiles in flight hold the producer's registers, which two K-tiles of products need but at
        # 32 filters or fewer; at 64 without ping-pong, its consumers on alternate K-tiles, the kernel's HALVES says why
        # it fails)
        keeps_registers = self.in_flight == 1 or self.filters in PIXEL_ROW_FILTERS
        alternate = self.filters == NARROW_FILTERS and not self.pingpong
        halves_refused = self.inputs or not keeps_registers or alternate
        if self.producer_halves not in (None, True) or (self.producer_halves and halves_refused):
            raise ValueError(f"producer_halves must be None, or True with the inputs gathered, in_flight=1 (or 16 or "
                             f"32 filters) and at 64 filters ping-pong, got {self.producer_halves!r}")  # fmt: skip
        if self.tap_pairs and problem.c > PAIRED_CHANNELS:
            raise ValueError(f"tap_pairs=True takes at most {PAIRED_CHANNELS} channels (a K-tile two taps of them); "
                             f"this layer has c={problem.c}")  # fmt: skip
        a_tile = self.filters in PIXEL_ROW_FILTERS and not (self.inputs or self.persistent or self.early)
        in_block = a_tile and (self.cluster or not self.splits)
        if self.weights not in WS_WEIGHTS or (self.weights_in_block and not in_block):
            raise ValueError(f"weights must be None, or 'split in block' at 16 or 32 filters, the inputs gathered, a "
                             f"block a tile, not early, any K split over a cluster, got {self.weights!r}")  # fmt: skip
        ahead_pingpong = self.inputs == "split ahead" and self.pingpong and not self.tap_pairs
        if self.width not in (None, 64) or (self.width and not ahead_pingpong):
            raise ValueError(f"width must be None, or 64 with the inputs split ahead at 64 filters with ping-pong, "
                             f"got {self.width!r}")  # fmt: skip
        check_problem(problem, self.block_filters)
        if self.weights_in_block and (tiles := k_tiles_a_split(problem, self.effective_splits(problem))) > (
                stages := ws_stages(self.block_filters)):  # fmt: skip
            raise ValueError(f"weights='split in block' takes at most {stages} K-tiles a block (its stages); this "
                             f"layer has {tiles}")  # fmt: skip
        if self.cluster and (splits := self.effective_splits(problem)) > MAX_CLUSTER:
            raise ValueError(f"splits={self.splits} makes {splits} splits of this layer's K; a cluster holds at most "
                             f"{MAX_CLUSTER} blocks (cluster=True)")  # fmt: skip
        planes = 1 if self.sums_in_cluster(problem) else self.effective_splits(problem)
        if (size := planes * math.prod(problem.output_shape)) > MAX_OPERAND_ELEMENTS:
            raise ValueError(f"the splits' partial outputs hold {size} elements; the kernel indexes them under 2^31")
        if self.channels_last:  # (its split, of a pass of images at a time)
            self.split_ahead.can_implement(dataclasses.replace(problem, n=self.pass_images(problem)))


#: Either wgmma kernel's launch.
WgmmaLaunch = WgmmaGemmLaunch | WgmmaWsLaunch


def launch_from_params(params: Mapping[str, Any]) -> WgmmaLaunch:
    """The launch recorded as ``params`` (``to_params`` of either kernel's launch): the warp-specialised one where
    they name its ``schedule``."""
    return (WgmmaWsLaunch if "schedule" in params else WgmmaGemmLaunch).from_params(params)


def conv2d_wgmma_tf32x3(
    x: Any,
    w: Any,
    *,
    pad: int = 0,
    stride: int = 1,
    launch: WgmmaLaunch | None = None,
    out: Any = None,
    bias: Any = None,
    workspace: Any = None,
) -> Any:
    """Convolution (cross-correlation) of NCHW ``x`` with MCRS ``w`` (plus ``bias``) as one implicit GEMM in 3xTF32
    on Hopper's wgmma: FP32 accuracy (within 1e-5 of float64) from TF32 tensor cores. Arguments and result as
    :func:`convkit.families.fp32.launch.conv2d_implicit_gemm`'s; ``launch`` is either kernel's (default
    :class:`WgmmaGemmLaunch`'s defaults); ``workspace`` (uint8, the launch's ``workspace_bytes``) holds the weights
    (and where the launch says so, the inputs) split as that kernel reads them, allocated here where None."""
    import cupy

    problem = check_conv_args(x, w, pad=pad, stride=stride)
    spec = launch or WgmmaGemmLaunch()
    if not isinstance(spec, WgmmaGemmLaunch | WgmmaWsLaunch):
        raise TypeError(f"launch must be a WgmmaGemmLaunch or a WgmmaWsLaunch, got {type(spec).__name__}")
    spec.can_implement(problem)  # before anything is allocated or launched
    epilogue = epilogue_bias(bias, True, f"the {spec.kind} launch {spec.to_params()}")
    out = output_for(out, problem)
    if isinstance(spec, WgmmaWsLaunch) and (images := spec.pass_images(problem)) < problem.n:
        for i in range(0, problem.n, images):  # (the input's planes a pass within the workspace allowed)
            conv2d_wgmma_tf32x3(x[i : i + images], w, pad=pad, stride=stride, launch=spec, out=out[i : i + images],
                                bias=bias, workspace=workspace)  # fmt: skip
        return out
    inputs, weights = spec.operands(problem, x, w, workspace)
    # every kernel takes the same arguments
    sizes = tuple(cupy.int32(v) for v in (problem.n, problem.c, problem.h, problem.w, problem.m, problem.out_h,
                                          problem.out_w, problem.pad, problem.stride))  # fmt: skip
    splits = spec.effective_splits(problem) if isinstance(spec, WgmmaWsLaunch) else 1
    if splits == 1 or spec.sums_in_cluster(problem):  # (a cluster's splits add their sums and the bias themselves)
        launch_kernel(spec, problem, (inputs, weights, epilogue, out, *sizes))
        return out
    partials = spec.partials(problem, workspace)  # K split: each split's plane, then their sum and the bias
    launch_kernel(spec, problem, (inputs, weights, cupy.uint64(0), partials, *sizes))
    sum_splits(problem, partials, out, splits, epilogue, early=spec.early)
    return out


def conv2d_wgmma_ws_tf32x3(x: Any, w: Any, *, launch: WgmmaWsLaunch | None = None, **kwargs: Any) -> Any:
    """:func:`conv2d_wgmma_tf32x3` by the warp-specialised kernel (``launch`` default :class:`WgmmaWsLaunch`'s)."""
    return conv2d_wgmma_tf32x3(x, w, launch=launch or WgmmaWsLaunch(), **kwargs)
