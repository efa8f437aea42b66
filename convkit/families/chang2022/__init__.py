"""Chang, Onishi, Maruyama 2022's kernels (``kernels/chang2022.cu``): latency hiding, sized by a model.

The paper's section 2.2 turns a GPU's figures into how much must be in flight to hide the global-memory
latency (:mod:`.model`); section 3.1 divides a single-channel convolution over the SMs (:mod:`.single`),
section 3.2 sizes the multi-channel kernel's block (:mod:`.multi`); :mod:`.launch` runs them. Each kernel is
a variant twice: as the paper sizes it on this GPU's figures (``chang_single``, ``chang_multi``), and as
the H100 runs it best (``chang_single_fill``, ``chang_multi_async``: tuned over the planners' and the cost
model's candidates).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from convkit.core.gpu import shared_memory_limits, sm_count
from convkit.core.problem import ConvProblem
from convkit.cuda.operands import ConvArgs
from convkit.families.chang2022.launch import conv2d_multi, conv2d_single
from convkit.families.chang2022.model import FILTER_SIZES, LatencyModel, current_figures, latency_model
from convkit.families.chang2022.multi import paper_multi_config
from convkit.families.chang2022.ranking import TUNING_CANDIDATES, multi_config, multi_launch, ranked_multi_configs
from convkit.families.chang2022.single import fill_plan, plan_single, single_candidates, single_launch
from convkit.families.registry import Family, Variant, called_when_run


def _model() -> LatencyModel:
    return latency_model(current_figures())


def _same_padded(p: ConvProblem) -> bool:
    """The kernels' problems: one image, square 1x1/3x3/5x5 filters, "same" padding, stride 1."""
    return p.n == 1 and p.r == p.s and p.r in FILTER_SIZES and p.pad == (p.r - 1) // 2 and p.stride == 1


def _single_channel(p: ConvProblem) -> bool:
    return p.c == 1 and _same_padded(p)


def _single(name: str, planner: Callable[..., Any], tuned: bool) -> Variant:
    """A single-channel plan: the paper's (:func:`plan_single`), or the H100's (:func:`fill_plan` by default,
    ``tuned`` over :func:`single_candidates`)."""

    def run(a: ConvArgs, p: ConvProblem, launch: Any) -> None:
        conv2d_single(a.x, a.w, launch=launch, out=a.out)

    return Variant(name, run, default=lambda p: planner(p, _model()),
                   candidates=(lambda p: single_candidates(p, _model())) if tuned else None,
                   launch_from=single_launch, applies_to=_single_channel)  # fmt: skip


def _multi(name: str, paper: bool) -> Variant:
    """A multi-channel launch: the paper's (:func:`paper_multi_config`), or the H100's (the cost model's
    cheapest by default, tuned over :func:`ranked_multi_configs`)."""

    def default(p: ConvProblem) -> Any:
        if paper:
            return paper_multi_config(p, _model())
        return multi_config(p, sm_count(), shared_per_sm=shared_memory_limits()[1])

    def candidates(p: ConvProblem) -> list[Any]:
        return ranked_multi_configs(p, sm_count(), shared_per_sm=shared_memory_limits()[1])[:TUNING_CANDIDATES]

    def run(a: ConvArgs, p: ConvProblem, launch: Any) -> None:
        conv2d_multi(a.x, a.w, launch=launch, out=a.out, workspace=a.workspace)

    return Variant(name, run, default=default, candidates=None if paper else candidates, launch_from=multi_launch,
                   applies_to=_same_padded)  # fmt: skip


#: Both kernels, each as the paper sizes it and as the H100 runs it (tuned).
SINGLE_VARIANTS = (_single("chang_single", plan_single, tuned=False),
                   _single("chang_single_fill", fill_plan, tuned=True))  # fmt: skip
MULTI_VARIANTS = (_multi("chang_multi", paper=True), _multi("chang_multi_async", paper=False))

#: Each variant's method in words: the book's one name for it.
WORDS = {
    "chang_single": "single-channel",
    "chang_single_fill": "single-channel, fill",
    "chang_multi": "multi-channel",
    "chang_multi_async": "multi-channel, async copies",
}

#: Small problems the generic GPU test checks every variant on: C = 1 and C > 1, K 1, 3, 5, maps no tile or strip
#: divides, a map smaller than the filter's halo, M no filter group divides.
SAMPLE_PROBLEMS = tuple(
    ConvProblem.same(*shape)
    for shape in ((1, 1, 13, 29, 11, 3), (1, 1, 7, 5, 9, 5), (1, 1, 33, 64, 40, 1), (1, 1, 2, 3, 5, 5),
                  (1, 13, 9, 11, 20, 3), (1, 37, 16, 24, 70, 5), (1, 3, 5, 8, 9, 1), (1, 64, 14, 14, 64, 1))
)  # fmt: skip


FAMILY = Family(
    "chang2022",
    (*SINGLE_VARIANTS, *MULTI_VARIANTS),
    sources=("chang2022",),
    words=WORDS,
    sample_problems=SAMPLE_PROBLEMS,
    edge_check=called_when_run(f"{__name__}.edges", "edge_check"),
)
