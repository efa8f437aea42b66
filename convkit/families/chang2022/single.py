"""Chang 2022, section 3.1: the single-channel launches (C = 1, M filters), the S/T procedure and the H100's plans.

``kernels/chang2022.cu`` has two single-channel kernels:

- ``chang_single`` executes a :class:`StagedSingleLaunch`: the paper's from :func:`plan_single`, or the
  H100's, tuned over :func:`single_candidates` (both planners, :func:`fill_plan` also dividing the other
  axis so that every SM has work, and a one-wave grid of short pieces on launch-bound maps).
- ``chang_single_direct``, past the paper, executes a :class:`DirectSingleLaunch`: input read straight into
  registers, for 1x1 and launch-bound maps (and with the weights in shared memory at 3x3 and 5x5), tuned
  with the plans.

Everything here is arithmetic, tested on the CPU; :func:`convkit.families.chang2022.launch.conv2d_single`
launches them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from convkit.core.problem import ConvProblem
from convkit.cuda.launch import KernelLaunch
from convkit.families.chang2022.model import BLOCKS_PER_SM, FILTERS_PER_THREAD, FLOAT_BYTES, LatencyModel


@dataclass(frozen=True)
class StagedSingleLaunch(KernelLaunch):
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

    kind: ClassVar[str] = "chang_single_staged"
    #: The file under ``kernels/`` that defines the kernel.
    source = "chang2022"

    def blocks(self, problem: ConvProblem) -> int:
        return math.ceil(problem.h / self.band_rows) * math.ceil(problem.m / self.group_filters)

    def kernel_name(self, problem: ConvProblem) -> str:
        return "chang_single"

    def options(self, problem: ConvProblem) -> tuple[str, ...]:
        """The kernel's compile-time macros: the filter size, the threads and the blocks per SM they allow."""
        k = problem.r
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

    def block(self, problem: ConvProblem) -> tuple[int, ...]:
        return (self.threads,)

    def can_implement(self, problem: ConvProblem) -> None:
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
class DirectSingleLaunch(KernelLaunch):
    """The unstaged launch (``chang_single_direct``, past the paper): a thread reads the input of ``rows`` x 4
    adjacent outputs straight into registers and writes them for ``filters`` consecutive filters, ``threads``
    per block. The weights come from global memory, or with ``shared_weights`` from a copy in shared memory
    made once per block (read 4 taps at a time). At 1x1 the map is flattened (a pixel is used once), so
    ``rows`` is 1."""

    filters: int
    threads: int = 128
    rows: int = 1
    shared_weights: bool = False

    kind: ClassVar[str] = "chang_single_direct"
    #: The file under ``kernels/`` that defines the kernel.
    source = "chang2022"

    def kernel_name(self, problem: ConvProblem) -> str:
        return "chang_single_direct"

    def to_params(self) -> dict[str, Any]:
        """The plan as recorded; ``rows`` and ``shared_weights`` only where not at their defaults, so the plans
        recorded before those knobs existed (the same code: the kernel's PTX is unchanged there) name the
        same launch."""
        params = {"kernel": "direct", **super().to_params()}
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

    def block(self, problem: ConvProblem) -> tuple[int, ...]:
        return (self.threads,)

    def blocks(self, problem: ConvProblem) -> int:
        return math.prod(self.grid(problem))

    def options(self, problem: ConvProblem) -> tuple[str, ...]:
        """The kernel's compile-time macros for the problem's K x K filters."""
        return (f"-DCSD_K={problem.r}", f"-DCSD_FILTERS={self.filters}", f"-DCSD_ROWS={self.rows}",
                f"-DCSD_SHARED_WEIGHTS={int(self.shared_weights)}")  # fmt: skip

    def shared_bytes(self, problem: ConvProblem) -> int:
        """Dynamic shared memory: none (the weights' copy is static)."""
        return 0

    def kernel_args(self, problem: ConvProblem) -> tuple[int, ...]:
        """The kernel's integer arguments: rows, width, M."""
        return (*self.rows_and_width(problem), problem.m)

    def can_implement(self, problem: ConvProblem) -> None:
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
ChangSingleLaunch = StagedSingleLaunch | DirectSingleLaunch


def single_launch(params: dict[str, Any]) -> ChangSingleLaunch:
    """The single-channel launch recorded as ``params`` (:meth:`StagedSingleLaunch.to_params` or
    :meth:`DirectSingleLaunch.to_params`)."""
    if params.get("kernel") == "direct":
        return DirectSingleLaunch.from_params({k: v for k, v in params.items() if k != "kernel"})
    return StagedSingleLaunch.from_params(params)


def staged_row_floats(width: int) -> int:
    """The kernel's staged input row stride (floats): 4 * ceil(W / 4) + 4."""
    return 4 * math.ceil(width / 4) + 4


def single_stage_bytes(problem: ConvProblem, rows: int, filters: int) -> int:
    """Shared memory of one piece as ``chang_single`` stages it (the paper's D_1 / D_2, to the byte):
    ``rows + K - 1`` input rows and ``filters`` (padded to 8) x K x K weights."""
    k = problem.r
    return FLOAT_BYTES * ((rows + k - 1) * staged_row_floats(problem.w) + k * k * math.ceil(filters / 8) * 8)


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


def _smallest(lo: int, hi: int, ok: Callable[[int], bool]) -> int:
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
                threads: int = 256) -> StagedSingleLaunch:  # fmt: skip
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
        return StagedSingleLaunch("filters", one.chosen, 1, problem.h, one.per_block,
                                  math.ceil(problem.h / one.chosen), one.per_block, threads)  # fmt: skip
    return StagedSingleLaunch("maps", 1, two.chosen, two.per_block, problem.m, two.per_block,
                              math.ceil(problem.m / two.chosen), threads)  # fmt: skip


