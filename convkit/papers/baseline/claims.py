"""The baseline chapter's findings as checked claims (:mod:`convkit.study.claims`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convkit.papers.baseline.results import MATCH, baseline_summary
from convkit.study.claims import SPEEDUP, Claim, Spread, per_folder

EXPERIMENT = "baseline"
SPREAD = Spread(EXPERIMENT, f"{EXPERIMENT}_repeat")


@per_folder
def _summary(directory: Path) -> Any:
    from convkit.study.results import load_results

    return baseline_summary(load_results(directory, EXPERIMENT)[0])


def claims() -> list[Claim]:
    """The chapter's claims: the direct kernel is slower than the best library; the best legacy algorithm matches
    PyTorch's autotuned cuDNN."""
    return [
        Claim("baseline.direct", "a plain direct kernel, one thread an output, takes longer than the best library "
              "(median of its time over the library's)", lambda d: _summary(d)["direct_vs_library"].median(), 1.0,
              spread=SPREAD, short="direct kernel"),
        Claim("baseline.legacy", "the best legacy cuDNN algorithm matches PyTorch's autotuned cuDNN (median of its "
              f"time over PyTorch's, within {MATCH}x)", lambda d: _summary(d)["best_vs_pytorch"].median(), MATCH,
              at_least=False, kind=SPEEDUP, spread=SPREAD, short="legacy cuDNN"),
    ]  # fmt: skip
