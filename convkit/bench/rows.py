"""A measured case as a row: the columns every results file shares, and how a case becomes one.

The bench writes rows and the study's results store keeps them (:mod:`convkit.study.results`); both read
the columns from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.op.cases import Case

#: Column order of every results CSV (the issue's required columns first).
COLUMNS: tuple[str, ...] = (
    "experiment", "label", "N", "C", "H", "W", "M", "R", "S", "pad", "stride",
    "impl", "variant", "params", "status", "time_ms_median", "time_ms_min", "time_ms_max",
    "reps", "rel_err", "gflops", "gbytes_per_s", "note", "run_id",
)  # fmt: skip


#: The columns that make a row unique in a convolution experiment.
KEY_COLUMNS: tuple[str, ...] = ("label", "pad", "stride", "impl", "variant", "params")


#: Row statuses. Only ``ok`` rows carry times; the others say why not.
STATUSES = ("ok", "wrong", "not_supported", "workspace_too_large", "oom", "error")


def timing_columns(timing: Any) -> dict[str, Any]:
    """The timing columns every results file shares, from a :class:`convkit.cuda.timing.Timing`."""
    return {"time_ms_median": f"{timing.median_ms:.6g}", "time_ms_min": f"{timing.min_ms:.6g}",
            "time_ms_max": f"{timing.max_ms:.6g}", "reps": timing.reps}  # fmt: skip


def error_text(value: float | None) -> str:
    """A relative error as the results files write it (empty when there was nothing to check)."""
    return "" if value is None else f"{value:.3e}"


def row_key(row: Mapping[str, Any], key_columns: tuple[str, ...] = KEY_COLUMNS) -> tuple[str, ...]:
    """What makes a row unique in an experiment: by default the problem and the case."""
    return tuple(str(row[k]) for k in key_columns)


def case_key(problem: ConvProblem, case: Case) -> tuple[str, ...]:
    return (problem.label, str(problem.pad), str(problem.stride), case.impl, case.variant, case.params)


def make_row(
    problem: ConvProblem, case: Case, *, status: str, timing: Any = None, rel_err: float | None = None, note: str = ""
) -> dict[str, Any]:
    """A results row for ``case`` on ``problem``; ``timing`` is a :class:`convkit.cuda.timing.Timing`."""
    if status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
    row: dict[str, Any] = {"label": problem.label, **problem.as_dict(),
                           "impl": case.impl, "variant": case.variant, "params": case.params,
                           "status": status, "rel_err": error_text(rel_err),
                           "note": note}  # fmt: skip
    if timing is not None:
        row |= timing_columns(timing) | {
            "gflops": f"{problem.flops / (timing.median_ms * 1e6):.6g}",
            "gbytes_per_s": f"{problem.min_bytes / (timing.median_ms * 1e6):.6g}",
        }
    return row
