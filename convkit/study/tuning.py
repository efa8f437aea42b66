"""Tuning tables: measure each variant's knob candidates once, keep the fastest.

Tuning is an experiment like any other (``<directory>/<chapter>_tuning.csv``, written by
:func:`convkit.study.sweep.tune_then_sweep`): every candidate a variant offers is checked against the
float64 reference and timed with a short budget. That file is the cached table: :func:`knob_table` reads
it as a :data:`convkit.families.registry.KnobTable`, the fastest correct candidate per problem and variant,
and the sweep of the same folder measures each variant with those knobs, in the same run as cuDNN, with
the full budget.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from convkit.core.memo import memoize
from convkit.core.problem import ConvProblem
from convkit.families.registry import KnobTable

#: What a tuned knob set is recorded for: the problem and the variant.
TUNED_BY = ("label", "pad", "stride", "variant")


def fastest_tuned(frame: Any) -> Any:
    """The fastest ``ok`` row per (label, pad, stride, variant) of a tuning frame (pandas).

    Rows that failed the check or did not run never win; a problem whose candidates all failed
    has no entry, and its variant falls back to the heuristic.
    """
    from convkit.study.tables import fastest_per

    return fastest_per(frame, TUNED_BY)


@memoize()
def _table(csv_path: str, mtime_ns: int) -> dict[tuple[str, int, int, str], dict[str, Any]]:
    from convkit.study.results import load_results

    del mtime_ns  # part of the cache key: a retuned file is read again
    path = Path(csv_path)
    frame, _ = load_results(path.parent, path.stem)
    return {(r.label, int(r.pad), int(r.stride), r.variant): json.loads(r.params)
            for r in fastest_tuned(frame).itertuples()}  # fmt: skip


def tuned_knobs(directory: Path, experiment: str) -> dict[tuple[str, int, int, str], dict[str, Any]]:
    """Every tuned knob set of the tuning table ``<directory>/<experiment>.csv``, by (label, pad, stride,
    variant); empty where the folder has no such table."""
    path = Path(directory) / f"{experiment}.csv"
    return _table(str(path), path.stat().st_mtime_ns) if path.is_file() else {}


def knob_table(directory: Path, experiment: str) -> KnobTable:
    """The tuning table ``<directory>/<experiment>.csv`` as a knob table: read when a knob is first asked for
    (and again where the file changed), so it sees what a tuning run just wrote."""

    def lookup(problem: ConvProblem, variant: str) -> dict[str, Any] | None:
        return tuned_knobs(directory, experiment).get((problem.label, problem.pad, problem.stride, variant))

    return lookup
