"""The cuConv launcher's knob choices, launch geometry and workspace arithmetic, and its tuning table (CPU)."""

from __future__ import annotations

import json

import pytest

from convkit.book.chapter import DEFAULT_RECORDED_GPU
from convkit.core.problem import ConvProblem
from convkit.cuda.launch import Launch
from convkit.families.cuconv.launch import (
    MIN_CHANNELS_PER_SPLIT,
    CuconvLaunch,
    CuconvSumLaunch,
    candidates,
    default_knobs,
)
from convkit.papers.cuconv import CUCONV_TUNING, CUCONV_VARIANTS
from convkit.study import networks, tuning
from convkit.study.checkout import results_dir
from convkit.study.results import load_results


def test_threads_cover_a_small_plane_in_whole_warps():
    p = ConvProblem.from_label("7-1-1-32-832")  # 49 positions
    assert default_knobs(p, "paper").threads == 64
    assert default_knobs(ConvProblem.from_label("56-8-3-64-64"), "fused").threads == 256


def test_split_fills_the_gpu_on_small_batch1_layers():
    p = ConvProblem.from_label("7-1-1-32-832")
    knobs = default_knobs(p, "split", sm_count=132)
    blocks = 1 * 8 * knobs.splits  # one position tile, 32 / 4 filter groups
    assert knobs.filters_per_thread == 4
    assert blocks >= 4 * 132 or p.c // knobs.splits < 2 * MIN_CHANNELS_PER_SPLIT
    assert p.c // knobs.splits >= MIN_CHANNELS_PER_SPLIT
    assert knobs.grid(p) == (1, 8, knobs.splits)


def test_split_stays_whole_when_the_grid_is_already_full():
    p = ConvProblem.from_label("56-64-3-256-256")
    assert default_knobs(p, "split", sm_count=132).splits == 1


def test_workspace_sizes():
    p = ConvProblem.from_label("13-2-3-16-8")
    out = 2 * 16 * 13 * 13
    assert CuconvLaunch("paper", 64).workspace_elements(p) == 9 * out
    one_by_one = ConvProblem.from_label("7-1-1-32-832")
    assert CuconvLaunch("paper", 64).workspace_elements(one_by_one) == 0  # 1x1: no stage 2
    assert CuconvLaunch("fused", 64, 4).workspace_elements(p) == 0
    assert CuconvLaunch("split", 64, 4, 3).workspace_elements(p) == 3 * out


def test_unknown_variant():
    with pytest.raises(ValueError, match="variant must be one of"):
        default_knobs(ConvProblem.from_label("7-1-1-32-832"), "winograd")


def test_launches_follow_the_launch_protocol():
    p = ConvProblem.from_label("13-2-3-48-17")
    tiled = CuconvLaunch("tiled", 256, splits=2, tile="64x64")
    assert isinstance(tiled, Launch) and isinstance(CuconvSumLaunch(), Launch)
    assert tiled.kernel_name(p) == "tiled_gemm" and tiled.block(p) == (256,) and tiled.shared_bytes(p) == 0
    assert tiled.options(p) == ("-DCONVKIT_BM=64", "-DCONVKIT_BN=64", "-DCONVKIT_TM=4", "-DCONVKIT_TN=4",
                                "-DCONVKIT_BK=16", "-DCONVKIT_R=3", "-DCONVKIT_S=3")  # fmt: skip
    assert CuconvLaunch("paper", 64).kernel_name(p) == "scalar_prods" and CuconvLaunch("paper", 64).options(p) == ()
    fused = CuconvLaunch("fused", 64, 8)
    assert fused.kernel_name(p) == "fused_tile" and fused.options(p) == ("-DCONVKIT_MT=8",)
    assert fused.shared_bytes(p) == 4 * 8 * 17 * 9  # every channel's weights fit one tile
    assert CuconvSumLaunch().kernel_name(p) == "sum_planes"


def test_params_are_recorded_as_before():
    """The rows' params JSON is how recorded rows are found again: the launch must not change it."""
    assert CuconvLaunch("paper", 64).to_params() == {"threads": 64, "filters_per_thread": 1, "splits": 1}
    assert CuconvLaunch("tiled", 256, splits=2, tile="64x64").to_params() == {
        "threads": 256, "filters_per_thread": 1, "splits": 2, "tile": "64x64",
    }  # fmt: skip
    frame, _ = load_results(results_dir() / DEFAULT_RECORDED_GPU, CUCONV_TUNING)
    for row in frame.iloc[::97].itertuples():
        params = json.loads(row.params)
        assert CuconvLaunch(row.variant.removeprefix("cuconv_"), **params).to_params() == params


@pytest.mark.parametrize(("launch", "match"), [
    (CuconvLaunch("fast", 64), "variant must be one of"),
    (CuconvLaunch("fused", 64, 3), "filters_per_thread must be one of"),
    (CuconvLaunch("fused", 64, 4, 2), "splits applies to variants 'split' and 'tiled' only"),
    (CuconvLaunch("tiled", 256, tile="48x48"), "tile must be one of"),
    (CuconvLaunch("paper", 64, tile="64x64"), "tile applies to variant 'tiled' only"),
    (CuconvLaunch("tiled", 128, tile="64x64"), "contradicts tile"),
    (CuconvLaunch("split", 64, 4, 5), "splits must be in"),
    (CuconvLaunch("paper", 2048), "threads must be"),
])  # fmt: skip
def test_launches_name_the_knob_they_cannot_run(launch, match):
    with pytest.raises(ValueError, match=match):
        launch.can_implement(ConvProblem(1, 4, 8, 8, 3, 3, 3, pad=1))


def test_every_candidate_can_run_its_problem():
    for problem in networks.problems()[::41]:
        for variant in ("paper", "fused", "split", "tiled"):
            for launch in candidates(problem, variant):
                launch.can_implement(problem)


def test_the_recorded_table_covers_every_problem_and_variant():
    directory = results_dir() / DEFAULT_RECORDED_GPU
    for problem in networks.problems()[::37]:
        for variant in CUCONV_VARIANTS:
            tuned = tuning.knob_table(directory, CUCONV_TUNING)(problem, variant.name)
            assert tuned is not None, (problem.label, variant.name)
