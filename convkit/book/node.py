"""The whole study's measuring on a node of GPUs (or a Dask cluster), before its notebooks run.

:func:`measure_study` runs every chapter's measuring steps on a :class:`convkit.study.shards.DaskSharder`: the
ceilings first (a whole step on one GPU: every chapter's floors read them), then each chapter's tuning and sweeps,
sharded by problem, the chapters side by side (a chapter after those whose tuning it reads, its
``Paper.measured_after``), and in a full run each
chapter's run-to-run sample in a fresh process. The notebooks then run on what was recorded
(:func:`convkit.book.reproduce.reproduce`). ``--gpus 1`` is the one-GPU path and starts no cluster.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from convkit.papers import PAPERS, paper
from convkit.papers.paper import REPEAT_SUFFIX
from convkit.papers.summary import chapter as summary_chapter
from convkit.study.results import QUICK_SUFFIX
from convkit.study.shards import FOLDER, DaskSharder
from convkit.study.sweep import measuring_on

#: Chapters whose measuring is no sweep of problems: one whole step on one GPU.
WHOLE_STEPS = ("ceilings",)
#: What a whole step of a chapter reads from the results folder (its resume state and the launches tuned there).
STEP_READS = ("*_tuning.csv", "*_tuning.json")
#: The closing chapter: the op in ten networks, its host cost, the reduced precisions, the concurrency soak; a whole
#: step on one GPU (python -m convkit.papers.summary.chapter measure), given what it resumes.
SUMMARY = "summary"


def chapters(only: Sequence[str] | None = None) -> list[str]:
    """The chapters to measure (``only``: these names; default every registered paper and the summary), in reading
    order."""
    every = [p.name for p in PAPERS] + [SUMMARY]
    unknown = set(only or ()) - set(every)
    if unknown:
        raise ValueError(f"no chapter {sorted(unknown)}; the study measures {every}")
    return [name for name in every if not only or name in only]


def measure_study(
    sharder: DaskSharder | None,
    directory: Path,
    *,
    quick: bool = False,
    only: Sequence[str] | None = None,
    progress: Callable[[str], None] = print,
) -> dict[str, float]:
    """Measure the chapters (``only``: these) into ``directory`` on ``sharder``'s GPUs (None: on this process's GPU,
    one chapter after the other), resuming what is there (see the module doc); returns each chapter's wall seconds,
    from the start of the run to its last row, and ``"all"``. Raises RuntimeError naming every chapter that failed,
    after the others finished."""
    suffix = QUICK_SUFFIX if quick else ""
    todo = chapters(only)
    start = time.monotonic()
    finished: dict[str, float] = {}
    failed: dict[str, str] = {}
    ready = {name: threading.Event() for name in todo}
    quick_flag = ["--quick"] if quick else []

    def measure(name: str) -> None:
        try:
            for before in () if name == SUMMARY else paper(name).measured_after:
                if before in ready:
                    ready[before].wait()
            if name == SUMMARY:  # its own repeated sample included
                argv = ["-m", "convkit.papers.summary.chapter", "measure", FOLDER, *quick_flag]
                _step(sharder, argv, directory, (*STEP_READS, *(f"{e}*" for e in summary_chapter.EXPERIMENTS)))
            elif name in WHOLE_STEPS:
                entry = paper(name)
                argv = ["-m", "convkit", "sweep", name, "--directory", FOLDER, *quick_flag]
                _step(sharder, argv, directory, (f"{entry.experiment}{suffix}.*",))
            else:
                entry = paper(name)
                entry.measure(directory, quick=quick, experiment=entry.experiment + suffix, progress=None)
            if not quick and name != SUMMARY:  # the run-to-run sample, in a process of its own, after the sweep
                argv = ["-m", "convkit", "repeat", name, "--directory", FOLDER]
                _step(sharder, argv, directory, (*STEP_READS, f"{paper(name).experiment}{REPEAT_SUFFIX}.*"))
            finished[name] = time.monotonic() - start
            progress(f"{name}: measured in {finished[name] / 60:.1f} min")
        except Exception as exc:  # the other chapters go on; this one is named at the end
            failed[name] = f"{type(exc).__name__}: {exc}"
            progress(f"{name}: failed ({failed[name][:300]})")
        finally:
            ready[name].set()

    with measuring_on(sharder):
        first, rest = [n for n in todo if n in WHOLE_STEPS], [n for n in todo if n not in WHOLE_STEPS]
        for name in first:  # every chapter's floors read the ceilings
            measure(name)
        if sharder is None:  # one GPU: one chapter at a time, as a notebook run measures them
            for name in rest:
                measure(name)
        else:
            _side_by_side([(measure, (name,)) for name in rest])
    finished["all"] = time.monotonic() - start
    if failed:
        raise RuntimeError("chapters that failed: " + "; ".join(f"{k}: {v}" for k, v in failed.items()))
    return finished


def _side_by_side(calls: Sequence[tuple[Callable[..., None], tuple[Any, ...]]]) -> None:
    """Each ``(function, arguments)`` in a thread of its own, all at once; returns when every one has."""
    threads = [threading.Thread(target=function, args=arguments) for function, arguments in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _step(sharder: DaskSharder | None, argv: list[str], directory: Path, reads: Sequence[str]) -> None:
    """``python *argv`` in a fresh process, :data:`~convkit.study.shards.FOLDER` naming ``directory``: on a worker
    (:meth:`DaskSharder.step`, in a scratch copy of what it ``reads``), or here, in ``directory`` itself."""
    import subprocess
    import sys

    if sharder is not None:
        sharder.step(argv, directory, reads)
    else:
        command = [sys.executable, *(arg.replace(FOLDER, str(directory)) for arg in argv)]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def record_times(directory: Path, times: dict[str, float], *, gpus: int, quick: bool, run: dict[str, Any]) -> Path:
    """Each chapter's measuring time (and ``all``) on ``gpus`` GPUs into ``<directory>/notebook_runs.csv``, step
    ``measuring``, the run ``run`` (a worker's provenance); a step timed again replaces its row."""
    from convkit.book.run_times import run_times_store

    mode = "quick" if quick else "full"
    store = run_times_store(directory, run | {"gpus": gpus})
    store.drop(lambda row: (row["step"], row["mode"], row["gpus"]) == ("measuring", mode, str(gpus))
               and row["notebook"] in times)  # fmt: skip
    for name, wall in times.items():
        store.append({"notebook": name, "step": "measuring", "mode": mode, "gpus": gpus, "status": "ok",
                      "wall_s": f"{wall:.1f}"})  # fmt: skip
    return store.csv_path


def results_folder(sharder: DaskSharder, directory: Path | None) -> Path:
    """``directory``, or ``results/<the workers' GPU>``; raises ValueError where the workers hold GPUs of several
    models (each model's results are a folder of their own)."""
    from convkit.core.gpu import gpu_slug
    from convkit.study.checkout import results_dir

    names = set(sharder.gpu_names().values())
    if len(names) != 1:
        raise ValueError(f"the workers hold GPUs of several models ({sorted(names)}): shard over one model at a time")
    return Path(directory) if directory is not None else results_dir() / gpu_slug(names.pop())


def summary(times: dict[str, float], workers: int) -> list[str]:
    """The run's wall times as lines, chapter by chapter."""
    lines = [f"measured on {workers} GPU{'s' if workers > 1 else ''} in {times['all'] / 60:.1f} min"]
    lines += [f"  {name}: done after {wall / 60:.1f} min" for name, wall in times.items() if name != "all"]
    return lines


def run_on_node(*, gpus: int, scheduler: str | None, directory: Path | None, quick: bool,
                only: Sequence[str] | None = None, times: bool = False) -> Path:  # fmt: skip
    """Measure the chapters (``only``: these) into ``directory`` (default ``results/<the GPU>``): on the cluster at
    ``scheduler``, or on this node's first ``gpus`` GPUs (:func:`convkit.study.shards.open_client`; 1: in this
    process, no cluster). ``times``: each chapter's wall time goes to ``results/<the GPU>/notebook_runs.csv`` with
    the GPU count. Returns the folder measured into."""
    from convkit.core.gpu import device_name, gpu_slug
    from convkit.study.checkout import results_dir
    from convkit.study.shards import close, gpu_provenance, open_client

    client = open_client(gpus=gpus, scheduler=scheduler) if scheduler or gpus > 1 else None
    try:
        sharder = DaskSharder(client) if client is not None else None
        if sharder is not None:
            folder, workers = results_folder(sharder, directory), sharder.workers
            run = client.submit(gpu_provenance, pure=False).result()
        else:
            folder, workers = Path(directory) if directory else results_dir() / gpu_slug(device_name()), 1
            run = gpu_provenance()
        print(f"convkit: measuring on {workers} GPU{'s' if workers > 1 else ''} into {folder}", flush=True)
        measured = measure_study(sharder, folder, quick=quick, only=only)
        print("\n".join(summary(measured, workers)), flush=True)
        if times:
            into = results_dir() / gpu_slug(run["gpu"])  # the GPU's own folder, also for a scratch run
            print(f"times in {record_times(into, measured, gpus=workers, quick=quick, run=run)}")
        return folder
    finally:
        if client is not None:
            close(client)


#: Where the run-to-run samples measured on every GPU of a node go: ``<results>/across/gpu<index>/``.
ACROSS = "across"


def measure_across(sharder: DaskSharder, directory: Path, *, only: Sequence[str] | None = None,
                   progress: Callable[[str], None] = print) -> Path:  # fmt: skip
    """Each chapter's run-to-run sample (``convkit repeat``, at the launches tuned in ``directory``) measured on every
    GPU of the cluster, each GPU's into ``<directory>/across/gpu<index>/``, the GPUs side by side; returns that
    ``across`` folder (see :func:`agreement`)."""
    names = [name for name in chapters(only) if name not in (SUMMARY, *WHOLE_STEPS)]
    folder = Path(directory) / ACROSS

    def on(worker: str, index: str) -> None:
        for name in names:
            argv = ["-m", "convkit", "repeat", name, "--directory", FOLDER]
            sharder.step(argv, directory, STEP_READS, into=folder / f"gpu{index}", worker=worker)
            progress(f"{name}: its sample measured on GPU {index}")

    _side_by_side([(on, item) for item in sharder.gpu_indices().items()])
    return folder


def run_to_run(directory: Path, name: str) -> float:
    """Chapter ``name``'s recorded run-to-run spread in ``directory`` (95th percentile, a fraction): its sample,
    measured again in a fresh process, against its sweep; NaN where either is not recorded."""
    from convkit.study import tables
    from convkit.study.results import load_results

    entry = paper(name)
    stems = (entry.experiment, entry.experiment + REPEAT_SUFFIX)
    if not all((Path(directory) / f"{stem}.csv").is_file() for stem in stems):
        return float("nan")
    return tables.spread(*(load_results(Path(directory), stem)[0] for stem in stems))["p95"]


def agreement(directory: Path) -> Any:
    """How far the GPUs of a node disagree, against how far one GPU disagrees with itself: for each chapter sampled
    on every GPU (:func:`measure_across`) and each GPU past the first, the spread of its times against the first
    GPU's on the same cases (``cases``, ``median``, ``p95``, fractions), beside the chapter's :func:`run_to_run`
    spread (``run_to_run_p95``) on this GPU, or where none is recorded here on the book's GPU (``run_to_run_on``:
    the folder it comes from). A DataFrame; empty where nothing was sampled."""
    import pandas as pd

    from convkit.study import tables
    from convkit.study.checkout import results_dir
    from convkit.study.results import DEFAULT_RECORDED_GPU, load_results

    directory = Path(directory)
    gpus = sorted((directory / ACROSS).glob("gpu*"), key=lambda p: p.name)
    rows = []
    for name in (name for name in chapters() if name not in (SUMMARY, *WHOLE_STEPS)):
        repeat = paper(name).experiment + REPEAT_SUFFIX
        held = [g for g in gpus if (g / f"{repeat}.csv").is_file()]
        if len(held) < 2:
            continue
        reference = directory
        own = run_to_run(directory, name)
        if own != own:  # no sample of its own here: the book's GPU's
            reference = results_dir() / DEFAULT_RECORDED_GPU
            own = run_to_run(reference, name)
        first = load_results(held[0], repeat)[0]
        for other in held[1:]:
            found = tables.spread(first, load_results(other, repeat)[0])
            rows.append({"chapter": paper(name).title, "gpus": f"{held[0].name[3:]} and {other.name[3:]}", **found,
                         "run_to_run_p95": own, "run_to_run_on": reference.name})  # fmt: skip
    return pd.DataFrame(rows)


def agreement_markdown(directory: Path) -> str:
    """The rerun page's table of :func:`agreement`: per chapter, the cases sampled on every GPU, how far the other
    GPUs' times lie from the first GPU's (the median pair's median, the widest pair's 95th percentile) beside the
    chapter's run-to-run spread (95th percentile, and on which GPU); empty where nothing was sampled on two GPUs."""
    from convkit.study.results import gpu_model

    found = agreement(directory)
    if found.empty:
        return ""
    lines = ["| chapter | cases | across the GPUs: median | across the GPUs: 95th percentile, widest pair "
             "| run to run: 95th percentile |", "|---|---|---|---|---|"]  # fmt: skip
    past = []  # how far the widest pair lies past the run-to-run spread, per chapter
    for title, rows in found.groupby("chapter", sort=False):
        own, on = rows["run_to_run_p95"].iloc[0], rows["run_to_run_on"].iloc[0]
        gpu = gpu_model(on)
        past.append(rows["p95"].max() - own)
        lines.append(f"| {title} | {int(rows['cases'].max())} | {rows['median'].median():.1%} "
                     f"| {rows['p95'].max():.1%} | {'–' if own != own else f'{own:.1%} ({gpu})'} |")  # fmt: skip
    within = sum(gap <= 0 for gap in past)
    beyond = f", in the others at most {100 * max(past):.1f} points past it" if within < len(past) else ""
    return "\n".join(lines) + (f"\n\nIn {within} of {len(past)} chapters the widest pair of GPUs lies within one GPU's "
                               f"run-to-run spread{beyond}; the pairs' medians are at most "
                               f"{found['median'].max():.1%}.\n")  # fmt: skip


def node_page(titles: dict[str, str]) -> str:
    """The rerun page's measuring on several GPUs: for each GPU model under ``results/`` whose node runs were timed,
    the times (:func:`convkit.book.run_times.node_markdown`) and the GPUs' agreement (:func:`agreement_markdown`);
    a sentence where none was timed. ``titles``: each chapter's name -> its title."""
    from convkit.book.run_times import NODE_SIZES, node_markdown, run_times
    from convkit.study.checkout import results_dir
    from convkit.study.results import gpu_model

    parts = []
    for folder in sorted(p for p in results_dir().iterdir() if p.is_dir()):
        if not any(run_times(folder, "measuring", n) for n in NODE_SIZES[1:]):
            continue
        gpu = gpu_model(folder)
        parts.append(f"On the {gpu}s of one node: when each chapter finished, counted from the start of the run (on "
                     "one GPU the chapters run one after the other, on several side by side), and the whole run:\n\n"
                     + node_markdown(folder, gpu, titles))  # fmt: skip
        across = agreement_markdown(folder)
        if across:
            parts.append(f"Each chapter's run-to-run sample measured on every {gpu} of the node, each GPU's times "
                         "against the first GPU's on the same cases, beside the chapter's run-to-run spread "
                         "(its sample measured again in a fresh process, against its sweep):\n\n" + across)  # fmt: skip
    return "\n".join(parts) if parts else "No run of the measuring on several GPUs has been timed yet.\n"
