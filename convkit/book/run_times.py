"""How long a reproduction takes: the run times recorded on a GPU, and each chapter's full time on one GPU projected
from its recorded cases where no full run of it was timed.

``<results>/notebook_runs.csv`` holds one row per timed step: a notebook's execution (step ``notebook``, on one GPU),
or a chapter's measuring before the notebooks (step ``measuring``, on ``gpus`` GPUs; chapter ``all`` for the whole
run), in a ``full`` or a ``quick`` run (``convkit reproduce --record-times``, :mod:`convkit.book.node`).

The projection (:func:`full_times`): a full run's wall time is, per case, the GPU time the case's timing loop ran
(its recorded repetitions times its median) plus a host cost per case (inputs, the float64 reference, the check,
the launch's compilation), measured as the mean over the chapters whose full run was timed. Each timed chapter is
projected from the others' host cost as well, which gives the projection's error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convkit.study.results import ResultStore, load_results

RUN_TIMES = "notebook_runs"
RUN_TIME_COLUMNS = ("experiment", "notebook", "step", "mode", "gpus", "status", "wall_s", "note", "run_id")
RUN_TIME_KEY = ("notebook", "step", "mode", "gpus")


def run_times_store(directory: Path, run: dict[str, Any]) -> ResultStore:
    """``<directory>/notebook_runs.csv``, the run times (:data:`RUN_TIME_COLUMNS`), opened for the run ``run``."""
    return ResultStore.open(directory, RUN_TIMES, run, columns=RUN_TIME_COLUMNS, key_columns=RUN_TIME_KEY)


def run_times(directory: Path, step: str = "notebook", gpus: int = 1) -> dict[tuple[str, str], float]:
    """(notebook stem or chapter, ``"full"`` or ``"quick"``) -> wall seconds of each ``step`` on ``gpus`` GPUs
    recorded without error in ``<directory>/notebook_runs.csv`` (empty where none is recorded)."""
    if not (Path(directory) / f"{RUN_TIMES}.csv").is_file():
        return {}
    frame, _ = load_results(Path(directory), RUN_TIMES)
    ok = frame[(frame["status"] == "ok") & (frame["step"] == step) & (frame["gpus"] == gpus)]
    return {(str(r.notebook), str(r.mode)): float(r.wall_s) for r in ok.itertuples()}


def minutes_text(wall_s: float) -> str:
    """A run's wall time as a reader reads it: ``0.5 min``, ``82 min``, ``3.4 h``."""
    minutes = wall_s / 60
    if minutes >= 120:
        return f"{minutes / 60:.1f} h"
    return f"{minutes:.1f} min" if minutes < 10 else f"{minutes:.0f} min"


@dataclass(frozen=True)
class Workload:
    """What a chapter's recorded full run measured: its cases (tuning included) and the GPU time their timing loops
    ran, in seconds (each case's repetitions times its median)."""

    cases: int
    gpu_s: float


def workload(directory: Path, experiments: Sequence[str]) -> Workload | None:
    """The :class:`Workload` of ``experiments`` as recorded in ``directory``: their cases on problems (rows with a
    ``label``; the ceilings' metrics are none); None where none is recorded."""
    cases, gpu_s = 0, 0.0
    for experiment in experiments:
        if not (Path(directory) / f"{experiment}.csv").is_file():
            continue
        frame, _ = load_results(Path(directory), experiment)
        if "label" not in frame.columns:
            continue
        cases += len(frame)
        if {"reps", "time_ms_median"} <= set(frame.columns):
            ok = frame[frame["status"] == "ok"] if "status" in frame else frame
            gpu_s += float((ok["reps"].fillna(0) * ok["time_ms_median"].fillna(0)).sum()) / 1000
    return Workload(cases, gpu_s) if cases else None


@dataclass(frozen=True)
class FullTime:
    """A chapter's full run on one GPU: its wall seconds, measured or projected; for a measured one, also its
    projection from the other timed chapters (the check), where there are others."""

    seconds: float
    measured: bool
    check: float | None = None


def host_cost(timed: Mapping[str, float], loads: Mapping[str, Workload]) -> dict[str, float]:
    """Each timed chapter's host seconds per case: its wall time less its cases' GPU time, over its cases."""
    return {name: (wall - loads[name].gpu_s) / loads[name].cases for name, wall in timed.items()
            if name in loads}  # fmt: skip


def full_times(directory: Path, chapters: Mapping[str, Sequence[str]]) -> dict[str, FullTime]:
    """Each chapter (notebook stem -> the experiments its full run measures) -> its full time on one GPU: the
    recorded time of a full run where one was timed, else projected (see the module doc). Chapters with neither a
    timed run nor recorded cases are left out."""
    timed = {stem: wall for (stem, mode), wall in run_times(directory).items() if mode == "full" and stem in chapters}
    loads = {stem: w for stem, experiments in chapters.items() if (w := workload(directory, experiments))}
    costs = host_cost(timed, loads)
    found: dict[str, FullTime] = {}
    for stem in chapters:
        others = [cost for name, cost in costs.items() if name != stem]
        projected = loads[stem].cases * sum(others) / len(others) + loads[stem].gpu_s if stem in loads and others \
            else None  # fmt: skip
        if stem in timed:
            found[stem] = FullTime(timed[stem], True, projected)
        elif projected is not None and math.isfinite(projected):
            found[stem] = FullTime(projected, False)
    return found


#: The GPU counts the rerun page compares, the one-GPU run first.
NODE_SIZES = (1, 2, 4)


def node_markdown(directory: Path, gpu: str, titles: Mapping[str, str]) -> str:
    """The rerun page's table of the measuring on several GPUs: the quick run's measuring steps (every chapter's
    subset, tuning included, the fixed workload) on 1, 2 and 4 GPUs of one node, each chapter done after so long,
    and the whole run with its speed-up over one GPU and its parallel efficiency; a sentence where none was timed.
    ``gpu``: the GPU's short name (``H100``); ``titles``: each chapter's name -> its title."""
    timed = {gpus: {name: wall for (name, mode), wall in run_times(directory, "measuring", gpus).items()
                    if mode == "quick"} for gpus in NODE_SIZES}  # fmt: skip
    sizes = [gpus for gpus in NODE_SIZES if "all" in timed[gpus]]
    if not sizes:
        return f"No run of the measuring on several GPUs has been timed on the {gpu} yet.\n"
    header = "| chapter | " + " | ".join(f"{n} {gpu}{'s' if n > 1 else ''}" for n in sizes) + " |"
    lines = [header, "|---|" + "---|" * len(sizes)]
    names = [name for name in timed[sizes[0]] if name != "all"]
    for name in names:
        cells = [minutes_text(timed[n][name]) if name in timed[n] else "–" for n in sizes]
        lines.append(f"| {titles.get(name, name)} | " + " | ".join(cells) + " |")
    one = timed[1].get("all") if 1 in sizes else None
    cells = []
    for n in sizes:
        wall = timed[n]["all"]
        gain = f" ({one / wall:.2f}x, {one / wall / n:.0%} efficiency)" if one and n > 1 else ""
        cells.append(f"**{minutes_text(wall)}**{gain}")
    lines.append("| **the whole run** | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
