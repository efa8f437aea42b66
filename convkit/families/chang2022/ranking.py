"""The H100's multi-channel launches: every tile of the three launches ranked by a simple cost model.

The tuning run measures the best-ranked of them (:data:`TUNING_CANDIDATES`); :func:`multi_config` is the
cheapest where nothing is tuned, :func:`multi_launch` rebuilds a launch from its recorded knobs.
"""

from __future__ import annotations

import math
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.families.chang2022.model import FILTERS_PER_THREAD, WARP
from convkit.families.chang2022.multi import (
    BROADCAST_MAX_TILES,
    BROADCAST_TILES,
    MULTI_TILES,
    POINTWISE_TILES,
    BroadcastMultiLaunch,
    ChangMultiLaunch,
    PointwiseMultiLaunch,
    TiledMultiLaunch,
)

#: Shared memory per SM the H100 launch is ranked for when the GPU's own is not given (bytes).
H100_SHARED_PER_SM = 233472
#: Warps per SM below which a launch is counted as losing latency hiding (proportionally).
WARPS_TO_HIDE = 16


def resident_blocks(config: ChangMultiLaunch, k: int, shared_per_sm: int = H100_SHARED_PER_SM) -> int:
    """Blocks of ``config`` one SM holds: by shared memory, by registers, by threads."""
    return max(0, min(shared_per_sm // config.shared_bytes_for(k), 65536 // (config.registers * config.threads),
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
) -> list[ChangMultiLaunch]:
    """The H100's launches of the multi-channel kernels, cheapest first by a simple model.

    Each tile of :data:`MULTI_TILES` (at 1x1 also of :data:`POINTWISE_TILES`, at 3x3 and 5x5 of
    :data:`BROADCAST_TILES`) gets its channels
    split over enough blocks to fill the SMs (and half and twice that), costed by :func:`_splits_and_costs`.
    Ties keep the earlier tile.
    """
    k = problem.r
    ranked: list[tuple[float, int, ChangMultiLaunch]] = []
    for order, (bm, th, tw, rpt, ck) in enumerate(MULTI_TILES):
        base = TiledMultiLaunch(bm=bm, tile_h=th, tile_w=tw, rpt=rpt, px=4, ck=ck, rows16=True)
        per_sm = resident_blocks(base, k, shared_per_sm)
        if per_sm < 1:
            continue
        padded = (math.ceil(problem.h / th) * th) * (math.ceil(problem.w / tw) * tw) * (math.ceil(problem.m / bm) * bm)
        for split, cost in _splits_and_costs(problem, padded, math.prod(base.grid(problem)), per_sm, base.threads,
                                             sm_count, (FILTERS_PER_THREAD, 4 * rpt), ck):  # fmt: skip
            ranked.append((cost, order, TiledMultiLaunch(bm, th, tw, rpt, 4, ck, split, rows16=True)))
    if k == 1:
        pixels = problem.h * problem.w
        # Ahead of the 2-D tiles at equal cost: no halo columns to stage at 1x1.
        for order, (bm, bp, tm, tp, ck) in enumerate(POINTWISE_TILES, start=-len(POINTWISE_TILES)):
            base = PointwiseMultiLaunch(bm, bp, tm, tp, ck)
            per_sm = resident_blocks(base, k, shared_per_sm)
            if per_sm < 1:
                continue
            padded = math.ceil(pixels / bp) * bp * math.ceil(problem.m / bm) * bm
            for split, cost in _splits_and_costs(problem, padded, math.prod(base.grid(problem)), per_sm,
                                                 base.threads, sm_count, (tm, tp), ck):  # fmt: skip
                ranked.append((cost, order, PointwiseMultiLaunch(bm, bp, tm, tp, ck, split)))
    if k > 1:
        # A thread's reuse: each weight it reads serves its tile_h x tile_w outputs, each input read (a
        # broadcast) up to K x K taps.
        for order, (filters, tiles, th, tw, ck) in enumerate(BROADCAST_TILES, start=len(MULTI_TILES)):
            base = BroadcastMultiLaunch(filters, tiles, th, tw, ck)
            per_sm = resident_blocks(base, k, shared_per_sm)
            if per_sm < 1 or base.tile_count(problem) > BROADCAST_MAX_TILES:
                continue
            padded = base.grid(problem)[1] * tiles * th * tw * math.ceil(problem.m / filters) * filters
            for split, cost in _splits_and_costs(problem, padded, math.prod(base.grid(problem)), per_sm,
                                                 base.threads, sm_count, (th * tw, k * k), ck):  # fmt: skip
                ranked.append((cost, order, BroadcastMultiLaunch(filters, tiles, th, tw, ck, split)))
    if not ranked:
        raise ValueError(f"no tile of MULTI_TILES fits {shared_per_sm} bytes of shared memory for {k}x{k} filters")
    return [config for _, _, config in sorted(ranked, key=lambda r: (r[0], r[1]))]


#: Launches a tuning run measures per problem: every tile the model ranks, at each of its splits (the model
#: picks well only on large layers).
TUNING_CANDIDATES = 3 * (len(MULTI_TILES) + len(POINTWISE_TILES) + len(BROADCAST_TILES))


def multi_config(problem: ConvProblem, sm_count: int, *,
                 shared_per_sm: int = H100_SHARED_PER_SM) -> ChangMultiLaunch:  # fmt: skip
    """The H100's launch without tuning: the model's cheapest (:func:`ranked_multi_configs`)."""
    return ranked_multi_configs(problem, sm_count, shared_per_sm=shared_per_sm)[0]


def multi_launch(params: dict[str, Any]) -> ChangMultiLaunch:
    """The launch recorded as ``params`` (a config's :meth:`to_params`): by ``params["kernel"]``, a
    :class:`PointwiseMultiLaunch` (``"pointwise"``), a :class:`BroadcastMultiLaunch` (``"broadcast"``), else a
    :class:`TiledMultiLaunch`."""
    params = dict(params)
    kinds = {"pointwise": PointwiseMultiLaunch, "broadcast": BroadcastMultiLaunch, "stride_fixed": TiledMultiLaunch}
    return kinds[params.pop("kernel", "stride_fixed")].from_params(params)
