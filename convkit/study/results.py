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
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from convkit.bench.rows import COLUMNS, KEY_COLUMNS, row_key
from convkit.core.paths import replace_text
from convkit.study.checkout import results_dir


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


def absorb(directory: Path, experiment: str, part: Path, **layout: Any) -> int:
    """Move the rows of ``<part>/<experiment>.csv`` (another process's recording, e.g. on another GPU of the node)
    into ``<directory>/<experiment>.csv``: each run's rows under a run of the same provenance there, a key both
    hold keeping the part's row. ``layout``: the store's ``columns`` and ``key_columns``. Returns the rows moved."""
    source = ResultStore(Path(part), experiment, **layout)
    rows = source.rows()
    if not rows:
        return 0
    runs = json.loads(source.json_path.read_text())["runs"] if source.json_path.exists() else {}
    keys = {row_key(r, source.key_columns) for r in rows}
    ResultStore(Path(directory), experiment, **layout).drop(lambda r: row_key(r, source.key_columns) in keys)
    into: dict[str, ResultStore] = {}
    for row in rows:
        run = row["run_id"]
        if run not in into:
            into[run] = ResultStore.open(Path(directory), experiment, runs.get(run, {}), **layout)
        into[run].append({k: v for k, v in row.items() if k not in ("experiment", "run_id")})
    return len(rows)


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


def notes(frame: Any) -> Any:
    """The ``note`` column of recorded rows as text, "" where a row has none (a file with no note at all reads it as
    floats, which pandas will not fill with text)."""
    return frame["note"].astype("string").fillna("")


#: The GPU whose recorded results the book shows when built without one.
DEFAULT_RECORDED_GPU = "nvidia-h100-80gb-hbm3"
#: Suffix of the experiments a quick run writes (kept apart from the full runs' results).
QUICK_SUFFIX = "_quick"


def full_or_quick(directory: Path, experiment: str) -> str:
    """``experiment`` as ``directory`` holds it: its full run where recorded, else its quick run where that is (a
    chapter run alone and quick has only its own quick files); the full name where neither is."""
    for name in (experiment, experiment + QUICK_SUFFIX):
        if (Path(directory) / f"{name}.csv").is_file():
            return name
    return experiment


def gpu_results_dir(directory: Path | None = None) -> Path:
    """``directory``, or this GPU's results folder (``results/<gpu slug>``) when None: the one rule every
    sweep, profile and command line follows."""
    if directory is not None:
        return Path(directory)
    from convkit.core.gpu import device_name, gpu_slug

    return results_dir() / gpu_slug(device_name())


def recorded_gpu_name(folder: str | Path) -> str:
    """The GPU's name as the runs recorded in a results folder give it (``NVIDIA H100 80GB HBM3``), or the folder's
    name where none is recorded; ``folder``: a name under ``results/``, or a folder's path anywhere."""
    directory = folder if isinstance(folder, Path) else results_dir() / folder
    for meta in sorted(directory.glob("*.json")):
        try:
            runs = json.loads(meta.read_text()).get("runs", {})
        except (ValueError, AttributeError):
            continue
        names = sorted({str(run.get("gpu")) for run in runs.values() if isinstance(run, dict) and run.get("gpu")})
        if names:
            return names[0]
    return directory.name


def gpu_model(folder: str | Path) -> str:
    """The GPU of a results folder as prose names it: ``H100`` for ``NVIDIA H100 80GB HBM3``."""
    return recorded_gpu_name(folder).removeprefix("NVIDIA ").split()[0]


def recorded_folders(experiment: str) -> list[tuple[str, Path, str]]:
    """Every GPU's folder under ``results/`` with a recording of ``experiment``: (the GPU's name without the vendor,
    with " (quick)" for a quick run, and the folder's name where two folders' runs name the same GPU; the folder;
    the experiment as recorded there, its full run where there is one, else its quick run). The book's GPU comes
    first."""
    folders = sorted(p for p in results_dir().iterdir() if p.is_dir())
    folders.sort(key=lambda p: p.name != DEFAULT_RECORDED_GPU)
    found: list[tuple[str, Path, str]] = []
    for folder in folders:
        for stem, quick in ((experiment, False), (experiment + QUICK_SUFFIX, True)):
            if (folder / f"{stem}.csv").is_file():
                gpu = recorded_gpu_name(folder).removeprefix("NVIDIA ")
                if gpu in {g.removesuffix(" (quick)") for g, _, _ in found}:  # labels name columns: one each
                    gpu += f" ({folder.name})"
                found.append((gpu + (" (quick)" if quick else ""), folder, stem))
                break
    return found


def recorded_elsewhere(directory: Path, gpu: str, needs: str = "") -> tuple[Path, str] | None:
    """(``results/<gpu>``, its GPU's name without the vendor) where a chapter run alone on another GPU shows what
    that GPU recorded: a folder other than ``directory`` that holds ``needs`` (a file name; "" for any); else None."""
    recorded = results_dir() / gpu
    if Path(directory).resolve() == recorded.resolve() or not (recorded / needs).exists():
        return None
    return recorded, recorded_gpu_name(gpu).removeprefix("NVIDIA ")
