"""Chang, Onishi, Maruyama 2022 (Pascal kernels): the latency-hiding model, its planners and kernels, on the H100.

The paper's section 2.2 turns a GPU's figures into how much must be in flight to hide the
global-memory latency (:mod:`.model`, its Table 1). Section 3.1 divides a single-channel convolution
(C = 1, M filters) over the SMs with the S/T procedure (:mod:`.single`); section 3.2 sizes the
stride-fixed block of the multi-channel kernel (:mod:`.multi`). :mod:`.launch` runs them
(``kernels/chang2022.cu``), :mod:`.problems` holds the chapter's grids, :mod:`.results` its numbers
and :mod:`.edges` the sanitizer's edge launches.

Each kernel is measured twice: as the paper sizes it on this GPU's figures (``chang_single``,
``chang_multi``), and as the H100 runs it best (``chang_single_fill``, ``chang_multi_async``: tuned
over the planners' and the cost model's candidates, in ``chang2022_tuning.csv``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from convkit.bench.measure import Variant, run_experiment
from convkit.core.gpu import shared_memory_limits, sm_count
from convkit.core.problem import ConvProblem
from convkit.papers.chang2022.edges import edge_check
from convkit.papers.chang2022.launch import conv2d_multi, conv2d_single
from convkit.papers.chang2022.model import FILTER_SIZES, LatencyModel, current_figures, latency_model
from convkit.papers.chang2022.multi import (
    TUNING_CANDIDATES,
    multi_config,
    multi_launch,
    paper_multi_config,
    ranked_multi_configs,
)
from convkit.papers.chang2022.problems import QUICK_STEP, multi_problems, single_problems, sweep_problems
from convkit.papers.chang2022.results import findings
from convkit.papers.chang2022.single import fill_plan, plan_single, single_candidates, single_launch
from convkit.papers.paper import Paper
from convkit.study import tuning

#: The sweep's experiment (``results/<gpu>/chang2022.csv``: 117 problems x 2 variants + every cuDNN algorithm).
EXPERIMENT = "chang2022"
#: The tuning table of the H100 plan and launch of both kernels (``results/<gpu>/chang2022_tuning.csv``).
TUNING = "chang2022_tuning"
#: The sweep's timing.
TIMING: dict[str, Any] = {"warmup": 3, "min_reps": 10, "max_reps": 300, "budget_ms": 40.0}


def _model() -> LatencyModel:
    return latency_model(current_figures())


def _same_padded(p: ConvProblem) -> bool:
    """The kernels' problems: one image, square 1x1/3x3/5x5 filters, "same" padding, stride 1."""
    return p.n == 1 and p.r == p.s and p.r in FILTER_SIZES and p.pad == (p.r - 1) // 2 and p.stride == 1


def _single_channel(p: ConvProblem) -> bool:
    return p.c == 1 and _same_padded(p)


def _single(name: str, planner: Callable[..., Any], tuned: bool) -> Variant:
    """A single-channel plan: the paper's (:func:`plan_single`), or the H100's (:func:`fill_plan`, ``tuned``
    over :func:`single_candidates` where a tuning run has measured them)."""

    def knobs(p: ConvProblem) -> dict[str, Any]:
        best = tuning.tuned_knobs(p, name, experiment=TUNING) if tuned else None
        return best if best is not None else planner(p, _model()).as_params()

    def candidates(p: ConvProblem) -> list[dict[str, Any]]:
        return [plan.as_params() for plan in single_candidates(p, _model())]

    def run(x: Any, w: Any, p: ConvProblem, out: Any, **knobs: Any) -> None:
        conv2d_single(x, w, plan=single_launch(knobs), out=out)

    return Variant(name, run, knobs, candidates=candidates if tuned else None, supports=_single_channel)


def _multi(name: str, paper: bool) -> Variant:
    """A multi-channel launch: the paper's (:func:`paper_multi_config`), or the H100's (tuned over
    :func:`ranked_multi_configs`, else the cost model's cheapest)."""

    def knobs(p: ConvProblem) -> dict[str, Any]:
        if paper:
            return paper_multi_config(p, _model()).as_params()
        tuned = tuning.tuned_knobs(p, name, experiment=TUNING)
        if tuned is not None:
            return tuned
        return multi_config(p, sm_count(), shared_per_sm=shared_memory_limits()[1]).as_params()

    def candidates(p: ConvProblem) -> list[dict[str, Any]]:
        ranked = ranked_multi_configs(p, sm_count(), shared_per_sm=shared_memory_limits()[1])
        return [c.as_params() for c in ranked[:TUNING_CANDIDATES]]

    def run(x: Any, w: Any, p: ConvProblem, out: Any, **knobs: Any) -> None:
        conv2d_multi(x, w, config=multi_launch(knobs), out=out)

    return Variant(name, run, knobs, candidates=None if paper else candidates, supports=_same_padded)


#: Both kernels, each as the paper sizes it and as the H100 runs it (tuned).
SINGLE_VARIANTS = (_single("chang_single", plan_single, tuned=False),
                   _single("chang_single_fill", fill_plan, tuned=True))  # fmt: skip
MULTI_VARIANTS = (_multi("chang_multi", paper=True), _multi("chang_multi_async", paper=False))


def measure(directory: Path, *, quick: bool = False, experiment: str = EXPERIMENT, progress: Any = print,
            **options: Any) -> None:  # fmt: skip
    """Tune the H100 plan and launch of both kernels (``chang2022_tuning.csv``), then sweep the
    single-channel grid (both plans) and the multi-channel grid (both launches) against every cuDNN
    algorithm and PyTorch into ``<experiment>.csv``; both resume where they stopped, and a configuration
    whose tuned launch changed is swept again whole. ``quick``: every seventh configuration of each grid."""
    if options:
        raise TypeError(f"the chang2022 sweep takes no options, got {sorted(options)}")
    step = QUICK_STEP if quick else 1
    grids = ((single_problems()[::step], SINGLE_VARIANTS), (multi_problems()[::step], MULTI_VARIANTS))
    # The H100 plan and launch (the tuned variants): every candidate plan and every ranked tile, measured once
    for problems, variants in grids:
        tuned = [v for v in variants if v.candidates is not None]
        run_experiment(TUNING, problems, tuned, directory=directory, cudnn=False, tune=True, timing=tuning.TIMING,
                       progress=progress)  # fmt: skip
    for problems, variants in grids:
        run_experiment(experiment, problems, variants, directory=directory, timing=TIMING, progress=progress,
                       remeasure_changed=True)  # fmt: skip


def sample_problems() -> list[ConvProblem]:
    """Small problems for the generic GPU test: C = 1 and C > 1, K 1, 3, 5, maps no tile or strip divides,
    a map smaller than the filter's halo, M no filter group divides."""
    same = ConvProblem.same
    return [same(1, 1, 13, 29, 11, 3), same(1, 1, 7, 5, 9, 5), same(1, 1, 33, 64, 40, 1), same(1, 1, 2, 3, 5, 5),
            same(1, 13, 9, 11, 20, 3), same(1, 37, 16, 24, 70, 5), same(1, 3, 5, 8, 9, 1),
            same(1, 64, 14, 14, 64, 1)]  # fmt: skip


PAPER = Paper(
    name="chang2022",
    title="Chang et al. 2022, latency hiding",
    notebook="05_chang2022",
    experiment=EXPERIMENT,
    measure=measure,
    variants=(*SINGLE_VARIANTS, *MULTI_VARIANTS),
    tuning=TUNING,
    sources=("chang2022",),
    sample_problems=sample_problems,
    problems=sweep_problems,
    findings=findings,
    edge_check=edge_check,
)
