"""Chang 2022 on the CPU: the latency model on the paper's inputs, the planners' bounds, the kernels' builds."""

from __future__ import annotations

import json
import math

import pytest

from convkit.book import chapter
from convkit.core.problem import ConvProblem
from convkit.cuda.launch import Launch
from convkit.families.chang2022 import model, multi, ranking, single
from convkit.papers.chang2022 import PAPER, problems


def _k(k):
    """A problem with K x K filters: what the launches' compile-time options depend on."""
    return ConvProblem.same(1, 1, 8, 8, 8, k)


def test_model_reproduces_table1_for_the_1080ti():
    m = model.latency_model(model.GTX_1080TI)
    assert (m.bytes_per_clock, m.data_requirement_bytes, m.threads_required) == (327, 84366, 21120)
    assert (m.threads_per_sm, m.warps_per_sm, m.data_per_sm_bytes) == (768, 24, 3072)
    assert m.min_volume_bytes == 86016 and m.fma_requirement_per_sm == 256 * 258


# (map, M, K): the S/T ranges must respect both bounds wherever they are not empty.
@pytest.mark.parametrize(("h", "m", "k"), [(28, 512, 3), (224, 512, 5), (1024, 32, 5), (512, 128, 1), (56, 32, 3)])
def test_single_bounds_hold(h, m, k):
    lat = model.latency_model(model.GTX_1080TI)
    problem = ConvProblem.same(1, 1, h, h, m, k)
    stage_limit = lat.figures.shared_bytes_per_sm // model.BLOCKS_PER_SM // 2
    fma_req = lat.fma_requirement_per_sm / model.BLOCKS_PER_SM
    one, two = single.single_bounds(problem, lat)
    assert one.per_block % model.FILTERS_PER_THREAD == 0 or one.per_block == m
    sides = (
        (one, h, lambda s: (math.ceil(h / s), one.per_block)),
        (two, m, lambda t: (two.per_block, math.ceil(m / t))),
    )
    for b, most, size in sides:
        if b.lower <= most:  # some divisor fits shared memory: the chosen one does
            assert single.single_stage_bytes(problem, *size(b.chosen)) <= stage_limit
        if b.lower > 1:
            assert single.single_stage_bytes(problem, *size(b.lower - 1)) > stage_limit
        if b.in_range:
            assert b.chosen == b.lower and single.single_fmas(problem, *size(b.chosen)) >= fma_req
    plan = single.plan_single(problem, lat)
    assert plan.method == ("filters" if one.stage_bytes <= two.stage_bytes else "maps")


def test_fill_plan_gives_every_sm_work():
    lat = model.latency_model(model.GTX_1080TI)
    for problem in problems.single_problems():
        plan = single.fill_plan(problem, lat)
        assert plan.piece_rows <= plan.band_rows and plan.piece_filters <= plan.group_filters
        if problem.m * problem.h >= 2 * 28:
            assert plan.blocks(problem) >= min(2 * 28, problem.h * math.ceil(problem.m / plan.group_filters))


def test_paper_multi_config_meets_fma_and_half_shared_memory():
    lat = model.latency_model(model.GTX_1080TI)
    for problem in problems.multi_problems():
        cfg = multi.paper_multi_config(problem, lat)
        k = problem.r
        assert cfg.shared_bytes_for(k) <= lat.figures.shared_bytes_per_sm // model.BLOCKS_PER_SM
        fmas = multi.PAPER_PX * cfg.bm * multi.SEGMENT_CHANNELS * k * k
        capped = cfg.bm in (multi.MAX_PAPER_BM, math.ceil(problem.m / 8) * 8)
        assert fmas >= lat.fma_requirement_per_sm / model.BLOCKS_PER_SM or capped


def test_h100_configs_fit_and_split_only_with_channels_to_spare():
    for problem in problems.multi_problems():
        for cfg in ranking.ranked_multi_configs(problem, 132):
            assert ranking.resident_blocks(cfg, problem.r) >= 1
            assert cfg.split_channels(problem) >= min(problem.c, cfg.ck)
            assert cfg.splits(problem) * cfg.split_channels(problem) >= problem.c


