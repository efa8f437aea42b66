"""cuConv (Jorda, Valero-Lara and Peña 2022): convolution as scalar products read in place, and the ladder past it.

The chapter measures the paper's two-stage design and three steps past it (:mod:`.launch`: ``paper``,
``fused``, ``split``, ``tiled``) against every cuDNN forward algorithm and PyTorch on the 616 problems
of five networks' stride-1 layers (:mod:`convkit.study.networks`: 88 configurations x 7 batch sizes), each
variant at the launch a tuning run found fastest. :mod:`.results` turns the rows into the chapter's
numbers; the ncu profile covers the paper's named configurations of its Tables 3-5.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.families.cuconv import CUCONV_VARIANTS, FAMILY
from convkit.families.registry import Kernels
from convkit.papers.cuconv import claims
from convkit.papers.cuconv.results import NAMED_CONFIGS
from convkit.papers.paper import Paper, Profile, ProfiledCase, convolution_cases
from convkit.study import networks
from convkit.study.sweep import tune_then_sweep
from convkit.study.tuning import knob_table

#: The paper's largest speed-up (its section 4.1): 7x7 input, 1x1 filters, 32 filters, depth 832, batch 1.
PAPER_MAX_LABEL = "7-1-1-32-832"

#: The sweep's experiment, and the tuning table of every variant's launch (results/<gpu>/cuconv_tuning.csv).
CUCONV_EXPERIMENT = "cuconv"
CUCONV_TUNING = "cuconv_tuning"
#: The sweep's timing: a short budget (616 problems x 13 cases), at least 5 timed runs after 2 warm-ups.
CUCONV_TIMING: dict[str, Any] = {"warmup": 2, "min_reps": 5, "max_reps": 200, "budget_ms": 20.0}
#: Configurations of a quick run (batch 1): every eleventh of the 88.
CUCONV_QUICK_STEP = 11


def measure(
    directory: Path,
    *,
    quick: bool = False,
    experiment: str = CUCONV_EXPERIMENT,
    progress: Callable[[str], None] | None = print,
    batches: tuple[int, ...] | None = None,
) -> None:
    """Tune every variant's launch, then sweep the variants, cuDNN and PyTorch, one batch size at a time.

    Batch 1 first (the paper's focus), so an interrupted session leaves whole batch sizes behind; both
    experiments resume where they stopped, and a problem whose tuned launch changed is swept again whole.
    ``batches`` picks batch sizes (default: the paper's seven); ``quick``: :func:`quick_configurations` at
    batch 1. Writes ``cuconv_tuning.csv`` and ``<experiment>.csv`` under ``directory``.
    """
    configs = networks.configurations()
    if quick:
        configs, batches = quick_configurations(), (1,)
    for batch in batches or networks.BATCH_SIZES:
        problems = [c.problem(batch) for c in configs]
        tune_then_sweep(directory, problems, CUCONV_VARIANTS, tuning=CUCONV_TUNING, experiment=experiment,
                        timing=CUCONV_TIMING, progress=progress)  # fmt: skip


def quick_configurations() -> list[networks.Config]:
    """A quick run's configurations: every eleventh, and those the paper names (its Tables 3-5 and its largest
    speed-up), so that every table and figure of the chapter has its rows."""

    def shape(p: ConvProblem) -> tuple[int, int, int, int]:
        return p.h, p.r, p.m, p.c

    named = {shape(ConvProblem.from_label(label)) for rows in NAMED_CONFIGS.values() for _, label in rows}
    named.add(shape(ConvProblem.from_label(PAPER_MAX_LABEL)))
    every = networks.configurations()
    picked = every[::CUCONV_QUICK_STEP]
    return [c for c in every if c in picked or shape(c.problem(1)) in named]


def problems(quick: bool = False) -> list[ConvProblem]:
    """The sweep's 616 problems, or (``quick``) :func:`quick_configurations` at batch 1."""
    if quick:
        return [c.problem(1) for c in quick_configurations()]
    return networks.problems()


def named_problems() -> list[tuple[str, str, ConvProblem]]:
    """(table, letter, problem) for every named configuration of the paper's Tables 3-5, "same" padding."""
    return [(t, letter, ConvProblem.from_label(label)) for t, rows in NAMED_CONFIGS.items() for letter, label in rows]


def profiled_cases(directory: Path) -> Iterator[ProfiledCase]:
    """The profile's cases, in order: on each named configuration, every variant at its launch tuned in
    ``directory``, then every cuDNN forward algorithm."""
    return convolution_cases(named_problems(), Kernels(CUCONV_VARIANTS), cudnn=True,
                             tuned=knob_table(directory, CUCONV_TUNING))  # fmt: skip


PAPER = Paper(
    "cuconv", "cuConv (Jorda et al. 2022)", "03_cuconv", CUCONV_EXPERIMENT, measure, FAMILY, tuning=CUCONV_TUNING,
    problems=problems, findings=claims.findings,
    claims=claims.claims,
    profile=Profile("cuconv_kernels", profiled_cases),
)  # fmt: skip