def fill_plan(problem: ConvProblem, model: LatencyModel, *, blocks_per_sm: int = BLOCKS_PER_SM,
              threads: int = 256) -> StagedSingleLaunch:  # fmt: skip
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
        return StagedSingleLaunch("both", plan.s, 1, band_rows, plan.group_filters, min(plan.piece_rows, band_rows),
                                  plan.piece_filters, threads)  # fmt: skip
    group_filters = math.ceil(problem.m / min(problem.m, math.ceil(target / bands)))
    return StagedSingleLaunch("both", 1, plan.t, plan.band_rows, group_filters, plan.piece_rows,
                              min(plan.piece_filters, group_filters), threads)  # fmt: skip


#: Blocks per SM the H100 plan's tuning tries (:func:`single_candidates`), and threads per block.
SINGLE_TUNING_BLOCKS_PER_SM, SINGLE_TUNING_THREADS = (2, 4, 8), (128, 256)
#: Launch-bound maps (up to 56 x 56): the tuning also tries each band of these rows x group of these
#: filters that fits one wave at two blocks per SM. There a layer's time is the launch plus one block's
#: chain (copy in, FMAs, store), so a short piece wins; on the H100 bands of 2-14 rows x 4-16 filters,
#: about one block per SM, ran up to 1.6 us faster than the procedure's plans.
SINGLE_GRID_MAX_MAP, SINGLE_GRID_BANDS, SINGLE_GRID_FILTERS = 56, (1, 2, 4, 7, 14), (4, 8, 16, 32)


def short_piece_plans(problem: ConvProblem, model: LatencyModel) -> list[StagedSingleLaunch]:
    """The one-wave grid of short pieces the tuning adds on launch-bound maps: each band of
    :data:`SINGLE_GRID_BANDS` rows x group of :data:`SINGLE_GRID_FILTERS` filters, one piece per block,
    with at most two blocks per SM. Empty for maps larger than :data:`SINGLE_GRID_MAX_MAP`."""
    if max(problem.h, problem.w) > SINGLE_GRID_MAX_MAP:
        return []
    wave = 2 * model.figures.sm_count
    shapes = itertools.product(SINGLE_GRID_BANDS, SINGLE_GRID_FILTERS, SINGLE_TUNING_THREADS)
    plans = (StagedSingleLaunch("both", 1, 1, band, group, band, group, threads)
             for band, group, threads in shapes if band <= problem.h and group <= problem.m)  # fmt: skip
    return [plan for plan in plans if plan.blocks(problem) <= wave]


#: The unstaged launches the tuning tries (:class:`DirectSingleLaunch`): filters per thread x threads with the
#: weights from global memory, one output row per thread, at 1x1 on every map and at 3x3 and 5x5 on maps up to
#: 224x224. On the small maps a staged plan's copy, wait and barrier are a large part of a block's chain; at
#: 112-1-5-512 the direct launch was also 22% faster (H100).
SINGLE_DIRECT_FILTERS, SINGLE_DIRECT_THREADS, SINGLE_DIRECT_MAX_MAP = (1, 2, 4, 8, 16), (64, 128, 256), 224
#: At 3x3 and 5x5, on every map, also with the weights in shared memory and these output rows per thread: on
#: the H100, 5-35% faster than the launch above from 56x56 up, 25-35% at 512x512 5x5, where the staged plans had
#: won; 0.1-0.2 us slower (the barrier) on some 28x28 layers.
SINGLE_DIRECT_ROWS = (1, 2, 4)


def direct_plans(problem: ConvProblem) -> list[DirectSingleLaunch]:
    """The unstaged launches of :data:`SINGLE_DIRECT_FILTERS` x :data:`SINGLE_DIRECT_THREADS` with no more
    filters per thread than M: with the weights from global memory at 1x1 or on maps up to
    :data:`SINGLE_DIRECT_MAX_MAP`, and at 3x3 and 5x5 with the weights in shared memory and each of
    :data:`SINGLE_DIRECT_ROWS` rows per thread."""
    shapes = [(filters, threads) for filters, threads in itertools.product(SINGLE_DIRECT_FILTERS, SINGLE_DIRECT_THREADS)
              if filters <= problem.m]  # fmt: skip
    plans = []
    if problem.r == 1 or max(problem.h, problem.w) <= SINGLE_DIRECT_MAX_MAP:
        plans += [DirectSingleLaunch(filters, threads) for filters, threads in shapes]
    if problem.r != 1:
        plans += [DirectSingleLaunch(filters, threads, rows, shared_weights=True)
                  for rows in SINGLE_DIRECT_ROWS for filters, threads in shapes]  # fmt: skip
    return plans


def single_candidates(problem: ConvProblem, model: LatencyModel) -> list[ChangSingleLaunch]:
    """The launches a tuning run measures for the H100 plan: :func:`plan_single` and :func:`fill_plan` for
    each of :data:`SINGLE_TUNING_BLOCKS_PER_SM` blocks per SM and :data:`SINGLE_TUNING_THREADS`
    threads, then :func:`short_piece_plans` and :func:`direct_plans`, without repeats. More blocks per
    SM mean smaller pieces, more of them in flight."""
    plans: list[ChangSingleLaunch] = [planner(problem, model, blocks_per_sm=blocks, threads=threads)
                                      for blocks in SINGLE_TUNING_BLOCKS_PER_SM for threads in SINGLE_TUNING_THREADS
                                      for planner in (plan_single, fill_plan)]  # fmt: skip
    return list(dict.fromkeys(plans + short_piece_plans(problem, model) + direct_plans(problem)))


def single_plan_stats(problem: ConvProblem, plan: StagedSingleLaunch, model: LatencyModel,
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
