"""The wgmma kernels' settings: every one that builds (for the probe, the emulator and the sanitizer), and those the
tuner measures on a layer (:func:`wgmma_candidates`, the 1x1 layers' own in :func:`one_tap_candidates`), each beside
the measurements that made it one; the first-use pick among them is :mod:`convkit.families.tf32x3.wgmma_pick`'s."""

from __future__ import annotations

import dataclasses
import math

from convkit.core.gpu import has_gpu, sm_count
from convkit.core.memo import memoize
from convkit.core.problem import ConvProblem
from convkit.families.tf32x3.wgmma import MAX_CLUSTER, WgmmaLaunch, WgmmaWsLaunch
from convkit.families.tf32x3.wgmma_gemm import WgmmaGemmLaunch
from convkit.families.tf32x3.wgmma_operands import (
    BLOCK_M,
    NARROW_FILTERS,
    PAIRED_CHANNELS,
    PIXEL_ROW_FILTERS,
    TILE_K,
    k_tiles,
    k_tiles_a_split,
)

#: Every setting the kernel builds. Only the staged one is a tuning candidate: on the H100, the tensor cores' own sums
#: over K lose precision as K grows (unstaged, 1.6e-5 at K = 2,304 and 4.2e-5 at K = 12,593 against float64, past the
#: direct methods' 1e-5; staged, 2.5-3.5e-7 on the same layers: ``scripts/wgmma_probe.py``).
WGMMA_SETTINGS = (WgmmaGemmLaunch(), WgmmaGemmLaunch(staged=False), WgmmaGemmLaunch(staged=False, stages=3),
                  WgmmaGemmLaunch(256, staged=False))  # fmt: skip


#: The split-ahead kernel as the tuner measures it: persistent, two K-tiles in flight; and at 64 filters a block.
#: Each launched early, as the operands' split ends (its producer waits for the split before its first copy): H200,
#: every fourth of cuConv's 3x3 and 5x5 layers (72; 2026-12-03, ``wgmma_probe.py --ahead-early``), over the same
#: setting launched after the split, 178 pairs of them: median 1.029x, faster on 160, 0.98x at worst (large layers,
#: within the spread), 1.14-1.15x on layers of a few microseconds.
SPLIT_AHEAD = WgmmaWsLaunch(in_flight=2, inputs="split ahead", persistent=True, early=True)
SPLIT_AHEAD_NARROW = dataclasses.replace(SPLIT_AHEAD, filters=NARROW_FILTERS)
#: At 64 filters a block, its consumers taking alternate output tiles (CUTLASS's ping-pong): a candidate on every layer
#: of more than one tap. H200, the 16 of cuConv's 3x3 and 5x5 layers (every fourth) where CUTLASS's 3xTF32 kernel beat
#: the candidates before it (2026-12-03, ``wgmma_probe.py --cutlass-taps``): the fastest wgmma setting on 10, over the
#: fastest candidate 1.07-1.42x: 1.29-1.42x on the 6 whose tiles of 128 filters are one wave without a K split (39-75
#: tiles of 128-320 filters, the blocks doubled or tripled), 1.13x and 1.20x over a K split in 4 (22 and 28 tiles),
#: 1.09x on 730 tiles of 192 filters, 1.07x over :data:`SPLIT_AHEAD_NARROW` on one of 64; faster than CUTLASS on 5.
SPLIT_AHEAD_PINGPONG = dataclasses.replace(SPLIT_AHEAD_NARROW, pingpong=True)
#: The same at 64 pixels a block (an m64n64k8 product a consumer): on a layer of more than one tap whose tiles of 64
#: filters by 128 pixels are fewer than the SMs, twice as many tiles. CUTLASS's 64 x 64 tile beat our fastest there
#: (H200 quick run, 2026-12-05: 28 x 28 512->512 at batch 1, 95.8 us against 111.9 at 64 by 128 with ping-pong, its
#: 56 tiles on 132 SMs). A tuning candidate, not yet timed; the first-use pick does not take it.
SPLIT_AHEAD_PINGPONG_64 = dataclasses.replace(SPLIT_AHEAD_PINGPONG, width=64)
#: The same with the inputs channels last in FP32 (half their bytes), split in shared memory once staged: the
#: products' setting of Winograd on wgmma with its inputs split as staged. Not a candidate for the direct method (H200):
#: slower than :data:`SPLIT_AHEAD` on each of the chapter's 97 stride-1 3x3 and 5x5 layers of at least 20 GFLOP (0.74x
#: at the median, 0.85x at best, 2026-11-28); a tie with it on a third of the 1x1 layers (median 1.02x, 2026-12-02).
SPLIT_STAGED = dataclasses.replace(SPLIT_AHEAD, inputs="split staged", early=None)


