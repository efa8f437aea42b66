"""CPU tests of the fused-layer chapter: tile arithmetic, launch geometry, the kernel's build, the tables."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from convkit.core.paths import kernels_dir
from convkit.core.problem import ConvProblem
from convkit.cuda import ptxas as ck_compile
from convkit.cuda.launch import Launch
from convkit.families.toy_cnn import launch as toy_cnn
from convkit.families.toy_cnn.launch import LAB_LAYER, ToyEpilogueLaunch, ToyLadderLaunch, ToyTiledLaunch
from convkit.papers import toy_cnn as paper
from convkit.papers.paper import FINDING_COLUMNS
from convkit.papers.toy_cnn import claims as toy_cnn_claims
from convkit.papers.toy_cnn import results as toy_cnn_results
from convkit.papers.toy_cnn.measure import CONV_ONLY, HOST_TIMED, LAYER_STEPS
from convkit.study.results import load_results
from convkit.study.roofline import recorded_ceilings

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
    t = ToyTiledLaunch(64, 16, 16, 4)
    assert (t.pixel_threads, t.threads, t.min_blocks) == (32, 256, 2)
    assert t.in_stride == 24  # 20 columns padded so two thread rows' float4 reads share no bank
    assert t.shared_bytes(LAB_LAYER) == 2 * 4 * (20 * 24 + 25 * 64) * 4
    assert t.grid(LAB_LAYER) == (14, 14, 4) and t.block(LAB_LAYER) == (256,)
    assert ToyTiledLaunch(16, 32, 32, 4).grid(LAB_LAYER) == (7, 7, 16)
    assert ToyTiledLaunch(32, 32, 32, 2).in_stride == 36  # 8 threads across: any multiple of 4


@pytest.mark.parametrize(("knobs", "match"), [
    ({"bm": 12}, "bm"), ({"tile_w": 10}, "tile_w"), ({"tile_h": 3}, "tile_h"), ({"ck": 0}, "ck"),
    ({"tile_h": 4, "tile_w": 8}, "multiple of 32"), ({"bm": 128, "tile_h": 32}, "512"),
])  # fmt: skip
def test_tiled_config_rejects_bad_tiles(knobs, match):
    with pytest.raises(ValueError, match=match):
        ToyTiledLaunch(**knobs)


def test_every_candidate_tile_builds_without_spills():
    """Each tile the sweep measures compiles for the T4 and the H100 within its register cap, no local memory."""
    if ck_compile.find_nvcc() is None:
        pytest.skip("nvcc not found")
    for tile in (ToyTiledLaunch(), toy_cnn.TILED_CANDIDATES[-1]):
        for arch in ck_compile.CHECKED_ARCHS:
            report = {k.kernel: k for k in ck_compile.ptxas_report("toy_cnn", arch, options=tile.options(LAB_LAYER))}
            tiled = report["toy_fused_tiled"]
            assert tiled.registers <= toy_cnn.TILED_REGISTERS
            assert tiled.stack_frame_bytes == tiled.spill_store_bytes == tiled.spill_load_bytes == 0, (tile, arch)


def test_launches_follow_the_launch_protocol_and_record_their_params_as_before():
    tile, ladder = ToyTiledLaunch(64, 16, 16, 4), ToyLadderLaunch("v2", (16, 8, 4), (7, 14, 96))
    assert all(isinstance(spec, Launch) for spec in (tile, ladder, ToyEpilogueLaunch()))
    assert tile.to_params() == {"bm": 64, "tile_h": 16, "tile_w": 16, "ck": 4}
    assert ToyTiledLaunch(**tile.to_params()) == tile
    assert tile.kernel_name(LAB_LAYER) == "toy_fused_tiled" and "-DTOY_FUSE_POOL=1" in tile.options(LAB_LAYER)
    assert "-DTOY_FUSE_POOL=0" in ToyTiledLaunch(fuse_pool=False).options(LAB_LAYER)
    assert ToyTiledLaunch(fuse_pool=False).to_params() == tile.to_params()  # the variant says it, not the params
    assert ladder.to_params() == {"block": [16, 8, 4], "grid": [7, 14, 96]}
    assert ladder.kernel_name(LAB_LAYER) == "toy_v2" and ladder.shared_bytes(LAB_LAYER) == 20 * 36 * 4
    assert ToyLadderLaunch("v0", (16, 8, 4), (7, 14, 96)).shared_bytes(LAB_LAYER) == 0
    assert ToyEpilogueLaunch().grid(LAB_LAYER) == (256 * 112 * 112 // 256,)
    ladder.can_implement(LAB_LAYER)


@pytest.mark.parametrize(("launch", "match"), [
    (ToyLadderLaunch("v9", (16, 8, 4), (7, 14, 96)), "variant"),
    (ToyLadderLaunch("v1", (32, 32, 2), (4, 4, 128)), "block"),
    (ToyLadderLaunch("v1", (16, 8), (7, 14, 96)), "block must be three positive ints"),
    (ToyLadderLaunch("v0", (2, 2, 1), (1, 1, 4)), "grid"),
    (ToyLadderLaunch("v0", (16, 8, 4), (7, 14, 70000)), "grid"),
])  # fmt: skip
def test_ladder_launches_name_what_cannot_run(launch, match):
    with pytest.raises(ValueError, match=match):
        launch.can_implement(LAB_LAYER)


def test_the_plan_is_the_recorded_sweep():
    """Every case the plan measures is recorded, in the recorded order (PyTorch's where it is importable)."""
    frame, _ = load_results(RECORDED, "toy_cnn")
    recorded = [(r.label, r.impl, r.variant, r.params) for r in frame.itertuples()]
    planned = [(p.label, c.impl, c.variant, c.params) for p, cases in paper.plan() for c in cases]
    assert set(planned) <= set(recorded)
    assert [k for k in recorded if k in set(planned)] == planned
    assert {k for k in recorded if k not in set(planned)} <= {k for k in recorded if k[1] == "pytorch"}
    assert {impl for _, impl, _, _ in planned} >= {"convkit", HOST_TIMED, "cudnn"}
    assert {params for _, impl, _, params in planned if impl == "cudnn"} == {CONV_ONLY, LAYER_STEPS}


def test_sample_checks_cover_every_kernel_without_the_libraries():
    checks = paper.PAPER.checks()
    variants = {c.variant for _, cases in checks for c in cases}
    assert variants == {f"toy_{v}" for v in toy_cnn.VARIANTS}
    assert {c.impl for _, cases in checks for c in cases} == {"convkit", HOST_TIMED}


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
    ceilings = recorded_ceilings(RECORDED)
    assert "compute-bound" in toy_cnn_claims.limits_text(frame, ceilings)
    shares = toy_cnn_results.peak_shares(frame, 65.3)
    assert shares["share of peak (%)"].iloc[0] == pytest.approx(100 * 1.69298 / 8.1)
    timing = toy_cnn_results.timing_methods(frame)
    assert timing.loc["tiled", "launch"].startswith("default tile")
    assert "Ladder" in toy_cnn_claims.verdict(frame, ceilings)
    profile = toy_cnn_results.profile_table(load_results(RECORDED, "toy_cnn_kernels")[0])
    assert len(profile.columns) <= 8 and profile["kernel"].str.len().max() <= 32
    assert set(toy_cnn_results.cudnn_table(frame)["steps"]) == {"conv", "layer"}
    kernels, _ = load_results(RECORDED, "toy_cnn_kernels")
    assert (toy_cnn_results.kernel_table(kernels)["time ms"] > 0).all()
    detail = toy_cnn_results.profile_detail(kernels)
    assert [len(frame) for _, frame in detail] == [len(toy_cnn_results.kernel_table(kernels))] * 3
    assert all(frame.index.names == ["step", "kernel"] and len(frame.columns) <= 6 for _, frame in detail)


def _copy(tmp_path):
    for path in RECORDED.glob("*"):
        if path.name.startswith(("toy_cnn", "ceilings")):
            shutil.copy(path, tmp_path / path.name)
    return tmp_path


def _slow_down_v5(directory):
    """Make V5's fastest recorded lab-layer run three times slower in the copied sweep."""
    path = directory / "toy_cnn.csv"
    frame = pd.read_csv(path, keep_default_na=False, dtype=str)
    rows = frame[(frame["label"] == LAB_LAYER.label) & (frame["variant"] == "toy_tiled") & (frame["impl"] == "convkit")]
    fastest = rows["time_ms_median"].astype(float).idxmin()
    frame.loc[rows.index, "time_ms_median"] = (rows["time_ms_median"].astype(float) * 3).map(str)
    frame.loc[rows.index, "gflops"] = (rows["gflops"].astype(float) / 3).map(str)
    frame.to_csv(path, index=False)
    return float(frame.loc[fastest, "time_ms_median"])


def test_result_box_follows_the_recorded_files(tmp_path):
    directory = _copy(tmp_path)
    lines = toy_cnn_claims.result_lines(directory)
    assert 3 <= len(lines) <= 5 and "21% of the T4's FP32 peak" in lines[0]
    slow = _slow_down_v5(directory)
    changed = toy_cnn_claims.result_lines(directory)
    assert changed[2] != lines[2] and f"{slow:.2f} ms" in changed[2]


def _numbers(text):
    return re.findall(r"\d[\d,.]*(?:x|%| ms| TFLOP/s| GFLOP/s)", text)


def test_findings_give_the_result_box_numbers():
    box = "\n".join(toy_cnn_claims.result_lines(RECORDED))
    notebook = (Path(__file__).parents[1] / "notebooks" / "04_toy_cnn.ipynb").read_text()
    for row in toy_cnn_claims.findings(RECORDED):
        assert f"({row['section']})=" in notebook
        for column in ("paper's number", "paper's design on the H100", "our best on the H100", "efficiency"):
            for number in _numbers(row[column]):
                assert number in box, (column, number)


def test_findings_follow_the_recorded_files(tmp_path):
    directory = _copy(tmp_path)
    rows = toy_cnn_claims.findings(directory)
    assert rows and all(set(row) == {*FINDING_COLUMNS, "section", "claims"} for row in rows)
    assert paper.PAPER.findings is not None
    before = rows[0]["our best on the H100"]
    _slow_down_v5(directory)
    assert toy_cnn_claims.findings(directory)[0]["our best on the H100"] != before
