"""The cuConv launcher's knob choices and workspace arithmetic (CPU)."""

from __future__ import annotations

import pytest

from convkit.cuconv import MIN_CHANNELS_PER_SPLIT, Knobs, default_knobs, workspace_elements
from convkit.problem import ConvProblem


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


def test_split_stays_whole_when_the_grid_is_already_full():
    p = ConvProblem.from_label("56-64-3-256-256")
    assert default_knobs(p, "split", sm_count=132).splits == 1


def test_workspace_sizes():
    p = ConvProblem.from_label("13-2-3-16-8")
    out = 2 * 16 * 13 * 13
    assert workspace_elements(p, "paper", Knobs(64)) == 9 * out
    assert workspace_elements(ConvProblem.from_label("7-1-1-32-832"), "paper", Knobs(64)) == 0  # 1x1: no stage 2
    assert workspace_elements(p, "fused", Knobs(64, 4)) == 0
    assert workspace_elements(p, "split", Knobs(64, 4, 3)) == 3 * out


def test_unknown_variant():
    with pytest.raises(ValueError, match="variant must be one of"):
        default_knobs(ConvProblem.from_label("7-1-1-32-832"), "winograd")