def wgmma_candidates(problem: ConvProblem) -> list[WgmmaLaunch]:
    """Launches a tuning run measures: the staged settings of :data:`WGMMA_SETTINGS`, the warp-specialised kernel on
    its inputs gathered and split ahead (:data:`SPLIT_AHEAD`), this at 64 filters a block too where the layer has at
    most 64 (20-35% faster on 3x3 and 5x5 layers of 64 filters, 0.94-1.08x on those of 192-320: ``wgmma_probe.py
    --layers``) and with ping-pong on any layer of more than one tap (:data:`SPLIT_AHEAD_PINGPONG`; at 64 pixels a
    block too where :func:`few_tiles`, :data:`SPLIT_AHEAD_PINGPONG_64`), the gathering
    kernel's settings: where :func:`stores_weigh_most`, :func:`one_tap_candidates`, else its K split where it fits
    (:func:`k_splits`); on a 1x1 layer of at most 32 filters, the pixels on the products' rows
    (:func:`pixel_rows_candidates`); on a layer of at most 16 channels, K-tiles of two taps
    (:func:`tap_pair_candidates`); each of the pixel rows' with its weights split in the block where that runs
    (:func:`weights_in_block`). H200, the 3xTF32 chapter's 110 layers of at least 20 GFLOP
    (2026-11-28): :data:`SPLIT_AHEAD` the fastest on 67 (median 92.7 TFLOP/s; a block a tile, one K-tile in flight:
    86.3), the gathered one on 9 (1x1). On the H100 the gathered one beat the first kernel on 4 of 5 layers. H200,
    every third of cuConv's 3x3 and 5x5 layers (96; 2026-12-02, ``wgmma_probe.py --gathered``): the 1x1 layers'
    settings beside the candidates without them, the fastest faster on 24 (median 1.00x): K split over a cluster on
    21 (1.1-2.5x; batch 1 and 8, and 16 at 7x7), over planes on 1, ping-pong on the two of 3 channels, one K-tile
    (1.47x, 1.51x)."""
    narrow = [SPLIT_AHEAD_NARROW] if problem.m <= NARROW_FILTERS else []
    narrow += [SPLIT_AHEAD_PINGPONG] if problem.r * problem.s > 1 else []
    narrow += [SPLIT_AHEAD_PINGPONG_64] if problem.r * problem.s > 1 and few_tiles(problem) else []
    gathering = one_tap_candidates(problem) if stores_weigh_most(problem) else k_splits(problem)
    narrower = [
        *pixel_rows_candidates(problem),
        *tap_pair_candidates(problem),
        *small_grid_candidates(problem),
        *pixel_rows_splits(problem),
    ]
    in_block = [spec for spec in dict.fromkeys(weights_in_block(s, problem) for s in narrower) if spec]
    return [*(spec for spec in WGMMA_SETTINGS if spec.staged), WgmmaWsLaunch(), *gathering, SPLIT_AHEAD, *narrow,
            *narrower, *in_block]  # fmt: skip


