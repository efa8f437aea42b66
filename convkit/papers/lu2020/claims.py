"""Lu 2020's claims, checked (:mod:`convkit.study.claims`): column reuse's load count, single-channel 2D
convolution against image-processing libraries, multi-channel layers against cuDNN."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convkit.papers.lu2020 import results as lr
from convkit.papers.lu2020.results import PAPER_MULTI, PAPER_SINGLE, TARGET_MIN_SIZE
from convkit.study.claims import EXACT, SHARE, Claim, Spread, per_folder
from convkit.study.tables import share_faster

SPREAD = Spread(lr.EXPERIMENT, lr.REPEAT)
IMAGES = f"every 5x5 and 7x7 image from {TARGET_MIN_SIZE}x{TARGET_MIN_SIZE}"


@per_folder
def _tables(directory: Path) -> tuple[Any, Any]:
    return lr.chapter_tables(directory)


def _target(directory: Path) -> Any:
    return lr.in_target(_tables(directory)[0])


def _column_loads(directory: Path) -> float:
    """The warp simulator's loads per window with column reuse (counted: no results folder needed)."""
    return lr.loads_per_window()["column"]


def claims() -> list[Claim]:
    """The chapter's claims, the paper's own bars."""
    multi = lambda d: _tables(d)[1]  # noqa: E731
    return [
        Claim("lu2020.loads", "column reuse cuts a 5x5 window's global loads from 25 to the paper's 10",
              _column_loads, 10.0, at_least=False, unit="loads", kind=EXACT, paper="25 -> 10 (RTX 2080 Ti)"),
        Claim("lu2020.single_design", f"the paper's design beats the best image-processing library by more than "
              f"{PAPER_SINGLE:.0f}x on {IMAGES} (its least speed-up)",
              lambda d: _target(d)["speedup_lu_combined"].min(), PAPER_SINGLE, spread=SPREAD,
              paper=f"more than {PAPER_SINGLE:.0f}x (RTX 2080 Ti)", short="the paper's design"),
        Claim("lu2020.single_best", f"our best kernel beats the best library by more than {PAPER_SINGLE:.0f}x on "
              f"{IMAGES} (its least speed-up)", lambda d: (_target(d)["best_lib_us"] / _target(d)["best_us"]).min(),
              PAPER_SINGLE, spread=SPREAD, paper=f"more than {PAPER_SINGLE:.0f}x (RTX 2080 Ti)", short="ours"),
        Claim("lu2020.multi_max", f"the multi-channel kernel runs up to {PAPER_MULTI}x faster than the fastest cuDNN "
              "algorithm (its largest speed-up)", lambda d: multi(d)["speedup"].max(), PAPER_MULTI, spread=SPREAD,
              paper=f"up to {PAPER_MULTI}x (RTX 2080 Ti)", short="up to 1.3x"),
        Claim("lu2020.multi_most", "the multi-channel kernel is faster than the fastest cuDNN algorithm on most "
              "layers (share of layers)", lambda d: share_faster(multi(d)["speedup"]), 50.0, unit="%", kind=SHARE,
              spread=SPREAD, speedups=lambda d: multi(d)["speedup"], short="most layers"),
    ]  # fmt: skip
