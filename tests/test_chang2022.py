"""Chang 2022 on the CPU: the latency model on the paper's inputs, the planners' bounds, the kernels' builds."""

from __future__ import annotations

import json
import math

import pytest

from convkit import chang2022 as chang
from convkit import chapter
from convkit.problem import ConvProblem


def test_model_reproduces_table1_for_the_1080ti():
    m = chang.latency_model(chang.GTX_1080TI)
    assert (m.bytes_per_clock, m.data_requirement_bytes, m.threads_required) == (327, 84366, 21120)
    assert (m.threads_per_sm, m.warps_per_sm, m.data_per_sm_bytes) == (768, 24, 3072)
    assert m.min_volume_bytes == 86016 and m.fma_requirement_per_sm == 256 * 258


# (map, M, K): the S/T ranges must respect both bounds wherever they are not empty.
@pytest.mark.parametrize(("h", "m", "k"), [(28, 512, 3), (224, 512, 5), (1024, 32, 5), (512, 128, 1), (56, 32, 3)])
def test_single_bounds_hold(h, m, k):
    model = chang.latency_model(chang.GTX_1080TI)
    problem = ConvProblem.same(1, 1, h, h, m, k)
    stage_limit = model.figures.shared_bytes_per_sm // chang.BLOCKS_PER_SM // 2
    fma_req = model.fma_requirement_per_sm / chang.BLOCKS_PER_SM
    one, two = chang.single_bounds(problem, model)
    assert one.per_block % chang.FILTERS_PER_THREAD == 0 or one.per_block == m
    sides = (
        (one, h, lambda s: (math.ceil(h / s), one.per_block)),
        (two, m, lambda t: (two.per_block, math.ceil(m / t))),
    )
    for b, most, size in sides:
        if b.lower <= most:  # some divisor fits shared memory: the chosen one does
            assert chang.single_stage_bytes(problem, *size(b.chosen)) <= stage_limit
        if b.lower > 1:
            assert chang.single_stage_bytes(problem, *size(b.lower - 1)) > stage_limit
        if b.in_range:
            assert b.chosen == b.lower and chang.single_fmas(problem, *size(b.chosen)) >= fma_req
    plan = chang.plan_single(problem, model)
    assert plan.method == ("filters" if one.stage_bytes <= two.stage_bytes else "maps")


def test_fill_plan_gives_every_sm_work():
    model = chang.latency_model(chang.GTX_1080TI)
    for problem in chang.single_problems():
        plan = chang.fill_plan(problem, model)
        assert plan.piece_rows <= plan.band_rows and plan.piece_filters <= plan.group_filters
        if problem.m * problem.h >= 2 * 28:
            assert plan.blocks(problem) >= min(2 * 28, problem.h * math.ceil(problem.m / plan.group_filters))


def test_paper_multi_config_meets_fma_and_half_shared_memory():
    model = chang.latency_model(chang.GTX_1080TI)
    for problem in chang.multi_problems():
        cfg = chang.paper_multi_config(problem, model)
        k = problem.r
        assert cfg.shared_bytes(k) <= model.figures.shared_bytes_per_sm // chang.BLOCKS_PER_SM
        fmas = chang.PAPER_PX * cfg.bm * chang.SEGMENT_CHANNELS * k * k
        capped = cfg.bm in (chang.MAX_PAPER_BM, math.ceil(problem.m / 8) * 8)
        assert fmas >= model.fma_requirement_per_sm / chang.BLOCKS_PER_SM or capped


def test_h100_configs_fit_and_split_only_with_channels_to_spare():
    for problem in chang.multi_problems():
        for cfg in chang.ranked_multi_configs(problem, 132):
            assert chang.resident_blocks(cfg, problem.r) >= 1
            assert cfg.split_channels(problem) >= min(problem.c, cfg.ck)
            assert cfg.splits(problem) * cfg.split_channels(problem) >= problem.c


def test_pointwise_tiles_join_the_h100_launch_at_1x1_only():
    for problem in chang.multi_problems():
        kinds = {type(cfg) for cfg in chang.ranked_multi_configs(problem, 132)}
        assert (chang.PointwiseConfig in kinds) == (problem.r == 1)
    cfg = chang.PointwiseConfig(64, 64, 4, 8, 16, split=3)
    assert cfg.threads == 128 and cfg.shared_bytes() == cfg.stages * 16 * (64 + 64 + 4) * 4
    problem = ConvProblem.same(1, 100, 7, 9, 70, 1)  # 63 pixels, 100 channels in splits of 48
    assert cfg.grid(problem) == (2, 1, 3) and cfg.split_channels(problem) == 48
    assert chang.multi_launch(cfg.as_params()) == cfg
    assert chang.multi_launch(chang.MultiConfig(bm=16).as_params()) == chang.MultiConfig(bm=16)
    with pytest.raises(ValueError, match="tm and tp"):
        chang.PointwiseConfig(tm=2)
    with pytest.raises(ValueError, match="whole threads"):
        chang.PointwiseConfig(bm=60)


