"""The first wgmma kernel (kernels/wgmma_tf32x3.cu) on the CPU, under tests/cuda_emulator: its descriptors, the
K-major staging of both operands, the two-stage pipeline, the split of the inputs, the staged sums and the
accumulators' layout in the store, each launch on fresh random inputs against convkit's float64 reference, the
output poisoned with NaN. The emulator reads each product's operands through the descriptors as the PTX ISA lays
out a K-major matrix without swizzle; scripts/wgmma_probe.py checks the same on an H100."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from emulated import CXX  # tests/emulated.py
from test_shipped_kernels_emulated import run_launch

from convkit.core import gpu, reference
from convkit.core.problem import ConvProblem
from convkit.core.reference import DIRECT_TOLERANCE
from convkit.cuda.operands import regions_bytes
from convkit.families.tf32x3 import wgmma, wgmma_operands, wgmma_pick, wgmma_settings
from convkit.families.tf32x3.rounding import round_tf32
from convkit.families.tf32x3.wgmma_settings import WGMMA_SETTINGS

pytestmark = pytest.mark.skipif(CXX is None, reason="no g++ to build the CUDA emulator")


def shared_bytes(n: int, stages: int = 2) -> int:
    """``stages`` stages of the weights' two planes (128 rows) and the inputs' (n rows), 32 floats a row."""
    return stages * (2 * 128 + 2 * n) * 32 * 4


CALL = "implicit_gemm_wgmma_tf32x3(x, w, w + ints[9], out, " + ", ".join(f"ints[{i}]" for i in range(9)) + ")"


def split_planes(w: np.ndarray) -> np.ndarray:
    """The weights' big and small planes as split_weights_tf32x3 writes them: [M][KP] each, rows padded with zeros
    to whole float4s; big rounded to nearest TF32 (ties away), small = w - big."""
    m = w.shape[0]
    flat = np.ascontiguousarray(w, dtype=np.float32).reshape(m, -1)
    big = round_tf32(flat)
    kp = -(-flat.shape[1] // 4) * 4
    planes = np.zeros((2, m, kp), dtype=np.float32)
    planes[0, :, : flat.shape[1]], planes[1, :, : flat.shape[1]] = big, flat - big
    return planes


def untiled_planes(tiled: np.ndarray, tiles: int, filters: int) -> np.ndarray:
    """The weights' two planes as the warp-specialised kernels' split tiles them ([block][tile][plane][k-group][row][4],
    split_weights_tiled_tf32x3) back as [plane][filter][k]: every block's rows (a partial block's padding too) by every
    K-tile's 32 values."""
    return tiled.reshape(-1, tiles, 2, 8, filters, 4).transpose(2, 0, 4, 1, 3, 5).reshape(2, -1, tiles * 32)


def input_planes(x: np.ndarray) -> np.ndarray:
    """The inputs' planes as split_ahead_operands_tf32x3 splits them (kernels/tf32_split.cuh's split_ahead, the weights'
    rule): big rounded to nearest TF32 (ties away), small = x - big, exact in FP32."""
    big = round_tf32(x)
    return np.stack([big, x - big])


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("emulated_wgmma")


#: Outputs of fewer pixels an image than a thread's step from one stored pair to the next (7): the epilogue's walk
#: over images wraps more than once a step (one pixel an image; six, over two blocks of 128 pixels).
SMALL_IMAGES = (ConvProblem(5, 8, 3, 3, 9, 3, 3, pad=0), ConvProblem(23, 8, 2, 3, 9, 1, 1, pad=0))
#: Images of an even count of pixels (192), over 128 a block: a tile whole in one image from its start and one from
#: its middle, stored as pairs, and one over an image's end; rows narrower (12) than the producer's step from one of
#: its pixels to the next (16).
EVEN_IMAGES = ConvProblem.same(2, 8, 16, 12, 8, 3)
#: A 1x1 filter padded and strided: the gathered inputs' one-tap path (pixels whose tap lies outside the image, a
#: last K-tile of 5 channels, a block of 84 pixels of 128).
ONE_TAP = ConvProblem(2, 37, 9, 11, 70, 1, 1, pad=1, stride=2)
#: Both wgmma kernels' emulated problems (each kernel adds one of its own after the fourth): odd sizes, more channels
#: than a K-tile and filters than a block, a 1x1, a strided 5x5, then the images above and a padded, strided 1x1.
EMULATED = (ConvProblem.same(1, 3, 17, 19, 5, 3), ConvProblem.same(2, 37, 9, 11, 131, 3),
            ConvProblem.same(2, 64, 5, 5, 20, 1), ConvProblem(1, 19, 15, 13, 70, 5, 5, pad=1, stride=2), *SMALL_IMAGES,
            EVEN_IMAGES, ONE_TAP)  # fmt: skip


def problem_id(p: ConvProblem) -> str:
    return f"{p.label}-p{p.pad}-s{p.stride}"