def pixel_rows_candidates(problem: ConvProblem) -> list[WgmmaWsLaunch]:
    """The gathering kernel with the block's pixels the products' rows (:data:`GATHERED_PIXEL_ROWS`), on a 1x1 layer of
    at most 32 filters: 16 filters a block where it has at most 16, else 32; persistent or a block a tile, one or two
    K-tiles in flight; and persistent with the producer in halves (:data:`PIXEL_ROWS_HALVES`). H200, cuConv's 84
    layers of at most 32 filters (2026-12-02, ``wgmma_probe.py --pixel-rows``): on its 77 1x1 layers the fastest of
    these (but the last) over the fastest of the other candidates and the mma.sync kernel 1.03-1.24x where the batch is
    32 or more (and on most of 8 and 16), persistent with one K-tile in flight the fastest on most; at batch 1 and 8 of
    512-832 channels, where the K split wins, 0.44-0.79x; on its seven 5x5 layers 0.36-0.70x (no candidate there)."""
    if problem.r * problem.s > 1 or problem.m > 32:
        return []
    filters = 16 if problem.m <= 16 else 32
    return [*(dataclasses.replace(GATHERED_PIXEL_ROWS, filters=filters, persistent=persistent, in_flight=in_flight)
              for persistent in (True, None) for in_flight in (1, 2)),
            dataclasses.replace(PIXEL_ROWS_HALVES, filters=filters)]  # fmt: skip


def few_tiles(problem: ConvProblem) -> bool:
    """Whether ``problem``'s output tiles of 64 filters by 128 pixels are fewer than the SMs (some would idle)."""
    return output_tiles(problem, NARROW_FILTERS) < sm_count()


def output_tiles(problem: ConvProblem, filters: int | None = None) -> int:
    """``problem``'s output tiles of 128 filters (else ``filters``) by 128 pixels (the warp-specialised kernel's blocks
    a tile)."""
    return math.prod(WgmmaWsLaunch(filters=filters).grid(problem)[:2])


def small_grid(problem: ConvProblem) -> bool:
    """Whether ``problem`` is a 1x1 layer whose :func:`output_tiles` would fill at most half the SMs: a layer of a few
    microseconds, where a block's stores of its tile weigh most."""
    return problem.r * problem.s == 1 and output_tiles(problem) <= sm_count() // 2


def small_grid_candidates(problem: ConvProblem) -> list[WgmmaWsLaunch]:
    """Smaller blocks, more of them, on a :func:`small_grid` layer of more than 32 filters (with fewer, these are
    :func:`pixel_rows_candidates`): the pixels on the products' rows at 32 and 16 filters a block, persistent or a
    block a tile, one K-tile in flight. H200, the 3xTF32 chapter's 104 such layers of stride 1 (2026-12-02,
    ``wgmma_probe.py --small-grids``; every run checked against float64, none wrong): the fastest of these over the
    fastest of the other candidates and the mma.sync kernel faster on 26 (1.02-1.33x; the fastest at 16 filters on 12,
    at 32 on 14), all where K split over a cluster was not the fastest; the gathering kernel at 64 filters a block
    without ping-pong, timed beside them on the 71 of more than 64 filters, the fastest on none. Over the best FP32
    library, cuConv's 94 such layers (``tf32x3_probe.py --suite=cuconv --every=1 --small-grids``, that run's best
    with and without these): at batch 1 0.877x, was 0.844x (geometric mean of 36; faster on 4, was 3), at batch 8
    1.260x, was 1.231x (26; faster on 24, was 21); all 94 1.145x, was 1.115x (faster on 59, was 54)."""
    if not small_grid(problem) or problem.m <= 32:
        return []
    return [dataclasses.replace(GATHERED_PIXEL_ROWS, filters=filters, persistent=persistent, in_flight=1)
            for filters in PIXEL_ROW_FILTERS for persistent in (True, None)]  # fmt: skip