def test_pointwise_tiles_join_the_h100_launch_at_1x1_only():
    for problem in problems.multi_problems():
        kinds = {type(cfg) for cfg in ranking.ranked_multi_configs(problem, 132)}
        assert (multi.PointwiseMultiLaunch in kinds) == (problem.r == 1)
    cfg = multi.PointwiseMultiLaunch(64, 64, 4, 8, 16, split=3)
    assert cfg.threads == 128 and cfg.shared_bytes_for() == cfg.stages * 16 * (64 + 64 + 4) * 4
    problem = ConvProblem.same(1, 100, 7, 9, 70, 1)  # 63 pixels, 100 channels in splits of 48
    assert cfg.grid(problem) == (2, 1, 3) and cfg.split_channels(problem) == 48
    assert ranking.multi_launch(cfg.to_params()) == cfg
    assert ranking.multi_launch(multi.TiledMultiLaunch(bm=16).to_params()) == multi.TiledMultiLaunch(bm=16)
    with pytest.raises(ValueError, match="tm and tp"):
        multi.PointwiseMultiLaunch(tm=2)
    with pytest.raises(ValueError, match="whole threads"):
        multi.PointwiseMultiLaunch(bm=60)


def test_broadcast_blocks_join_the_h100_launch_at_3x3_and_5x5_on_small_maps():
    for problem in problems.multi_problems():
        kinds = {type(cfg) for cfg in ranking.ranked_multi_configs(problem, 132)}
        small = math.ceil(problem.h / 7) * math.ceil(problem.w / 7) <= multi.BROADCAST_MAX_TILES
        assert (multi.BroadcastMultiLaunch in kinds) == (problem.r > 1 and small)
    cfg = multi.BroadcastMultiLaunch(32, 4, 7, 7, 8, split=3)
    problem = ConvProblem.same(1, 100, 15, 20, 70, 5)  # 3 x 3 tiles, 100 channels in splits of 40
    assert cfg.threads == 128 and cfg.grid(problem) == (3, 3, 3) and cfg.split_channels(problem) == 40
    # Two buffers of 4 windows (8 channels x 11 rows x 12 floats) and 32 rows of 200 + 4 weights; one buffer
    # for a block of one segment.
    assert cfg.shared_bytes_for(5) == 2 * (4 * 8 * 11 * 12 + 32 * 204) * 4
    assert cfg.shared_bytes_for(5, segments=1) == cfg.shared_bytes_for(5) // 2 and cfg.segments(problem) == 5
    assert multi.BroadcastMultiLaunch(32, ck=4).weight_stride(5) == 100  # 25 float4s: odd already
    # At least the block's sums on their way out: 49 floats per thread (odd already), 28 padded to 29.
    assert multi.BroadcastMultiLaunch(128, ck=4).shared_bytes_for(3, segments=1) == 128 * 49 * 4
    assert multi.BroadcastMultiLaunch(64, 2, 4, 7, 4).shared_bytes_for(3, segments=1) == 128 * 29 * 4
    assert ranking.multi_launch(cfg.to_params()) == cfg
    with pytest.raises(ValueError, match="multiple of 4"):
        multi.BroadcastMultiLaunch(ck=6)
    with pytest.raises(ValueError, match="whole warps"):
        multi.BroadcastMultiLaunch(filters=48)
    with pytest.raises(ValueError, match="1024 threads"):
        multi.BroadcastMultiLaunch(filters=512, tiles=4)


def test_single_candidates_include_both_plans_and_fit_shared_memory():
    lat = model.latency_model(model.GTX_1080TI)
    for problem in problems.single_problems():
        plans = single.single_candidates(problem, lat)
        assert single.plan_single(problem, lat) in plans and single.fill_plan(problem, lat) in plans
        assert len(plans) == len(set(plans))
        for plan in plans:
            plan.can_implement(problem)
            assert plan.shared_bytes(problem) <= 232448


