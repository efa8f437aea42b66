"""The wgmma kernels' first-use pick (:func:`wgmma_default`): the launch the op's first-use tuner times on a layer where
no recorded knobs name one, chosen among the settings of :mod:`convkit.families.tf32x3.wgmma_settings` by the rules
below, each beside the measurements that fitted it."""

from __future__ import annotations

import dataclasses
import math

from convkit.core.gpu import sm_count
from convkit.core.problem import ConvProblem
from convkit.families.tf32x3.wgmma import WgmmaLaunch, WgmmaWsLaunch
from convkit.families.tf32x3.wgmma_gemm import WgmmaGemmLaunch
from convkit.families.tf32x3.wgmma_operands import NARROW_FILTERS, PIXEL_ROW_FILTERS, k_tiles, k_tiles_a_split
from convkit.families.tf32x3.wgmma_settings import (
    GATHERED_PERSISTENT,
    GATHERED_PINGPONG,
    GATHERED_PINGPONG_HALVES,
    GATHERED_PIXEL_ROWS,
    SPLIT_AHEAD,
    SPLIT_AHEAD_PINGPONG,
    TAP_PAIRS_PINGPONG,
    k_split,
    output_tiles,
    pixel_rows_candidates,
    pixel_rows_splits,
    small_grid,
    small_grid_candidates,
    split_fits,
    stores_weigh_most,
    tap_pair_candidates,
    weights_in_block,
)
from convkit.libs.cudnn import WORKSPACE_LIMIT_BYTES


