"""The FP32 chapter's finding, checked (:mod:`convkit.study.claims`): FP32 kernels match the best library where
the work is compute-bound (parity is the bar: there is no paper)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convkit.papers.fp32 import results
from convkit.papers.fp32.results import LARGE_GFLOP
from convkit.study import tables
from convkit.study.claims import SHARE, Claim, Spread, per_folder

SPREAD = Spread(results.SWEEP, results.REPEAT)


@per_folder
def _cuconv(directory: Path) -> Any:
    from convkit.study.roofline import recorded_ceilings

    ceilings = recorded_ceilings(directory) or {}
    try:
        return results.chapter_tables(directory, ceilings)["cuconv"]
    except KeyError:  # a quick run's rows under the sweep's name (convkit verify's view): the quick suites
        return results.chapter_tables(directory, ceilings, quick=True)["cuconv"]


def _large(directory: Path) -> Any:
    t = _cuconv(directory)
    return t[t["gflop"] >= LARGE_GFLOP]["speedup"]


def claims() -> list[Claim]:
    """On cuConv's problems: the geometric-mean speed-up of the faster of the two FP32 kernels over the best
    library, on the compute-bound layers and on all; the share of problems faster."""
    return [
        Claim("fp32.large", f"the FP32 kernels match the best library on the compute-bound layers (at least "
              f"{LARGE_GFLOP:.0f} GFLOP; geometric-mean speed-up)", lambda d: tables.geomean(_large(d)), 1.0,
              spread=SPREAD, short="large layers"),
        Claim("fp32.all", "the FP32 kernels match the best library on all of cuConv's problems (geometric-mean "
              "speed-up)", lambda d: tables.geomean(_cuconv(d)["speedup"]), 1.0, spread=SPREAD, short="all problems"),
        Claim("fp32.share", "the FP32 kernels are faster than the best library on half of cuConv's problems",
              lambda d: tables.share_faster(_cuconv(d)["speedup"]), 50.0, unit="%", kind=SHARE, spread=SPREAD,
              speedups=lambda d: _cuconv(d)["speedup"].dropna(), short="share faster"),
    ]  # fmt: skip
