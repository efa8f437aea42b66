"""Chang 2022's claims, checked (:mod:`convkit.study.claims`): each kernel's mean speed-up over the library, held
to the paper's mean. The paper averages arithmetically; the book reads speed-ups by their geometric mean, so each
mean is a claim of its own and the verdicts say which one holds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from convkit.papers.chang2022.results import EXPERIMENT, PAPER_SPEEDUPS, best_variant, recorded_table
from convkit.study import tables
from convkit.study.claims import Claim, Spread

SPREAD = Spread(EXPERIMENT, f"{EXPERIMENT}_repeat")
DESIGN = {"single": "chang_single", "multi": "chang_multi"}


def _speedups(kind: str, best: bool) -> Callable[[Path], Any]:
    def of(directory: Path) -> Any:
        t = recorded_table(directory)
        variant = best_variant(t, kind) if best else DESIGN[kind]
        return t[t["kind"] == kind][f"speedup_{variant}"].dropna()

    return of


def claims() -> list[Claim]:
    """Per kernel: the paper's design and our best form, arithmetic and geometric mean, each at the paper's mean."""
    out = []
    for kind in ("single", "multi"):
        paper = PAPER_SPEEDUPS[kind]["mean"]
        design, best = _speedups(kind, False), _speedups(kind, True)
        words = f"{kind}-channel kernel"
        out += [
            Claim(f"chang2022.{kind}_design", f"the paper's {words} as-is beats the best library by the paper's mean "
                  "(arithmetic, the paper's measure)", lambda d, s=design: s(d).mean(), paper, spread=SPREAD,
                  short="the paper's kernel", paper=f"{paper}x mean (GTX 1080 Ti)"),
            Claim(f"chang2022.{kind}_mean", f"our {words} beats the best library by the paper's mean (arithmetic, "
                  "the paper's measure)", lambda d, s=best: s(d).mean(), paper, spread=SPREAD,
                  short="ours, arithmetic", paper=f"{paper}x mean (GTX 1080 Ti)"),
            Claim(f"chang2022.{kind}_geomean", f"our {words} beats the best library by the paper's mean, read as a "
                  "geometric mean", lambda d, s=best: tables.geomean(s(d)), paper, spread=SPREAD,
                  short="ours, geometric", paper=f"{paper}x mean (GTX 1080 Ti)"),
        ]  # fmt: skip
    return out