@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
def test_kernels_build_without_spills(arch):
    from convkit.cuda.ptxas import find_nvcc, ptxas_report

    if find_nvcc() is None:
        pytest.skip("nvcc is not on the PATH")
    builds = [(f"-DCS_K={k}",) for k in (1, 3, 5)]
    filters = max(single.SINGLE_DIRECT_FILTERS)
    builds += [single.DirectSingleLaunch(filters, rows=rows, shared_weights=shared).options(_k(k))
               for k in (3, 5) for rows, shared in ((1, False), (max(single.SINGLE_DIRECT_ROWS), True))]  # fmt: skip
    builds += [
        multi.TiledMultiLaunch(16, 1, 32).options(_k(5)),
        multi.TiledMultiLaunch(64, 16, 16, 1, 4).options(_k(5)),
    ]
    builds += [multi.TiledMultiLaunch(bm, th, tw, rpt, 4, ck).options(_k(k))
               for bm, th, tw, rpt, ck in multi.MULTI_TILES if rpt > 1 for k in (1, 3, 5)]  # fmt: skip
    builds += [multi.PointwiseMultiLaunch(*tile).options(_k(1)) for tile in multi.POINTWISE_TILES]
    builds += [multi.BroadcastMultiLaunch(*tile).options(_k(k)) for tile in multi.BROADCAST_TILES for k in (3, 5)]
    for options in builds:
        for r in ptxas_report("chang2022", arch, options=tuple(options)):
            assert r.spill_store_bytes == 0, (options, r)


def test_launch_bound_maps_also_try_one_wave_of_short_pieces():
    h100 = model.figures_from_ceilings(chapter.ceilings("recorded"), "H100")
    lat = model.latency_model(h100)
    for problem in problems.single_problems():
        short = single.short_piece_plans(problem, lat)
        if problem.h > single.SINGLE_GRID_MAX_MAP:
            assert not short, problem.label
            continue
        assert short, problem.label
        assert all(p.blocks(problem) <= 2 * lat.figures.sm_count for p in short)
        assert all(p.piece_rows == p.band_rows and p.piece_filters == p.group_filters for p in short)
        assert set(short) <= set(single.single_candidates(problem, lat))


def test_direct_plans_read_weights_from_global_on_small_maps_and_from_shared_memory_at_3x3_and_5x5():
    h100 = model.figures_from_ceilings(chapter.ceilings("recorded"), "H100")
    lat = model.latency_model(h100)
    for problem in problems.single_problems():
        direct = single.direct_plans(problem)
        from_global = [p for p in direct if not p.shared_weights]
        assert bool(from_global) == (problem.r == 1 or problem.h <= single.SINGLE_DIRECT_MAX_MAP), problem.label
        assert all(p.rows == 1 for p in from_global)
        from_shared = {p.rows for p in direct if p.shared_weights}
        assert from_shared == (set() if problem.r == 1 else set(single.SINGLE_DIRECT_ROWS)), problem.label
        assert all(p.filters <= problem.m for p in direct)
        for plan in direct:
            plan.can_implement(problem)
        assert set(direct) <= set(single.single_candidates(problem, lat))


@pytest.mark.parametrize("launch", [single.StagedSingleLaunch("both", 1, 2, 3, 4, 3, 4, 128),
                                    single.DirectSingleLaunch(8, 64),
                                    single.DirectSingleLaunch(8, 64, rows=4, shared_weights=True)])  # fmt: skip
def test_single_launch_round_trips_its_params(launch):
    assert single.single_launch(json.loads(json.dumps(launch.to_params()))) == launch


def test_direct_plan_params_leave_out_the_defaults_of_the_later_knobs():
    """Plans recorded before rows and shared_weights existed name the same launch (and the same results key)."""
    assert single.DirectSingleLaunch(8, 64).to_params() == {"kernel": "direct", "filters": 8, "threads": 64}
    assert single.DirectSingleLaunch(8, 64, rows=2).to_params()["rows"] == 2
    assert single.DirectSingleLaunch(8, 64, shared_weights=True).to_params()["shared_weights"] is True


