"""The ceilings chapter's findings as checked claims (:mod:`convkit.study.claims`): the measured rates fall short
of the datasheet's, which is why every floor in the book uses the measured ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convkit.papers.ceilings.measure import EXPERIMENT
from convkit.papers.ceilings.results import headline
from convkit.study.claims import TIME, Claim, Spread, per_folder


@per_folder
def _headline(directory: Path) -> dict[str, float]:
    from convkit.study.results import load_results

    return headline(load_results(directory, EXPERIMENT)[0])


def _moved(sweep: Any, repeat: Any) -> float:
    """The larger relative move of the two rates the floors use, measured again in a fresh process."""
    a, b = headline(sweep), headline(repeat)
    return max(abs(b[k] / a[k] - 1) for k in ("copy_gbps", "sgemm_tflops"))


SPREAD = Spread(EXPERIMENT, f"{EXPERIMENT}_repeat", moved=_moved)


def claims() -> list[Claim]:
    """The chapter's claims: copy bandwidth and SGEMM, each below its datasheet figure."""
    return [
        Claim("ceilings.copy", "device-to-device copy reaches less than the datasheet's memory bandwidth (share of it)",
              lambda d: 100 * _headline(d)["copy_share"], 100.0, at_least=False, unit="%", kind=TIME, spread=SPREAD,
              paper="datasheet bandwidth", short="copy"),
        Claim("ceilings.sgemm", "cuBLAS SGEMM reaches less than the datasheet's FP32 FMA peak (share of it)",
              lambda d: 100 * _headline(d)["sgemm_share"], 100.0, at_least=False, unit="%", kind=TIME, spread=SPREAD,
              paper="datasheet FMA peak", short="SGEMM"),
    ]  # fmt: skip