def pixel_rows_splits(problem: ConvProblem) -> list[WgmmaWsLaunch]:
    """The pixels on the products' rows at 16 and 32 filters a block with K split in 2, 4 and 8 over a cluster
    (:data:`PIXEL_ROWS_CLUSTER`; a split count kept once where two share their splits in effect), on a 1x1 layer of at
    least 3 K-tiles and at most 32 filters or a :func:`small_grid`, where the tiles' clusters all run at once
    (:func:`cluster_slots`); the producer in halves where a split has :data:`SPLIT_HALVES_K_TILES` or more: more
    blocks, each reading fewer weights, where a block of 128 filters a tile leaves most SMs idle over many K-tiles.
    H200, 2026-12-04 (``tf32x3_probe.py --suite=cuconv --every=1``, the layers where these are candidates, every run
    checked against float64, none wrong): in 4 and 8 with two K-tiles a split at least, on cuConv's 28 such batch-1
    layers the fastest of these over the fastest other wgmma setting 1.03-1.33x on 26 (median 1.19x); faster than the
    best FP32 library on 23 of them, was 5; the fastest wgmma setting on each of its 18 of batch 8-64. Then in 2 too,
    a K-tile a split, in halves (``wgmma_probe.py --batch-one-settings``, the 56 1x1 layers at batch 1 under 0.5
    GFLOP): the fastest candidate with these over the fastest without them 1.04-1.30x on 23 (the fastest a K-tile a
    split on 8 of them, in 2 on 3, in halves on 9), none slower by over 2%; the best over cuBLAS SGEMM 1.006x at the
    geometric mean (faster on 32), was 0.965x (26). Not on 2 K-tiles, where they ran 0.86-0.96x the fastest of the
    rest; nor on batch-1 3x3 and 5x5 layers of at most 66 tiles (31 of cuConv's; ``tf32x3_probe.py``, 2026-12-05):
    the fastest of them over our direct kernels before 0.61x at the geometric mean, faster on 2, fastest on none."""
    if problem.r * problem.s > 1 or not (problem.m <= 32 or small_grid(problem)) or k_tiles(problem) < 3:
        return []
    out, seen = [], set()
    for filters in PIXEL_ROW_FILTERS:
        for splits in (2, 4, 8):
            spec = dataclasses.replace(PIXEL_ROWS_CLUSTER, filters=filters, splits=splits)
            effective = spec.effective_splits(problem)
            if (filters, effective) not in seen and clusters_fit(spec, problem):
                seen.add((filters, effective))
                halves = k_tiles_a_split(problem, effective) >= SPLIT_HALVES_K_TILES
                out.append(dataclasses.replace(spec, producer_halves=halves or None))
    return out


def tap_pair_candidates(problem: ConvProblem) -> list[WgmmaWsLaunch]:
    """The split-ahead kernel on K-tiles of two taps (:data:`TAP_PAIR_SETTINGS`) on a layer of at most 16 channels and
    more than one tap; where it has at most 64 filters, at 64 a block with ping-pong too (:data:`TAP_PAIRS_PINGPONG`).
    H200, cuConv's 28 such layers (2026-12-02, ``wgmma_probe.py --tap-pairs``): the fastest of these over the fastest
    of the other candidates and the mma.sync kernel, faster on 16, all of 16 channels and a batch of 8 or more (at
    14x14 5x5, 32 or more): 1.04-1.81x (1.41x or more on 13), always at 64 filters with ping-pong; at smaller
    batches 0.75-0.97x; on its seven of 3 channels 0.58-0.64x (the gathering kernel's ping-pong wins there, and
    :func:`stores_weigh_most` picks it first)."""
    if problem.r * problem.s == 1 or problem.c > PAIRED_CHANNELS:
        return []
    return list(TAP_PAIR_SETTINGS if problem.m <= NARROW_FILTERS else TAP_PAIR_SETTINGS[:1])


def stores_weigh_most(problem: ConvProblem) -> bool:
    """Whether a tile's products are few beside its stores: a 1x1 filter, or at most two K-tiles (a layer of a few
    channels, an image's first), where the gathering kernel's persistent and ping-pong settings (each storing a tile
    as the next is multiplied) serve."""
    return problem.r * problem.s == 1 or k_tiles(problem) <= 2


