"""The study's findings as claims: each a statement, the value a results folder gives it, the bar it is held to,
and a tolerance taken from the recorded run-to-run spread.

A chapter declares its claims once (``Paper.claims``); the chapters' result boxes, the intro's findings table,
``convkit verify`` and the book's reproduction page all evaluate them, so the words and the numbers cannot drift
apart. A claim's verdict on a results folder is one of :data:`VERDICTS`:

- *holds*: its value is on the bar's side (a speed-up of at least the paper's, a share of at most ...);
- *holds within the spread*: it misses the bar by less than its tolerance, so a rerun could land either side;
- *does not hold*: it misses by more;
- *not measured here*: the folder lacks what the value needs (a GPU without TF32 tensor cores, a quick run
  without the problem the claim names).

The tolerance is the recorded spread of what the value is made of: a chapter's ``<experiment>_repeat`` sample,
measured again in a fresh process (:meth:`convkit.papers.paper.Paper.measure_repeat`), against its sweep. A
value built from times (a rate, a time) moves by the times' spread; a speed-up by the speed-ups' (both of its
times measured again); a share of problems by the share whose speed-up lies within that spread of 1 (those could
flip); a count (loads from the warp simulator, an error bound) not at all.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HOLDS, WITHIN, FAILS, NOT_MEASURED = "holds", "holds within the spread", "does not hold", "not measured here"
VERDICTS = (HOLDS, WITHIN, FAILS, NOT_MEASURED)

#: How a claim's tolerance follows from its chapter's spread (see the module's docstring).
TIME, SPEEDUP, SHARE, EXACT = "time", "speed-up", "share", "exact"


@dataclass(frozen=True)
class Spread:
    """Where a chapter's run-to-run spread is recorded: its sweep and the sample measured again (experiments of
    the results folder); ``moved`` (sweep rows, repeat rows -> a fraction) where its rows are not convolution
    cases (the ceilings)."""

    sweep: str
    repeat: str
    moved: Callable[[Any, Any], float] | None = None


@dataclass(frozen=True)
class Claim:
    """One finding, checked.

    Attributes:
        key: ``<paper>.<name>``, stable across runs (``convkit verify`` matches on it).
        statement: the finding as the book states it, with the bar in words.
        value: the number a results folder gives it (raises ``FileNotFoundError``/``KeyError``/``ValueError``, or
            returns NaN, where the folder lacks what it needs).
        bar: the number it is held to: the paper's where it has one, else the study's own (parity, a bound).
        at_least: holds where ``value >= bar`` (else where ``value <= bar``).
        unit: ``x``, ``%``, ``loads`` or ``error``: how a value is written (:func:`formatted`).
        kind: how its tolerance follows from ``spread`` (:data:`TIME`, :data:`SPEEDUP`, :data:`SHARE`,
            :data:`EXACT`).
        spread: the chapter's recorded spread (None for :data:`EXACT`).
        paper: the paper's number in words, with its GPU ("" where the claim is the study's own).
        speedups: for :data:`SHARE`: the per-problem speed-ups the share counts.
        short: a few words that tell it from the other claims of its finding ("the paper's kernel", "ours").
    """

    key: str
    statement: str
    value: Callable[[Path], float]
    bar: float
    at_least: bool = True
    unit: str = "x"
    kind: str = SPEEDUP
    spread: Spread | None = None
    paper: str = ""
    speedups: Callable[[Path], Any] | None = None
    short: str = ""

    @property
    def chapter(self) -> str:
        return self.key.split(".", 1)[0]

    def bar_text(self) -> str:
        """The bar as a comparison: "at least 2.00x", "at most 1.25x"."""
        return f"{'at least' if self.at_least else 'at most'} {formatted(self.bar, self.unit)}"


def per_folder(func: Callable[..., Any]) -> Callable[..., Any]:
    """``func(directory, *args)`` of a results folder (and hashable ``args``), remembered while the folder's CSV
    files are unchanged: a chapter's claims, result box and findings read one set of tables many times."""
    import functools

    cache: dict[tuple[Any, ...], Any] = {}

    @functools.wraps(func)
    def cached(directory: Path, *args: Any) -> Any:
        folder = Path(directory).resolve()
        key = (str(folder), args, tuple(sorted((f.name, f.stat().st_mtime_ns) for f in folder.glob("*.csv"))))
        if key not in cache:
            cache[key] = func(folder, *args)
        return cache[key]

    return cached