def pingpong_waves_fewer(problem: ConvProblem) -> bool:
    """Whether the split-ahead kernel's tiles of 64 filters with ping-pong (:data:`SPLIT_AHEAD_PINGPONG`) take fewer
    waves of the SMs than its tiles of 128 (:data:`SPLIT_AHEAD`), a wave of 64 three fifths of one of 128. H200, 96 of
    cuConv's 3x3 and 5x5 layers (2026-12-03, ``wgmma_probe.py --ahead-early`` and ``--gathered``, the rule fitted on
    that run): on the 59 of more than 64 filters where both ran, the faster of the two on each: the ping-pong's pace
    over the other's 1.29-1.53x where its waves are as many (its tiles on more SMs), 1.05-1.15x where they are 1.4-1.5
    times as many (3 against 2; 36 against 24 at 192 filters, a third of the 128 wasted), 0.81-0.94x where twice as
    many, 0.99x at 15 against 9."""

    def waves(filters: int | None) -> int:
        return -(-output_tiles(problem, filters) // sm_count())

    return 3 * waves(NARROW_FILTERS) < 5 * waves(None)


#: On a small grid of more than 32 filters, the most K-tiles at which the first-use pick takes smaller blocks
#: (:func:`small_grid_pick`) before a K split in one wave: at 4-6 K-tiles they were 1.11-1.13x the split over a
#: cluster at batch 1, at 8 mostly slower (0.78-0.87x; 1.04x on one layer of 25 tiles). H200, ``--small-grids``.
SMALL_GRID_K_TILES = 6


def small_grid_pick(problem: ConvProblem) -> WgmmaWsLaunch:
    """The first-use pick of :func:`small_grid_candidates`: the smallest block whose grid still fits the GPU in one
    wave, the pixels on the rows at 16 filters a block, else at 32 (persistent, one K-tile in flight), else 64 with
    ping-pong (:data:`GATHERED_PINGPONG`)."""
    for filters in sorted(PIXEL_ROW_FILTERS):
        pick = dataclasses.replace(GATHERED_PIXEL_ROWS, filters=filters, in_flight=1)
        if math.prod(dataclasses.replace(pick, persistent=None).grid(problem)) <= sm_count():  # (its tiles)
            return pick
    return GATHERED_PINGPONG


def stages_by_halves(problem: ConvProblem) -> bool:
    """Whether the first-use pick of a 1x1 layer of at most 64 filters has its producer in halves
    (:data:`PIXEL_ROWS_HALVES`, :data:`GATHERED_PINGPONG_HALVES`): blocks of 128 pixels at least one an SM, and at
    least 4 K-tiles (a layer of 16-64 channels keeps two K-tiles of products in flight instead)."""
    pixel_blocks = WgmmaWsLaunch().grid(problem)[0]
    return pixel_blocks >= sm_count() and k_tiles(problem) >= 4


#: The most K-tiles a block of the pixel rows' K split (:func:`pixel_rows_splits`) that the first-use pick takes
#: before K split in 8: 7x7 2,048->512 at batch 8, 32 K-tiles a block in 2, ran at 0.68 of K split in 8 over planes
#: (8 K-tiles a block of 128 filters; 23.0 TFLOP/s against 34.0, ``wgmma_probe.py --moved-picks``); at 16 a block (the
#: same layer at batch 1, in 4) every setting ran within 3% of the others (``--batch-one-settings``). H200, 2026-12-04.
PIXEL_ROWS_K_TILES = 16


def split_before_rows(problem: ConvProblem, rows: WgmmaWsLaunch) -> bool:
    """Whether the first-use pick takes K split in 8 (:func:`k_split`, where it runs) before the pixel rows' K split
    ``rows``: where ``rows`` splits K in 2 and K split in 8 runs over a cluster (14x14 512->512 at batch 1: the rows
    0.92 of it), or where ``rows`` leaves a block more than :data:`PIXEL_ROWS_K_TILES` K-tiles."""
    splits = rows.effective_splits(problem)
    return (splits == 2 and k_split(problem, 8).cluster) or k_tiles_a_split(problem, splits) > PIXEL_ROWS_K_TILES


#: On more than one tap, the fewest K-tiles at which the first-use pick splits K in 8 (one and a half a split). H200,
#: each of cuConv's 42 3x3 and 5x5 layers where it did at any count (2026-12-03, ``wgmma_probe.py --gathered
#: --k-split-picks``): the fastest setting or within 2% of it on each of 13 K-tiles or more; at 9 (27x27 32->128 at
#: batch 1, 6 tiles) 0.83x the split-ahead kernel's ping-pong, in two runs.
MULTI_TAP_SPLIT_K_TILES = 12


def wgmma_default(problem: ConvProblem) -> WgmmaLaunch:
    """The launch the op's first-use tuner times where no recorded knobs name one: :func:`pick_weights_split_ahead`,
    with its weights split in the block where that runs (:func:`weights_in_block`) on a 1x1 layer, at batch 1 or with
    K split over a cluster, where it was timed (:data:`~convkit.families.tf32x3.wgmma_settings.IN_BLOCK_SETTINGS`:
    1.051x, faster on 56 of 61 such layers)."""
    pick = pick_weights_split_ahead(problem)
    timed = problem.n == 1 or (isinstance(pick, WgmmaWsLaunch) and pick.sums_in_cluster(problem))
    in_block = weights_in_block(pick, problem) if problem.r * problem.s == 1 and timed else None
    return in_block or pick


def pick_weights_split_ahead(problem: ConvProblem) -> WgmmaLaunch:
    """The first-use pick among the settings with the weights split ahead: where :func:`pixel_rows_splits` has
    any, the pixels on the rows with K split over a cluster in the most splits, then the most blocks, but where K split
    in 8 runs and :func:`split_before_rows`; else K split in 8 (else 4) where that grid is one wave
    (a block an SM at most) and each split has a K-tile (:func:`k_split`: over a cluster where it fits; on more than one
    tap in 8 alone, of :data:`MULTI_TAP_SPLIT_K_TILES` K-tiles or more), but on a :func:`small_grid` layer of more than
    32 filters and at most :data:`SMALL_GRID_K_TILES` K-tiles; else, on a 1x1 layer of at most 32 filters, the pixels on
    the products' rows, persistent, one K-tile in flight (:func:`pixel_rows_candidates`); else, on a :func:`small_grid`
    layer, :func:`small_grid_pick`; else, where :func:`stores_weigh_most`, at 64 filters a block with ping-pong where
    the layer has at most 64, else persistent (the pixel rows and the ping-pong with the producer in halves where
    :func:`stages_by_halves`); else the inputs split ahead (:data:`SPLIT_AHEAD`; at 64 filters a block with ping-pong
    where the layer has at most 64 or :func:`pingpong_waves_fewer`, :data:`SPLIT_AHEAD_PINGPONG`; on K-tiles of two taps
    with ping-pong where it has at most 64 filters and 16 channels, :data:`TAP_PAIRS_PINGPONG`), in passes of images
    within the 1 GiB the study allows any algorithm, else (one image's planes past it) the first kernel
    (:class:`WgmmaGemmLaunch`). H200, the 3xTF32 chapter's 349 1x1 layers (2026-12-02, ``wgmma_probe.py --ones``, the
    rule fitted on that run): the geometric mean of its pick over the fastest of these settings 0.983 (under 0.9 on 23
    layers), and 0.981 on a second run of 287 of them; its pick or the mma.sync kernel over cuBLAS SGEMM, median 1.19x
    (the fastest of all, 1.21x); on the 192 of them where K split is a candidate (``--clustered``), 1.156x with the
    split over planes, 1.171x over a cluster where it fits; with :func:`k_split`, on all 349 in a later run, 1.195x
    (faster on 239; the fastest of all 1.22x). On every third of cuConv's 3x3 and 5x5 layers (96, ``--gathered``, the
    rule fitted on that run): 0.998 of the fastest setting (geometric mean; 0.875 at worst), where the first kernel, the
    default before, was 0.41; on the other third's 95 (``--offset=1``, a later run) 0.982, under 0.9 on 3: two whose
    inputs' planes would pass 1 GiB (224-128-3-64-64, 112-256-3-128-128), where the first kernel runs at 0.44-0.50 of
    the split-ahead kernel's pace, and one K split at 0.90. The pixel rows and tap pairs, their rules fitted on one run
    each: on cuConv's layers of at most 32 filters (``--pixel-rows``; the 78 where the pick was among the runs, its 77
    1x1 among them) 0.996, on its 28 of at most 16 channels (``--tap-pairs``) 0.991; under 0.9 on two of each, all K
    splits at batch 1 (0.87-0.89). The small grids' pick, fitted on its run (``--small-grids``, 100 layers where the
    pick was among the runs): 0.994, under 0.9 on 2 (0.84-0.88, K splits of 4-6 K-tiles), where the rule before it was
    0.920 (under 0.9 on 32); with those K splits left to the smaller blocks (:data:`SMALL_GRID_K_TILES`) 0.999, none
    under 0.9, and on a second run (fresh process, cuConv's 90 of them, ``tf32x3_probe.py --suite=cuconv --every=1
    --small-grids``) 0.998, none under 0.9. Two K-tiles of inputs in flight where :func:`stages_by_halves` (the rule
    fitted on the two runs of ``--gather-ahead`` at 1dc6c4b, cuConv's 94 1x1 layers of at most 64 filters, 2026-12-03, a
    thread's next K-tile in a second set of its registers): 0.992 of the fastest, was 0.979 (0.859 at worst, a K split
    at batch 1, either way); on the 37 layers where the pick changed, 1.035x the pick before (0.965-1.096x, slower by
    over 2% on 2). The producer's halves in their place, faster than that on each layer where both ran
    (:data:`GATHERED_PINGPONG_HALVES`), the pick not yet timed as a whole. On more than one tap,
    :data:`SPLIT_AHEAD_PINGPONG` where :func:`pingpong_waves_fewer` and no K split in 4, and the inputs split ahead a
    pass of images at a time where their planes would pass 1 GiB: on 95 of cuConv's 3x3 and 5x5 layers
    (``--ahead-early`` and ``--gathered``, the rules fitted on that run, 2026-12-03) 0.999 of the fastest candidate
    (0.95 at worst) where the rule before was 0.938 (0.39 at worst, under 0.9 on 15), the three layers now in passes
    counted at their pace in one pass; on 24 layers not in that run (``--gathered --offset=1 --part=1/4``) the fastest
    on each, and in passes 112-256-3-128-64 at 0.975 its pace in one."""
    # (in 4 on more than one tap: 0.81-0.84x the split-ahead kernel's ping-pong, 5 of cuConv's layers, 2026-12-03.
    # The pixel rows' K split: on the 49 layers of the H200's runs where it changed the pick, 0.997 of the fastest
    # wgmma setting at the geometric mean, where the pick before was 0.837; under 0.9 on one, 7x7 2048->512 at batch
    # 1, 0.89, 2026-12-04. In 2 and a K-tile a split too, the rule fitted on that run (``--batch-one-settings``, the
    # 56 1x1 layers at batch 1 under 0.5 GFLOP, this GPU's cluster slots): 0.996 of the fastest candidate, none under
    # 0.9 (0.925 at worst, 112x112 64->64, which it leaves as it was); in 2 before K split in 8 over a cluster 0.995,
    # 0.92 on 14x14 512->512)
    splits = (8, 4) if problem.r * problem.s == 1 else (8,) if k_tiles(problem) >= MULTI_TAP_SPLIT_K_TILES else ()
    split = next((s for s in splits if split_fits(problem, s, 1)), None)
    rows = max(pixel_rows_splits(problem), default=None, key=lambda s: (s.effective_splits(problem), -s.filters))
    if rows and not (split == 8 and split_before_rows(problem, rows)):
        chosen = rows
    elif split and not (small_grid_candidates(problem) and k_tiles(problem) <= SMALL_GRID_K_TILES):
        chosen = k_split(problem, split)
    elif pixel_rows := pixel_rows_candidates(problem):
        chosen = pixel_rows[-1 if stages_by_halves(problem) else 0]  # (persistent, one K-tile in flight)
    elif small_grid(problem):
        chosen = small_grid_pick(problem)
    elif stores_weigh_most(problem) and problem.m <= NARROW_FILTERS:
        chosen = GATHERED_PINGPONG_HALVES if stages_by_halves(problem) else GATHERED_PINGPONG
    elif stores_weigh_most(problem):
        chosen = GATHERED_PERSISTENT
    else:
        pingpong = problem.m <= NARROW_FILTERS or pingpong_waves_fewer(problem)
        chosen = SPLIT_AHEAD_PINGPONG if pingpong else SPLIT_AHEAD
        if TAP_PAIRS_PINGPONG in tap_pair_candidates(problem):  # (timed at 64 filters a block alone)
            chosen = TAP_PAIRS_PINGPONG
        if chosen.workspace_bytes(problem) > WORKSPACE_LIMIT_BYTES:  # (one image's planes past it)
            chosen = WgmmaGemmLaunch()
    return WgmmaGemmLaunch() if chosen.not_supported_reasons(problem) else chosen  # (where the first kernel fits)