def test_broadcast_blocks_join_the_h100_launch_at_3x3_and_5x5_on_small_maps():
    for problem in chang.multi_problems():
        kinds = {type(cfg) for cfg in chang.ranked_multi_configs(problem, 132)}
        small = math.ceil(problem.h / 7) * math.ceil(problem.w / 7) <= chang.BROADCAST_MAX_TILES
        assert (chang.BroadcastConfig in kinds) == (problem.r > 1 and small)
    cfg = chang.BroadcastConfig(32, 4, 7, 7, 8, split=3)
    problem = ConvProblem.same(1, 100, 15, 20, 70, 5)  # 3 x 3 tiles, 100 channels in splits of 40
    assert cfg.threads == 128 and cfg.grid(problem) == (3, 3, 3) and cfg.split_channels(problem) == 40
    # Two buffers of 4 windows (8 channels x 11 rows x 12 floats) and 32 rows of 200 + 4 weights; one buffer
    # for a block of one segment.
    assert cfg.shared_bytes(5) == 2 * (4 * 8 * 11 * 12 + 32 * 204) * 4
    assert cfg.shared_bytes(5, segments=1) == cfg.shared_bytes(5) // 2 and cfg.segments(problem) == 5
    assert chang.BroadcastConfig(32, ck=4).weight_stride(5) == 100  # 25 float4s: odd already
    # At least the block's sums on their way out: 49 floats per thread (odd already), 28 padded to 29.
    assert chang.BroadcastConfig(128, ck=4).shared_bytes(3, segments=1) == 128 * 49 * 4
    assert chang.BroadcastConfig(64, 2, 4, 7, 4).shared_bytes(3, segments=1) == 128 * 29 * 4
    assert chang.multi_launch(cfg.as_params()) == cfg
    with pytest.raises(ValueError, match="multiple of 4"):
        chang.BroadcastConfig(ck=6)
    with pytest.raises(ValueError, match="whole warps"):
        chang.BroadcastConfig(filters=48)
    with pytest.raises(ValueError, match="1024 threads"):
        chang.BroadcastConfig(filters=512, tiles=4)


def test_single_candidates_include_both_plans_and_fit_shared_memory():
    model = chang.latency_model(chang.GTX_1080TI)
    for problem in chang.single_problems():
        plans = chang.single_candidates(problem, model)
        assert chang.plan_single(problem, model) in plans and chang.fill_plan(problem, model) in plans
        assert len(plans) == len(set(plans))
        for plan in plans:
            plan.check(problem)
            assert plan.shared_bytes(problem) <= 232448


@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
def test_kernels_build_without_spills(arch):
    from convkit.compile import find_nvcc, ptxas_report

    if find_nvcc() is None:
        pytest.skip("nvcc is not on the PATH")
    builds = [(f"-DCS_K={k}",) for k in (1, 3, 5)]
    builds += [chang.SingleDirectPlan(max(chang.SINGLE_DIRECT_FILTERS), rows=rows, shared_weights=shared).options(k)
               for k in (3, 5) for rows, shared in ((1, False), (max(chang.SINGLE_DIRECT_ROWS), True))]  # fmt: skip
    builds += [chang.MultiConfig(16, 1, 32).options(5), chang.MultiConfig(64, 16, 16, 1, 4).options(5)]
    builds += [chang.MultiConfig(bm, th, tw, rpt, 4, ck).options(k)
               for bm, th, tw, rpt, ck in chang.MULTI_TILES if rpt > 1 for k in (1, 3, 5)]  # fmt: skip
    builds += [chang.PointwiseConfig(*tile).options() for tile in chang.POINTWISE_TILES]
    builds += [chang.BroadcastConfig(*tile).options(k) for tile in chang.BROADCAST_TILES for k in (3, 5)]
    for options in builds:
        for r in ptxas_report("chang2022", arch, options=tuple(options)):
            assert r.spill_store_bytes == 0, (options, r)