def ws_inputs(problem: ConvProblem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random x, w and bias for ``problem``, the same for the same problem (either wgmma kernel's tests)."""
    rng = np.random.default_rng(abs(hash(problem.key)) % 2**32)
    x = rng.standard_normal(problem.input_shape).astype(np.float32)
    w = rng.standard_normal(problem.filter_shape).astype(np.float32)
    return x, w, rng.standard_normal(problem.m).astype(np.float32)


def float64_output(problem: ConvProblem, x: np.ndarray, w: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """The reference the emulated kernels are held to: ``problem``'s convolution in float64, the bias added."""
    return reference.bias_add(reference.conv2d(x.astype(np.float64), w.astype(np.float64), pad=problem.pad,
                                               stride=problem.stride), bias.astype(np.float64))  # fmt: skip


@pytest.mark.parametrize("problem", [*EMULATED[:4], ConvProblem.same(1, 6, 9, 9, 8, 7), *EMULATED[4:]], ids=problem_id)
@pytest.mark.parametrize("launch", WGMMA_SETTINGS,
                         ids=lambda spec: "-".join(f"{k}{int(v)}" for k, v in spec.to_params().items()))  # fmt: skip
def test_the_wgmma_kernel_matches_float64_on_the_cpu(build_dir, problem, launch):
    x, w, bias = ws_inputs(problem)
    planes = split_planes(w)
    operand = np.concatenate([planes.ravel(), bias])
    out_floats = problem.n * problem.out_h * problem.out_w * problem.m
    ints = (problem.n, problem.c, problem.h, problem.w, problem.m, problem.out_h, problem.out_w, problem.pad,
            problem.stride, planes.size)  # fmt: skip
    out = run_launch(build_dir, launch, problem, CALL, (x, operand), out_floats, ints).reshape(problem.output_shape)
    assert not np.isnan(out).any(), "an output the kernel never wrote"
    ref = float64_output(problem, x, w, bias)
    assert reference.relative_error(out, ref) < DIRECT_TOLERANCE


def test_the_inputs_planes_are_the_weights_split():
    """The inputs' planes (input_planes) split as the weights' (split_planes): one rule for both operands."""
    x = np.array([1.0, 1.0 + 2.0**-11, -(1.0 + 2.0**-11), 3.0, 0.1, 0.0, 1e-35], dtype=np.float32)
    assert np.array_equal(input_planes(x), split_planes(x[None])[:, 0, : x.size])


def test_the_split_planes_are_split_weights_rule():
    """The planes this test builds follow the kernel's rule (kernels/tf32_split.cuh): big is TF32, big + small is
    the weight exactly, and a tie rounds away from zero."""
    w = np.array([[1.0, 1.0 + 2.0**-11, -(1.0 + 2.0**-11), 3.0, 0.1]], dtype=np.float32)
    big, small = split_planes(w)[:, 0]
    assert big.shape == (8,) and not big[5:].any() and not small[5:].any()
    assert (big.view(np.uint32) & 0x1FFF == 0).all()
    assert (big[:5] + small[:5] == w[0]).all()
    assert big[1] == np.float32(1.0 + 2.0**-10) and big[2] == -np.float32(1.0 + 2.0**-10)


def test_the_launch_declares_its_build_shared_memory_workspace_and_bias(monkeypatch):
    from convkit.families.tf32x3 import wgmma

    monkeypatch.setattr(gpu, "has_gpu", lambda: True)
    monkeypatch.setattr(gpu, "compute_capability", lambda: (9, 0))
    monkeypatch.delenv("CONVKIT_PTX_ARCH", raising=False)
    p = ConvProblem.same(2, 37, 9, 11, 131, 3)
    spec = wgmma.WgmmaGemmLaunch(256, staged=False)
    assert spec.arch == "sm_90a" and spec.kernel_name(p) == "implicit_gemm_wgmma_tf32x3"
    assert spec.options(p) == ("-DCONVKIT_R=3", "-DCONVKIT_S=3", "-DCONVKIT_WG_N=256", "-DCONVKIT_STAGED=0",
                               "-DCONVKIT_STAGES=2")  # fmt: skip
    assert spec.grid(p) == (-(-2 * 9 * 11 // 256), 2) and spec.block(p) == (256,)
    assert spec.shared_bytes(p) == shared_bytes(256) and spec.adds_bias(p)
    assert spec.workspace_bytes(p) >= 4 * 2 * 131 * 336  # two planes of K = 333 rounded up to 336
    assert wgmma.WgmmaGemmLaunch.from_params(spec.to_params()) == spec
    assert not spec.not_supported_reasons(p)
    assert "n must be one of" in wgmma.WgmmaGemmLaunch(64).not_supported_reasons(p)[0]
    assert "staged=False" in wgmma.WgmmaGemmLaunch(256).not_supported_reasons(p)[0]
    assert "stages=3" in wgmma.WgmmaGemmLaunch(stages=3).not_supported_reasons(p)[0]
    assert wgmma.WgmmaGemmLaunch(staged=False, stages=3).shared_bytes(p) == shared_bytes(128, 3)


def test_the_split_ahead_operands_are_one_launch_input_tiles_then_weight_lines():
    """One launch splits the split-ahead kernel's operands: a block a tile of 32 channels by 32 pixels of each image,
    then blocks of 256 threads over the weights' lines (at most 65,535 of them, each thread then taking several); a
    grid past 2^31 - 1 blocks is refused naming the input, before any launch."""
    split = wgmma_operands.SplitAheadLaunch(filters=64, tap_pairs=False)
    p = ConvProblem.same(3, 37, 9, 11, 131, 3)  # 4 pixel tiles by 2 channel tiles, 3 images
    lines = wgmma_operands.tiled_elements(p, True, 64) // 8  # 3 blocks of 64 filters, 18 K-tiles, 8 k-groups, 64 rows
    assert split.input_blocks(p) == 4 * 2 * 3 and split.weight_blocks(p) == -(-lines // 256) == 108
    assert split.grid(p) == (24 + 108,) and split.block(p) == (32, 8) and split.shared_bytes(p) == 0
    assert split.options(p)[-1] == "-DCONVKIT_WS_FILTERS=64" and not split.not_supported_reasons(p)
    assert split.weight_blocks(ConvProblem.same(1, 4096, 7, 7, 4096, 5)) == 65535  # (a grid-stride loop beyond)
    huge = ConvProblem(262_144, 2048, 64, 64, 8, 1, 1)  # 8,192 tiles an image: 2^31 of them
    assert "x's 2147483648 tiles" in split.not_supported_reasons(huge)[0]


def test_both_kernels_are_candidates_read_back_from_their_params(monkeypatch):
    """The staged setting and the warp-specialised kernel are tuned; a recorded launch of either reads back as
    itself (the variant's launch_from), and a schedule the kernel lacks is refused naming it; K split over blocks
    takes whole K-tiles a split and its partial outputs' workspace."""
    from convkit.families.tf32x3 import WGMMA_VARIANT, wgmma

    monkeypatch.setattr(gpu, "has_gpu", lambda: True)
    monkeypatch.setattr(gpu, "compute_capability", lambda: (9, 0))
    monkeypatch.delenv("CONVKIT_PTX_ARCH", raising=False)
    for module in (wgmma, wgmma_settings, wgmma_pick):  # (a persistent launch's grid; the candidates' and pick's rules)
        monkeypatch.setattr(module, "sm_count", lambda: 132)
    # a GPU that runs 14 clusters of 8 blocks at once (the H200: 15, cuOccupancyMaxActiveClusters); of fewer, the bound
    monkeypatch.setattr(wgmma_settings, "cluster_slots", lambda splits: 14 if splits == 8 else 132 // splits)
    p = ConvProblem.same(2, 37, 9, 11, 131, 3)
    candidates = wgmma_settings.wgmma_candidates(p)
    # (the split-ahead kernel launched early, as the operands' split ends: its producer waits for it)
    split_ahead = wgmma.WgmmaWsLaunch(in_flight=2, inputs="split ahead", persistent=True, early=True)
    staged = wgmma.WgmmaWsLaunch(in_flight=2, inputs="split staged", persistent=True)  # split as staged
    split_in = [dataclasses.replace(wgmma_settings.GATHERED_SPLIT, splits=s) for s in (4, 8)]
    cluster_in = [dataclasses.replace(wgmma_settings.GATHERED_CLUSTER, splits=s) for s in (4, 8)]
    # 4 tiles, 11 K-tiles: K split in 4 and 8, over a cluster (split staged: Winograd's); more than one tap: split
    # ahead at 64 filters a block with ping-pong too
    ahead_pingpong = dataclasses.replace(split_ahead, filters=64, pingpong=True)
    # (6 tiles of 64 filters by 128 pixels, fewer than the SMs: at 64 pixels a block too)
    ahead_pingpong_64 = dataclasses.replace(ahead_pingpong, width=64)
    assert candidates == [wgmma.WgmmaGemmLaunch(), wgmma.WgmmaWsLaunch(), *cluster_in, split_ahead, ahead_pingpong,
                          ahead_pingpong_64]  # fmt: skip
    assert ahead_pingpong_64.grid(p) == (12,) and ahead_pingpong.grid(p) == (6,)  # (persistent: a block a tile here)
    assert ahead_pingpong_64.options(p)[-1] == "-DCONVKIT_WS_WIDTH=64"
    assert WGMMA_VARIANT.launch_from(ahead_pingpong_64.to_params()) == ahead_pingpong_64
    for wrong in (dataclasses.replace(split_ahead, width=64), dataclasses.replace(ahead_pingpong, width=32),
                  dataclasses.replace(ahead_pingpong_64, tap_pairs=True)):  # fmt: skip
        assert wrong.not_supported_reasons(p)[0].startswith(("width must be", "tap_pairs")), wrong
    many = ConvProblem.same(32, 256, 28, 28, 256, 3)  # 392 tiles: no split
    assert wgmma_settings.wgmma_candidates(many) == [wgmma.WgmmaGemmLaunch(), wgmma.WgmmaWsLaunch(), split_ahead,
                                                     ahead_pingpong]  # fmt: skip
    narrow = dataclasses.replace(split_ahead, filters=64)
    narrow_candidates = wgmma_settings.wgmma_candidates(ConvProblem.same(2, 37, 9, 11, 64, 3))
    assert narrow_candidates[-3:] == [narrow, ahead_pingpong, ahead_pingpong_64]
    gathered_persistent = wgmma.WgmmaWsLaunch(in_flight=2, persistent=True, early=True)  # on a 1x1 filter alone
    one_tap = wgmma_settings.wgmma_candidates(ConvProblem.same(2, 37, 9, 11, 131, 1))
    pingpong = wgmma.WgmmaWsLaunch(in_flight=2, persistent=True, filters=64, early=True, pingpong=True)
    smaller = [dataclasses.replace(wgmma_settings.GATHERED_PIXEL_ROWS, filters=f, persistent=persistent, in_flight=1)
               for f in (16, 32) for persistent in (True, None)]  # fmt: skip
    in_block = [dataclasses.replace(spec, weights="split in block", early=None) for spec in smaller[1::2]]
    # (4 tiles of 128 filters by 128 pixels: a small grid, smaller blocks too; 2 K-tiles: their weights split in the
    # block too, a block a tile)
    assert one_tap == [wgmma.WgmmaGemmLaunch(), wgmma.WgmmaWsLaunch(), gathered_persistent, pingpong, split_ahead,
                       *smaller, *in_block]  # fmt: skip
    # on a 1x1 filter: ping-pong; 64 filters a block where <= 64; K split where its grid is <= 8 blocks an SM, a
    # K-tile a split, over a cluster where the tiles' clusters all fit at once
    one_tap_candidates, pingpong = wgmma_settings.one_tap_candidates, wgmma_settings.GATHERED_PINGPONG
    deep = one_tap_candidates(ConvProblem(32, 832, 7, 7, 48, 1, 1))  # 13 tiles, 26 K-tiles: 4 and 7 splits
    narrow_ones = [wgmma_settings.GATHERED_NARROW, wgmma_settings.GATHERED_PINGPONG_HALVES]  # (<= 64 filters)
    assert deep == [gathered_persistent, pingpong, *narrow_ones, *cluster_in]
    assert [WGMMA_VARIANT.launch_from(spec.to_params()) for spec in deep] == deep  # recorded, read back
    assert WGMMA_VARIANT.launch_from(ahead_pingpong.to_params()) == wgmma_settings.SPLIT_AHEAD_PINGPONG
    assert one_tap_candidates(ConvProblem(128, 832, 7, 7, 512, 1, 1))[1:] == [pingpong, split_in[0]]  # 196 tiles: 4
    assert one_tap_candidates(ConvProblem(32, 192, 7, 7, 448, 1, 1))[1:] == [pingpong, split_in[0]]  # 6 K-tiles: 4
    assert one_tap_candidates(ConvProblem(32, 96, 7, 7, 448, 1, 1)) == [gathered_persistent, pingpong]  # 3 K-tiles
    assert one_tap_candidates(ConvProblem(256, 832, 14, 14, 256, 1, 1)) == [gathered_persistent, pingpong]  # 784 tiles
    # the first-use tuner's launch: K split in 8, else 4, in one wave a K-tile a split; else ping-pong at <= 64 filters
    # (with the weights split ahead: where they are split in the block instead, the test of weights_in_block says)
    default = wgmma_pick.pick_weights_split_ahead
    # (on a small grid, the pixels on the rows with K split over a cluster first: the most splits, then the most
    # blocks; the producer in halves where a split has 4 K-tiles or more)
    # (8 K-tiles: in 2 at 16 and 32 filters, in 4 at 32: 28 tiles, where 56 of 16 would pass the 33 clusters of 4)
    rows_split = wgmma_settings.PIXEL_ROWS_CLUSTER
    rows_split_4 = dataclasses.replace(rows_split, splits=4)
    in_halves = [dataclasses.replace(rows_split, filters=f, splits=2, producer_halves=True) for f in (16, 32)]
    assert wgmma_settings.pixel_rows_splits(ConvProblem(1, 256, 28, 28, 128, 1, 1)) == [*in_halves, rows_split_4]
    assert default(ConvProblem(1, 256, 28, 28, 128, 1, 1)) == rows_split_4
    assert default(ConvProblem(1, 512, 14, 14, 128, 1, 1)) == rows_split  # 16 K-tiles: in 8, 8 tiles of 32 filters
    # (15 tiles: 15 clusters of 8 would not fit the 14; the pixel rows in 2 at 32 filters, 60 tiles, before K split
    # in 8 over planes, but not before K split in 8 over a cluster)
    assert default(ConvProblem(1, 256, 40, 48, 128, 1, 1)) == in_halves[1]
    assert default(ConvProblem(1, 512, 14, 14, 640, 1, 1)) == cluster_in[1]  # (10 tiles; the pixel rows' 40 in 2)
    # (64 K-tiles, 16 tiles: 16 clusters of 8 past the 14; the pixel rows in 2 would leave a block 32 K-tiles, more
    # than PIXEL_ROWS_K_TILES: K split in 8 over planes first, 8 a block)
    assert default(ConvProblem(8, 2048, 7, 7, 512, 1, 1)) == split_in[1]
    assert default(ConvProblem(8, 512, 14, 14, 256, 1, 1)) == cluster_in[0]  # 26 tiles: 4
    # (4 K-tiles: the pixel rows in 4 at 16 filters, a K-tile each, before 128 filters in 4)
    assert default(ConvProblem(1, 128, 28, 28, 32, 1, 1)) == dataclasses.replace(rows_split_4, filters=16)
    assert default(ConvProblem(1, 64, 28, 28, 32, 1, 1)).splits is None  # (2 K-tiles: no pixel rows split)
    assert default(ConvProblem(1, 96, 28, 28, 128, 1, 1)) == rows_split_4  # 3 K-tiles: in 3 (in 4 and 8 the same)
    in_two = [dataclasses.replace(rows_split, filters=f, splits=2) for f in (16, 32)]  # (2 K-tiles a split: no halves)
    assert wgmma_settings.pixel_rows_splits(ConvProblem(1, 96, 28, 28, 128, 1, 1)) == [*in_two, rows_split_4]
    # (a small grid of few K-tiles: the pixel rows' K split where its clusters fit, else the smaller blocks before a
    # K split in one wave)
    assert default(ConvProblem(1, 192, 28, 28, 128, 1, 1)) == rows_split_4  # 6 K-tiles: in 3 (28 clusters of 6: 22)
    assert default(ConvProblem(1, 256, 28, 28, 128, 1, 1)) == rows_split_4  # 8
    assert default(ConvProblem(1, 96, 28, 28, 512, 1, 1)) == smaller[2]  # (7 x 32 blocks at 16 filters; at 32, 7 x 16)
    assert default(ConvProblem(1, 96, 28, 28, 1024, 1, 1)) == pingpong  # (7 x 64 of 16, 7 x 32 of 32: past 132)
    assert default(ConvProblem(8, 96, 28, 28, 128, 1, 1)) == pingpong  # 49 tiles (392 blocks of 16, 196 of 32)
    assert default(ConvProblem(11, 96, 28, 28, 128, 1, 1)) == gathered_persistent  # 68 tiles: past half the SMs
    assert not wgmma_settings.small_grid_candidates(ConvProblem(1, 96, 28, 28, 32, 1, 1))  # (the pixel rows' own)
    assert not wgmma_settings.small_grid_candidates(ConvProblem.same(1, 96, 28, 28, 128, 3))  # 1x1 alone
    assert wgmma_settings.small_grid_candidates(ConvProblem(1, 96, 28, 28, 33, 1, 1)) == smaller
    assert default(ConvProblem(8, 64, 56, 56, 64, 1, 1)) == pingpong  # 196 tiles, 64 filters
    assert default(ConvProblem(8, 64, 56, 56, 65, 1, 1)) == gathered_persistent
    # other filters: the same K split; else the inputs split ahead within 1 GiB of workspace, else the first kernel
    deeper = ConvProblem.same(2, 64, 9, 11, 131, 3)  # 18 K-tiles (p's 11 are too few to split on 9 taps)
    assert default(deeper) == cluster_in[1] == WGMMA_VARIANT.launch(deeper)
    assert default(p) == ahead_pingpong == WGMMA_VARIANT.launch(p)
    # (at 64 filters a block with ping-pong where <= 64 filters, or where its waves are under 5/3 of 128 filters')
    assert default(many) == split_ahead and default(ConvProblem.same(32, 64, 28, 28, 64, 3)) == ahead_pingpong
    assert default(ConvProblem.same(16, 160, 14, 14, 320, 3)) == ahead_pingpong  # 75 tiles; K split past a wave
    assert default(ConvProblem.same(30, 160, 14, 14, 320, 3)) == ahead_pingpong  # 138 tiles, 2 waves; of 64: 230, 2
    assert default(ConvProblem.same(64, 64, 14, 14, 256, 3)) == ahead_pingpong  # 196 tiles, 2 waves; of 64: 392, 3
    assert default(ConvProblem.same(8, 64, 28, 28, 256, 3)) == split_ahead  # 98 tiles, 1 wave; of 64: 196, 2
    assert default(ConvProblem.same(8, 512, 14, 14, 256, 3)) == ahead_pingpong  # 26 tiles: no K split in 4
    assert default(ConvProblem.same(2, 512, 14, 14, 256, 3)) == cluster_in[1]  # 8 tiles: in 8, over a cluster
    assert default(ConvProblem.same(1, 32, 27, 27, 128, 3)) == ahead_pingpong  # 6 tiles, 9 K-tiles: too few to split
    assert default(ConvProblem.same(1, 16, 28, 28, 32, 5)).splits == 8  # 13 K-tiles
    # the inputs' planes a pass of images within the 1 GiB every algorithm is allowed: 1.6 GB of them in two passes
    huge = ConvProblem.same(256, 64, 112, 112, 128, 3)
    assert default(huge) == split_ahead and split_ahead.pass_images(huge) == 128
    assert split_ahead.workspace_bytes(huge) <= 1 << 30 < 2 * wgmma_operands.input_plane_elements(huge) * 4
    assert default(ConvProblem.same(1, 2048, 256, 256, 128, 3)) == wgmma.WgmmaGemmLaunch()  # one image's: 1 GiB
    # an image's first layer (3 channels: one K-tile) stores most, as a 1x1 layer: the 1x1 layers' settings
    first = ConvProblem.same(16, 3, 224, 224, 64, 3)
    gathering = [gathered_persistent, pingpong, *narrow_ones]
    assert wgmma_settings.wgmma_candidates(first)[2:6] == gathering
    assert default(first) == pingpong
    # a 1x1 layer of at most 32 filters: the pixels on the products' rows, 16 filters a block where it has at most 16
    rows_at = [dataclasses.replace(wgmma_settings.GATHERED_PIXEL_ROWS, filters=f, persistent=persistent, in_flight=k)
               for f in (32, 16) for persistent in (True, None) for k in (1, 2)]  # fmt: skip
    halves_at = [dataclasses.replace(wgmma_settings.PIXEL_ROWS_HALVES, filters=f) for f in (32, 16)]  # (in halves)
    assert wgmma_settings.wgmma_candidates(ConvProblem(64, 256, 28, 28, 32, 1, 1))[-5:] == [*rows_at[:4], halves_at[0]]
    assert wgmma_settings.wgmma_candidates(ConvProblem(64, 256, 28, 28, 16, 1, 1))[-5:] == [*rows_at[4:], halves_at[1]]
    assert halves_at[0] == dataclasses.replace(rows_at[0], producer_halves=True)  # persistent, one K-tile in flight
    assert default(ConvProblem(16, 256, 28, 28, 24, 1, 1)) == rows_at[0]  # persistent, one K-tile in flight
    assert default(ConvProblem(8, 256, 28, 28, 24, 1, 1)) == in_halves[1]  # (49 tiles of 32 filters: K split in 2)
    # (the producer in halves where its blocks of 128 pixels are at least one an SM and it has 4 K-tiles or more)
    assert default(ConvProblem(64, 256, 28, 28, 24, 1, 1)) == halves_at[0]  # 392 blocks, 8 K-tiles
    assert default(ConvProblem(64, 96, 28, 28, 16, 1, 1)) == rows_at[4]  # 3 K-tiles
    assert default(ConvProblem(32, 256, 28, 28, 64, 1, 1)) == wgmma_settings.GATHERED_PINGPONG_HALVES  # 196, 8
    assert default(ConvProblem(21, 256, 28, 28, 64, 1, 1)) == pingpong  # 129 blocks
    assert default(ConvProblem(1, 512, 14, 14, 32, 1, 1)) == dataclasses.replace(rows_split, filters=16)  # (K split)
    assert not wgmma_settings.pixel_rows_candidates(ConvProblem.same(64, 16, 28, 28, 32, 5))  # 1x1 alone
    assert not wgmma_settings.pixel_rows_candidates(ConvProblem(64, 256, 28, 28, 33, 1, 1))
    # at most 16 channels, more than one tap: K-tiles of two taps (at most 64 filters: at 64 a block, ping-pong too)
    tap_pairs = wgmma_settings.TAP_PAIR_SETTINGS
    assert wgmma_settings.wgmma_candidates(ConvProblem.same(64, 16, 54, 54, 64, 3))[-3:] == list(tap_pairs)
    assert wgmma_settings.tap_pair_candidates(ConvProblem.same(64, 16, 54, 54, 65, 3)) == [tap_pairs[0]]
    assert default(ConvProblem.same(64, 16, 54, 54, 64, 3)) == wgmma_settings.TAP_PAIRS_PINGPONG == tap_pairs[2]
    assert default(ConvProblem.same(64, 16, 54, 54, 65, 3)) == split_ahead  # (timed at 64 filters alone)
    assert not wgmma_settings.tap_pair_candidates(ConvProblem.same(64, 17, 54, 54, 64, 3))
    assert not wgmma_settings.tap_pair_candidates(ConvProblem(64, 16, 54, 54, 64, 1, 1))
    assert wgmma_settings.tap_pair_candidates(first) == list(tap_pairs) and default(first) == pingpong  # (stores)
    assert WGMMA_VARIANT.launch(ConvProblem(8, 64, 56, 56, 64, 1, 1)) == pingpong
    # the input channels last in FP32: one plane, the kernel and its input's split built to split it as staged
    assert staged.kernel_name(p) == split_ahead.kernel_name(p) and staged.input_planes == 1
    assert staged.options(p) == (*split_ahead.options(p), "-DCONVKIT_WS_INPUTS_FP32=1")
    tiled = wgmma_operands.tiled_elements(p, True)
    one, two = (regions_bytes([tiled, n * wgmma_operands.input_plane_elements(p)]) for n in (1, 2))
    assert (staged.workspace_bytes(p), split_ahead.workspace_bytes(p)) == (one, two)
    assert WGMMA_VARIANT.launch_from(staged.to_params()) == staged
    assert WGMMA_VARIANT.launch_from(narrow.to_params()) == narrow
    assert not wgmma.WgmmaWsLaunch(filters=64).not_supported_reasons(p)  # gathered at 64 filters too
    assert wgmma.WgmmaWsLaunch(filters=64).options(p)[-1] == "-DCONVKIT_WS_FILTERS=64"
    assert "filters must be" in wgmma.WgmmaWsLaunch(inputs="split ahead", filters=32).not_supported_reasons(p)[0]
    # 32 or 16 filters a block, the pixels the products' rows: the gathering kernel alone, no ping-pong; K split over
    # planes or a cluster (a block a tile), as at 128 filters
    rows = wgmma_settings.GATHERED_PIXEL_ROWS
    assert not rows.not_supported_reasons(p) and not wgmma.WgmmaWsLaunch(filters=16).not_supported_reasons(p)
    assert rows.options(p)[-1] == "-DCONVKIT_WS_FILTERS=32" and WGMMA_VARIANT.launch_from(rows.to_params()) == rows
    for wrong in (dataclasses.replace(rows, filters=48), dataclasses.replace(rows, inputs="split ahead"),
                  dataclasses.replace(rows, pingpong=True)):  # fmt: skip
        assert "filters must be" in wrong.not_supported_reasons(p)[0]
    planes_rows = wgmma.WgmmaWsLaunch(filters=16, splits=4)
    clustered_rows = dataclasses.replace(planes_rows, cluster=True)
    assert not clustered_rows.not_supported_reasons(p) and not planes_rows.not_supported_reasons(p)
    assert clustered_rows.options(p)[-2:] == ("-DCONVKIT_WS_FILTERS=16", "-DCONVKIT_WS_CLUSTER=4")
    assert "cluster must be" in wgmma.WgmmaWsLaunch(filters=64, splits=4, cluster=True).not_supported_reasons(p)[0]
    assert "splits must be" in dataclasses.replace(rows, splits=4).not_supported_reasons(p)[0]  # (persistent)
    assert (
        "pingpong must be"
        in dataclasses.replace(wgmma_settings.GATHERED_PINGPONG, filters=None).not_supported_reasons(p)[0]
    )
    # K-tiles of two taps of 16 channels: the inputs channels last, at most 16 channels
    pairs = wgmma_settings.TAP_PAIR_SETTINGS[0]
    few = ConvProblem.same(2, 16, 9, 11, 131, 3)
    assert not pairs.not_supported_reasons(few) and pairs.options(few)[-1] == "-DCONVKIT_WS_TAP_PAIRS=1"
    assert "at most 16 channels" in pairs.not_supported_reasons(p)[0]  # 37
    assert "tap_pairs must be" in wgmma.WgmmaWsLaunch(tap_pairs=True).not_supported_reasons(few)[0]  # gathered
    assert WGMMA_VARIANT.launch_from(pairs.to_params()) == pairs
    # its workspace: the tiled weights, 5 K-tiles of two taps a 128-filter block (2), and the input's two planes of
    # rows 16 channels wide
    tiled, plane = 2 * 5 * 2 * 128 * 32, 2 * 9 * 11 * 16
    assert pairs.workspace_bytes(few) == regions_bytes([tiled, 2 * plane])
    # four stages of two 32-filter planes and two 128-pixel planes, the barriers, the rows' staging (unused)
    assert rows.shared_bytes(p) == 4 * (2 * 32 + 2 * 128) * 32 * 4 + 128 + wgmma_operands.STAGED_ROWS_BYTES
    assert rows.grid(ConvProblem.same(2, 37, 9, 11, 70, 3)) == (2 * 3,)  # persistent: 2 pixel blocks x 3 of 32 filters
    assert "filters must be" in dataclasses.replace(staged, filters=64).not_supported_reasons(p)[0]  # (128 alone)
    assert [WGMMA_VARIANT.launch_from(spec.to_params()) for spec in candidates] == candidates
    assert wgmma.WgmmaWsLaunch().to_params() == {"schedule": "warp-specialised", "in_flight": 1}
    assert WGMMA_VARIANT.launch_from(wgmma_settings.WS_SETTINGS[1].to_params()) == wgmma_settings.WS_SETTINGS[1]
    assert wgmma_settings.WS_SETTINGS[1].options(p)[-1] == "-DCONVKIT_WS_IN_FLIGHT=2"
    assert "schedule must be" in wgmma.WgmmaWsLaunch("ping-pong").not_supported_reasons(p)[0]
    assert "in_flight must be" in wgmma.WgmmaWsLaunch(in_flight=3).not_supported_reasons(p)[0]
    assert "inputs must be" in wgmma.WgmmaWsLaunch(inputs="gathered").not_supported_reasons(p)[0]
    assert "persistent must be" in wgmma.WgmmaWsLaunch(persistent=False).not_supported_reasons(p)[0]
    assert not wgmma_settings.GATHERED_PERSISTENT.not_supported_reasons(p)  # the gathering kernel persistent too
    persistent = wgmma.WgmmaWsLaunch(inputs="split ahead", persistent=True)
    assert WGMMA_VARIANT.launch_from(persistent.to_params()) == persistent
    assert persistent.options(p)[-1] == "-DCONVKIT_WS_PERSISTENT=1" and persistent.grid(p) == (4,)  # 2 x 2 tiles
    split_ahead = wgmma.WgmmaWsLaunch(inputs="split ahead")
    assert WGMMA_VARIANT.launch_from(split_ahead.to_params()) == split_ahead
    assert not split_ahead.not_supported_reasons(p)
    wide = ConvProblem.same(700, 3, 224, 224, 8, 3)  # x and out under 2^31 elements, its planes of 32 channels not:
    assert not split_ahead.not_supported_reasons(wide) and split_ahead.pass_images(wide) == 78  # in 9 passes
    tall = ConvProblem.same(1, 3, 8192, 8192, 8, 3)  # one image's planes past 2^31 elements
    assert "the input channels last holds 4294967296" in split_ahead.not_supported_reasons(tall)[0]
    with pytest.raises(ValueError, match="no knob 'stages'"):
        wgmma.launch_from_params({"schedule": "warp-specialised", "stages": 3})
    # K split over blocks (the gathering kernel, a block a tile): whole K-tiles a split, partial outputs in workspace
    split = wgmma_settings.GATHERED_SPLIT
    deep = ConvProblem(32, 832, 7, 7, 48, 1, 1)  # 26 K-tiles: 4 splits of 7, then (26 / 8 -> 4 a split) 7 of 4
    assert WGMMA_VARIANT.launch_from(split.to_params()) == split and split.to_params()["splits"] == 4
    assert split.effective_splits(deep) == 4 and dataclasses.replace(split, splits=8).effective_splits(deep) == 7
    assert split.grid(deep) == (13, 1, 4) and split.effective_splits(ConvProblem(1, 8, 4, 4, 8, 1, 1)) == 1
    tiled = wgmma_operands.tiled_elements(deep)
    assert split.workspace_bytes(deep) == regions_bytes([tiled, 4 * math.prod(deep.output_shape)])
    for wrong in (1, 65, True, 2.0):
        assert "splits must be" in dataclasses.replace(split, splits=wrong).not_supported_reasons(deep)[0]
    for wrong in (dataclasses.replace(split, persistent=True), dataclasses.replace(split, inputs="split ahead")):
        assert "splits must be" in wrong.not_supported_reasons(deep)[0]
    # over a cluster (rank r split r): built for the splits that K gives, no planes of partial outputs
    cluster = wgmma_settings.GATHERED_CLUSTER
    assert cluster.options(deep)[-1] == "-DCONVKIT_WS_CLUSTER=4"
    assert cluster.workspace_bytes(deep) == regions_bytes([tiled])
    assert dataclasses.replace(cluster, splits=8).options(deep)[-1] == "-DCONVKIT_WS_CLUSTER=7"
    assert WGMMA_VARIANT.launch_from(cluster.to_params()) == cluster and cluster.grid(deep) == (13, 1, 4)
    one_k_tile = ConvProblem(1, 8, 4, 4, 8, 1, 1)  # no split: built and launched as the kernel unsplit
    assert not cluster.sums_in_cluster(one_k_tile)
    assert not any(option.startswith("-DCONVKIT_WS_CLUSTER") for option in cluster.options(one_k_tile))
    for wrong in (dataclasses.replace(cluster, splits=None), dataclasses.replace(cluster, filters=64),
                  dataclasses.replace(cluster, cluster=False)):  # fmt: skip
        assert "cluster must be" in wrong.not_supported_reasons(deep)[0]
    assert "at most 8 blocks" in dataclasses.replace(cluster, splits=16).not_supported_reasons(deep)[0]  # 13 splits
    early, plain = gathered_persistent, dataclasses.replace(gathered_persistent, early=None)  # launched as the split
    assert early.starts_early(deep) and not plain.starts_early(deep) and early.to_params()["early"]  # ends: it waits
    assert WGMMA_VARIANT.launch_from(early.to_params()) == early
    assert "early must be" in dataclasses.replace(early, early=False).not_supported_reasons(deep)[0]
    ahead_early = wgmma_settings.SPLIT_AHEAD_PINGPONG  # (waits for the split)
    assert ahead_early.starts_early(deep) and not ahead_early.not_supported_reasons(deep)
    assert ahead_early in wgmma_settings.WS_SETTINGS  # (emulated, sanitized, replayed on two streams and in a graph)
    assert dataclasses.replace(ahead_early, early=None) in wgmma_settings.WS_SETTINGS  # (launched after the split)
    pingpong = wgmma_settings.GATHERED_PINGPONG  # at 64 filters, persistent: the consumers' rows staged as at 128
    assert pingpong.options(deep)[-1] == "-DCONVKIT_WS_PINGPONG=1" and WGMMA_VARIANT.launch_from(pingpong.to_params())
    assert pingpong.shared_bytes(deep) == wgmma_settings.GATHERED_NARROW.shared_bytes(deep) - 64 * 128 * 4 + 34_816
    for wrong in (dataclasses.replace(pingpong, persistent=None), dataclasses.replace(pingpong, filters=None),
                  dataclasses.replace(pingpong, pingpong=False)):  # fmt: skip
        assert "pingpong must be" in wrong.not_supported_reasons(deep)[0]
    # the producer's halves on alternate K-tiles: it keeps its registers, so one K-tile of products in flight but at 16
    # or 32 filters; the inputs gathered; at 64 filters ping-pong (its consumers on alternate K-tiles without: refused)
    halves = dataclasses.replace(pingpong, in_flight=1, producer_halves=True)
    assert halves.options(deep)[-1] == "-DCONVKIT_WS_PRODUCER_HALVES=1"
    assert WGMMA_VARIANT.launch_from(halves.to_params()) == halves
    assert "HALVES" not in " ".join(pingpong.options(deep))
    assert not dataclasses.replace(rows, producer_halves=True).not_supported_reasons(deep)  # (two in flight at 32)
    alternate = dataclasses.replace(split, filters=64, in_flight=1, producer_halves=True)  # (K split too)
    for wrong in (dataclasses.replace(halves, in_flight=2), dataclasses.replace(halves, producer_halves=False),
                  dataclasses.replace(halves, pingpong=None), alternate,
                  dataclasses.replace(split_ahead, producer_halves=True)):  # fmt: skip
        assert "producer_halves must be" in wrong.not_supported_reasons(deep)[0]
    narrow = dataclasses.replace(split, filters=64)  # at 64 filters a block too: its weights tiled at 64
    assert not narrow.not_supported_reasons(deep) and narrow.grid(deep) == (13, 1, 4)
    tiled = wgmma_operands.tiled_elements(deep, False, 64)
    assert narrow.workspace_bytes(deep) == regions_bytes([tiled, 4 * math.prod(deep.output_shape)])


@pytest.mark.parametrize("capability", [(8, 0), (8, 9), (10, 0)])
def test_the_launch_declines_every_gpu_but_hopper_naming_it(monkeypatch, capability):
    from convkit.families.tf32x3 import wgmma

    monkeypatch.setattr(gpu, "has_gpu", lambda: True)
    monkeypatch.setattr(gpu, "compute_capability", lambda: capability)
    (reason,) = wgmma.WgmmaGemmLaunch().not_supported_reasons(ConvProblem.same(1, 8, 8, 8, 8, 3))
    assert "compute capability 9.0" in reason and "sm_{}{}".format(*capability) in reason


def test_the_weights_split_in_the_block_run_only_where_the_kernel_builds_them(monkeypatch):
    """``weights="split in block"`` (:func:`~convkit.families.tf32x3.wgmma_settings.weights_in_block`): at 32 or 16
    filters, a block a tile of at most its stages' K-tiles (4), any K split over a cluster, not launched early, no
    workspace, its operands x and w as given. Refused elsewhere naming ``weights``, before any build."""
    monkeypatch.setattr(gpu, "has_gpu", lambda: True)
    monkeypatch.setattr(gpu, "compute_capability", lambda: (9, 0))
    monkeypatch.delenv("CONVKIT_PTX_ARCH", raising=False)
    of, rows = wgmma_settings.weights_in_block, wgmma_settings.PIXEL_ROWS_CLUSTER  # (32 filters, in 8)
    deep, shallow = ConvProblem(1, 300, 7, 7, 40, 1, 1, pad=0), ConvProblem(1, 64, 7, 7, 40, 1, 1, pad=0)  # 10, 2
    in_block = of(rows, deep)  # (5 splits of 2 K-tiles over a cluster)
    assert in_block.weights == "split in block" and in_block.persistent is None and in_block.early is None
    assert in_block.options(deep)[-1] == "-DCONVKIT_WS_WEIGHTS_IN_BLOCK=1"
    assert in_block.workspace_bytes(deep) == 0 and in_block.operands(deep, 1, 2, None) == (1, 2)
    assert wgmma.launch_from_params(in_block.to_params()) == in_block
    assert of(dataclasses.replace(rows, splits=2), deep) is None  # (5 K-tiles a block)
    assert of(dataclasses.replace(rows, cluster=None), deep) is None  # (split over planes)
    assert of(wgmma_settings.GATHERED_PIXEL_ROWS, shallow).persistent is None  # (2 K-tiles, K whole)
    for refused in (wgmma_settings.GATHERED_PERSISTENT, wgmma_settings.GATHERED_NARROW, wgmma_settings.SPLIT_AHEAD):
        assert of(refused, shallow) is None
    (reason,) = dataclasses.replace(in_block, splits=2).not_supported_reasons(deep)
    assert reason.startswith("weights='split in block' takes at most 4 K-tiles")
    for wrong in (
        dataclasses.replace(in_block, weights="in block"),
        dataclasses.replace(in_block, early=True),
        dataclasses.replace(in_block, cluster=None),
        dataclasses.replace(in_block, splits=None, cluster=None, persistent=True),
        dataclasses.replace(wgmma_settings.GATHERED_NARROW, weights="split in block", persistent=None),
    ):
        (reason,) = wrong.not_supported_reasons(deep)
        assert reason.startswith("weights must be None"), reason


def test_the_weights_split_in_the_block_are_candidates_and_the_pick_where_they_were_timed(monkeypatch):
    """Each pixel-rows candidate's version with the weights split in the block joins the candidates where it runs
    (once: persistent or not, it is a block a tile), and the first-use pick takes it on the 1x1 layers at batch 1 and
    the K splits over a cluster, where it was timed; elsewhere the pick splits them ahead."""
    monkeypatch.setattr(gpu, "has_gpu", lambda: True)
    monkeypatch.setattr(gpu, "compute_capability", lambda: (9, 0))
    monkeypatch.delenv("CONVKIT_PTX_ARCH", raising=False)
    for module in (wgmma, wgmma_settings, wgmma_pick):
        monkeypatch.setattr(module, "sm_count", lambda: 132)
    batch_one = ConvProblem(1, 64, 7, 7, 16, 1, 1, pad=0)  # (2 K-tiles, 16 filters)
    candidates = wgmma_settings.wgmma_candidates(batch_one)
    in_block = [c for c in candidates if isinstance(c, wgmma.WgmmaWsLaunch) and c.weights_in_block]
    assert in_block and len(in_block) == len(set(in_block))
    assert all(not c.persistent and not c.early and c.filters == 16 for c in in_block)
    pick = wgmma_pick.wgmma_default(batch_one)
    assert pick.weights_in_block and pick in candidates
    assert pick == wgmma_settings.weights_in_block(wgmma_pick.pick_weights_split_ahead(batch_one), batch_one)
    batch_32 = dataclasses.replace(batch_one, n=32)  # (persistent, never timed a block a tile with the weights so)
    ahead = wgmma_pick.pick_weights_split_ahead(batch_32)
    assert wgmma_pick.wgmma_default(batch_32) == ahead and not getattr(ahead, "weights", None)
    three = ConvProblem.same(1, 64, 7, 7, 24, 3)  # (more than one tap: none)
    assert not any(getattr(c, "weights", None) for c in wgmma_settings.wgmma_candidates(three))


def test_the_launch_declines_a_ptx_build_for_another_gpu(monkeypatch):
    """The T4's code path on an H100 (CONVKIT_PTX_ARCH=compute_75) has no wgmma."""
    from convkit.families.tf32x3 import wgmma

    monkeypatch.setattr(gpu, "has_gpu", lambda: True)
    monkeypatch.setattr(gpu, "compute_capability", lambda: (9, 0))
    monkeypatch.setenv("CONVKIT_PTX_ARCH", "compute_75")
    (reason,) = wgmma.WgmmaGemmLaunch().not_supported_reasons(ConvProblem.same(1, 8, 8, 8, 8, 3))
    assert "compute_75" in reason


@pytest.mark.parametrize("where", ["no GPU", "compute_75 PTX on an H100", "an A100"])
def test_cluster_slots_are_the_bound_where_the_driver_is_not_asked(monkeypatch, where):
    """Where the clustered kernel does not run (no GPU, another architecture's PTX, not Hopper), the clusters a GPU
    holds at once are the bound, sm_count() // splits: no build, no driver, no CuPy (the first-use pick and the
    candidates ask anywhere); on a GPU the driver's count (tests/test_wgmma_tf32x3_gpu.py)."""
    monkeypatch.setattr(wgmma_settings, "has_gpu", lambda: where != "no GPU")
    monkeypatch.setattr(wgmma_settings, "sm_count", lambda: 132)
    monkeypatch.setattr(gpu, "has_gpu", lambda: where != "no GPU")
    monkeypatch.setattr(gpu, "compute_capability", lambda: (8, 0) if where == "an A100" else (9, 0))
    if "PTX" in where:
        monkeypatch.setenv("CONVKIT_PTX_ARCH", "compute_75")
    asked = []
    monkeypatch.setattr(wgmma_settings, "_driver_cluster_slots", asked.append)
    assert [wgmma_settings.cluster_slots(s) for s in (2, 4, 7, 8)] == [66, 33, 18, 16] and not asked


def ws_id(spec: wgmma.WgmmaWsLaunch) -> str:
    """A warp-specialised setting as a test id: its K-tiles in flight, where its inputs come from, persistent, its
    filters a block, its splits of K, where its weights are split, its pixels a block."""
    persistent, narrow = "-persistent" if spec.persistent else "", f"-{spec.filters}filters" if spec.filters else ""
    k_split, early = f"-k_split{spec.splits}" if spec.splits else "", "-early" if spec.early else ""
    pingpong, cluster = "-pingpong" if spec.pingpong else "", "-cluster" if spec.cluster else ""
    pairs, halves = "-tap_pairs" if spec.tap_pairs else "", "-producer_halves" if spec.producer_halves else ""
    in_block = "-weights_in_block" if spec.weights_in_block else ""
    width = f"-{spec.width}pixels" if spec.width else ""
    return (f"in_flight{spec.in_flight}-{'split' if spec.inputs else 'gather'}{persistent}{narrow}{k_split}{cluster}"
            f"{early}{pingpong}{pairs}{halves}{in_block}{width}")  # fmt: skip


def ws_call(kernel: str, bias: str = "w + ints[9]") -> str:
    """The driver's call of a warp-specialised kernel: inputs, weights, the bias (default: after them), out and
    nine sizes."""
    return f"{kernel}(x, w, {bias}, out, " + ", ".join(f"ints[{i}]" for i in range(9)) + ")"


def emulate_ws(build_dir: Path, launch: wgmma.WgmmaWsLaunch, problem: ConvProblem, x: np.ndarray, w: np.ndarray,
               bias: np.ndarray) -> np.ndarray:  # fmt: skip
    """The warp-specialised kernel's output on ``problem`` under the emulator, its operands split as ``launch`` has
    them split (each checked against the split's rule on the way), poisoned with NaN before the launch; with the
    weights split in the block (``weights="split in block"``), w as given."""
    if launch.weights_in_block:
        return launch_ws(build_dir, launch, problem, x, np.ascontiguousarray(w, dtype=np.float32).ravel(), bias)
    pairs, rs = bool(launch.tap_pairs), problem.r * problem.s
    k, tiles = problem.c * rs, wgmma_operands.k_tiles(problem, launch.channels_last, pairs)
    filters = launch.block_filters
    tiled_floats = wgmma_operands.tiled_elements(problem, launch.channels_last, filters, pairs)
    if launch.channels_last:  # one launch: the weights tiled, then the input split ahead (two planes) or FP32 (one)
        split_ahead = wgmma_operands.SplitAheadLaunch(split=launch.input_planes == 2, tap_pairs=pairs, filters=filters)
        call = "split_ahead_operands_tf32x3(x, out + ints[4], ints[0], ints[1], ints[2], w, out, ints[3])"
        both = run_launch(build_dir, split_ahead, problem, call, (x, w),
                          tiled_floats + launch.input_planes * wgmma_operands.input_plane_elements(problem, pairs),
                          (problem.n, problem.c, problem.h * problem.w, problem.m, tiled_floats))  # fmt: skip
        tiled, inputs = both[:tiled_floats], both[tiled_floats:]
    else:
        split = wgmma_operands.SplitTiledLaunch(filters=filters)
        tiled = run_launch(build_dir, split, problem, f"{split.kernel}(w, out, ints[0], ints[1])", (x[:1], w),
                           tiled_floats, (problem.m, k))  # fmt: skip
        inputs = x
    weights = untiled_planes(tiled, tiles, filters)[:, : problem.m]
    expected_weights = split_planes(w)[:, :, :k]
    if pairs:  # K-tile t: channels 0 .. 15 at taps 2 t and 2 t + 1 (none past the last)
        by_tap = weights.reshape(2, problem.m, 2 * tiles, 16).transpose(0, 1, 3, 2)
        assert not by_tap[:, :, problem.c :].any() and not by_tap[:, :, :, rs:].any(), "weights past C or the taps"
        weights = by_tap[:, :, : problem.c, :rs].reshape(2, problem.m, k)
    elif launch.channels_last:  # K-tile t: channels 32 (t / RS) .. + 31 at tap t % RS
        cp = tiles // rs * 32
        by_tap = weights.reshape(2, problem.m, cp // 32, rs, 32).transpose(0, 1, 2, 4, 3).reshape(2, problem.m, cp, rs)
        assert not by_tap[:, :, problem.c :].any(), "weights past C"
        weights = by_tap[:, :, : problem.c].reshape(2, problem.m, k)
    assert np.array_equal(weights[:, :, :k], expected_weights), "the tiled planes hold another split"
    if launch.channels_last:  # split ahead into two planes, or (split as staged) one in FP32
        nhwc = inputs.reshape(launch.input_planes, problem.n, problem.h, problem.w, -1)
        assert not nhwc[..., problem.c :].any(), "inputs past C"
        expected = input_planes(x) if launch.input_planes == 2 else x[None]
        assert np.array_equal(nhwc[..., : problem.c].transpose(0, 1, 4, 2, 3), expected)
    return launch_ws(build_dir, launch, problem, inputs, tiled, bias)


def launch_ws(build_dir: Path, launch: wgmma.WgmmaWsLaunch, problem: ConvProblem, inputs: np.ndarray,
              tiled: np.ndarray, bias: np.ndarray) -> np.ndarray:  # fmt: skip
    """The warp-specialised kernel's launch under the emulator on its operands (:func:`emulate_ws`), the output
    poisoned with NaN before it; a K split's planes summed here where the kernel leaves them."""
    operand = np.concatenate([tiled, bias])
    out_floats = problem.n * problem.out_h * problem.out_w * problem.m
    ints = (problem.n, problem.c, problem.h, problem.w, problem.m, problem.out_h, problem.out_w, problem.pad,
            problem.stride, tiled.size)  # fmt: skip
    # K split: each split's plane of partial outputs, no bias, summed here; or over a cluster, which adds them itself
    splits, clustered = launch.effective_splits(problem), launch.sums_in_cluster(problem)
    planes = 1 if clustered else splits
    call = ws_call(launch.kernel_name(problem), "w + ints[9]" if planes == 1 else "(const float*)nullptr")
    out = run_launch(build_dir, launch, problem, call, (inputs, operand), planes * out_floats, ints,
                     cluster=splits if clustered else 1)  # fmt: skip
    if planes == 1:
        return out.reshape(problem.output_shape)
    planes = out.reshape(splits, *problem.output_shape)
    assert not np.isnan(planes).any(), "a split's partial output the kernel never wrote"
    return planes.sum(axis=0, dtype=np.float32) + bias[None, :, None, None]


@pytest.mark.parametrize("problem", [*EMULATED[:4], ConvProblem.same(1, 16, 6, 6, 70, 1), *EMULATED[4:]],
                         ids=problem_id)  # fmt: skip
@pytest.mark.parametrize("launch", wgmma_settings.WS_SETTINGS, ids=ws_id)
def test_the_warp_specialised_kernel_matches_float64_on_the_cpu(build_dir, problem, launch, monkeypatch):
    """The weights split into the tiled layout (split_weights_tiled_tf32x3, or with inputs channels last, in one
    launch with the input's channels-last planes, split_ahead_operands_tf32x3: split ahead, or one in FP32 that the
    consumers split once it is staged), then the producer
    and consumer warpgroups taking turns by mbarriers, more K-tiles than stages (the third problem: 2 of 2; the
    second: 11; split ahead, 4 and 18). The persistent one on a GPU of two SMs: each block loops over output tiles
    (the second problem's four, or six of 64 filters), its barriers' phases carried from one to the next. At 64
    filters a block the consumers take alternate K-tiles: an odd count (the first and fourth problems), and one
    alone, the second consumer adding nothing (the last). K split in 4 (a block a tile): 4 splits of the second
    problem's 11 K-tiles, 2 of the last's 2, one K-tile alone unsplit; each split's partial outputs summed here, or
    over a cluster (the emulator running its blocks together) added by the kernel: clusters of 2 to 8 blocks (4 and 6
    on the second problem, whose 131 filters leave a partial block of 3; 3 on two of the small images)."""
    monkeypatch.setattr(wgmma, "sm_count", lambda: 2)
    x, w, bias = ws_inputs(problem)
    out = emulate_ws(build_dir, launch, problem, x, w, bias)
    assert not np.isnan(out).any(), "an output the kernel never wrote"
    ref = float64_output(problem, x, w, bias)
    assert reference.relative_error(out, ref) < DIRECT_TOLERANCE


#: Layers of at most 16 channels, for K-tiles of two taps: 3 channels and an odd count of taps (the last K-tile a tap
#: short), 16 channels and 131 filters, a strided 5x5 of 13 channels (13 K-tiles of two taps), a 1x1 (one tap, a
#: K-tile half zeros) over more pixels than a block.
TAP_PAIR_PROBLEMS = (
    ConvProblem.same(1, 3, 17, 19, 5, 3), ConvProblem.same(2, 16, 9, 11, 131, 3),
    ConvProblem(1, 13, 15, 13, 40, 5, 5, pad=1, stride=2), ConvProblem.same(3, 16, 9, 7, 20, 1),
)  # fmt: skip


#: 5 K-tiles (an odd count) of each of five output tiles (two m-blocks at 32 filters a block), on 2 SMs.
ODD_K_TILES = ConvProblem(4, 144, 12, 12, 64, 1, 1, pad=0)


def assert_same_bits(build_dir: Path, problem: ConvProblem, launch: wgmma.WgmmaWsLaunch,
                     experiment: wgmma.WgmmaWsLaunch) -> None:  # fmt: skip
    """``experiment``'s output on ``problem`` under the emulator (:func:`emulate_ws`, :func:`ws_inputs`) written
    everywhere, equal to ``launch``'s bit for bit, and within the bar of float64's."""
    x, w, bias = ws_inputs(problem)
    outputs = [emulate_ws(build_dir, spec, problem, x, w, bias) for spec in (launch, experiment)]
    assert not np.isnan(outputs[1]).any(), "an output the kernel never wrote"
    assert np.array_equal(*outputs)
    ref = float64_output(problem, x, w, bias)
    assert reference.relative_error(outputs[1], ref) < DIRECT_TOLERANCE


@pytest.mark.parametrize("problem", [ConvProblem(1, 300, 7, 7, 40, 1, 1, pad=0), ODD_K_TILES,
                                     ConvProblem(2, 37, 9, 11, 131, 1, 1, pad=0), ConvProblem.same(1, 40, 6, 6, 24, 3),
                                     ConvProblem.same(1, 13, 7, 9, 20, 3)], ids=problem_id)  # fmt: skip
@pytest.mark.parametrize("launch", wgmma_settings.IN_BLOCK_SETTINGS, ids=ws_id)
@pytest.mark.parametrize("slow", ["", "4,7"])
def test_the_weights_split_in_the_block_are_the_same_bits_on_the_cpu(build_dir, launch, problem, slow, monkeypatch):
    """The weights read as given and split by the consumers into the stages (CONVKIT_WS_WEIGHTS_IN_BLOCK)
    give the bits of the same kernel on weights split ahead, and float64's within the bar: blocks of 1 to 4 K-tiles,
    rows of w not 16-byte aligned (117 values), a last partial K-tile, filters past the last block's, pixels past the
    last tile's, K whole or split over clusters of 2 to 6; with the consumers far behind the producer or not. (The
    consumers' K-tiles put in the stages in reverse failed each case of more than one K-tile a block.)"""
    monkeypatch.setattr(wgmma, "sm_count", lambda: 2)
    if slow:
        monkeypatch.setenv("CONVKIT_EMULATED_SLOW_WARPS", slow)
    monkeypatch.setattr(gpu, "has_gpu", lambda: True)  # (where it runs on Hopper: a block's K-tiles its stages)
    monkeypatch.setattr(gpu, "compute_capability", lambda: (9, 0))
    if reasons := launch.not_supported_reasons(problem):
        pytest.skip(f"{problem.label}: {reasons[0]}")
    assert_same_bits(build_dir, problem, dataclasses.replace(launch, weights=None), launch)


@pytest.mark.parametrize("slow", ["0,1", "2,3", "4,7", "8,11"])
@pytest.mark.parametrize("launch", wgmma_settings.WS_SETTINGS, ids=ws_id)
def test_the_warp_specialised_kernel_holds_with_a_warpgroup_behind_on_the_cpu(build_dir, slow, launch, monkeypatch):
    """Each setting with one warpgroup, or one half of the producer, far behind the rest (CONVKIT_EMULATED_SLOW_WARPS:
    its waits looked at every 64th round), as a GPU's warpgroups drift apart where the emulator's rounds keep them
    together: each parity wait must still tell a stage's phases apart, across output tiles of an odd count of
    K-tiles (where a producer half's turns lie three apart). The producer in halves beside consumers on alternate
    K-tiles (64 filters without ping-pong), built without the kernel's and the launch's refusal, gave an error of 0.71
    with the first half slow, as that setting failed on the H200."""
    problem = ODD_K_TILES
    monkeypatch.setattr(wgmma, "sm_count", lambda: 2)
    monkeypatch.setenv("CONVKIT_EMULATED_SLOW_WARPS", slow)
    x, w, bias = ws_inputs(problem)
    out = emulate_ws(build_dir, launch, problem, x, w, bias)
    assert not np.isnan(out).any(), "an output the kernel never wrote"
    ref = float64_output(problem, x, w, bias)
    assert reference.relative_error(out, ref) < DIRECT_TOLERANCE


@pytest.mark.parametrize("problem", TAP_PAIR_PROBLEMS, ids=problem_id)
@pytest.mark.parametrize("launch", wgmma_settings.TAP_PAIR_SETTINGS, ids=ws_id)
def test_k_tiles_of_two_taps_match_float64_on_the_cpu(build_dir, problem, launch, monkeypatch):
    """The split-ahead kernel with K-tiles of two taps of 16 channels (``tap_pairs``): its weights and input split to
    match (each checked against the split's rule by :func:`emulate_ws`), the output against float64, as every other
    setting's."""
    test_the_warp_specialised_kernel_matches_float64_on_the_cpu(build_dir, problem, launch, monkeypatch)


@pytest.mark.parametrize("problem", [ConvProblem.same(2, 37, 9, 11, 131, 3), ConvProblem.same(1, 16, 6, 6, 70, 1)],
                         ids=lambda p: p.label)  # fmt: skip
def test_inputs_split_as_staged_give_the_bits_split_ahead_gives_on_the_cpu(build_dir, problem, monkeypatch):
    """The same split of the same values, by the consumers once staged or by a pass ahead, and the same products
    in the same order: the outputs equal bit for bit (the setting Winograd's products run)."""
    monkeypatch.setattr(wgmma, "sm_count", lambda: 2)
    x, w, bias = ws_inputs(problem)
    launches = (wgmma_settings.SPLIT_AHEAD, wgmma_settings.SPLIT_STAGED)
    outputs = [emulate_ws(build_dir, launch, problem, x, w, bias) for launch in launches]
    assert np.array_equal(*outputs)


@pytest.mark.parametrize("problem", [ONE_TAP, ConvProblem.same(1, 16, 6, 6, 70, 1)], ids=lambda p: p.label)
def test_the_gathered_and_split_ahead_kernels_agree_bit_for_bit_on_a_1x1_on_the_cpu(build_dir, problem, monkeypatch):
    """On a 1x1 filter both take the channels in the same K-tiles, split them by the same rule (tf32::split_ahead)
    and issue the same products in the same order: the gathering kernel (persistent, two K-tiles in flight) and the
    split-ahead one give the same bits."""
    monkeypatch.setattr(wgmma, "sm_count", lambda: 2)
    x, w, bias = ws_inputs(problem)
    launches = (wgmma_settings.GATHERED_PERSISTENT, wgmma_settings.SPLIT_AHEAD)
    outputs = [emulate_ws(build_dir, launch, problem, x, w, bias) for launch in launches]
    assert np.array_equal(*outputs)


def test_winograd_on_wgmma_declares_its_operands_products_and_candidates(monkeypatch):
    """Winograd with its products on the split-ahead kernel: the transforms write both operands split as that kernel
    reads them (a point's tiled weights and its two channels-last input planes), one persistent launch runs every
    point's product, the variant reads its launches back and declines off Hopper naming the GPU."""
    from convkit.core.reference import TRANSFORM_TOLERANCE
    from convkit.families import tf32x3 as family
    from convkit.families.fp32.winograd import WGMMA_FP32_INPUTS, WGMMA_OPERANDS
    from convkit.families.tf32x3 import wgmma_winograd

    monkeypatch.setattr(gpu, "has_gpu", lambda: True)
    monkeypatch.setattr(gpu, "compute_capability", lambda: (9, 0))
    monkeypatch.delenv("CONVKIT_PTX_ARCH", raising=False)
    monkeypatch.setattr(wgmma_winograd, "sm_count", lambda: 132)
    p = ConvProblem.same(16, 200, 56, 56, 130, 3)  # C past a K-tile's 32, M past a block's 128
    spec = wgmma_winograd.WgmmaWinogradLaunch(4)
    assert spec.to_params() == {"m": 4, "inputs": "split ahead"}
    assert wgmma_winograd.WgmmaWinogradLaunch.from_params({"m": 4}) == spec  # a row from before the knob
    t_pad = spec.tiles(p)[3]
    assert t_pad == 16 * 14 * 14 and spec.gemm_problem(p) == ConvProblem(1, 200, 1, t_pad, 130, 1, 1)
    assert spec.transform_layout() == WGMMA_OPERANDS
    # V: 36 points x 2 blocks of 128 filters x 7 K-tiles x both planes of 128 x 32; U: 36 x 2 planes of t_pad x 224
    assert spec.workspace_elements(p) == (36 * 2 * 7 * 2 * 128 * 32, 36 * 2 * t_pad * 224, 36 * 130 * t_pad)
    assert spec.transform_items(p) == (2 * 7 * 128 * 32, t_pad * 224) and spec.transform_items(p, False)[0] == 0
    products = spec.products_launch(p)
    assert products.kernel_name(p) == "winograd_products_wgmma_tf32x3" and products.arch == "sm_90a"
    gemm = spec.gemm_problem(p)
    assert products.options(gemm) == ("-DCONVKIT_R=1", "-DCONVKIT_S=1", "-DCONVKIT_WS_IN_FLIGHT=2",
                                      "-DCONVKIT_WS_PERSISTENT=1")  # fmt: skip
    assert products.grid(gemm) == (132,) and products.block(gemm) == (384,)
    assert products.output_tiles(gemm) == 36 * 25 * 2  # 3,136 pixels: 25 blocks of 128
    assert products.shared_bytes(gemm) == wgmma_settings.SPLIT_AHEAD.shared_bytes(gemm)
    assert not spec.not_supported_reasons(p)
    # the inputs one FP32 plane, split by the products' producer: half U, the products built to split them
    staged = wgmma_winograd.WgmmaWinogradLaunch(4, inputs="split staged")
    assert staged.transform_layout() == WGMMA_FP32_INPUTS and staged.to_params() == {"m": 4, "inputs": "split staged"}
    assert staged.workspace_elements(p) == (36 * 2 * 7 * 2 * 128 * 32, 36 * t_pad * 224, 36 * 130 * t_pad)
    assert staged.transform_items(p) == spec.transform_items(p)
    assert staged.products_launch(p).options(gemm) == (*products.options(gemm), "-DCONVKIT_WS_INPUTS_FP32=1")
    assert not staged.not_supported_reasons(p)
    with pytest.raises(ValueError, match="inputs must be one of"):
        wgmma_winograd.WgmmaWinogradLaunch(4, inputs="split").can_implement(p)
    candidates = wgmma_winograd.winograd_wgmma_candidates(p)
    assert [(c.m, c.inputs) for c in candidates] == [(m, i) for m in (2, 4, 6) for i in ("split ahead", "split staged")]
    assert {c.m for c in wgmma_winograd.winograd_wgmma_candidates(ConvProblem.same(2, 8, 9, 9, 8, 5))} == {2, 4}
    variant = family.WINOGRAD_WGMMA_VARIANT
    assert variant.tolerance == TRANSFORM_TOLERANCE and variant.precision == "tf32x3"
    assert variant.launch_of({"m": 6}) == wgmma_winograd.WgmmaWinogradLaunch(6) and variant.default(p) == spec
    assert variant.not_supported_reasons(ConvProblem(1, 8, 9, 9, 8, 3, 3, pad=1, stride=2))  # stride 1 only
    with pytest.raises(ValueError, match="no knob 'gemm_tile'"):
        variant.launch_of({"m": 4, "gemm_tile": "64x64"})
    monkeypatch.setattr(gpu, "compute_capability", lambda: (8, 0))
    (reason,) = variant.not_supported_reasons(p)
    assert "compute capability 9.0" in reason and "sm_80" in reason
