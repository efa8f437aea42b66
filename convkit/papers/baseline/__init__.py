"""The baseline: a plain direct kernel and every legacy cuDNN forward algorithm on seventeen configurations.

Before any paper's kernel, the chapter measures what the GPU's own library does on configurations drawn
from the later chapters (:mod:`.anchors`): each of cuDNN's eight forward algorithms called alone,
PyTorch's autotuned cuDNN in the same run, and the naive one-thread-per-output kernel
(:mod:`.direct`, ``kernels/direct.cu``) whose gap the papers' kernels aim to close. :mod:`.results`
turns the rows into the chapter's numbers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.families.baseline import DIRECT, FAMILY
from convkit.papers.baseline import claims
from convkit.papers.baseline.anchors import anchors
from convkit.papers.baseline.results import findings
from convkit.papers.paper import Paper
from convkit.study.sweep import run_experiment

#: The sweep's experiment (``results/<gpu>/baseline.csv``).
EXPERIMENT = "baseline"


def measure(directory: Path, *, quick: bool = False, experiment: str = EXPERIMENT, progress: Any = print,
            **options: Any) -> None:  # fmt: skip
    """Measure the direct kernel, every cuDNN algorithm and PyTorch on the anchors (``quick``: a few small
    ones) into ``<experiment>.csv``, resuming what is there."""
    if options:
        raise TypeError(f"the baseline sweep takes no options, got {sorted(options)}")
    run_experiment(experiment, problems(quick), [DIRECT], directory=directory, progress=progress)


def problems(quick: bool = False) -> list[ConvProblem]:
    """The anchor configurations (``quick``: a few small ones)."""
    return [a.problem for a in anchors(quick)]


PAPER = Paper(
    "baseline", "The baseline: every cuDNN algorithm", "01_baseline", EXPERIMENT, measure, FAMILY,
    problems=problems, findings=findings,
    claims=claims.claims,
)  # fmt: skip