def test_launch_bound_maps_also_try_one_wave_of_short_pieces():
    h100 = chang.figures_from_ceilings(chapter.ceilings_summary(chapter.ceilings("recorded").frame), "H100")
    model = chang.latency_model(h100)
    for problem in chang.single_problems():
        short = chang.short_piece_plans(problem, model)
        if problem.h > chang.SINGLE_GRID_MAX_MAP:
            assert not short, problem.label
            continue
        assert short, problem.label
        assert all(p.blocks(problem) <= 2 * model.figures.sm_count for p in short)
        assert all(p.piece_rows == p.band_rows and p.piece_filters == p.group_filters for p in short)
        assert set(short) <= set(chang.single_candidates(problem, model))


def test_direct_plans_read_weights_from_global_on_small_maps_and_from_shared_memory_at_3x3_and_5x5():
    h100 = chang.figures_from_ceilings(chapter.ceilings_summary(chapter.ceilings("recorded").frame), "H100")
    model = chang.latency_model(h100)
    for problem in chang.single_problems():
        direct = chang.direct_plans(problem)
        from_global = [p for p in direct if not p.shared_weights]
        assert bool(from_global) == (problem.r == 1 or problem.h <= chang.SINGLE_DIRECT_MAX_MAP), problem.label
        assert all(p.rows == 1 for p in from_global)
        from_shared = {p.rows for p in direct if p.shared_weights}
        assert from_shared == (set() if problem.r == 1 else set(chang.SINGLE_DIRECT_ROWS)), problem.label
        assert all(p.filters <= problem.m for p in direct)
        for plan in direct:
            plan.check(problem)
        assert set(direct) <= set(chang.single_candidates(problem, model))


@pytest.mark.parametrize("launch", [chang.SinglePlan("both", 1, 2, 3, 4, 3, 4, 128), chang.SingleDirectPlan(8, 64),
                                    chang.SingleDirectPlan(8, 64, rows=4, shared_weights=True)])  # fmt: skip
def test_single_launch_round_trips_its_params(launch):
    assert chang.single_launch(json.loads(json.dumps(launch.as_params()))) == launch


def test_direct_plan_params_leave_out_the_defaults_of_the_later_knobs():
    """Plans recorded before rows and shared_weights existed name the same launch (and the same results key)."""
    assert chang.SingleDirectPlan(8, 64).as_params() == {"kernel": "direct", "filters": 8, "threads": 64}
    assert chang.SingleDirectPlan(8, 64, rows=2).as_params()["rows"] == 2
    assert chang.SingleDirectPlan(8, 64, shared_weights=True).as_params()["shared_weights"] is True


def test_single_direct_plan_grid_and_checks():
    one = ConvProblem.same(1, 1, 28, 28, 32, 1)
    chang.SingleDirectPlan(4, 128).check(one)
    # 1x1: the 35 pixels flattened are 9 quads; 3x3: 7 rows of 2 quads; 9 filters in 3 groups of 4
    assert chang.SingleDirectPlan(4, 128).grid(ConvProblem.same(1, 1, 7, 5, 9, 1)) == (1, 3)
    assert chang.SingleDirectPlan(4, 128).kernel_args(ConvProblem.same(1, 1, 7, 5, 9, 1)) == (1, 35, 9)
    assert chang.SingleDirectPlan(4, 32).grid(ConvProblem.same(1, 1, 7, 5, 9, 3)) == (1, 3)
    assert chang.SingleDirectPlan(4, 32).kernel_args(ConvProblem.same(1, 1, 7, 5, 9, 3)) == (7, 5, 9)
    with pytest.raises(ValueError, match=r"plan\.filters"):
        chang.SingleDirectPlan(0).check(one)
    with pytest.raises(ValueError, match=r"plan\.threads"):
        chang.SingleDirectPlan(4, 48).check(one)
    with pytest.raises(ValueError, match="65535 groups"):
        chang.SingleDirectPlan(1).check(ConvProblem.same(1, 1, 4, 4, 70000, 1))
    # rows per thread: 7 rows in 4 pairs (or 2 quads) of rows x 2 quads = 8 (4) tiles
    assert chang.SingleDirectPlan(4, 32, rows=2).grid(ConvProblem.same(1, 1, 7, 5, 9, 3)) == (1, 3)
    assert chang.SingleDirectPlan(4, 4 * 32, rows=2).grid(ConvProblem.same(1, 1, 70, 5, 9, 3)) == (1, 3)
    assert chang.SingleDirectPlan(4, 32, rows=4).grid(ConvProblem.same(1, 1, 70, 5, 9, 3)) == (2, 3)
    with pytest.raises(ValueError, match=r"plan\.rows must be 1, 2 or 4"):
        chang.SingleDirectPlan(4, rows=3).check(ConvProblem.same(1, 1, 7, 5, 9, 3))
    with pytest.raises(ValueError, match=r"plan\.rows must be 1 at 1x1"):
        chang.SingleDirectPlan(4, rows=2).check(one)