def one_tap_candidates(problem: ConvProblem) -> list[WgmmaWsLaunch]:
    """The gathering kernel's settings for a 1x1 filter: persistent (:data:`GATHERED_PERSISTENT`), persistent at 64
    filters a block with its consumers taking alternate output tiles (:data:`GATHERED_PINGPONG`), at 64 filters a block
    where the layer has at most 64 (:data:`GATHERED_NARROW`) and there ping-pong with the producer in halves
    (:data:`GATHERED_PINGPONG_HALVES`), K split in 4 and 8 (:data:`GATHERED_SPLIT`) where that
    grid is at most eight blocks an SM and each split has a K-tile (:func:`k_split`: over a cluster where the tile's
    clusters all run at once). H200, the 3xTF32 chapter's 1x1 layers, each setting on every one (2026-12-02,
    ``wgmma_probe.py --ones --part=k/3``): of the 337 over 1 TFLOP/s in SGEMM the fastest was persistent on 135, at 64
    filters on 79, K split in 4 on 32, in 8 on 21, mma.sync on 65; the best over cuBLAS SGEMM, median 0.98x without the
    last three, 1.08x with them, 1.13x with each launched early (all 349, faster on 219), 1.21x with ping-pong too
    (faster on 238), 1.22x with K split over a cluster where it fits (faster on 242; at batch 1 0.89x, was 0.84x; at 8
    1.23x, was 1.11x). The rule leaves out no split that won (two blocks an SM, two K-tiles a split: 7 layers 2-9%
    off)."""
    narrow = [GATHERED_NARROW, GATHERED_PINGPONG_HALVES] if problem.m <= NARROW_FILTERS else []
    return [GATHERED_PERSISTENT, GATHERED_PINGPONG, *narrow, *k_splits(problem)]


def k_splits(problem: ConvProblem) -> list[WgmmaWsLaunch]:
    """The gathering kernel with K split in 4 and in 8 (:func:`k_split`) where that grid is at most eight blocks an SM
    and each split has a K-tile (:func:`split_fits`)."""
    return [k_split(problem, s) for s in (4, 8) if split_fits(problem, s, 8)]


def split_fits(problem: ConvProblem, splits: int, blocks_per_sm: int) -> bool:
    """Whether the gathering kernel's K split in ``splits`` (a block a tile of 128 filters) makes a grid of at most
    ``blocks_per_sm`` blocks an SM, each split with a K-tile of its own."""
    pixel_blocks, m_blocks, _ = GATHERED_SPLIT.grid(problem)
    return pixel_blocks * m_blocks * splits <= blocks_per_sm * sm_count() and k_tiles(problem) >= splits


def k_split(problem: ConvProblem, splits: int) -> WgmmaWsLaunch:
    """The gathering kernel with K split in ``splits``: over a cluster (:data:`GATHERED_CLUSTER`, the splits' sums added
    in it) where the layer's output tiles, a cluster each, all fit on the GPU at once (:func:`cluster_slots`), else
    into planes of partial outputs that a second kernel adds (:data:`GATHERED_SPLIT`). H200, the 192 of the 3xTF32
    chapter's 1x1 layers where K split in 4 is a candidate (2026-12-02, ``wgmma_probe.py --ones --clustered``): over a
    cluster against over planes, in 8, 1.09-1.14x at the median for 2 to 14 tiles, 0.83x at 16 (the H200 holds 15
    clusters of 8, 30 of 4: :func:`cluster_slots`); in 4, 0.99-1.06x up to 33 tiles, 0.82-0.99x past them (a second
    wave of clusters). With this rule, on all 349 1x1 layers (``--ones``): over a cluster where it picked one, 1.08x
    its planes in 8 (54 layers, never slower), 1.03x in 4 (87; 0.93x at worst)."""
    clustered = dataclasses.replace(GATHERED_CLUSTER, splits=splits)
    return clustered if clusters_fit(clustered, problem) else dataclasses.replace(GATHERED_SPLIT, splits=splits)


def clusters_fit(spec: WgmmaWsLaunch, problem: ConvProblem) -> bool:
    """Whether ``spec``, K split over a cluster, runs ``problem`` with every output tile's cluster on the GPU at once:
    2 to :data:`MAX_CLUSTER` splits in effect, and the tiles within :func:`cluster_slots`."""
    effective = spec.effective_splits(problem)
    return 1 < effective <= MAX_CLUSTER and math.prod(spec.grid(problem)[:2]) <= cluster_slots(effective)


