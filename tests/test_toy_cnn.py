"""CPU tests of the fused-layer chapter: tile arithmetic, launch geometry, the kernel's build, the tables."""

from __future__ import annotations

import re

import pytest

from convkit import compile as ck_compile
from convkit import toy_cnn, toy_cnn_results
from convkit.paths import kernels_dir
from convkit.problem import ConvProblem
from convkit.results import load_results
from convkit.toy_cnn import LAB_LAYER, TiledConfig

RECORDED = kernels_dir().parent / "results" / "nvidia-h100-80gb-hbm3"


def test_lab_layer_is_the_reports():
    assert LAB_LAYER.flops == 2 * 256 * 256 * 25 * 224 * 224  # 164.4 GFLOP
    assert toy_cnn.layer_output_shape(LAB_LAYER) == (1, 256, 112, 112)


def test_shared_tile_is_figure_1():
    # (BLOCK_DIM - 1) * stride + pool + kernel - 1
    assert toy_cnn.shared_tile_shape((16, 8, 4)) == (8 * 2 + 4, 16 * 2 + 4)
    assert toy_cnn.shared_tile_shape((1, 1, 1)) == (6, 6)


def test_report_grid_covers_the_pooled_output():
    assert toy_cnn.report_grid(LAB_LAYER, (16, 8, 4), 96) == toy_cnn.REPORT_BEST_GRID
    assert toy_cnn.report_grid(LAB_LAYER, (16, 16, 1)) == (7, 7, 256)
    odd = ConvProblem(1, 3, 41, 29, 37, 5, 5)  # pooled 18 x 12
    assert toy_cnn.report_grid(odd, (5, 4, 3)) == (3, 5, 13)


def test_report_table3_grids_are_the_reports():
    for grid, block, _, _ in toy_cnn.REPORT_TABLE3:
        assert toy_cnn.report_grid(LAB_LAYER, block, grid[2]) == grid


def test_block_sweep_respects_the_thread_limit():
    shapes = toy_cnn.block_shapes(LAB_LAYER)
    assert (16, 8, 4) in shapes and all(x * y * z <= 1024 for x, y, z in shapes)


def test_tiled_config_arithmetic():
    t = TiledConfig(64, 16, 16, 4)
    assert (t.pixel_threads, t.threads, t.min_blocks) == (32, 256, 2)
    assert t.in_stride == 24  # 20 columns padded so two thread rows' float4 reads share no bank
    assert t.shared_bytes == 2 * 4 * (20 * 24 + 25 * 64) * 4
    assert toy_cnn.tiled_grid(LAB_LAYER, t) == (14, 14, 4)
    assert toy_cnn.tiled_grid(LAB_LAYER, TiledConfig(16, 32, 32, 4)) == (7, 7, 16)
    assert TiledConfig(32, 32, 32, 2).in_stride == 36  # 8 threads across: any multiple of 4


@pytest.mark.parametrize(("knobs", "match"), [
    ({"bm": 12}, "bm"), ({"tile_w": 10}, "tile_w"), ({"tile_h": 3}, "tile_h"), ({"ck": 0}, "ck"),
    ({"tile_h": 4, "tile_w": 8}, "multiple of 32"), ({"bm": 128, "tile_h": 32}, "512"),
])  # fmt: skip
def test_tiled_config_rejects_bad_tiles(knobs, match):
    with pytest.raises(ValueError, match=match):
        TiledConfig(**knobs)


def test_every_candidate_tile_builds_without_spills():
    """Each tile the sweep measures compiles for the T4 and the H100 within its register cap, no local memory."""
    if ck_compile.find_nvcc() is None:
        pytest.skip("nvcc not found")
    for tile in (TiledConfig(), toy_cnn.TILED_CANDIDATES[-1]):
        for arch in ck_compile.CHECKED_ARCHS:
            report = {k.kernel: k for k in ck_compile.ptxas_report("toy_cnn", arch, options=tile.options())}
            tiled = report["toy_fused_tiled"]
            assert tiled.registers <= toy_cnn.TILED_REGISTERS
            assert tiled.stack_frame_bytes == tiled.spill_store_bytes == tiled.spill_load_bytes == 0, (tile, arch)


def test_kernel_constants_match_the_launcher():
    source = (kernels_dir() / "toy_cnn.cu").read_text()
    assert re.search(r"constexpr int kKernelSize = 5;", source)
    assert "kTaps * kBM" in source and "kInH * kInStride" in source  # the shared_bytes formula's terms


def test_recorded_tables():
    frame, _ = load_results(RECORDED, "toy_cnn")
    ladder = toy_cnn_results.ladder_table(frame, 65.3)
    assert list(ladder.index[:5]) == [toy_cnn_results.LADDER_NAMES[v] for v in toy_cnn.LADDER]
    assert (ladder["TFLOP/s"] > 0).all()
    assert len(toy_cnn_results.table3(frame).dropna()) == 9
    assert len(toy_cnn_results.block_sweep(frame)) == len(toy_cnn.block_shapes(LAB_LAYER))
    targets = toy_cnn_results.targets(frame, 65.3, 51.7)
    assert targets["met"].iloc[0] in (True, False)
    assert "Ladder" in toy_cnn_results.verdict(frame, 65.3)
    assert set(toy_cnn_results.cudnn_table(frame)["steps"]) == {"conv", "layer"}
    kernels, _ = load_results(RECORDED, "toy_cnn_kernels")
    assert (toy_cnn_results.kernel_table(kernels)["time ms"] > 0).all()
