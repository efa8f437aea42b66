"""Chang, Onishi, Maruyama 2022 (Pascal kernels): the latency-hiding model, its planners and kernels, on the H100.

The paper's section 2.2 turns a GPU's figures into how much must be in flight to hide the
global-memory latency (:mod:`.model`, its Table 1). Section 3.1 divides a single-channel convolution
(C = 1, M filters) over the SMs with the S/T procedure (:mod:`.single`); section 3.2 sizes the
stride-fixed block of the multi-channel kernel (:mod:`.multi`). :mod:`.launch` runs them
(``kernels/chang2022.cu``), :mod:`.problems` holds the chapter's grids and :mod:`.results` its numbers
(the sanitizer's edge launches are the family's, :mod:`convkit.families.chang2022.edges`).

Each kernel is measured twice: as the paper sizes it on this GPU's figures (``chang_single``,
``chang_multi``), and as the H100 runs it best (``chang_single_fill``, ``chang_multi_async``: tuned
over the planners' and the cost model's candidates, in ``chang2022_tuning.csv``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convkit.families.chang2022 import FAMILY, MULTI_VARIANTS, SINGLE_VARIANTS
from convkit.papers.chang2022 import claims
from convkit.papers.chang2022.problems import QUICK_STEP, multi_problems, single_problems, sweep_problems
from convkit.papers.chang2022.results import EXPERIMENT, findings
from convkit.papers.paper import Paper
from convkit.study.sweep import tune_then_sweep

# EXPERIMENT (the sweep: 117 problems x 2 variants + every cuDNN algorithm) is named in the results module.
#: The tuning table of the H100 plan and launch of both kernels (``results/<gpu>/chang2022_tuning.csv``).
TUNING = "chang2022_tuning"
#: The sweep's timing.
TIMING: dict[str, Any] = {"warmup": 3, "min_reps": 10, "max_reps": 300, "budget_ms": 40.0}


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
    for problems, variants in grids:
        tune_then_sweep(directory, problems, variants, tuning=TUNING, experiment=experiment, timing=TIMING,
                        progress=progress)  # fmt: skip


PAPER = Paper(
    "chang2022", "Chang et al. 2022, latency hiding", "05_chang2022", EXPERIMENT, measure, FAMILY, tuning=TUNING,
    problems=sweep_problems, findings=findings,
    claims=claims.claims,
)  # fmt: skip