def cluster_slots(splits: int) -> int:
    """How many clusters of ``splits`` blocks of the gathering kernel's K split over a cluster this GPU runs at once:
    the driver's count for the kernel built for a 1x1 filter (``cuOccupancyMaxActiveClusters``; a cluster's blocks
    share a GPC, so the count is under ``sm_count() // splits`` where the GPCs' SMs are no multiple of it; a block an
    SM whatever the filter, its shared memory the same). Without a GPU,
    or where the kernel does not run (off Hopper, or built for another architecture's PTX), that bound. It builds the
    kernel once per GPU and process (kept on disk: ``convkit prebuild`` builds it as it lists the op's builds)."""
    launch = dataclasses.replace(GATHERED_CLUSTER, splits=splits)
    if not has_gpu() or launch.not_supported_reasons(_one_tile(splits)):
        return sm_count() // splits
    return _driver_cluster_slots(splits)


def _one_tile(splits: int) -> ConvProblem:
    """A 1x1 layer of one output tile, a K-tile a split: what the kernel is built and counted on."""
    return ConvProblem(1, splits * TILE_K, 8, 8, BLOCK_M, 1, 1)


@memoize(for_each_device=True)
def _driver_cluster_slots(splits: int) -> int:
    """:func:`cluster_slots` on this GPU, from the built kernel."""
    from convkit.cuda.driver import max_active_clusters
    from convkit.cuda.launch import loaded

    launch, problem = dataclasses.replace(GATHERED_CLUSTER, splits=splits), _one_tile(splits)
    function = loaded(launch, problem).kernel.ptr
    return max_active_clusters(function, launch.grid(problem), launch.block(problem), launch.shared_bytes(problem))