def formatted(value: float, unit: str) -> str:
    """A claim's value as the notation page writes numbers: speed-ups to two decimals with an x, shares to one
    decimal with %, errors in scientific notation, counts grouped by thousands."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "%":
        return f"{value:.1f}%"
    if unit == "error":
        return f"{value:.1e}"
    return f"{value:,.0f}"


def _measured(claim: Claim, directory: Path) -> float:
    try:
        value = float(claim.value(Path(directory)))
    except (FileNotFoundError, KeyError, ValueError, IndexError, ZeroDivisionError):
        return math.nan
    return value if math.isfinite(value) else math.nan


#: The fewest convkit cases a speed-up spread is taken over; below it, twice the times' spread stands in (a ratio
#: of two times, each within it).
FEWEST_CASES = 20


def relative_spread(directory: Path, spread: Spread, kind: str) -> tuple[float, str]:
    """(the 95th percentile of how far a value of ``kind`` moved when ``spread.repeat`` measured ``spread.sweep``'s
    cases again, as a fraction; how): times (:data:`TIME`), or each convkit case's speed-up over the best library
    of the same problem and run, over the cases both runs hold (:data:`SPEEDUP`, :data:`SHARE`). NaN where the
    folder holds no sample."""
    from convkit.study import tables
    from convkit.study.results import load_results

    try:
        sweep, repeat = (load_results(Path(directory), name)[0] for name in (spread.sweep, spread.repeat))
    except FileNotFoundError:
        return math.nan, ""
    if spread.moved is not None:
        return spread.moved(sweep, repeat), "the rates measured again"
    times = tables.spread(sweep, repeat)
    if kind == TIME:
        return times["p95"], f"times, {times['cases']} cases"
    from convkit.bench.rows import KEY_COLUMNS

    def keys(frame: Any) -> Any:
        return frame[list(KEY_COLUMNS)].astype(str).apply(tuple, axis=1)

    common = set(keys(sweep)) & set(keys(repeat))
    a, b = (tables.case_speedups(f[keys(f).isin(common)]) for f in (sweep, repeat))
    both = a.index.intersection(b.index)
    if len(both) < FEWEST_CASES:
        return 2 * times["p95"], f"twice the times' ({times['cases']} cases; {len(both)} speed-ups)"
    return float((b.loc[both] / a.loc[both] - 1).abs().quantile(0.95)), f"speed-ups, {len(both)} cases"


@dataclass(frozen=True)
class Evaluated:
    """A claim on one results folder: its value, tolerance (in the value's unit) and verdict."""

    claim: Claim
    value: float
    tolerance: float
    source: str
    verdict: str

    def row(self) -> dict[str, Any]:
        c = self.claim
        return {"key": c.key, "chapter": c.chapter, "statement": c.statement, "paper": c.paper,
                "bar": c.bar_text(), "value": self.value, "value_text": formatted(self.value, c.unit),
                "tolerance": self.tolerance, "tolerance_text": formatted(self.tolerance, c.unit) if c.kind != EXACT
                else "0 (counted)", "source": self.source, "verdict": self.verdict}  # fmt: skip


def tolerance(claim: Claim, directory: Path, value: float) -> tuple[float, str]:
    """(the tolerance of ``claim``'s ``value``, in its unit; where it comes from), from the spread recorded in
    ``directory``."""
    if claim.kind == EXACT or claim.spread is None:
        return 0.0, "counted or computed, not timed"
    rel, how = relative_spread(directory, claim.spread, TIME if claim.kind == TIME else SPEEDUP)
    where = f"{claim.spread.repeat} against {claim.spread.sweep}: {how}"
    if math.isnan(rel):
        return 0.0, f"no run-to-run sample recorded ({where})"
    if claim.kind == SHARE:
        speedups = claim.speedups(Path(directory)) if claim.speedups else None
        if speedups is None or not len(speedups):
            return 0.0, where
        return 100 * float(((speedups - 1).abs() <= rel).mean()), f"problems within {rel:.1%} of parity; {where}"
    return abs(value) * rel, f"{rel:.1%} (95th percentile); {where}"


def verdict(claim: Claim, value: float, tol: float) -> str:
    """:data:`HOLDS`, :data:`WITHIN`, :data:`FAILS` or :data:`NOT_MEASURED` for ``value`` with tolerance ``tol``."""
    if math.isnan(value):
        return NOT_MEASURED
    sign = 1 if claim.at_least else -1
    if sign * (value - claim.bar) >= 0:
        return HOLDS
    return WITHIN if sign * (value + sign * tol - claim.bar) >= 0 else FAILS


def evaluate(claim: Claim, directory: Path, spread_from: Path | None = None) -> Evaluated:
    """``claim`` on the results in ``directory``, its tolerance from the spread recorded in ``spread_from``
    (default: the same folder)."""
    value = _measured(claim, directory)
    tol, source = tolerance(claim, Path(spread_from or directory), value) if not math.isnan(value) else (0.0, "")
    return Evaluated(claim, value, tol, source, verdict(claim, value, tol))
