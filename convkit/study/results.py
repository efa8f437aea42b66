"""The results store: one tidy CSV per experiment and GPU, with provenance beside it.

``results/<gpu-slug>/<experiment>.csv`` holds one row per (problem, implementation, variant,
parameters); ``<experiment>.json`` holds the provenance of every run that wrote rows, keyed by
the ``run_id`` each row carries. Rows are appended one at a time and flushed to disk before
the next measurement starts, so a sweep killed at any point loses at most the row being
written: :meth:`ResultStore.open` drops a torn last line, and :func:`sweep` skips every key
already present, so a resumed sweep neither repeats nor loses a row.
"""

from __future__ import annotations

import csv
import io
import json
import os
import traceback
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convkit.core.problem import ConvProblem

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


def params_text(params: Mapping[str, Any] | None) -> str:
    """Canonical text of tuning parameters (sorted JSON), part of a row's key."""
    return json.dumps(dict(params or {}), sort_keys=True, separators=(",", ":"))


def timing_columns(timing: Any) -> dict[str, Any]:
    """The timing columns every results file shares, from a :class:`convkit.cuda.timing.Timing`."""
    return {"time_ms_median": f"{timing.median_ms:.6g}", "time_ms_min": f"{timing.min_ms:.6g}",
            "time_ms_max": f"{timing.max_ms:.6g}", "reps": timing.reps}  # fmt: skip


def error_text(value: float | None) -> str:
    """A relative error as the results files write it (empty when there was nothing to check)."""
    return "" if value is None else f"{value:.3e}"


@dataclass(frozen=True)
class Case:
    """One thing to measure on one problem: an implementation, a variant, its parameters."""

    impl: str
    variant: str
    params: str = "{}"