#: The gathering kernel persistent, two K-tiles in flight: its producer gathers the next tile's first K-tiles as its
#: consumers store the last one's. On 117 of the chapter's 1x1 layers (H200, ``wgmma_probe.py --ones --part=1/3``)
#: faster than it a block a tile on 96, within 3% on 20 (median 1.07x), than the mma.sync kernel on 70 (1.15x).
#: Each 1x1 candidate is launched early: on the same 117 (``--early``, 2026-12-02) 5% faster at the median for each
#: (persistent 1.055x, faster by over 2% on 95, never slower by 2%; at 64 filters 1.062x; K split 1.048-1.053x).
GATHERED_PERSISTENT = WgmmaWsLaunch(in_flight=2, persistent=True, early=True)
#: For 1x1 layers of few output tiles and many K-tiles: K split over blocks, a block a tile; of at most 64 filters:
#: persistent, 64 filters a block. (K split at 64 filters too: the fastest on 5 of those 146 layers, no candidate.)
GATHERED_SPLIT = WgmmaWsLaunch(in_flight=2, splits=4, early=True)
GATHERED_NARROW = WgmmaWsLaunch(in_flight=2, persistent=True, filters=NARROW_FILTERS, early=True)
#: K split with each tile's splits one thread-block cluster, their sums added there (no planes, no second kernel).
#: Its weights are split ahead by a launch of their own even at batch 1, where each block reads them once: their
#: split by the producer as it staged them (one launch, d313d76, reverted) was slower on 34 of the 38 batch-1 layers
#: this serves (H200, ``wgmma_probe.py --batch-one``, 2026-12-03: 0.92x the call at the geometric mean, 0.81-1.02x;
#: 7x7 832->32 16.5 us against 13.5), each K-tile's copy, split and arrival one after the other ahead of its products.
GATHERED_CLUSTER = dataclasses.replace(GATHERED_SPLIT, cluster=True)
#: Its consumers take alternate output tiles, one storing as the other multiplies (CUTLASS's ping-pong). H200, the
#: chapter's 349 1x1 layers (``wgmma_probe.py --ones``, 2026-12-02): over :data:`GATHERED_PERSISTENT` 1.16x at the
#: median (1.21x on the 146 of at most 64 filters, 0.95x on the rest), the fastest setting on 148; in a second run
#: (fresh process, 287 of the layers) the same to within 1.5% (10th-90th percentile), and :data:`GATHERED_NARROW`
#: over it 0.92x at the median on 118 of at most 64 filters, faster by over 2% on 2 (kept a candidate there).
GATHERED_PINGPONG = dataclasses.replace(GATHERED_NARROW, pingpong=True)
#: For 1x1 layers of at most 32 filters (77 of cuConv's 616): the gathering kernel with the block's pixels the products'
#: rows and its 32 filters their columns, persistent (:func:`pixel_rows_candidates`). H200, over the best FP32 library
#: (``tf32x3_probe.py --suite=cuconv --touched --every=1``, 2026-12-02): with it 0.98x (geometric mean; faster on 32 of
#: the 77), where a sample of 13 of cuConv's layers of at most 32 filters had run 0.86x without it.
GATHERED_PIXEL_ROWS = WgmmaWsLaunch(in_flight=2, persistent=True, filters=32, early=True)
#: The 1x1 layers' settings of 64 and of 32 or 16 filters a block with the producer in halves on alternate K-tiles,
#: two K-tiles of its loads in flight (one K-tile of products; the kernel's HALVES says why). H200, 2026-12-03: over
#: the same settings with a thread's next K-tile in a second set of its registers (``wgmma_probe.py --gather-ahead``
#: at 1dc6c4b: 1.03-1.10x over the rest on 29 of cuConv's 94 1x1 layers of at most 64 filters, all at batch 16 or
#: more), faster on each of the 9 layers where both were among the five fastest (``--cutlass-ones``, 1.02-1.10x;
#: 28x28 256->32 at batch 128 57.1 us against 62.8, CUTLASS's 63.4); the fastest wgmma setting on 12 of its 15 layers
#: (at batch 8 too, 1.01-1.06x the candidates before), and on 6 of the 11 of ``--producer-halves --part=1/3``
#: (1.03-1.11x, batch 8 to 256; 0.93-0.98x at batch 1 and 16, and at 32 of 2 K-tiles).
GATHERED_PINGPONG_HALVES = dataclasses.replace(GATHERED_PINGPONG, in_flight=1, producer_halves=True)
PIXEL_ROWS_HALVES = dataclasses.replace(GATHERED_PIXEL_ROWS, in_flight=1, producer_halves=True)
#: The pixels on the rows with K split over a cluster, a block a tile (:func:`pixel_rows_splits`).
PIXEL_ROWS_CLUSTER = dataclasses.replace(GATHERED_PIXEL_ROWS, persistent=None, splits=8, cluster=True)
#: The fewest K-tiles a split at which :func:`pixel_rows_splits` stages them by the producer's halves (two K-tiles of
#: inputs in flight). H200, the 3xTF32 chapter's 56 1x1 layers at batch 1 under 0.5 GFLOP (2026-12-04,
#: ``wgmma_probe.py --batch-one-settings``), the halves' pace over the same setting's without, at the median over the
#: layers and settings: 0.965x at one K-tile a split (102 pairs), 0.995x at two, 1.000x at three, 1.031x at four (1.000
#: at worst), 1.03-1.16x at more.
SPLIT_HALVES_K_TILES = 4
#: For layers of at most 16 channels (21 of cuConv's 616 have 16; K-tiles of 32 channels at one tap are half zeros
#: there): the split-ahead kernel on K-tiles of two taps of 16 channels, at 128 and 64 filters a block, and at 64 with
#: ping-pong (:func:`tap_pair_candidates`). Apart from :data:`WS_SETTINGS`, which run any layer.
TAP_PAIR_SETTINGS = (
    dataclasses.replace(SPLIT_AHEAD, tap_pairs=True),
    dataclasses.replace(SPLIT_AHEAD_NARROW, tap_pairs=True),
    dataclasses.replace(SPLIT_AHEAD_NARROW, tap_pairs=True, pingpong=True),
)
#: At 64 filters a block, its consumers taking alternate output tiles: the fastest on each of cuConv's 16-channel
#: layers where K-tiles of two taps won (``wgmma_probe.py --tap-pairs``).
TAP_PAIRS_PINGPONG = TAP_PAIR_SETTINGS[2]
#: Every setting of the warp-specialised kernel, for the probe, the emulator and the sanitizer.
WS_SETTINGS = (WgmmaWsLaunch(), WgmmaWsLaunch(in_flight=2), GATHERED_PERSISTENT, WgmmaWsLaunch(inputs="split ahead"),
               WgmmaWsLaunch(in_flight=2, inputs="split ahead"), WgmmaWsLaunch(inputs="split ahead", persistent=True),
               SPLIT_AHEAD, SPLIT_AHEAD_NARROW, SPLIT_STAGED, GATHERED_SPLIT, GATHERED_NARROW,
               dataclasses.replace(GATHERED_SPLIT, filters=NARROW_FILTERS),
               dataclasses.replace(GATHERED_PERSISTENT, early=None), GATHERED_PINGPONG,
               SPLIT_AHEAD_PINGPONG, SPLIT_AHEAD_PINGPONG_64, GATHERED_CLUSTER,
               dataclasses.replace(GATHERED_CLUSTER, splits=8), GATHERED_PIXEL_ROWS,
               WgmmaWsLaunch(filters=16), PIXEL_ROWS_HALVES, GATHERED_PINGPONG_HALVES,
               dataclasses.replace(GATHERED_CLUSTER, in_flight=1, producer_halves=True),
               dataclasses.replace(SPLIT_AHEAD, early=None),
               dataclasses.replace(SPLIT_AHEAD_PINGPONG, early=None), PIXEL_ROWS_CLUSTER,
               dataclasses.replace(PIXEL_ROWS_CLUSTER, filters=16, splits=4, cluster=None),
               dataclasses.replace(PIXEL_ROWS_CLUSTER, filters=16, splits=4, producer_halves=True))  # fmt: skip


