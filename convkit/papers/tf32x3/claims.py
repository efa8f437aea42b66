"""The 3xTF32 chapter's findings, checked (:mod:`convkit.study.claims`): FP32 accuracy (the book's bar for direct
FP32 methods), and tensor-core speed against the best FP32 library and against CUTLASS's 3xTF32 kernel."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convkit.core.reference import DIRECT_TOLERANCE as FP32_DIRECT_TOLERANCE
from convkit.papers.tf32x3 import results
from convkit.papers.tf32x3.results import LARGE_GFLOP
from convkit.study import tables
from convkit.study.claims import EXACT, Claim, Spread, per_folder

SPREAD = Spread(results.SWEEP, results.REPEAT)


@per_folder
def _tables(directory: Path) -> dict[str, Any]:
    from convkit.study.roofline import recorded_ceilings

    ceilings = recorded_ceilings(directory) or {}
    try:
        return results.chapter_tables(directory, ceilings)
    except KeyError:  # a quick run's rows under the sweep's name (convkit verify's view): the quick suites
        return results.chapter_tables(directory, ceilings, quick=True)


def _worst_error(directory: Path) -> float:
    errors = results.direct_errors(_tables(directory))
    return float(errors["rel_err"].astype(float).max()) if len(errors) else float("nan")


def _over_cutlass(directory: Path) -> float:
    """Our direct 3xTF32 kernels' median rate (the faster per layer where a run recorded the wgmma one too) over
    CUTLASS's fastest 3xTF32 tile's, on the large layers."""
    cuconv = _tables(directory)["cuconv"]
    return results.large_median(cuconv, "direct_us") / results.large_median(cuconv, "cutlass_tf32x3_us")


def claims() -> list[Claim]:
    """Accuracy (every checked run under the FP32 bar), speed over the best FP32 library, and against CUTLASS."""
    return [
        Claim("tf32x3.error", f"3xTF32 keeps FP32 accuracy: the largest error of every checked run below "
              f"{FP32_DIRECT_TOLERANCE:.0e}", _worst_error, FP32_DIRECT_TOLERANCE, at_least=False, unit="error",
              kind=EXACT, paper="FP32 accuracy (Ootomo & Yokota 2022)", short="accuracy"),
        Claim("tf32x3.speed", "with 3xTF32, our kernels match the best FP32 library on cuConv's problems "
              "(geometric-mean speed-up)", lambda d: tables.geomean(_tables(d)["cuconv"]["speedup"].dropna()), 1.0,
              spread=SPREAD, short="speed"),
        Claim("tf32x3.cutlass", f"our direct 3xTF32 kernels match CUTLASS's 3xTF32 on the layers of at least "
              f"{LARGE_GFLOP:.0f} GFLOP (median rate over CUTLASS's)", _over_cutlass, 1.0, spread=SPREAD,
              short="against CUTLASS"),
    ]  # fmt: skip
