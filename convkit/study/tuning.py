"""Tuning tables: measure each variant's knob candidates once, keep the fastest.

Tuning is an experiment like any other (``results/<gpu>/<paper>_tuning.csv``, written by
:func:`convkit.bench.measure.run_experiment` with ``tune=True``): every candidate a variant offers is
checked against the float64 reference and timed with a short budget. That file is the cached
table: :func:`tuned_knobs` returns the fastest correct candidate for a problem and variant, and
the sweep measures each variant with those knobs, in the same run as cuDNN, with the full budget.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from convkit.core.problem import ConvProblem

#: Tuning timing: enough runs to rank candidates, a fraction of the sweep's budget.
TIMING: dict[str, Any] = {"warmup": 1, "min_reps": 3, "max_reps": 50, "budget_ms": 3.0}


def fastest(frame: Any) -> Any:
    """The fastest ``ok`` row per (label, pad, stride, variant) of a tuning frame (pandas).

    Rows that failed the check or did not run never win; a problem whose candidates all failed
    has no entry, and its variant falls back to the heuristic.
    """
    ok = frame[frame["status"] == "ok"]
    if ok.empty:
        return ok
    best = ok.loc[ok.groupby(["label", "pad", "stride", "variant"], sort=False)["time_ms_median"].idxmin()]
    return best.reset_index(drop=True)


@functools.cache
def _table(csv_path: str, mtime_ns: int) -> dict[tuple[str, int, int, str], dict[str, Any]]:
    from convkit.study.results import load_results

    del mtime_ns  # part of the cache key: a retuned file is read again
    path = Path(csv_path)
    frame, _ = load_results(path.parent, path.stem)
    return {(r.label, int(r.pad), int(r.stride), r.variant): json.loads(r.params)
            for r in fastest(frame).itertuples()}  # fmt: skip


def tuned_knobs(
    problem: ConvProblem, variant: str, *, experiment: str, directory: Path | None = None
) -> dict[str, Any] | None:
    """The tuned knobs of ``variant`` (``"cuconv_tiled"``) on ``problem`` in the tuning table
    ``experiment`` (each chapter keeps its own), or None if not tuned there.

    ``directory`` defaults to this GPU's results folder; without a GPU there is nothing to look up.
    """
    if directory is None:
        from convkit.core.gpu import device_name, gpu_slug, has_gpu
        from convkit.core.paths import results_dir

        if not has_gpu():
            return None
        directory = results_dir() / gpu_slug(device_name())
    path = Path(directory) / f"{experiment}.csv"
    if not path.is_file():
        return None
    return _table(str(path), path.stat().st_mtime_ns).get((problem.label, problem.pad, problem.stride, variant))