#: The gathering kernel's weights read as given and split by its consumers into the stages (``weights="split in
#: block"``): a call one launch, where the split ahead took 0.6-0.8 us over the kernel alone on the batch-1 1x1 layers.
#: H200, 2026-12-05 (``wgmma_probe.py`` at e9a99e5, now ``--weights-in-block``: the 1x1 layers at batch 1 and the
#: pixel rows' K splits at batch 8-128, every run checked against float64): over the first-use pick with the weights
#: split ahead, the whole call 1.051x at the geometric mean, faster on 56 of the 61 where it runs. The settings the
#: edges and the emulator run it in (each where a block has at most its stages' K-tiles): K whole at 32 filters, K
#: split over a cluster at 16 in 4, at 32 in 8 with the producer in halves, at 16 in 2 with one K-tile in flight.
IN_BLOCK_SETTINGS = tuple(
    dataclasses.replace(spec, weights="split in block", early=None)
    for spec in (dataclasses.replace(GATHERED_PIXEL_ROWS, persistent=None),
                 dataclasses.replace(PIXEL_ROWS_CLUSTER, filters=16, splits=4),
                 dataclasses.replace(PIXEL_ROWS_CLUSTER, filters=32, splits=8, producer_halves=True),
                 dataclasses.replace(PIXEL_ROWS_CLUSTER, filters=16, splits=2, in_flight=1))
)  # fmt: skip


def weights_in_block(spec: WgmmaLaunch, problem: ConvProblem) -> WgmmaWsLaunch | None:
    """``spec`` (the gathering kernel at 16 or 32 filters) with its weights split in the block, a block a tile and not
    launched early (nothing before it), where that runs on ``problem`` (:data:`IN_BLOCK_SETTINGS`), else None."""
    if not isinstance(spec, WgmmaWsLaunch):  # (where else it runs is the launch's to say: can_implement)
        return None
    in_block = dataclasses.replace(spec, weights="split in block", persistent=None, early=None)
    return None if in_block.not_supported_reasons(problem) else in_block