def replace_text(path: Path, text: str) -> None:
    """Write ``path`` through a temporary file and a rename: a kill leaves the old or the new file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


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


class ResultStore:
    """Appends rows of one experiment to ``<directory>/<experiment>.csv``; see the module doc.

    Convolution experiments use the default :data:`COLUMNS`; an experiment of another shape
    (the ceilings: metric, value, unit) passes its own ``columns`` and ``key_columns``.
    """

    def __init__(
        self,
        directory: Path,
        experiment: str,
        provenance: Mapping[str, Any] | None = None,
        *,
        columns: tuple[str, ...] = COLUMNS,
        key_columns: tuple[str, ...] = KEY_COLUMNS,
    ):
        missing = {"experiment", "run_id", *key_columns} - set(columns)
        if missing:
            raise ValueError(f"columns lack {sorted(missing)}")
        self.columns = columns
        self.key_columns = key_columns
        self.directory = Path(directory)
        self.experiment = experiment
        self.csv_path = self.directory / f"{experiment}.csv"
        self.json_path = self.directory / f"{experiment}.json"
        self.run_id = uuid.uuid4().hex[:12]
        self._provenance = dict(provenance or {})
        self._registered = False  # provenance goes to the JSON with the run's first row
        self._repair()

    @classmethod
    def open(
        cls, directory: Path, experiment: str, provenance: Mapping[str, Any] | None = None, **layout: Any
    ) -> ResultStore:
        """Open (creating if needed) a store; this run's provenance is registered with its first row.

        A run that records nothing (every key already done, or killed before its first row) leaves the
        JSON as it was, so every run id there has rows.
        """
        return cls(directory, experiment, provenance, **layout)

    def _repair(self) -> None:
        """Drop a torn last line left by a kill mid-write, so appends start on a fresh line.

        Refuses a file whose header is not this store's columns: appending would misalign rows.
        """
        if not self.csv_path.exists():
            return
        data = self.csv_path.read_bytes()
        header = data.split(b"\n", 1)[0].decode()
        if b"\n" in data and header != ",".join(self.columns):  # a torn header alone is repaired below
            raise ValueError(f"{self.csv_path} has other columns than this experiment writes: {header[:200]}")
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            with open(self.csv_path, "r+b") as f:
                f.truncate(cut)
                f.flush()
                os.fsync(f.fileno())

    def _runs_doc(self, kept: set[str]) -> dict[str, Any]:
        """The provenance document with only the runs in ``kept`` (a new one where there is none)."""
        doc: dict[str, Any] = {"experiment": self.experiment, "runs": {}}
        if self.json_path.exists():
            doc = json.loads(self.json_path.read_text())
            doc["runs"] = {run: found for run, found in doc["runs"].items() if run in kept}
        return doc

    def _write_provenance(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        doc = self._runs_doc({row["run_id"] for row in self.rows()})  # a deleted CSV leaves no run behind
        doc["runs"][self.run_id] = self._provenance
        replace_text(self.json_path, json.dumps(doc, indent=2, sort_keys=True) + "\n")
        self._registered = True

    def rows(self) -> list[dict[str, str]]:
        """Every complete row recorded so far."""
        if not self.csv_path.exists():
            return []
        with open(self.csv_path, newline="") as f:
            return list(csv.DictReader(f))

    def done_keys(self) -> set[tuple[str, ...]]:
        return {row_key(r, self.key_columns) for r in self.rows()}

    def drop(self, where: Callable[[dict[str, str]], bool]) -> int:
        """Remove the rows ``where`` selects (each as :meth:`rows` gives it), and the provenance of runs left
        with no row; returns how many were removed. Both files are replaced atomically: a kill leaves the
        old or the new one."""
        rows = self.rows()
        keep = [r for r in rows if not where(r)]
        if len(keep) == len(rows):
            return 0
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=self.columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(keep)
        replace_text(self.csv_path, buf.getvalue())
        if self.json_path.exists():
            doc = self._runs_doc({r["run_id"] for r in keep} | ({self.run_id} if self._registered else set()))
            replace_text(self.json_path, json.dumps(doc, indent=2, sort_keys=True) + "\n")
        return len(rows) - len(keep)

    def append(self, row: Mapping[str, Any]) -> None:
        """Write one row and force it to disk before returning."""
        self.directory.mkdir(parents=True, exist_ok=True)
        unknown = set(row) - set(self.columns)
        if unknown:
            raise ValueError(f"row has columns the store does not know: {sorted(unknown)}")
        if not self._registered:  # before the row: no row without its provenance
            self._write_provenance()
        full = {k: "" for k in self.columns} | dict(row) | {"experiment": self.experiment, "run_id": self.run_id}
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=self.columns, lineterminator="\n")
        new_file = not self.csv_path.exists() or self.csv_path.stat().st_size == 0
        if new_file:
            writer.writeheader()
        writer.writerow(full)
        with open(self.csv_path, "a", newline="") as f:
            f.write(buf.getvalue())  # one write per row: a kill tears at most this line
            f.flush()
            os.fsync(f.fileno())


Measure = Callable[[ConvProblem, list[Case]], Iterator[dict[str, Any]]]


def sweep(
    store: ResultStore,
    problems: Iterable[ConvProblem],
    cases: Callable[[ConvProblem], list[Case]],
    measure: Measure,
    *,
    progress: Callable[[str], None] | None = None,
    remeasure_changed: bool = False,
) -> int:
    """Measure every case of every problem that the store does not hold yet; returns rows written.

    ``measure(problem, todo)`` yields one row per case in ``todo`` (built with :func:`make_row`);
    each is stored as soon as it is yielded. If it raises, the cases it had not yielded are
    recorded with status ``error`` and the message, and the sweep goes on with the next problem.

    ``remeasure_changed`` (for experiments with one launch per implementation and variant): a problem
    whose rows hold a case's implementation and variant with other ``params`` than the case has now (a
    launch tuned again, a changed plan) is measured again whole: its rows are dropped first, so that
    every implementation of it still comes from one run, and no variant has two rows.
    """
    done = store.done_keys()
    recorded: dict[tuple[str, ...], set[str]] = {}  # (label, pad, stride, impl, variant) -> the params it ran
    for key in done if remeasure_changed else ():
        recorded.setdefault(key[:-1], set()).add(key[-1])
    written = 0
    for problem in problems:
        keys = {case_key(problem, c): c for c in cases(problem)}
        if remeasure_changed and any(recorded.get(key[:-1], {key[-1]}) != {key[-1]} for key in keys):
            where = (problem.label, str(problem.pad), str(problem.stride))
            store.drop(lambda row, at=where: (row["label"], row["pad"], row["stride"]) == at)
            done = {key for key in done if key[:3] != where}
            if progress:
                progress(f"{problem.label} pad={problem.pad} stride={problem.stride}: a launch changed, measured again")
        todo = [case for key, case in keys.items() if key not in done]
        if not todo:
            continue
        if progress:
            progress(f"{problem.label} pad={problem.pad} stride={problem.stride}: {len(todo)} cases")
        pending = {case_key(problem, c): c for c in todo}
        try:
            for row in measure(problem, todo):
                key = row_key(row)
                if key not in pending:
                    raise RuntimeError(f"measure returned a row for an unexpected case {key}")
                store.append(row)
                done.add(key)
                del pending[key]
                written += 1
        except Exception as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            message = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            for case in pending.values():
                store.append(make_row(problem, case, status="error", note=message[:500]))
                written += 1
    return written


def load_results(directory: Path, experiment: str) -> tuple[Any, dict[str, Any]]:
    """The rows of an experiment as a pandas DataFrame, and its provenance document."""
    import pandas as pd

    csv_path = Path(directory) / f"{experiment}.csv"
    json_path = Path(directory) / f"{experiment}.json"
    if not csv_path.exists():
        raise FileNotFoundError(f"no recorded results {csv_path}")
    frame = pd.read_csv(csv_path, keep_default_na=False, na_values=[""])
    provenance = json.loads(json_path.read_text()) if json_path.exists() else {}
    return frame, provenance