def test_single_direct_plan_grid_and_checks():
    one = ConvProblem.same(1, 1, 28, 28, 32, 1)
    single.DirectSingleLaunch(4, 128).can_implement(one)
    # 1x1: the 35 pixels flattened are 9 quads; 3x3: 7 rows of 2 quads; 9 filters in 3 groups of 4
    assert single.DirectSingleLaunch(4, 128).grid(ConvProblem.same(1, 1, 7, 5, 9, 1)) == (1, 3)
    assert single.DirectSingleLaunch(4, 128).kernel_args(ConvProblem.same(1, 1, 7, 5, 9, 1)) == (1, 35, 9)
    assert single.DirectSingleLaunch(4, 32).grid(ConvProblem.same(1, 1, 7, 5, 9, 3)) == (1, 3)
    assert single.DirectSingleLaunch(4, 32).kernel_args(ConvProblem.same(1, 1, 7, 5, 9, 3)) == (7, 5, 9)
    with pytest.raises(ValueError, match=r"plan\.filters"):
        single.DirectSingleLaunch(0).can_implement(one)
    with pytest.raises(ValueError, match=r"plan\.threads"):
        single.DirectSingleLaunch(4, 48).can_implement(one)
    with pytest.raises(ValueError, match="65535 groups"):
        single.DirectSingleLaunch(1).can_implement(ConvProblem.same(1, 1, 4, 4, 70000, 1))
    # rows per thread: 7 rows in 4 pairs (or 2 quads) of rows x 2 quads = 8 (4) tiles
    assert single.DirectSingleLaunch(4, 32, rows=2).grid(ConvProblem.same(1, 1, 7, 5, 9, 3)) == (1, 3)
    assert single.DirectSingleLaunch(4, 4 * 32, rows=2).grid(ConvProblem.same(1, 1, 70, 5, 9, 3)) == (1, 3)
    assert single.DirectSingleLaunch(4, 32, rows=4).grid(ConvProblem.same(1, 1, 70, 5, 9, 3)) == (2, 3)
    with pytest.raises(ValueError, match=r"plan\.rows must be 1, 2 or 4"):
        single.DirectSingleLaunch(4, rows=3).can_implement(ConvProblem.same(1, 1, 7, 5, 9, 3))
    with pytest.raises(ValueError, match=r"plan\.rows must be 1 at 1x1"):
        single.DirectSingleLaunch(4, rows=2).can_implement(one)


@pytest.mark.parametrize("launch", [single.StagedSingleLaunch("both", 1, 2, 3, 4, 3, 4, 128),
                                    single.DirectSingleLaunch(8, 64), multi.TiledMultiLaunch(),
                                    multi.PointwiseMultiLaunch(), multi.BroadcastMultiLaunch()],
                         ids=lambda launch: type(launch).__name__)  # fmt: skip
def test_launches_satisfy_the_launch_protocol(launch):
    problem = ConvProblem.same(1, 1 if isinstance(launch, single.ChangSingleLaunch) else 16, 9, 11, 20, 1)
    assert isinstance(launch, Launch) and launch.source == "chang2022"
    assert launch.kernel_name(problem).startswith("chang_") and launch.block(problem)[0] > 0
    launch.can_implement(problem)


def test_multi_launches_name_what_they_cannot_implement():
    with pytest.raises(ValueError, match="for 1x1 filters"):
        multi.PointwiseMultiLaunch().can_implement(ConvProblem.same(1, 4, 8, 8, 4, 3))
    too_tall = ConvProblem.same(1, 16, 70000, 8, 8, 1)  # 70000 rows of blocks: grid y is at most 65535
    with pytest.raises(ValueError, match="65535"):
        multi.TiledMultiLaunch(bm=8).can_implement(too_tall)


def test_sample_problems_cover_both_kernels_and_every_filter_size():
    samples = PAPER.sample_problems()
    for variant in PAPER.variants:
        assert any(variant.applies_to(p) for p in samples), variant.name  # its launches need a GPU to plan
    assert {p.r for p in samples if p.c == 1} == {p.r for p in samples if p.c > 1} == {1, 3, 5}
