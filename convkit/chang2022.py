"""Chang, Onishi, Maruyama 2022 (Pascal kernels): the latency-hiding model, the planners, the launchers.

The paper's section 2.2 turns a GPU's figures into how much must be in flight to hide the
global-memory latency (:func:`latency_model`, its Table 1). Section 3.1 divides a single-channel
convolution (C = 1, M filters) over the SMs with the S/T procedure (:func:`plan_single`); section
3.2 sizes the stride-fixed block of the multi-channel kernel (:func:`paper_multi_config`). The
kernels are in ``kernels/chang2022.cu``:

- ``chang_single``: executes a :class:`SinglePlan` (the paper's from :func:`plan_single`, or the
  H100's, tuned over :func:`single_candidates`: both planners, :func:`fill_plan` also dividing the
  other axis so that every SM has work).
- ``chang_single_direct``: an unstaged launch (:class:`SingleDirectPlan`: input read straight into
  registers) for 1x1 and launch-bound maps, tuned with the plans.
- ``chang_multi``: the stride-fixed block; :func:`paper_multi_config` gives the paper's launch (one
  pixel per thread on a 32-pixel line, 4-byte copies), :func:`ranked_multi_configs` the H100's
  candidates (2-D tiles of 4-pixel strips, 16-byte copies, channels split over blocks for small maps,
  summed in the same launch).
- ``chang_pointwise``: the stride-fixed block as a GEMM tile at 1x1 (:class:`PointwiseConfig`), ranked
  with the 2-D tiles.
- ``chang_broadcast``: at 3x3 and 5x5 on maps up to 112x112, a filter's 7x7 outputs per thread with the
  input broadcast to a warp's 32 filters (:class:`BroadcastConfig`), ranked with the 2-D tiles.

Everything here but the launchers is pure arithmetic, tested on the CPU.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass
from typing import Any

from convkit.arrays import check_conv_args, output_for
from convkit.compile import load_kernel, staged_row_stride, with_dynamic_shared
from convkit.problem import ConvProblem

_FLOAT = 4
WARP = 32
#: Filter sizes the kernels are built for (a thread reads 8 staged columns per row).
FILTER_SIZES = (1, 3, 5)
#: Filters each thread of both kernels computes (two float4 weight reads per tap).
FILTERS_PER_THREAD = 8
#: Blocks per SM in both of the paper's kernels ("two blocks are assigned to each SM").
BLOCKS_PER_SM = 2
#: The paper's claims (section 4, Figure 5): speedups over cuDNN 7.1 on the GTX 1080 Ti.
PAPER_SPEEDUPS = {"single": {"min": 1.5, "mean": 2.6, "max": 5.6}, "multi": {"min": 1.05, "mean": 1.39, "max": 2.0}}


# --- The model (section 2.2, Table 1) ------------------------------------------------------------------


@dataclass(frozen=True)
class GpuFigures:
    """What the model needs to know about a GPU.

    Args:
        name: the GPU.
        latency_cycles: global-memory load latency, SM clock cycles.
        bandwidth_gbps: global-memory bandwidth, GB/s (1e9 bytes).
        clock_mhz: SM clock the latency is counted in.
        sm_count: streaming multiprocessors.
        fp32_lanes_per_sm: FP32 cores per SM.
        shared_bytes_per_sm: shared memory per SM.
        registers_per_sm: 32-bit registers per SM.
        source: where the figures come from.
    """

    name: str
    latency_cycles: float
    bandwidth_gbps: float
    clock_mhz: float
    sm_count: int
    fp32_lanes_per_sm: int
    shared_bytes_per_sm: int
    registers_per_sm: int
    source: str = ""


#: The paper's Table 1 inputs: latency from Mei and Chu's microbenchmarks, base clock, 96 KB shared memory.
GTX_1080TI = GpuFigures("GeForce GTX 1080 Ti", latency_cycles=258, bandwidth_gbps=484, clock_mhz=1480, sm_count=28,
                        fp32_lanes_per_sm=128, shared_bytes_per_sm=96 * 1024, registers_per_sm=65536,
                        source="the paper's Table 1")  # fmt: skip
#: The paper counts two operations per core per clock ("Flops/clock cycle/core"; one FMA is two).
PAPER_OPS_PER_LANE_CLOCK = 2


@dataclass(frozen=True)
class LatencyModel:
    """Table 1: what must be in flight to hide the latency (the paper's quantities, per GPU and SM)."""

    figures: GpuFigures
    bytes_per_clock: int  # bandwidth / clock, rounded as the paper does (327)
    data_requirement_bytes: int  # bytes in flight to cover one latency (84,366)
    threads_required: int  # 4-byte loads in flight, whole warps (21,120)
    warps_per_sm: int  # (24)
    threads_per_sm: int  # (768)
    data_per_sm_bytes: int  # (3,072)
    min_volume_bytes: int  # threads_per_sm * SMs * 4 (86,016)
    fma_requirement_per_sm: int  # C_FMA: operations per SM over one latency (256 x 258)

    def table(self) -> dict[str, Any]:
        """The rows of the paper's Table 1 (plus the FMA requirement), for display."""
        f = self.figures
        return {
            "global memory latency (clock cycles)": f.latency_cycles,
            "bandwidth (GB/s)": round(f.bandwidth_gbps, 1),
            "clock (MHz)": round(f.clock_mhz, 1),
            "SMs": f.sm_count,
            "transmission rate (bytes/clock)": self.bytes_per_clock,
            "data requirement (bytes)": self.data_requirement_bytes,
            "thread requirement (whole GPU)": self.threads_required,
            "thread requirement/SM": self.threads_per_sm,
            "warp requirement/SM": self.warps_per_sm,
            "data requirement/SM (bytes)": self.data_per_sm_bytes,
            "minimum volume (bytes)": self.min_volume_bytes,
            "FMA requirement/SM (C_FMA, paper's count)": self.fma_requirement_per_sm,
            "shared memory/SM (bytes)": f.shared_bytes_per_sm,
        }


def latency_model(figures: GpuFigures) -> LatencyModel:
    """The paper's section 2.2 arithmetic for ``figures``.

    Bytes per clock is bandwidth over clock, rounded; the data requirement is that times the latency;
    it takes one 4-byte load per thread, in whole warps, spread over the SMs (rounded up to warps).
    The FMA requirement is the SM's operations over one latency, counted as the paper does (two per
    core per clock: 256 x 258 = 66,048 on the 1080 Ti).

    Example:
        >>> m = latency_model(GTX_1080TI)
        >>> m.bytes_per_clock, m.data_requirement_bytes, m.threads_per_sm, m.warps_per_sm, m.data_per_sm_bytes
        (327, 84366, 768, 24, 3072)
    """
    f = figures
    bytes_per_clock = round(f.bandwidth_gbps * 1e9 / (f.clock_mhz * 1e6))
    data = round(bytes_per_clock * f.latency_cycles)
    warps = math.ceil(math.ceil(data / _FLOAT) / WARP)
    warps_per_sm = math.ceil(warps / f.sm_count)
    threads_per_sm = warps_per_sm * WARP
    return LatencyModel(
        figures=f, bytes_per_clock=bytes_per_clock, data_requirement_bytes=data, threads_required=warps * WARP,
        warps_per_sm=warps_per_sm, threads_per_sm=threads_per_sm, data_per_sm_bytes=threads_per_sm * _FLOAT,
        min_volume_bytes=threads_per_sm * f.sm_count * _FLOAT,
        fma_requirement_per_sm=round(PAPER_OPS_PER_LANE_CLOCK * f.fp32_lanes_per_sm * f.latency_cycles),
    )  # fmt: skip


def figures_from_ceilings(summary: dict[str, float], name: str, registers_per_sm: int = 65536) -> GpuFigures:
    """A GPU's figures from its measured ceilings (:func:`convkit.chapter.ceilings_summary`): the
    latency beyond L2 (DRAM), the copy bandwidth, the clock under load."""
    return GpuFigures(name, latency_cycles=round(summary["dram_latency_cycles"]), bandwidth_gbps=summary["copy_gbps"],
                      clock_mhz=summary["sm_clock_mhz"], sm_count=int(summary["sm_count"]),
                      fp32_lanes_per_sm=int(summary["fp32_lanes_per_sm"]),
                      shared_bytes_per_sm=int(summary["shared_memory_per_sm"]), registers_per_sm=registers_per_sm,
                      source="measured ceilings (notebook 00)")  # fmt: skip


#: Latency assumed where a GPU's ceilings were never recorded (cycles; the H100 measures 694).
ASSUMED_LATENCY_CYCLES = 600


def current_figures() -> GpuFigures:
    """The figures of the GPU in use: its recorded ceilings if ``results/<gpu>/ceilings.csv`` exists,
    else its properties with the theoretical bandwidth and :data:`ASSUMED_LATENCY_CYCLES`."""
    from convkit.gpu import device_name, gpu_slug, require_cupy
    from convkit.paths import results_dir

    name = device_name()
    directory = results_dir() / gpu_slug(name)
    if (directory / "ceilings.csv").is_file():
        from convkit.chapter import ceilings_summary
        from convkit.results import load_results

        summary = ceilings_summary(load_results(directory, "ceilings")[0])
        if not math.isnan(summary["dram_latency_cycles"]):
            return figures_from_ceilings(summary, name)
    cupy = require_cupy()
    attrs = cupy.cuda.Device().attributes
    major, minor = (int(v) for v in cupy.cuda.Device().compute_capability)
    from convkit.ceilings import FP32_LANES_PER_SM

    memory_mhz = attrs.get("MemoryClockRate", 0) / 1e3
    return GpuFigures(name, ASSUMED_LATENCY_CYCLES, 2 * memory_mhz * 1e6 * attrs["GlobalMemoryBusWidth"] / 8 / 1e9,
                      attrs.get("ClockRate", 1e6) / 1e3, attrs["MultiProcessorCount"],
                      FP32_LANES_PER_SM.get((major, minor), 64), attrs["MaxSharedMemoryPerMultiprocessor"],
                      attrs["MaxRegistersPerMultiprocessor"], source="device properties, latency assumed")  # fmt: skip


# --- Single channel: the S/T procedure (section 3.1) --------------------------------------------------------


@dataclass(frozen=True)
class SinglePlan:
    """How ``chang_single`` divides a single-channel convolution (all JSON-able, recorded as knobs).

    A block owns ``band_rows`` output rows and ``group_filters`` filters and works through them in
    pieces of ``piece_rows`` x ``piece_filters``, prefetching the next piece. ``method`` is
    ``"filters"`` (the paper's first: filters divided over the SMs, the map in ``s`` pieces),
    ``"maps"`` (its second: the map divided over the SMs, the filters in ``t`` pieces) or ``"both"``
    (:func:`fill_plan`).
    """

    method: str
    s: int
    t: int
    band_rows: int
    group_filters: int
    piece_rows: int
    piece_filters: int
    threads: int = 256

    def as_params(self) -> dict[str, Any]:
        return asdict(self)

    def blocks(self, problem: ConvProblem) -> int:
        return math.ceil(problem.h / self.band_rows) * math.ceil(problem.m / self.group_filters)

    #: The kernel a plan runs.
    kernel_name = "chang_single"

    def options(self, k: int) -> tuple[str, ...]:
        """The kernel's compile-time macros for K x K filters."""
        return f"-DCS_K={k}", f"-DCS_THREADS={self.threads}", f"-DCS_MIN_BLOCKS={max(1, 512 // self.threads)}"

    def shared_bytes(self, problem: ConvProblem) -> int:
        """Dynamic shared memory: two pieces (:func:`single_stage_bytes`), the current and the prefetched."""
        return 2 * single_stage_bytes(problem, self.piece_rows, self.piece_filters)

    def kernel_args(self, problem: ConvProblem) -> tuple[int, ...]:
        """The kernel's integer arguments."""
        p = problem
        bands = math.ceil(p.h / self.band_rows)
        return p.h, p.w, p.m, self.band_rows, bands, self.group_filters, self.piece_rows, self.piece_filters

    def grid(self, problem: ConvProblem) -> tuple[int, ...]:
        return (self.blocks(problem),)

    def check(self, problem: ConvProblem) -> None:
        """Raise ValueError, naming the field, if the kernel cannot run this plan."""
        for name in ("band_rows", "group_filters", "piece_rows", "piece_filters"):
            if getattr(self, name) < 1:
                raise ValueError(f"plan.{name} must be positive, got {getattr(self, name)}")
        if self.piece_rows > self.band_rows or self.piece_filters > self.group_filters:
            raise ValueError(f"plan pieces ({self.piece_rows} rows x {self.piece_filters} filters) exceed the block's "
                             f"share ({self.band_rows} x {self.group_filters})")  # fmt: skip
        if self.threads not in (128, 256, 512):
            raise ValueError(f"plan.threads must be 128, 256 or 512, got {self.threads}")


@dataclass(frozen=True)
class SingleDirectPlan:
    """The unstaged launch (``chang_single_direct``, past the paper): a thread reads the input of ``rows`` x 4
    adjacent outputs straight into registers and writes them for ``filters`` consecutive filters, ``threads``
    per block. The weights come from global memory, or with ``shared_weights`` from a copy in shared memory
    made once per block (read 4 taps at a time). At 1x1 the map is flattened (a pixel is used once), so
    ``rows`` is 1."""

    filters: int
    threads: int = 128
    rows: int = 1
    shared_weights: bool = False

    #: The kernel a plan runs.
    kernel_name = "chang_single_direct"

    def as_params(self) -> dict[str, Any]:
        """The plan as recorded; ``rows`` and ``shared_weights`` only where not at their defaults, so the plans
        recorded before those knobs existed (the same code: the kernel's PTX is unchanged there) name the
        same launch."""
        params = {"kernel": "direct", **asdict(self)}
        defaults = {"rows": 1, "shared_weights": False}
        return {k: v for k, v in params.items() if k not in defaults or v != defaults[k]}

    @staticmethod
    def rows_and_width(problem: ConvProblem) -> tuple[int, int]:
        """The map as the kernel walks it: H x W, or at 1x1 one row of H * W pixels."""
        return (1, problem.h * problem.w) if problem.r == 1 else (problem.h, problem.w)

    def grid(self, problem: ConvProblem) -> tuple[int, int]:
        rows, width = self.rows_and_width(problem)
        tiles = math.ceil(rows / self.rows) * math.ceil(width / 4)
        return math.ceil(tiles / self.threads), math.ceil(problem.m / self.filters)

    def blocks(self, problem: ConvProblem) -> int:
        return math.prod(self.grid(problem))

    def options(self, k: int) -> tuple[str, ...]:
        """The kernel's compile-time macros for K x K filters."""
        return (f"-DCSD_K={k}", f"-DCSD_FILTERS={self.filters}", f"-DCSD_ROWS={self.rows}",
                f"-DCSD_SHARED_WEIGHTS={int(self.shared_weights)}")  # fmt: skip

    def shared_bytes(self, problem: ConvProblem) -> int:
        """Dynamic shared memory: none (the weights' copy is static)."""
        return 0

    def kernel_args(self, problem: ConvProblem) -> tuple[int, ...]:
        """The kernel's integer arguments: rows, width, M."""
        return (*self.rows_and_width(problem), problem.m)

    def check(self, problem: ConvProblem) -> None:
        """Raise ValueError, naming the field, if the kernel cannot run this plan on ``problem``."""
        if not 1 <= self.filters <= 32:
            raise ValueError(f"plan.filters must be 1 to 32, got {self.filters}")
        if self.threads % 32 or not 32 <= self.threads <= 1024:
            raise ValueError(f"plan.threads must be a multiple of 32 from 32 to 1024, got {self.threads}")
        if self.rows not in (1, 2, 4):
            raise ValueError(f"plan.rows must be 1, 2 or 4, got {self.rows}")
        if self.rows != 1 and problem.r == 1:
            raise ValueError(f"plan.rows must be 1 at 1x1 (the map is flattened to one row), got {self.rows}")
        if self.grid(problem)[1] > 65535:
            raise ValueError(f"plan.filters = {self.filters}: {problem.m} filters make more than 65535 groups")


#: Either single-channel launch.
SingleLaunch = SinglePlan | SingleDirectPlan


def single_launch(params: dict[str, Any]) -> SingleLaunch:
    """The single-channel launch recorded as ``params`` (:meth:`SinglePlan.as_params` or
    :meth:`SingleDirectPlan.as_params`)."""
    if params.get("kernel") == "direct":
        return SingleDirectPlan(**{k: v for k, v in params.items() if k != "kernel"})
    return SinglePlan(**params)


def staged_row_floats(width: int) -> int:
    """The kernel's staged input row stride (floats): 4 * ceil(W / 4) + 4."""
    return 4 * math.ceil(width / 4) + 4


def single_stage_bytes(problem: ConvProblem, rows: int, filters: int) -> int:
    """Shared memory of one piece as ``chang_single`` stages it (the paper's D_1 / D_2, to the byte):
    ``rows + K - 1`` input rows and ``filters`` (padded to 8) x K x K weights."""
    k = problem.r
    return _FLOAT * ((rows + k - 1) * staged_row_floats(problem.w) + k * k * math.ceil(filters / 8) * 8)


def single_fmas(problem: ConvProblem, rows: int, filters: int) -> int:
    """FMAs of one piece (the paper's F_1 / F_2): rows x W pixels x filters x K x K."""
    return rows * problem.w * filters * problem.r * problem.s


@dataclass(frozen=True)
class SingleBounds:
    """One method's side of the S/T procedure: the divisor's range and what was chosen."""

    method: str
    per_block: int  # filters (method "filters") or rows (method "maps") each block owns
    lower: int  # from the shared-memory bound (two stages fit a block's share of the SM)
    upper: int  # from the FMA requirement (pieces keep at least C_FMA per block)
    chosen: int
    stage_bytes: int
    fmas: int

    @property
    def in_range(self) -> bool:
        return self.lower <= self.upper


def _smallest(lo: int, hi: int, ok: Any) -> int:
    """Smallest d in lo..hi with ok(d), or hi + 1."""
    for d in range(lo, hi + 1):
        if ok(d):
            return d
    return hi + 1


def single_bounds(problem: ConvProblem, model: LatencyModel, blocks_per_sm: int = BLOCKS_PER_SM) -> list[SingleBounds]:
    """Both methods' S and T ranges (steps 1-3 of the procedure), per block (two blocks share an SM's
    shared memory and FMA requirement)."""
    f = model.figures
    blocks = blocks_per_sm * f.sm_count
    fma_req = math.ceil(model.fma_requirement_per_sm / blocks_per_sm)
    stage_limit = f.shared_bytes_per_sm // blocks_per_sm // 2  # two stages per block
    h, m = problem.h, problem.m
    out = []
    # Method 1: each block takes ceil(M / blocks) filters (whole multiples of the kernel's 8 filters
    # per thread) and the whole map, in S pieces of rows.
    gf = min(m, math.ceil(m / blocks / FILTERS_PER_THREAD) * FILTERS_PER_THREAD)
    lower = _smallest(1, h, lambda s: single_stage_bytes(problem, math.ceil(h / s), gf) <= stage_limit)
    upper = max((s for s in range(1, h + 1) if single_fmas(problem, math.ceil(h / s), gf) >= fma_req), default=0)
    s = lower if lower <= upper else min(lower, h)
    out.append(SingleBounds("filters", gf, lower, upper, s, single_stage_bytes(problem, math.ceil(h / s), gf),
                            single_fmas(problem, math.ceil(h / s), gf)))  # fmt: skip
    # Method 2: each block takes ceil(H / blocks) rows and all filters, in T pieces of filters.
    rb = math.ceil(h / blocks)
    lower = _smallest(1, m, lambda t: single_stage_bytes(problem, rb, math.ceil(m / t)) <= stage_limit)
    upper = max((t for t in range(1, m + 1) if single_fmas(problem, rb, math.ceil(m / t)) >= fma_req), default=0)
    t = lower if lower <= upper else min(lower, m)
    out.append(SingleBounds("maps", rb, lower, upper, t, single_stage_bytes(problem, rb, math.ceil(m / t)),
                            single_fmas(problem, rb, math.ceil(m / t))))  # fmt: skip
    return out


def plan_single(problem: ConvProblem, model: LatencyModel, *, blocks_per_sm: int = BLOCKS_PER_SM,
                threads: int = 256) -> SinglePlan:  # fmt: skip
    """The paper's S/T procedure (section 3.1) for a C = 1 problem.

    1. S (method 1) and T (method 2) may not be so small that a piece's data outgrows shared memory
       (here: two stages in a block's share of the SM) -- the lower bounds;
    2. nor so large that a piece's FMAs fall below C_FMA -- the upper bounds;
    3. the smallest value in range is taken; where the range is empty the paper sets 1, which
       cannot fit large maps, so we take the smallest that fits (the piece then relies on the
       volume in flight rather than on FMAs to hide the latency);
    4. the method with the smaller piece data is used, the other divisor reset to 1.

    The register bound does not apply: the kernel keeps 8 x 4 accumulators per thread and loops
    over the piece, so registers do not grow with it.
    """
    one, two = single_bounds(problem, model, blocks_per_sm)
    if one.stage_bytes <= two.stage_bytes:
        return SinglePlan("filters", one.chosen, 1, problem.h, one.per_block, math.ceil(problem.h / one.chosen),
                          one.per_block, threads)  # fmt: skip
    return SinglePlan("maps", 1, two.chosen, two.per_block, problem.m, two.per_block,
                      math.ceil(problem.m / two.chosen), threads)  # fmt: skip


def fill_plan(problem: ConvProblem, model: LatencyModel, *, blocks_per_sm: int = BLOCKS_PER_SM,
              threads: int = 256) -> SinglePlan:  # fmt: skip
    """The paper's plan, then divided along the other axis too (its approach 3, "both") until there are
    ``blocks_per_sm`` blocks per SM: with 132 SMs, M = 32 filters or a 28-row map leave most SMs idle
    under either single division."""
    plan = plan_single(problem, model, blocks_per_sm=blocks_per_sm, threads=threads)
    target = blocks_per_sm * model.figures.sm_count
    groups = math.ceil(problem.m / plan.group_filters)
    bands = math.ceil(problem.h / plan.band_rows)
    if bands * groups >= target:
        return plan
    if plan.method == "filters":  # few filter groups: cut the map into bands as well
        band_rows = math.ceil(problem.h / min(problem.h, math.ceil(target / groups)))
        return SinglePlan("both", plan.s, 1, band_rows, plan.group_filters, min(plan.piece_rows, band_rows),
                          plan.piece_filters, threads)  # fmt: skip
    group_filters = math.ceil(problem.m / min(problem.m, math.ceil(target / bands)))
    return SinglePlan("both", 1, plan.t, plan.band_rows, group_filters, plan.piece_rows,
                      min(plan.piece_filters, group_filters), threads)  # fmt: skip


#: Blocks per SM the H100 plan's tuning tries (:func:`single_candidates`), and threads per block.
SINGLE_TUNING_BLOCKS_PER_SM, SINGLE_TUNING_THREADS = (2, 4, 8), (128, 256)
#: Launch-bound maps (up to 56 x 56): the tuning also tries each band of these rows x group of these
#: filters that fits one wave at two blocks per SM. There a layer's time is the launch plus one block's
#: chain (copy in, FMAs, store), so a short piece wins; on the H100 (2026-11-23) bands of 2-14 rows
#: x 4-16 filters, about one block per SM, ran up to 1.6 us faster than the procedure's plans.
SINGLE_GRID_MAX_MAP, SINGLE_GRID_BANDS, SINGLE_GRID_FILTERS = 56, (1, 2, 4, 7, 14), (4, 8, 16, 32)


def short_piece_plans(problem: ConvProblem, model: LatencyModel) -> list[SinglePlan]:
    """The one-wave grid of short pieces the tuning adds on launch-bound maps: each band of
    :data:`SINGLE_GRID_BANDS` rows x group of :data:`SINGLE_GRID_FILTERS` filters, one piece per block,
    with at most two blocks per SM. Empty for maps larger than :data:`SINGLE_GRID_MAX_MAP`."""
    if max(problem.h, problem.w) > SINGLE_GRID_MAX_MAP:
        return []
    wave = 2 * model.figures.sm_count
    shapes = itertools.product(SINGLE_GRID_BANDS, SINGLE_GRID_FILTERS, SINGLE_TUNING_THREADS)
    plans = (SinglePlan("both", 1, 1, band, group, band, group, threads)
             for band, group, threads in shapes if band <= problem.h and group <= problem.m)  # fmt: skip
    return [plan for plan in plans if plan.blocks(problem) <= wave]


#: The unstaged launches the tuning tries (:class:`SingleDirectPlan`): filters per thread x threads with the
#: weights from global memory, one output row per thread, at 1x1 on every map and at 3x3 and 5x5 on maps up to
#: 224x224. On the small maps a staged plan's copy, wait and barrier are a large part of a block's chain; at
#: 112-1-5-512 the direct launch was also 22% faster (H100, 2026-11-23).
SINGLE_DIRECT_FILTERS, SINGLE_DIRECT_THREADS, SINGLE_DIRECT_MAX_MAP = (1, 2, 4, 8, 16), (64, 128, 256), 224
#: At 3x3 and 5x5, on every map, also with the weights in shared memory and these output rows per thread: in
#: a scratch A/B (H100, 2026-11-23) 5-35% faster than the launch above from 56x56 up, 25-35% at 512x512 5x5,
#: where the staged plans had won; 0.1-0.2 us slower (the barrier) on some 28x28 layers.
SINGLE_DIRECT_ROWS = (1, 2, 4)


def direct_plans(problem: ConvProblem) -> list[SingleDirectPlan]:
    """The unstaged launches of :data:`SINGLE_DIRECT_FILTERS` x :data:`SINGLE_DIRECT_THREADS` with no more
    filters per thread than M: with the weights from global memory at 1x1 or on maps up to
    :data:`SINGLE_DIRECT_MAX_MAP`, and at 3x3 and 5x5 with the weights in shared memory and each of
    :data:`SINGLE_DIRECT_ROWS` rows per thread."""
    shapes = [(filters, threads) for filters, threads in itertools.product(SINGLE_DIRECT_FILTERS, SINGLE_DIRECT_THREADS)
              if filters <= problem.m]  # fmt: skip
    plans = []
    if problem.r == 1 or max(problem.h, problem.w) <= SINGLE_DIRECT_MAX_MAP:
        plans += [SingleDirectPlan(filters, threads) for filters, threads in shapes]
    if problem.r != 1:
        plans += [SingleDirectPlan(filters, threads, rows, shared_weights=True)
                  for rows in SINGLE_DIRECT_ROWS for filters, threads in shapes]  # fmt: skip
    return plans


def single_candidates(problem: ConvProblem, model: LatencyModel) -> list[SingleLaunch]:
    """The launches a tuning run measures for the H100 plan: :func:`plan_single` and :func:`fill_plan` for
    each of :data:`SINGLE_TUNING_BLOCKS_PER_SM` blocks per SM and :data:`SINGLE_TUNING_THREADS`
    threads, then :func:`short_piece_plans` and :func:`direct_plans`, without repeats. More blocks per
    SM mean smaller pieces, more of them in flight."""
    plans: list[SingleLaunch] = [planner(problem, model, blocks_per_sm=blocks, threads=threads)
                                 for blocks in SINGLE_TUNING_BLOCKS_PER_SM for threads in SINGLE_TUNING_THREADS
                                 for planner in (plan_single, fill_plan)]  # fmt: skip
    return list(dict.fromkeys(plans + short_piece_plans(problem, model) + direct_plans(problem)))


def single_plan_stats(problem: ConvProblem, plan: SinglePlan, model: LatencyModel,
                      blocks_per_sm: int = BLOCKS_PER_SM) -> dict[str, Any]:  # fmt: skip
    """What a plan does on a problem: blocks, pieces per block, bytes and FMAs per piece, whether a
    piece's FMAs cover C_FMA (prefetch hides the latency) and whether the bytes in flight over the GPU
    reach the data requirement (the paper's second approach)."""
    blocks = plan.blocks(problem)
    pieces = math.ceil(plan.band_rows / plan.piece_rows) * math.ceil(plan.group_filters / plan.piece_filters)
    stage = single_stage_bytes(problem, plan.piece_rows, plan.piece_filters)
    fmas = single_fmas(problem, plan.piece_rows, plan.piece_filters)
    resident = min(blocks, blocks_per_sm * model.figures.sm_count)
    return {"method": plan.method, "S": plan.s, "T": plan.t, "blocks": blocks, "pieces_per_block": pieces,
            "piece_rows": plan.piece_rows, "piece_filters": plan.piece_filters, "stage_bytes": stage,
            "fmas_per_piece": fmas,
            "fma_hides_latency": fmas >= model.fma_requirement_per_sm / blocks_per_sm,
            "volume_in_flight": resident * stage,
            "volume_covers": resident * stage >= model.data_requirement_bytes}  # fmt: skip


# --- Multi channel: the stride-fixed block (section 3.2) ---------------------------------------------------


class _ChannelSplit:
    """What both multi-channel launches share: their channels in segments of ``ck``, split over ``split``
    blocks per output tile."""

    ck: int
    split: int

    def split_channels(self, problem: ConvProblem) -> int:
        """Channels per split, a multiple of ``ck``."""
        return math.ceil(math.ceil(problem.c / self.split) / self.ck) * self.ck

    def splits(self, problem: ConvProblem) -> int:
        """Splits that get channels (rounding the channels per split up to ``ck`` can leave fewer)."""
        return math.ceil(problem.c / self.split_channels(problem))

    def segments(self, problem: ConvProblem) -> int:
        """Segments of ``ck`` channels a block sums (a double-buffered block of one segment needs one buffer)."""
        return math.ceil(self.split_channels(problem) / self.ck)


def _min_blocks(threads: int, registers: int = 128) -> int:
    """``__launch_bounds__`` blocks per SM that leave ptxas ``registers`` or more per thread."""
    return max(1, 65536 // (threads * registers))


@dataclass(frozen=True)
class MultiConfig(_ChannelSplit):
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
        if self.threads % WARP or self.threads > 1024:
            raise ValueError(f"{self.threads} threads per block: whole warps, at most 1024")
        if self.ck < 1 or self.split < 1:
            raise ValueError("ck and split must be positive")

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

    def shared_bytes(self, k: int, segments: int = 2) -> int:
        """Dynamic shared memory: two stages (one for a block of one segment) of ``ck`` input windows and
        ``ck`` x K x K x (bm + 4) weights."""
        stage = self.ck * (self.tile_h + k - 1) * self.in_stride() + self.ck * k * k * (self.bm + 4)
        return min(2, segments) * stage * _FLOAT

    def options(self, k: int) -> tuple[str, ...]:
        return (f"-DCM_K={k}", f"-DCM_BM={self.bm}", f"-DCM_TILE_H={self.tile_h}", f"-DCM_TILE_W={self.tile_w}",
                f"-DCM_RPT={self.rpt}", f"-DCM_PX={self.px}", f"-DCM_CK={self.ck}",
                f"-DCM_MIN_BLOCKS={self.min_blocks}")  # fmt: skip

    def grid(self, problem: ConvProblem) -> tuple[int, int, int]:
        return (math.ceil(problem.w / self.tile_w), math.ceil(problem.h / self.tile_h),
                math.ceil(problem.m / self.bm) * self.splits(problem))  # fmt: skip

    #: The kernel this block compiles.
    kernel_name = "chang_multi"

    def kernel_args(self, problem: ConvProblem, x: Any, w: Any) -> tuple[int, ...]:
        """The kernel's integer arguments: 16-byte copies of input rows where the width and ``x`` allow."""
        p = problem
        rows16 = self.rows16 and p.w % 4 == 0 and x.data.ptr % 16 == 0
        return p.c, p.h, p.w, p.m, self.split_channels(p), int(rows16)

    def as_params(self) -> dict[str, Any]:
        return asdict(self)


#: The paper's P_x: 32 pixels, 128 bytes of a feature-map line.
PAPER_PX = 32
#: Channels per segment: 8 x K x K floats, the paper's 32 bytes at 1x1 and a multiple of 32 bytes for any K.
SEGMENT_CHANNELS = 8
#: N_f cap: 8 filters per thread, 32 pixels per line, 1024 threads.
MAX_PAPER_BM = 256


def paper_multi_config(problem: ConvProblem, model: LatencyModel, *,
                       blocks_per_sm: int = BLOCKS_PER_SM) -> MultiConfig:  # fmt: skip
    """The paper's section 3.2 rule: S_B = 8 channels (32 bytes at 1x1), P_x = 32 pixels, and the
    smallest N_f (a multiple of 8) with P_x x N_f x S_B/4 x K x K FMAs per segment >= C_FMA per block,
    capped by the half-shared-memory bound (two segments in flight) and by M."""
    k = problem.r
    fma_req = model.fma_requirement_per_sm / blocks_per_sm
    stage_limit = model.figures.shared_bytes_per_sm // blocks_per_sm
    bm = max(8, math.ceil(fma_req / (PAPER_PX * SEGMENT_CHANNELS * k * k) / 8) * 8)
    bm = min(bm, MAX_PAPER_BM, math.ceil(problem.m / 8) * 8)
    while bm > 8 and MultiConfig(bm=bm).shared_bytes(k) > stage_limit:
        bm -= 8
    return MultiConfig(bm=bm, tile_h=1, tile_w=PAPER_PX, rpt=1, px=1, ck=SEGMENT_CHANNELS)


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
class PointwiseConfig(_ChannelSplit):
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
        if self.threads % WARP or self.threads > 1024:
            raise ValueError(f"{self.threads} threads per block: whole warps, at most 1024")
        if self.ck < 1 or self.split < 1:
            raise ValueError("ck and split must be positive")
        if self.stages < 2:
            raise ValueError(f"stages must be 2 or more, got {self.stages!r}")

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bp // self.tp)

    @property
    def registers(self) -> int:
        """Registers per thread the block is built for: 128, but an 8 x 8 tile of 128 threads spills there."""
        return 168 if self.tm * self.tp == 64 and self.threads < 256 else 128

    def shared_bytes(self, k: int = 1, segments: int | None = None) -> int:
        """Dynamic shared memory: ``stages`` buffers (fewer for a block of fewer ``segments``) of ``ck`` x ``bp``
        pixels and ``ck`` x (``bm`` + 4) weights."""
        buffers = self.stages if segments is None else min(self.stages, segments)
        return buffers * self.ck * (self.bp + self.bm + 4) * _FLOAT

    def options(self, k: int = 1) -> tuple[str, ...]:
        return (f"-DCP_BM={self.bm}", f"-DCP_BP={self.bp}", f"-DCP_TM={self.tm}", f"-DCP_TP={self.tp}",
                f"-DCP_CK={self.ck}", f"-DCP_STAGES={self.stages}",
                f"-DCP_MIN_BLOCKS={_min_blocks(self.threads, self.registers)}")  # fmt: skip

    def grid(self, problem: ConvProblem) -> tuple[int, int, int]:
        """Filter blocks fastest: the blocks of one pixel tile run together and share it through L2."""
        return math.ceil(problem.m / self.bm), math.ceil(problem.h * problem.w / self.bp), self.splits(problem)

    #: The kernel this block compiles.
    kernel_name = "chang_pointwise"

    def kernel_args(self, problem: ConvProblem, x: Any, w: Any) -> tuple[int, ...]:
        """The kernel's integer arguments, the pixels flattened: 16-byte copies where P % 4 == 0 and ``x`` allows."""
        p = problem
        vec16 = (p.h * p.w) % 4 == 0 and x.data.ptr % 16 == 0
        return p.c, p.h * p.w, p.m, self.split_channels(p), int(vec16)

    def as_params(self) -> dict[str, Any]:
        return {"kernel": "pointwise", **asdict(self)}


#: Tiles of ``chang_pointwise`` the H100 launch chooses from at 1x1: (bm, bp, tm, tp, ck), the
#: 128 x 128 GEMM tile of 8 x 8 per thread down to 4 x 4 per thread and one-warp blocks for layers
#: of a few blocks.
POINTWISE_TILES: tuple[tuple[int, int, int, int, int], ...] = (
    (128, 128, 8, 8, 8), (128, 128, 8, 8, 16), (128, 64, 8, 8, 8), (64, 128, 8, 8, 8), (64, 64, 8, 8, 16),
    (64, 64, 4, 8, 16), (64, 64, 4, 4, 16), (32, 64, 4, 4, 16), (32, 32, 4, 4, 32), (32, 32, 4, 4, 8),
    (16, 32, 4, 4, 4),
)  # fmt: skip


@dataclass(frozen=True)
class BroadcastConfig(_ChannelSplit):
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
        if self.split < 1:
            raise ValueError("split must be positive")

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

    def shared_bytes(self, k: int, segments: int = 2) -> int:
        """Dynamic shared memory: two stages (one for a block of one segment) of ``ck`` input windows per
        tile and ``filters`` weight rows; at least the block's sums on their way out (a tile per thread, an
        odd number of floats apart)."""
        windows = self.tiles * self.ck * (self.tile_h + k - 1) * self.in_stride(k)
        stages = min(2, segments) * (windows + self.filters * self.weight_stride(k))
        sums = self.threads * (self.tile_h * self.tile_w | 1)
        return max(stages, sums) * _FLOAT

    def options(self, k: int) -> tuple[str, ...]:
        return (f"-DCB_K={k}", f"-DCB_FILTERS={self.filters}", f"-DCB_TILES={self.tiles}",
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

    #: The kernel this block compiles.
    kernel_name = "chang_broadcast"

    def kernel_args(self, problem: ConvProblem, x: Any, w: Any) -> tuple[int, ...]:
        """The kernel's integer arguments: 16-byte pieces of each filter's segment where C % 4 == 0 and ``w``
        allows."""
        p = problem
        vec16 = p.c % 4 == 0 and w.data.ptr % 16 == 0
        return p.c, p.h, p.w, p.m, self.split_channels(p), int(vec16)

    def as_params(self) -> dict[str, Any]:
        return {"kernel": "broadcast", **asdict(self)}


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
#: with 64, on the H100 (2026-11-23).
BROADCAST_MAX_TILES = 256
#: Any of the three launches of the multi-channel kernels.
MultiLaunch = MultiConfig | PointwiseConfig | BroadcastConfig


#: Warps per SM below which a launch is counted as losing latency hiding (proportionally).
WARPS_TO_HIDE = 16


#: Shared memory per SM the H100 launch is ranked for when the GPU's own is not given (bytes).
H100_SHARED_PER_SM = 233472


def resident_blocks(config: MultiLaunch, k: int, shared_per_sm: int = H100_SHARED_PER_SM) -> int:
    """Blocks of ``config`` one SM holds: by shared memory, by registers, by threads."""
    return max(0, min(shared_per_sm // config.shared_bytes(k), 65536 // (config.registers * config.threads),
                      2048 // config.threads))  # fmt: skip


def _splits_and_costs(problem: ConvProblem, padded: int, blocks: int, per_sm: int, threads: int, sm_count: int,
                      reuse: tuple[int, int], ck: int) -> list[tuple[int, float]]:  # fmt: skip
    """The channel split that gives every SM ``per_sm`` blocks (down to one segment of ``ck``
    channels per split) and, where it is above 1, half and twice of it (the model weighs neither the
    splits' atomics nor the latency of small blocks well), each with the model's cost: the ``padded`` work,
    times the idle share of the last wave, divided by the share of :data:`WARPS_TO_HIDE` warps the
    blocks keep on an SM, times 0.5 plus the shared-memory reads per FMA, 1 / a + 1 / b for a thread
    that uses its two operands' reads ``reuse`` = (a, b) times each (8 filters x 4 pixels: 8 and 4), plus 10% for
    a split (the later splits' atomics)."""
    target = per_sm * sm_count
    split = max(1, min(math.ceil(target / blocks), problem.c // ck))
    reads = 0.5 + 1 / reuse[0] + 1 / reuse[1]
    costed = []
    alternatives = {split // 2, split, min(2 * split, problem.c // ck)} if split > 1 else {1}
    for s in sorted(alternatives, reverse=True):
        total = blocks * s
        waves = math.ceil(total / target) * target / total
        warps = min(per_sm, math.ceil(total / sm_count)) * threads // WARP
        cost = padded * waves / min(1.0, warps / WARPS_TO_HIDE) * reads * (1.1 if s > 1 else 1.0)
        costed.append((s, round(cost, 6)))
    return costed


def ranked_multi_configs(
    problem: ConvProblem, sm_count: int, *, shared_per_sm: int = H100_SHARED_PER_SM
) -> list[MultiLaunch]:
    """The H100's launches of the multi-channel kernels, cheapest first by a simple model.

    Each tile of :data:`MULTI_TILES` (at 1x1 also of :data:`POINTWISE_TILES`, at 3x3 and 5x5 of
    :data:`BROADCAST_TILES`) gets its channels
    split over enough blocks to fill the SMs (and half and twice that), costed by :func:`_splits_and_costs`.
    Ties keep the earlier tile.
    """
    k = problem.r
    ranked: list[tuple[float, int, MultiLaunch]] = []
    for order, (bm, th, tw, rpt, ck) in enumerate(MULTI_TILES):
        base = MultiConfig(bm=bm, tile_h=th, tile_w=tw, rpt=rpt, px=4, ck=ck, rows16=True)
        per_sm = resident_blocks(base, k, shared_per_sm)
        if per_sm < 1:
            continue
        padded = (math.ceil(problem.h / th) * th) * (math.ceil(problem.w / tw) * tw) * (math.ceil(problem.m / bm) * bm)
        for split, cost in _splits_and_costs(problem, padded, math.prod(base.grid(problem)), per_sm, base.threads,
                                             sm_count, (FILTERS_PER_THREAD, 4 * rpt), ck):  # fmt: skip
            ranked.append((cost, order, MultiConfig(bm, th, tw, rpt, 4, ck, split, rows16=True)))
    if k == 1:
        pixels = problem.h * problem.w
        # Ahead of the 2-D tiles at equal cost: no halo columns to stage at 1x1.
        for order, (bm, bp, tm, tp, ck) in enumerate(POINTWISE_TILES, start=-len(POINTWISE_TILES)):
            base = PointwiseConfig(bm, bp, tm, tp, ck)
            per_sm = resident_blocks(base, k, shared_per_sm)
            if per_sm < 1:
                continue
            padded = math.ceil(pixels / bp) * bp * math.ceil(problem.m / bm) * bm
            for split, cost in _splits_and_costs(problem, padded, math.prod(base.grid(problem)), per_sm,
                                                 base.threads, sm_count, (tm, tp), ck):  # fmt: skip
                ranked.append((cost, order, PointwiseConfig(bm, bp, tm, tp, ck, split)))
    if k > 1:
        # A thread's reuse: each weight it reads serves its tile_h x tile_w outputs, each input read (a
        # broadcast) up to K x K taps.
        for order, (filters, tiles, th, tw, ck) in enumerate(BROADCAST_TILES, start=len(MULTI_TILES)):
            base = BroadcastConfig(filters, tiles, th, tw, ck)
            per_sm = resident_blocks(base, k, shared_per_sm)
            if per_sm < 1 or base.tile_count(problem) > BROADCAST_MAX_TILES:
                continue
            padded = base.grid(problem)[1] * tiles * th * tw * math.ceil(problem.m / filters) * filters
            for split, cost in _splits_and_costs(problem, padded, math.prod(base.grid(problem)), per_sm,
                                                 base.threads, sm_count, (th * tw, k * k), ck):  # fmt: skip
                ranked.append((cost, order, BroadcastConfig(filters, tiles, th, tw, ck, split)))
    if not ranked:
        raise ValueError(f"no tile of MULTI_TILES fits {shared_per_sm} bytes of shared memory for {k}x{k} filters")
    return [config for _, _, config in sorted(ranked, key=lambda r: (r[0], r[1]))]


#: Launches a tuning run measures per problem: every tile the model ranks, at each of its splits (the model
#: picks well only on large layers).
TUNING_CANDIDATES = 3 * (len(MULTI_TILES) + len(POINTWISE_TILES) + len(BROADCAST_TILES))


def multi_config(problem: ConvProblem, sm_count: int, *,
                 shared_per_sm: int = H100_SHARED_PER_SM) -> MultiLaunch:  # fmt: skip
    """The H100's launch without tuning: the model's cheapest (:func:`ranked_multi_configs`)."""
    return ranked_multi_configs(problem, sm_count, shared_per_sm=shared_per_sm)[0]


def multi_launch(params: dict[str, Any]) -> MultiLaunch:
    """The launch recorded as ``params`` (a config's :meth:`as_params`): by ``params["kernel"]``, a
    :class:`PointwiseConfig` (``"pointwise"``), a :class:`BroadcastConfig` (``"broadcast"``), else a
    :class:`MultiConfig`."""
    params = dict(params)
    kinds = {"pointwise": PointwiseConfig, "broadcast": BroadcastConfig, "stride_fixed": MultiConfig}
    return kinds[params.pop("kernel", "stride_fixed")](**params)


# --- Launchers ------------------------------------------------------------------------------------------------


def check_same_args(x: Any, w: Any, *, single: bool) -> ConvProblem:
    """Validate the arguments of both kernels before launch: one image, square K x K filters with K in
    1, 3, 5, "same" padding implied; ``single`` also needs C = 1. Errors name the argument."""
    k = w.shape[-1] if hasattr(w, "shape") and len(w.shape) == 4 else 1
    problem = check_conv_args(x, w, pad=(k - 1) // 2 if k % 2 else 0, stride=1)
    if problem.n != 1:
        raise ValueError(f"x must hold one image (N = 1) as in the paper, got N = {problem.n}")
    if problem.r != problem.s or problem.r not in FILTER_SIZES:
        raise ValueError(f"w must hold square 1x1, 3x3 or 5x5 filters, got {problem.r}x{problem.s}")
    if single and problem.c != 1:
        raise ValueError(f"x must have one channel for the single-channel kernel, got C = {problem.c}")
    p = problem
    if max(p.c * p.h * p.w, p.m * p.c * p.r * p.s, p.m * p.h * p.w) >= 2**31:
        raise ValueError("x, w or the output has 2^31 elements or more; the kernels index planes with int")
    return problem


def conv2d_single(x: Any, w: Any, *, plan: SingleLaunch | None = None, out: Any = None) -> Any:
    """Single-channel "same" convolution (1, 1, H, W) x (M, 1, K, K) -> (1, M, H, W) with ``chang_single``
    (``chang_single_direct`` for a :class:`SingleDirectPlan`).

    Args:
        x: float32 ``cupy.ndarray`` (1, 1, H, W), C-contiguous.
        w: float32 ``cupy.ndarray`` (M, 1, K, K), K in 1, 3, 5.
        plan: the division; default :func:`fill_plan` for this GPU's figures. A :class:`SingleDirectPlan`
            runs the unstaged kernel.
        out: optional float32 (1, M, H, W) output.

    Example:
        >>> y = conv2d_single(x, w, plan=plan_single(problem, latency_model(current_figures())))  # doctest: +SKIP
    """
    import cupy

    problem = check_same_args(x, w, single=True)
    if plan is None:
        plan = fill_plan(problem, latency_model(current_figures()))
    if not isinstance(plan, SingleLaunch):
        raise TypeError(f"plan must be a SinglePlan or SingleDirectPlan, got {type(plan).__name__}")
    plan.check(problem)
    out = output_for(out, problem)
    shared = plan.shared_bytes(problem)
    kernel = with_dynamic_shared(load_kernel("chang2022", plan.kernel_name, options=plan.options(problem.r)),
                                 shared, f"plan {plan}")  # fmt: skip
    args = plan.kernel_args(problem)
    kernel(plan.grid(problem), (plan.threads,), (x, w, out, *(cupy.int32(v) for v in args)), shared_mem=shared)
    return out


def conv2d_multi(x: Any, w: Any, *, config: MultiLaunch | None = None, out: Any = None) -> Any:
    """Multi-channel "same" convolution (1, C, H, W) x (M, C, K, K) -> (1, M, H, W) with ``chang_multi``
    (``chang_pointwise`` for a :class:`PointwiseConfig` at 1x1, ``chang_broadcast`` for a :class:`BroadcastConfig`).

    Args:
        x: float32 ``cupy.ndarray`` (1, C, H, W), C-contiguous.
        w: float32 ``cupy.ndarray`` (M, C, K, K), K in 1, 3, 5.
        config: the block; default :func:`multi_config` for this GPU. With ``split`` above 1 the splits
            of each output tile add into it with atomics in the same launch (the first to start zeroes it).
        out: optional float32 (1, M, H, W) output.
    """
    import cupy

    from convkit.gpu import sm_count

    problem = check_same_args(x, w, single=False)
    if config is None:
        per_sm = int(cupy.cuda.Device().attributes["MaxSharedMemoryPerMultiprocessor"])
        config = multi_config(problem, sm_count(), shared_per_sm=per_sm)
    if not isinstance(config, MultiLaunch):
        raise TypeError(
            f"config must be a MultiConfig, PointwiseConfig or BroadcastConfig, got {type(config).__name__}"
        )
    if isinstance(config, PointwiseConfig) and problem.r != 1:
        raise ValueError(f"config {config} is for 1x1 filters; w is {problem.r}x{problem.s}")
    grid = config.grid(problem)
    if grid[1] > 65535 or grid[2] > 65535:
        raise ValueError(f"grid {grid}: y and z must be at most 65535 (use a larger tile or fewer splits)")
    out = output_for(out, problem)
    shared = config.shared_bytes(problem.r, config.segments(problem))
    kernel = with_dynamic_shared(load_kernel("chang2022", config.kernel_name, options=config.options(problem.r)),
                                 shared, f"config {config}")  # fmt: skip
    splits = config.splits(problem)
    counters = split_counters(math.prod(grid) // splits if splits > 1 else 0)
    args = config.kernel_args(problem, x, w)
    kernel(grid, (config.threads,), (x, w, out, *(cupy.int32(v) for v in args), counters), shared_mem=shared)
    return out


_SPLIT_COUNTERS: dict[tuple[int, int], Any] = {}


def split_counters(tiles: int) -> Any:
    """Zeroed int32 counters, 3 per output tile, for a launch that splits the channels (the kernels'
    ``split::zero_tile_once``; they leave them zero again). One buffer per device and stream: launches on one
    stream run in order, launches on two streams must not share counters."""
    import cupy

    key = (cupy.cuda.Device().id, cupy.cuda.get_current_stream().ptr)
    counters = _SPLIT_COUNTERS.get(key)
    if counters is None or counters.size < 3 * tiles:
        counters = cupy.zeros(3 * max(tiles, 4096), dtype=cupy.int32)
        _SPLIT_COUNTERS[key] = counters
    return counters


# --- The chapter's grids (the paper's section 4, and the issue's) ---------------------------------------------

#: Single-channel maps, filters M and filter sizes: 6 x 3 x 3 = 54 configurations.
SINGLE_MAPS, SINGLE_FILTERS = (28, 56, 112, 224, 512, 1024), (32, 128, 512)
#: Multi-channel maps and C = M: 7 x 3 x 3 = 63 configurations, batch 1.
MULTI_MAPS, MULTI_CHANNELS = (7, 14, 28, 56, 112, 224, 512), (64, 256, 512)


def single_problems() -> list[ConvProblem]:
    """The single-channel grid: C = 1, maps 28..1024 square, M 32..512, filters 1, 3, 5."""
    return [ConvProblem.same(1, 1, h, h, m, k) for h in SINGLE_MAPS for m in SINGLE_FILTERS for k in FILTER_SIZES]


def multi_problems() -> list[ConvProblem]:
    """The multi-channel grid: batch 1, maps 7..512 square, C = M in 64, 256, 512, filters 1, 3, 5."""
    return [ConvProblem.same(1, c, h, h, c, k) for h in MULTI_MAPS for c in MULTI_CHANNELS for k in FILTER_SIZES]
