"""Lu, Zhang, Wang 2020 (memory transactions): launchers, launch knobs and the chapter's problems.

The kernels are in ``kernels/lu2020.cu``; the warp exchange they run comes from
:func:`convkit.papers.lu2020.warp_sim.exchange_schedule`, which also counts their loads on the CPU.

Single channel (C = 1; any N and M), one kernel per step of the paper:

- ``direct``: one thread per output, every window element a global load (Figure 3a);
- ``column_naive``: column reuse with a lane-dependent index into the thread's window (Figure 3b/c
  as first written);
- ``column``: column reuse with the 64-bit pack/shift of Algorithms 1 and 2 (static indices);
- ``row``: row reuse (Algorithm 3), ``rows`` outputs down a column per thread;
- ``combined``: row reuse over rows gathered by column reuse.

Past the paper, ``wide`` (``lu_wide``, :func:`conv2d_wide`): four output columns per lane from one 16-byte
load per input row, the halo from the neighbouring lanes, and row reuse.

Multi channel: ``lu_multi``, the combined form summed over channels with ``filters`` filters per
thread (:func:`conv2d_multi`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from convkit.core.problem import ConvProblem
from convkit.cuda.arrays import check_conv_args, output_for
from convkit.cuda.launch import KernelLaunch
from convkit.cuda.launch import launch as launch_kernel
from convkit.families.lu2020.exchange import exchange_schedule, schedule_macros

WARP = 32
#: Filter widths the kernels are built and checked for (the paper's 5, and 3 and 7).
FILTER_SIZES = (3, 5, 7)
#: The single-channel kernels in the paper's order (kernel ``lu_<name>``).
SINGLE_VARIANTS = ("direct", "column_naive", "column", "row", "combined")
#: The variants with one output per thread (``rows`` is 1 for them).
ONE_OUTPUT = ("direct", "column_naive", "column")
#: The single-channel kernel past the paper (``lu_wide``), measured beside the ladder.
WIDE = "wide"


def build_options(
    k: int, *, rows: int = 1, warps: int = 4, filters: int = 8, stage_channels: int = 8
) -> tuple[str, ...]:
    """NVRTC options of ``kernels/lu2020.cu`` for a K x K filter and a launch: the exchange schedule
    of :func:`convkit.papers.lu2020.warp_sim.exchange_schedule` and the tile macros."""
    return (*schedule_macros(exchange_schedule(k)), f"-DLU_ROWS={rows}", f"-DLU_WARPS={warps}",
            f"-DLU_FILTERS={filters}", f"-DLU_STAGE_CHANNELS={stage_channels}")  # fmt: skip


def check_problem(problem: ConvProblem, *, single: bool) -> None:
    """Raise ValueError, naming the argument, for a problem the kernels cannot compute.

    Square K x K filters with K in :data:`FILTER_SIZES`, stride 1, any zero padding below K; the
    single-channel kernels need C = 1. Planes are indexed with int: each array under 2^31 elements.
    """
    p = problem
    if p.r != p.s or p.r not in FILTER_SIZES:
        raise ValueError(f"w must hold square 3x3, 5x5 or 7x7 filters, got {p.r}x{p.s}")
    if p.stride != 1:
        raise ValueError(f"stride must be 1 for the Lu 2020 kernels, got {p.stride}")
    if p.pad >= p.r:
        raise ValueError(f"pad must be below the filter width {p.r}, got {p.pad}")
    if single and p.c != 1:
        raise ValueError(f"x must have one channel (C = 1) for the single-channel kernels, got C = {p.c}")
    if max(p.n * p.c * p.h * p.w, p.m * p.c * p.r * p.s, p.n * p.m * p.out_h * p.out_w) >= 2**31:
        raise ValueError("x, w or the output has 2^31 elements or more; the kernels index with int")


def _check_knob(name: str, value: Any, allowed: tuple[int, ...]) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")


class _ColumnLaunch(KernelLaunch):
    """What the single-channel launches share: ``rows`` outputs down a column per thread, ``warps`` per block,
    no dynamic shared memory."""

    rows: int
    warps: int

    knobs: ClassVar[tuple[str, ...]] = ("rows", "warps")
    source: ClassVar[str] = "lu2020"

    def block(self, problem: ConvProblem) -> tuple[int, ...]:
        return WARP, self.warps

    def shared_bytes(self, problem: ConvProblem) -> int:
        return 0


@dataclass(frozen=True)
class LuSingleLaunch(_ColumnLaunch):
    """How a single-channel kernel (``lu_<variant>``) is launched: outputs down a column per thread, warps
    per block (a :class:`convkit.cuda.launch.Launch`). The variant is not a knob: :meth:`to_params` leaves it
    out, as the results rows name it in their own column."""

    variant: str
    rows: int = 8
    warps: int = 4

    kind: ClassVar[str] = "lu_single"

    def kernel_name(self, problem: ConvProblem) -> str:
        return f"lu_{self.variant}"

    def options(self, problem: ConvProblem) -> tuple[str, ...]:
        return build_options(problem.r, rows=self.rows, warps=self.warps)

    def grid(self, problem: ConvProblem) -> tuple[int, ...]:
        p = problem
        return math.ceil(p.out_w / WARP), math.ceil(p.out_h / (self.rows * self.warps)), p.n * p.m

    def can_implement(self, problem: ConvProblem) -> None:
        """Raise ValueError naming the argument or knob the kernel cannot run on ``problem``."""
        if self.variant not in SINGLE_VARIANTS:
            raise ValueError(f"variant must be one of {SINGLE_VARIANTS}, got {self.variant!r}")
        check_problem(problem, single=True)
        _check_knob("launch.rows", self.rows, (1,) if self.variant in ONE_OUTPUT else (1, 2, 4, 8, 16))
        _check_knob("launch.warps", self.warps, (1, 2, 4, 8, 16))


@dataclass(frozen=True)
class LuMultiLaunch(KernelLaunch):
    """How ``lu_multi`` is launched (a :class:`convkit.cuda.launch.Launch`): outputs down a column and filters
    per thread, warps per block, channels whose filters are staged in shared memory at a time."""

    rows: int = 4
    filters: int = 8
    warps: int = 4
    stage_channels: int = 8

    kind: ClassVar[str] = "lu_multi"
    source: ClassVar[str] = "lu2020"

    def kernel_name(self, problem: ConvProblem) -> str:
        return "lu_multi"

    def options(self, problem: ConvProblem) -> tuple[str, ...]:
        return build_options(problem.r, **self.to_params())

    def grid(self, problem: ConvProblem) -> tuple[int, ...]:
        p = problem
        return (math.ceil(p.out_w / WARP), math.ceil(p.out_h / (self.rows * self.warps)),
                p.n * math.ceil(p.m / self.filters))  # fmt: skip

    def block(self, problem: ConvProblem) -> tuple[int, ...]:
        return WARP, self.warps

    def shared_bytes(self, problem: ConvProblem) -> int:
        return 0  # the staged filters are static shared memory

    def can_implement(self, problem: ConvProblem) -> None:
        """Raise ValueError naming the argument or knob the kernel cannot run on ``problem``."""
        check_problem(problem, single=False)
        _check_knob("launch.rows", self.rows, (1, 2, 4, 8))
        _check_knob("launch.filters", self.filters, (4, 8, 12, 16))
        _check_knob("launch.warps", self.warps, (1, 2, 4, 8))
        _check_knob("launch.stage_channels", self.stage_channels, (1, 2, 4, 8, 16))


def single_candidates(variant: str) -> list[LuSingleLaunch]:
    """The launches a tuning run measures for ``variant``: warps per block, and outputs per thread
    for the row-reuse kernels."""
    rows = (1,) if variant in ONE_OUTPUT else (2, 4, 8, 16)
    return [LuSingleLaunch(variant, r, w) for r in rows for w in (2, 4, 8)]


def default_single(variant: str) -> LuSingleLaunch:
    """The untuned launch: 4 warps; 8 outputs per thread where the kernel reuses rows."""
    return LuSingleLaunch(variant, 1 if variant in ONE_OUTPUT else 8, 4)


#: ``lu_multi`` tiles that stay within 128 registers at 3x3 (rows x filters accumulators at most 64).
MULTI_CANDIDATES = tuple(LuMultiLaunch(r, f, w) for r, f in ((2, 8), (2, 16), (4, 8), (4, 16), (8, 8)) for w in (2, 4))


def conv2d_single(
    x: Any,
    w: Any,
    *,
    pad: int,
    variant: str | None = None,
    launch: LuSingleLaunch | None = None,
    out: Any = None,
) -> Any:
    """Single-channel convolution (N, 1, H, W) x (M, 1, K, K) -> (N, M, P, Q) with one of the paper's kernels.

    Args:
        x: float32 ``cupy.ndarray`` (N, 1, H, W), C-contiguous.
        w: float32 ``cupy.ndarray`` (M, 1, K, K), K in 3, 5, 7.
        pad: zero padding on every side, below K (``(K - 1) // 2`` keeps the size).
        variant: one of :data:`SINGLE_VARIANTS`; default the launch's, else ``"combined"``.
        launch: outputs per thread (1 for :data:`ONE_OUTPUT`) and warps per block; default
            :func:`default_single` of the variant.
        out: optional float32 output (N, M, P, Q).

    Example:
        >>> y = conv2d_single(x, w, pad=2, launch=LuSingleLaunch("combined", 8, 4))  # doctest: +SKIP
    """
    import cupy

    if variant is None:
        variant = launch.variant if isinstance(launch, LuSingleLaunch) else "combined"
    if variant not in SINGLE_VARIANTS:
        raise ValueError(f"variant must be one of {SINGLE_VARIANTS}, got {variant!r}")
    problem = check_conv_args(x, w, pad=pad, stride=1)
    spec = launch if launch is not None else default_single(variant)
    if not isinstance(spec, LuSingleLaunch):
        raise TypeError(f"launch must be a LuSingleLaunch, got {type(spec).__name__}")
    if spec.variant != variant:
        raise ValueError(f"launch.variant is {spec.variant!r} but variant is {variant!r}")
    spec.can_implement(problem)  # before anything is allocated
    out = output_for(out, problem)
    p = problem
    launch_kernel(spec, p, (x, w, out, *(cupy.int32(v) for v in (p.h, p.w, p.m, p.out_h, p.out_w, p.pad))))
    return out


@dataclass(frozen=True)
class LuWideLaunch(_ColumnLaunch):
    """How ``lu_wide`` is launched (a :class:`convkit.cuda.launch.Launch`): four output columns per lane, ``rows``
    down, ``warps`` per block. Past the paper: 16-byte loads and the halo from the neighbouring lanes
    (``kernels/lu2020.cu``)."""

    rows: int = 8
    warps: int = 4

    kind: ClassVar[str] = "lu_wide"

    def kernel_name(self, problem: ConvProblem) -> str:
        return "lu_wide"

    def options(self, problem: ConvProblem) -> tuple[str, ...]:
        return (*build_options(problem.r, rows=self.rows, warps=self.warps), f"-DLU_WIDE_PAD={problem.pad}")

    def grid(self, problem: ConvProblem) -> tuple[int, ...]:
        p = problem
        return math.ceil(p.out_w / (4 * WARP)), math.ceil(p.out_h / (self.rows * self.warps)), p.n * p.m

    def can_implement(self, problem: ConvProblem) -> None:
        """Raise ValueError naming the argument or knob the kernel cannot run on ``problem``."""
        check_problem(problem, single=True)
        if not wide_halo_fits(problem):
            raise ValueError(f"pad must leave at most 4 halo columns on each side, got pad={problem.pad} for "
                             f"{problem.r}x{problem.r}")  # fmt: skip
        _check_knob("launch.rows", self.rows, (1, 2, 4, 8, 16))
        _check_knob("launch.warps", self.warps, (1, 2, 4, 8, 16))

    def kernel_args(self, problem: ConvProblem, x: Any, out: Any) -> tuple[int, ...]:
        """(H, W, M, P, Q, pad, vec): ``vec`` 1 where rows and both arrays allow 16-byte loads and stores."""
        p = problem
        vec = p.w % 4 == 0 and p.out_w % 4 == 0 and x.data.ptr % 16 == 0 and out.data.ptr % 16 == 0
        return p.h, p.w, p.m, p.out_h, p.out_w, p.pad, int(vec)


def wide_halo_fits(problem: ConvProblem) -> bool:
    """Whether ``lu_wide``'s halo comes from the neighbouring lanes: at most 4 columns on each side of a lane's
    four (every "same" padding of the chapter's filters)."""
    return problem.pad <= 4 and problem.r - 1 - problem.pad <= 4


#: The launches a tuning run measures for ``lu_wide``: rows per thread and warps per block.
WIDE_CANDIDATES = tuple(LuWideLaunch(r, w) for r in (2, 4, 8, 16) for w in (1, 2, 4, 8))


def conv2d_wide(x: Any, w: Any, *, pad: int, launch: LuWideLaunch | None = None, out: Any = None) -> Any:
    """Single-channel convolution (N, 1, H, W) x (M, 1, K, K) -> (N, M, P, Q) with ``lu_wide``.

    Args:
        x: float32 ``cupy.ndarray`` (N, 1, H, W), C-contiguous.
        w: float32 ``cupy.ndarray`` (M, 1, K, K), K in 3, 5, 7.
        pad: zero padding on every side, at most 4 and at least K - 5 (every "same" padding).
        launch: rows per thread and warps per block; default :class:`LuWideLaunch`.
        out: optional float32 output (N, M, P, Q).
    """
    import cupy

    problem = check_conv_args(x, w, pad=pad, stride=1)
    spec = launch if launch is not None else LuWideLaunch()
    spec.can_implement(problem)  # before anything is allocated
    out = output_for(out, problem)
    launch_kernel(spec, problem, (x, w, out, *(cupy.int32(v) for v in spec.kernel_args(problem, x, out))))
    return out


def conv2d_multi(x: Any, w: Any, *, pad: int, launch: LuMultiLaunch | None = None, out: Any = None) -> Any:
    """Multi-channel convolution (N, C, H, W) x (M, C, K, K) -> (N, M, P, Q) with ``lu_multi``.

    Args:
        x: float32 ``cupy.ndarray`` (N, C, H, W), C-contiguous.
        w: float32 ``cupy.ndarray`` (M, C, K, K), K in 3, 5, 7.
        pad: zero padding on every side, below K.
        launch: the tile; default :class:`LuMultiLaunch`.
        out: optional float32 output (N, M, P, Q).
    """
    import cupy

    problem = check_conv_args(x, w, pad=pad, stride=1)
    spec = launch if launch is not None else LuMultiLaunch()
    if not isinstance(spec, LuMultiLaunch):
        raise TypeError(f"launch must be a LuMultiLaunch, got {type(spec).__name__}")
    spec.can_implement(problem)  # before anything is allocated
    out = output_for(out, problem)
    p = problem
    launch_kernel(spec, p, (x, w, out, *(cupy.int32(v) for v in (p.c, p.h, p.w, p.m, p.out_h, p.out_w, p.pad))))
    return out


#: The image-processing peer's variant name in results rows (impl ``cupyx``).
NDIMAGE_PEER = "ndimage.correlate"


def correlate_peer(x: Any, w: Any, out: Any) -> None:
    """The image-processing peer: ``cupyx.scipy.ndimage.correlate`` of one (1, 1, H, W) image with one
    odd K x K filter, zero boundary (``mode="constant"``), written into ``out`` (1, 1, H, W): the same
    numbers as a "same"-padded convolution."""
    from cupyx.scipy import ndimage

    ndimage.correlate(x[0, 0], w[0, 0], output=out[0, 0], mode="constant", cval=0.0)


def is_single_image(p: ConvProblem) -> bool:
    """Problems the image-processing peers compute (:attr:`ConvProblem.is_image_filter`)."""
    return p.is_image_filter


# --- The chapter's problems ---------------------------------------------------------------------------
