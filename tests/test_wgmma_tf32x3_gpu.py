"""The 3xTF32 implicit GEMM on Hopper's wgmma on the GPU: every tuning candidate against float64 on random shapes
(a bias added), and the warp-specialised kernel; their error beside the FP32 SIMT kernel's as K grows, and the
accuracy experiment's hard inputs (a wide dynamic range, TF32's rounding ties, all positive, and values near the
bottom of FP32's range, where the small part is subnormal); Winograd with its products on wgmma at every tile, and on
the hard inputs. Skipped on any GPU but compute capability 9.0."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_fp32_gpu import _random_problems
from test_tf32x3_gpu import HARD_INPUTS, HARD_LAYER, K_GROWTH_CHANNELS, hard_inputs, k_growth_inputs
from test_wgmma_tf32x3 import SMALL_IMAGES, TAP_PAIR_PROBLEMS, split_planes, untiled_planes, ws_id

from convkit.bench.measure import CHECK_ONLY, measure_problem
from convkit.core import reference
from convkit.core.problem import ConvProblem
from convkit.families import tf32x3 as family
from convkit.families.fp32.launch import conv2d_implicit_gemm
from convkit.families.fp32.winograd import WinogradLaunch, conv2d_winograd
from convkit.families.registry import Kernels
from convkit.families.tf32x3.wgmma import conv2d_wgmma_tf32x3, conv2d_wgmma_ws_tf32x3
from convkit.families.tf32x3.wgmma_gemm import WgmmaGemmLaunch
from convkit.families.tf32x3.wgmma_settings import IN_BLOCK_SETTINGS, TAP_PAIR_SETTINGS, WS_SETTINGS, wgmma_candidates
from convkit.families.tf32x3.wgmma_winograd import INPUTS, WgmmaWinogradLaunch, winograd_wgmma_candidates
from convkit.op.cases import Case, params_text

# the warp-specialised kernel waits on mbarriers, so a wrong phase hangs it: each test in a process of its own
pytestmark = [pytest.mark.gpu, pytest.mark.watchdog(60)]


@pytest.fixture(autouse=True)
def _hopper():
    reasons = WgmmaGemmLaunch().not_supported_reasons(ConvProblem.same(1, 1, 1, 1, 1, 1))
    if reasons:
        pytest.skip(reasons[0])


@pytest.fixture
def candidates_built(problem):
    """Every candidate's kernels for ``problem`` built before its run, here in the watchdog's process (into the kernel
    cache on disk, which the run's own process reads): the 60 s a run has to show that it does not hang are the GPU's,
    not NVRTC's. The ten builds of a layer of two K-tiles, twelve test processes building at once on a cold cache,
    once took past them (H200, 2026-12-03)."""
    from convkit.op.prebuild import launch_builds

    for spec in wgmma_candidates(problem):
        for build in launch_builds(family.WGMMA_VARIANT, problem, spec):
            build.load()


@pytest.mark.parametrize("problem", [*_random_problems(24, seed=17), *SMALL_IMAGES],
                         ids=lambda p: f"{p.label}-p{p.pad}-s{p.stride}")  # fmt: skip
def test_every_candidate_matches_float64(problem, candidates_built):
    todo = [Case("convkit", family.WGMMA, params_text(k.to_params())) for k in wgmma_candidates(problem)]
    rows = list(measure_problem(problem, todo, Kernels(family.VARIANTS), seed=4, timing=CHECK_ONLY))
    failed = [(r["params"], r["status"], r["rel_err"], r["note"]) for r in rows if r["status"] != "ok"]
    assert not failed, failed


#: The warp-specialised kernel's key among the errors.
WS = "warp-specialised"


def _errors(p: ConvProblem, x: np.ndarray, w: np.ndarray) -> dict[str, float]:
    """Each launch's error against float64 (a bias added) beside the FP32 SIMT kernel's, on ``x`` and ``w``."""
    import cupy

    bias = np.random.default_rng(1).standard_normal(p.m).astype(np.float32)
    ref = reference.bias_add(reference.conv2d(x.astype(np.float64), w.astype(np.float64), pad=p.pad), bias)
    xs, ws, bs = cupy.asarray(x), cupy.asarray(w), cupy.asarray(bias)
    out = {
        str(spec.to_params()): reference.relative_error(
            conv2d_wgmma_tf32x3(xs, ws, pad=p.pad, launch=spec, bias=bs).get(), ref
        )
        for spec in wgmma_candidates(p)
    }
    warp_specialised = conv2d_wgmma_ws_tf32x3(xs, ws, pad=p.pad, bias=bs).get()
    simt = conv2d_implicit_gemm(xs, ws, pad=p.pad).get() + bias[None, :, None, None]
    return out | {WS: reference.relative_error(warp_specialised, ref), "fp32": reference.relative_error(simt, ref)}


@pytest.mark.parametrize("problem", [*_random_problems(12, seed=19), *SMALL_IMAGES],
                         ids=lambda p: f"{p.label}-p{p.pad}-s{p.stride}")  # fmt: skip
@pytest.mark.parametrize("launch", WS_SETTINGS, ids=ws_id)
def test_the_warp_specialised_kernel_matches_float64(problem, launch):
    """Each setting on random shapes, strides and paddings, a bias added, the output poisoned with NaN first (the
    early ones launched as programmatic dependents of the split before them: Hopper's, not the emulator's)."""
    import cupy

    rng = cupy.random.default_rng(23)
    x, w = (rng.standard_normal(shape, dtype=cupy.float32) for shape in (problem.input_shape, problem.filter_shape))
    bias = rng.standard_normal(problem.m, dtype=cupy.float32)
    out = cupy.full(problem.output_shape, cupy.nan, dtype=cupy.float32)
    conv2d_wgmma_ws_tf32x3(x, w, pad=problem.pad, stride=problem.stride, out=out, bias=bias, launch=launch)
    ref = reference.bias_add(reference.conv2d(x, w, pad=problem.pad, stride=problem.stride), bias)
    assert reference.relative_error(out, ref) < reference.DIRECT_TOLERANCE


@pytest.mark.parametrize("problem", [*TAP_PAIR_PROBLEMS, ConvProblem(7, 16, 30, 31, 33, 3, 3, pad=0, stride=2),
                                     ConvProblem.same(4, 11, 28, 28, 96, 5)],
                         ids=lambda p: f"{p.label}-p{p.pad}-s{p.stride}")  # fmt: skip
@pytest.mark.parametrize("launch", TAP_PAIR_SETTINGS, ids=ws_id)
def test_k_tiles_of_two_taps_match_float64(problem, launch):
    """The split-ahead kernel on K-tiles of two taps of 16 channels: the emulator's shapes, and two more of several
    output tiles a block (strided, unpadded; 11 channels of a 5x5), a bias added, the output poisoned with NaN."""
    test_the_warp_specialised_kernel_matches_float64(problem, launch)


@pytest.mark.parametrize("problem", [*_random_problems(12, seed=31), *SMALL_IMAGES, ConvProblem(1, 100, 7, 7, 40, 1, 1),
                                     ConvProblem(3, 117, 9, 11, 29, 1, 1), ConvProblem(1, 300, 14, 14, 16, 1, 1)],
                         ids=lambda p: f"{p.label}-p{p.pad}-s{p.stride}")  # fmt: skip
@pytest.mark.parametrize("launch", IN_BLOCK_SETTINGS, ids=ws_id)
def test_the_weights_split_in_the_block_match_float64(problem, launch):
    """The gathering kernel reading w as given and splitting it in the block (``weights="split in block"``), where it
    runs (a block's K-tiles within its stages): random shapes, rows of w not 16-byte aligned (117 values), K split
    over clusters, a bias added, the output poisoned with NaN."""
    if reasons := launch.not_supported_reasons(problem):
        pytest.skip(reasons[0])
    test_the_warp_specialised_kernel_matches_float64(problem, launch)


@pytest.mark.parametrize("launch", [spec for spec in WS_SETTINGS if spec.early], ids=ws_id)
def test_an_early_launch_is_right_replayed_on_two_streams_and_in_a_captured_graph(launch):
    """A kernel launched as the split before it ends (``early``: the gathering kernel after the weights' split, the
    split-ahead one after the operands'): recorded into a plan as the op records it, then replayed through the driver on
    two streams at once, each on its own operands and workspace; and captured in a CUDA graph (its dependency on the
    split a programmatic edge), replayed on new values. Each output poisoned with NaN first, against float64."""
    import cupy

    from convkit.cuda.operands import ConvArgs
    from convkit.cuda.plan import Plan
    from convkit.cuda.record import recording

    p = ConvProblem(8, 520, 14, 14, 160, 1, 1)  # 17 K-tiles: split over blocks, persistent over 26 tiles
    rng = cupy.random.default_rng(29)

    def operands() -> ConvArgs:
        x, w = (rng.standard_normal(shape, dtype=cupy.float32) for shape in (p.input_shape, p.filter_shape))
        out = cupy.full(p.output_shape, cupy.nan, dtype=cupy.float32)
        workspace = cupy.empty(launch.workspace_bytes(p), dtype=cupy.uint8)
        return ConvArgs(x, w, out, rng.standard_normal(p.m, dtype=cupy.float32), workspace)

    def error(a: ConvArgs) -> float:
        return reference.relative_error(a.out, reference.bias_add(reference.conv2d(a.x, a.w), a.bias))

    def call(a: ConvArgs) -> None:
        conv2d_wgmma_tf32x3(a.x, a.w, launch=launch, out=a.out, bias=a.bias, workspace=a.workspace)

    first = operands()
    with recording() as recorded:
        call(first)
    plan = Plan.record(recorded, first)
    streams, replayed = [cupy.cuda.Stream(non_blocking=True) for _ in range(2)], [operands() for _ in range(2)]
    cupy.cuda.Device().synchronize()
    for stream, a in zip(streams, replayed, strict=True):
        plan.replay((*(o.data.ptr for o in a.operands()), a.workspace.data.ptr, 0), stream)
    cupy.cuda.Device().synchronize()
    stream, captured = cupy.cuda.Stream(non_blocking=True), operands()
    with stream:
        stream.begin_capture()
        call(captured)
        graph = stream.end_capture()
        fresh = operands()
        captured.x[...], captured.w[...], captured.out[...] = fresh.x, fresh.w, cupy.nan
    graph.launch(stream)
    stream.synchronize()
    errors = [error(a) for a in (first, *replayed, captured)]
    assert all(e < reference.DIRECT_TOLERANCE for e in errors), errors


@pytest.mark.parametrize("channels", K_GROWTH_CHANNELS)
def test_the_error_stays_a_direct_fp32_methods_as_k_grows(channels):
    """K = 9 C from 27 to 4608: every tuning candidate (the staged launches: the tensor cores' own sums over K
    truncate, past the bar, see ``WGMMA_SETTINGS``) under the direct bar and, for K >= 256, each no worse than 1.5x
    the SIMT kernel's."""
    err = _errors(*k_growth_inputs(channels))
    print(f"K={9 * channels}: {err}")
    assert all(e < reference.DIRECT_TOLERANCE for e in err.values()), err
    if 9 * channels >= 256:
        assert max(e for key, e in err.items() if key != "fp32") <= 1.5 * err["fp32"], err


@pytest.mark.parametrize("inputs", HARD_INPUTS)
def test_hard_inputs(inputs):
    err = _errors(HARD_LAYER, *hard_inputs(inputs))
    print(f"{inputs}: {err}")
    assert all(e < reference.DIRECT_TOLERANCE for e in err.values()), err


@pytest.mark.parametrize("problem", [p for p in _random_problems(40, seed=19) if p.stride == 1 and p.r == p.s
                                     and p.r in (3, 5)][:10], ids=lambda p: f"{p.label}-p{p.pad}")  # fmt: skip
def test_every_winograd_candidate_matches_float64(problem):
    """Winograd with its products on wgmma at every tile (its candidates) within the transform methods' bar of
    float64, a bias added by the output transform."""
    todo = [Case("convkit", family.WINOGRAD_WGMMA, params_text(k.to_params()))
            for k in winograd_wgmma_candidates(problem)]  # fmt: skip
    rows = list(measure_problem(problem, todo, Kernels(family.VARIANTS), seed=6, timing=CHECK_ONLY))
    failed = [(r["params"], r["status"], r["rel_err"], r["note"]) for r in rows if r["status"] != "ok"]
    assert rows and not failed, failed


@pytest.mark.parametrize("inputs", HARD_INPUTS)
def test_winograd_on_hard_inputs_stays_within_fp32_winograds_error(inputs):
    """The hard inputs through F(4x4, 3x3) with its products on wgmma: FP32 Winograd's error at the same tile, within
    1.5x (both transforms the same; the products split into TF32 parts), and under the transform methods' bar."""
    import cupy

    x, w = (cupy.asarray(a) for a in hard_inputs(inputs))
    ref = reference.conv2d(x, w, pad=HARD_LAYER.pad)
    err = {name: reference.relative_error(conv2d_winograd(x, w, pad=HARD_LAYER.pad, launch=spec), ref)
           for name, spec in (("wgmma", WgmmaWinogradLaunch(4)), ("fp32", WinogradLaunch(4)))}  # fmt: skip
    print(f"{inputs}: {err}")
    assert err["wgmma"] < reference.TRANSFORM_TOLERANCE and err["wgmma"] <= 1.5 * err["fp32"], err


@pytest.mark.parametrize("launch", [*(s for s in WS_SETTINGS if s.channels_last), *TAP_PAIR_SETTINGS], ids=ws_id)
def test_passes_of_images_give_the_bits_of_one(launch, monkeypatch):
    """Where the input's planes would pass the workspace allowed, the split and the kernel run a pass of images at a
    time (here 3 of 7 a pass: 3, 3, 1): against float64, the output poisoned with NaN, and bit for bit the output of
    one pass (each output's sum is the same products in the same order); K-tiles of two taps at 16 channels."""
    import cupy

    from convkit.cuda.operands import WORKSPACE_ALIGN, aligned
    from convkit.families.tf32x3 import wgmma, wgmma_operands

    pairs = bool(launch.tap_pairs)
    problem = ConvProblem(7, 16 if pairs else 19, 15, 13, 64 if pairs else 70, 3, 3, pad=1, stride=2)
    image = 4 * launch.input_planes * wgmma_operands.input_plane_elements(dataclasses.replace(problem, n=1), pairs)
    tiled = 4 * wgmma_operands.tiled_elements(problem, True, launch.block_filters, pairs)
    rng = cupy.random.default_rng(31)
    x, w = (rng.standard_normal(shape, dtype=cupy.float32) for shape in (problem.input_shape, problem.filter_shape))
    bias = rng.standard_normal(problem.m, dtype=cupy.float32)
    whole = conv2d_wgmma_ws_tf32x3(x, w, pad=1, stride=2, bias=bias, launch=launch)
    monkeypatch.setattr(wgmma, "WORKSPACE_LIMIT_BYTES", aligned(tiled) + WORKSPACE_ALIGN + 3 * image)
    assert launch.pass_images(problem) == 3 and launch.workspace_bytes(problem) <= wgmma.WORKSPACE_LIMIT_BYTES
    out = cupy.full(problem.output_shape, cupy.nan, dtype=cupy.float32)
    conv2d_wgmma_ws_tf32x3(x, w, pad=1, stride=2, out=out, bias=bias, launch=launch)
    ref = reference.bias_add(reference.conv2d(x, w, pad=1, stride=2), bias)
    assert reference.relative_error(out, ref) < reference.DIRECT_TOLERANCE
    same = out == whole
    assert bool(same.all()), int((~same).sum())


@pytest.mark.parametrize("problem", [ConvProblem.same(3, 37, 13, 11, 131, 3), ConvProblem.same(2, 70, 9, 10, 64, 1),
                                     ConvProblem(1, 19, 15, 13, 70, 5, 5, pad=1, stride=2)],
                         ids=lambda p: f"{p.label}-p{p.pad}-s{p.stride}")  # fmt: skip
def test_inputs_split_as_staged_give_the_bits_split_ahead_gives(problem):
    """The same split of the same FP32 values, by the producer as it stages them rather than by a pass ahead, and the
    same products in the same order: the direct kernel's outputs (the setting Winograd's products run) and Winograd's
    (3x3, stride 1) equal bit for bit."""
    import cupy

    from convkit.families.tf32x3.wgmma_settings import SPLIT_AHEAD, SPLIT_STAGED

    rng = cupy.random.default_rng(29)
    x, w = (rng.standard_normal(shape, dtype=cupy.float32) for shape in (problem.input_shape, problem.filter_shape))
    kw = {"pad": problem.pad, "stride": problem.stride}
    ahead, staged = (conv2d_wgmma_ws_tf32x3(x, w, launch=launch, **kw) for launch in (SPLIT_AHEAD, SPLIT_STAGED))
    same = ahead == staged
    assert bool(same.all()), int((~same).sum())
    if problem.stride == 1 and problem.r == 3:
        ahead, staged = (conv2d_winograd(x, w, pad=problem.pad, launch=WgmmaWinogradLaunch(4, inputs=inputs))
                         for inputs in INPUTS)  # fmt: skip
        same = ahead == staged
        assert bool(same.all()), int((~same).sum())


@pytest.mark.parametrize("filters", [None, 32, 16])
@pytest.mark.parametrize("splits", [2, 3, 4, 8])
@pytest.mark.parametrize("problem", [ConvProblem(1, 256, 28, 28, 128, 1, 1), ConvProblem(2, 300, 9, 10, 200, 1, 1),
                                     ConvProblem.same(1, 70, 7, 9, 131, 3)],
                         ids=lambda p: f"{p.label}-p{p.pad}")  # fmt: skip
def test_a_k_split_over_a_cluster_gives_the_bits_of_its_planes_sum(problem, splits, filters):
    """K split, each tile's splits one cluster adding their sums in each other's shared memory, in the order sum_planes
    adds the planes of partial outputs: the same output bit for bit (the bias added as that kernel adds it), on layers
    of one tile in filters and several (200, 131: a partial one), 2 to 8 splits asked (clusters of 2 to 8 blocks: 8 make
    5 on the second layer's 10 K-tiles, 7 on the last's 20), each output poisoned with NaN first; at 128 filters a
    block, and at 32 and 16 with the pixels on the products' rows."""
    import cupy

    from convkit.families.tf32x3.wgmma_settings import GATHERED_CLUSTER, GATHERED_SPLIT

    rng = cupy.random.default_rng(31)
    x, w = (rng.standard_normal(shape, dtype=cupy.float32) for shape in (problem.input_shape, problem.filter_shape))
    bias = rng.standard_normal(problem.m, dtype=cupy.float32)
    outputs = []
    for launch in (GATHERED_SPLIT, GATHERED_CLUSTER):
        out = cupy.full(problem.output_shape, cupy.nan, dtype=cupy.float32)
        launch = dataclasses.replace(launch, splits=splits, filters=filters)
        outputs.append(conv2d_wgmma_ws_tf32x3(x, w, pad=problem.pad, out=out, bias=bias, launch=launch))
    same = outputs[0] == outputs[1]
    assert bool(same.all()), int((~same).sum())
    ref = reference.bias_add(reference.conv2d(x, w, pad=problem.pad), bias)
    assert reference.relative_error(outputs[1], ref) < reference.DIRECT_TOLERANCE


def test_cluster_slots_are_the_drivers_count_under_the_bound():
    """On Hopper, the clusters of 2 to 8 blocks of the clustered kernel the GPU runs at once, from the driver: at
    least one, at most a block an SM, fewer (or as many) as the cluster grows (the H200: 66 of 2, 30 of 4, 15 of 8)."""
    from convkit.core.gpu import sm_count
    from convkit.families.tf32x3.wgmma_settings import cluster_slots

    slots = [cluster_slots(s) for s in range(2, 9)]
    assert all(1 <= n <= sm_count() // s for s, n in zip(range(2, 9), slots, strict=True)), slots
    assert slots == sorted(slots, reverse=True), slots


def test_argument_errors_before_launch():
    import cupy

    x, w = cupy.zeros((1, 3, 8, 8), cupy.float32), cupy.zeros((4, 3, 3, 3), cupy.float32)
    with pytest.raises(ValueError, match="n must be one of"):
        conv2d_wgmma_tf32x3(x, w, launch=WgmmaGemmLaunch(n=64))
    with pytest.raises(ValueError, match="n=256 takes staged=False"):
        conv2d_wgmma_tf32x3(x, w, launch=WgmmaGemmLaunch(n=256))


@pytest.mark.parametrize("filters", [128, 32, 16])
@pytest.mark.parametrize("offset", [0, 1], ids=["aligned", "one_float_on"])
@pytest.mark.parametrize("problem", [ConvProblem(1, 256, 7, 7, 131, 1, 1), ConvProblem(1, 70, 5, 5, 40, 1, 1)],
                         ids=lambda p: p.label)  # fmt: skip
def test_the_tiled_split_of_the_weights_is_the_rule_bit_for_bit(problem, offset, filters):
    """The gathering kernel's weights split once per call (split_weights_tiled_tf32x3) against the NumPy rule in the
    tiled layout ([block][tile][plane][k-group][row][4], zeros past M and K), the output poisoned with NaN first: w
    aligned to 16 bytes (a thread's 4 values one 16-byte load where they lie whole in w; 70 channels leave a K-tile's
    k-groups partial) and one float on (4 loads a thread); a partial block of filters (131, 40)."""
    import cupy

    from convkit.cuda.launch import launch as launch_kernel
    from convkit.families.tf32x3.wgmma_operands import SplitTiledLaunch, k_tiles, tiled_elements

    m, k = problem.m, problem.c
    w_host = np.random.default_rng(7).standard_normal((m, k), dtype=np.float32)
    storage = cupy.empty(m * k + 4, dtype=cupy.float32)
    w = storage[offset : offset + m * k]
    w[...] = cupy.asarray(w_host.ravel())
    out = cupy.full(tiled_elements(problem, False, filters), cupy.nan, dtype=cupy.float32)
    launch_kernel(SplitTiledLaunch(filters=filters), problem, (w, out, cupy.int32(m), cupy.int32(k)))
    planes = untiled_planes(out.get(), k_tiles(problem), filters)  # (zeros past M and K, no NaN left)
    expected = np.zeros_like(planes)
    expected[:, :m, :k] = split_planes(w_host)[:, :, :k]
    assert np.array_equal(planes.view(np.uint32), expected.view(np.uint32))
