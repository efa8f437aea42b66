"""The Chang 2022 chapter's grids: the paper's section 4 sizes, widened to the H100 (one image, "same" padding)."""

from __future__ import annotations

from convkit.core.problem import ConvProblem
from convkit.families.chang2022.model import FILTER_SIZES
from convkit.study.layer_sets import square_map_grid

#: Single-channel maps, filters M and filter sizes: 6 x 3 x 3 = 54 configurations.
SINGLE_MAPS, SINGLE_FILTERS = (28, 56, 112, 224, 512, 1024), (32, 128, 512)
#: Configurations of a --quick run: every seventh of each grid.
QUICK_STEP = 7


def single_problems() -> list[ConvProblem]:
    """The single-channel grid: C = 1, maps 28..1024 square, M 32..512, filters 1, 3, 5."""
    return [ConvProblem.same(1, 1, h, h, m, k) for h in SINGLE_MAPS for m in SINGLE_FILTERS for k in FILTER_SIZES]


def multi_problems() -> list[ConvProblem]:
    """The multi-channel grid: batch 1, maps 7..512 square, C = M in 64, 256, 512, filters 1, 3, 5
    (:mod:`convkit.study.layer_sets`)."""
    return square_map_grid()


def sweep_problems(quick: bool = False) -> list[ConvProblem]:
    """Both grids as the sweep measures them: every configuration, or every :data:`QUICK_STEP`-th of each."""
    step = QUICK_STEP if quick else 1
    return single_problems()[::step] + multi_problems()[::step]
