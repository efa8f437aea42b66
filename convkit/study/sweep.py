"""The sweep loop: every case of every problem into a results store, resumable, and the study's one
tune-then-sweep.

:func:`sweep` measures what the store does not hold yet and records a failing case with its error;
:func:`run_experiment` drives it with :func:`convkit.bench.measure.measure_problem`, so every chapter's sweep
is resumable. :func:`tune_then_sweep` is what every tuned chapter does: measure each knob candidate into the
tuning table, then sweep the variants at the knobs that table found fastest, both in ``directory``.
:func:`build_first` builds every kernel a tuning run will time, in parallel, before it times them one at a time.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from convkit.bench.measure import TUNING_TIMING, measure_problem
from convkit.bench.rows import case_key, make_row, row_key
from convkit.core.problem import ConvProblem
from convkit.families.registry import Kernels, KnobTable, Variant, first_of
from convkit.op.cases import Case, cases
from convkit.study.results import ResultStore, gpu_results_dir

#: Checks and times the cases of one problem, one row per case (:func:`convkit.bench.measure.measure_problem`).
RowsOf = Callable[[ConvProblem, list[Case]], Iterator[dict[str, Any]]]
#: One problem and the cases of it a sweep still has to measure.
Work = tuple[ConvProblem, list[Case]]


class Sharder(Protocol):
    """Where a sweep's problems are measured when not in this process: :class:`convkit.study.shards.DaskSharder`."""

    def sweep(self, store: ResultStore, work: list[Work], measure: RowsOf, *,
              progress: Callable[[str], None] | None) -> int:  # fmt: skip
        """Measure ``work`` elsewhere and append its rows to ``store`` (or stores of its runs); rows written."""
        ...


_SHARDER: Sharder | None = None


@contextmanager
def measuring_on(sharder: Sharder | None) -> Iterator[None]:
    """Every sweep in this block (in any thread) measures on ``sharder``'s GPUs; None: in this process."""
    global _SHARDER
    before, _SHARDER = _SHARDER, sharder
    try:
        yield
    finally:
        _SHARDER = before


def sweep(
    store: ResultStore,
    problems: Iterable[ConvProblem],
    cases: Callable[[ConvProblem], list[Case]],
    measure: RowsOf,
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
    launch tuned again, a changed plan), or lack a case it has now (a kernel or a peer added since, a run cut
    short within it), is measured again whole: its rows are dropped first, so that every implementation of it
    still comes from one run, and no variant has two rows.

    Inside :func:`measuring_on`, the problems go in chunks to the GPUs of its :class:`Sharder`; this process stays
    the one writer.
    """
    work = pending(store, problems, cases, progress=progress, remeasure_changed=remeasure_changed)
    if _SHARDER is not None:
        return _SHARDER.sweep(store, work, measure, progress=progress)
    written = 0
    for problem, todo in work:
        if progress:
            progress(f"{problem.label} pad={problem.pad} stride={problem.stride}: {len(todo)} cases")
        for row in measure_each([(problem, todo)], measure):
            store.append(row)
            written += 1
    return written


def pending(
    store: ResultStore,
    problems: Iterable[ConvProblem],
    cases: Callable[[ConvProblem], list[Case]],
    *,
    progress: Callable[[str], None] | None = None,
    remeasure_changed: bool = False,
) -> list[Work]:
    """Each problem with the cases of it ``store`` does not hold yet, in order (none where every case is held); a
    problem whose launch changed, or that lacks some of its cases, is dropped from the store first with
    ``remeasure_changed`` (see :func:`sweep`)."""
    done = store.done_keys()
    recorded: dict[tuple[str, ...], set[str]] = {}  # (label, pad, stride, impl, variant) -> the params it ran
    for key in done if remeasure_changed else ():
        recorded.setdefault(key[:-1], set()).add(key[-1])
    work = []
    for problem in problems:
        keys = {case_key(problem, c): c for c in cases(problem)}
        held = sum(key in done for key in keys)
        changed = any(recorded.get(key[:-1], {key[-1]}) != {key[-1]} for key in keys)
        if remeasure_changed and (changed or 0 < held < len(keys)):
            where = (problem.label, str(problem.pad), str(problem.stride))
            store.drop(lambda row, at=where: (row["label"], row["pad"], row["stride"]) == at)
            done = {key for key in done if key[:3] != where}
            if progress:
                why = "a launch changed" if changed else f"{len(keys) - held} of its cases new"
                progress(f"{problem.label} pad={problem.pad} stride={problem.stride}: {why}, measured again whole")
        if todo := [case for key, case in keys.items() if key not in done]:
            work.append((problem, todo))
    return work


def measure_each(work: Iterable[Work], measure: RowsOf) -> Iterator[dict[str, Any]]:
    """Every row of ``work``: what ``measure`` yields for each problem, and where it raises, the cases it had not
    yielded as rows of status ``error`` with the message (the next problem is measured all the same)."""
    for problem, todo in work:
        left = {case_key(problem, c): c for c in todo}
        try:
            for row in measure(problem, todo):
                key = row_key(row)
                if key not in left:
                    raise RuntimeError(f"measure returned a row for an unexpected case {key}")
                del left[key]
                yield row
        except Exception as exc:  # a KeyboardInterrupt is no Exception: it stops the sweep, its cases unrecorded
            message = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            for case in left.values():
                yield make_row(problem, case, status="error", note=message[:500])


def run_sweep(
    experiment: str,
    problems: Iterable[ConvProblem],
    cases_of: Callable[[ConvProblem], list[Case]],
    measure: RowsOf,
    *,
    directory: Path | None = None,
    progress: Callable[[str], None] | None = print,
    remeasure_changed: bool = False,
) -> Path:
    """Measure ``cases_of(problem)`` with ``measure`` into ``<directory>/<experiment>.csv`` (default
    ``results/<this GPU>``), resuming what is there, with this run's provenance; returns the directory."""
    from convkit.study import provenance

    directory = gpu_results_dir(directory)
    # Sharded, each worker's rows carry that worker's provenance (its GPU); this process may have no GPU.
    here = provenance.collect() if _SHARDER is None else {}
    store = ResultStore.open(directory, experiment, here)
    sweep(store, problems, cases_of, measure, progress=progress, remeasure_changed=remeasure_changed)
    return directory


def fixed_sweep(
    experiment: str, default_problems: Callable[[], list[ConvProblem]], cases: Sequence[Case], measure_rows: RowsOf
) -> Callable[..., Path]:
    """``measure(directory=None, *, problems=None, experiment=experiment, progress=print)`` for an experiment whose
    every problem takes the same ``cases``: ``problems`` (default ``default_problems()``) into
    ``<directory>/<experiment>.csv`` (default ``results/<this GPU>``), resuming; returns the directory."""

    def measure(directory: Path | None = None, *, problems: list[ConvProblem] | None = None,
                experiment: str = experiment, progress: Callable[[str], None] | None = print) -> Path:  # fmt: skip
        chosen = problems if problems is not None else default_problems()
        return run_sweep(experiment, chosen, lambda p: list(cases), measure_rows, directory=directory,
                         progress=progress)  # fmt: skip

    return measure


def run_experiment(
    experiment: str,
    problems: Iterable[ConvProblem],
    variants: Sequence[Variant],
    *,
    directory: Path | None = None,
    cudnn: bool = True,
    tune: bool = False,
    peers: Sequence[Variant] = (),
    seed: int | None = None,
    timing: dict[str, Any] | None = None,
    progress: Callable[[str], None] | None = print,
    remeasure_changed: bool = False,
    tuned: KnobTable | None = None,
) -> Path:
    """Measure ``variants`` (and cuDNN, PyTorch, ``peers``: see :func:`cases`) on ``problems`` into
    ``results/<gpu-slug>/<experiment>.csv``, resuming what is there.

    ``tune`` measures every knob candidate of the variants; otherwise each runs its knobs from ``tuned`` (else
    its default). ``remeasure_changed``: a problem whose variant
    now runs other knobs than its rows record (tuned again) is measured again whole
    (:func:`sweep`). Returns the directory written to.
    """
    kernels = Kernels(tuple(variants), tuple(peers))
    return run_sweep(
        experiment, problems,
        lambda p: cases(p, kernels.variants, cudnn=cudnn, tune=tune, peers=kernels.peers, tuned=tuned),
        lambda p, todo: measure_problem(p, todo, kernels, seed=seed, timing=timing),
        directory=directory, progress=progress, remeasure_changed=remeasure_changed,
    )  # fmt: skip


def tune_then_sweep(
    directory: Path | None,
    problems: Iterable[ConvProblem],
    variants: Sequence[Variant],
    *,
    tuning: str,
    experiment: str,
    peers: Sequence[Variant] = (),
    timing: dict[str, Any] | None = None,
    progress: Callable[[str], None] | None = print,
    tune_here: Sequence[Variant] | None = None,
    knobs_from: tuple[str, ...] = (),
) -> Path:
    """Measure every knob candidate of ``variants`` (those that tune) on ``problems`` into the tuning table
    ``tuning``, then sweep
    them at the knobs that table found fastest (with every cuDNN algorithm, PyTorch and ``peers``) into
    ``experiment``, both in ``directory`` (default ``results/<this GPU>``) and both resuming; a problem whose
    tuned launch changed is swept again whole. ``tune_here`` (default: every variant that tunes) are the ones
    tuned into ``tuning``; the others run the knobs of the tuning tables ``knobs_from`` (other chapters'
    experiments in the same folder), so that a chapter measuring another's kernels does not tune them again.
    Returns the directory."""
    from convkit.study.tuning import knob_table

    directory, problems = gpu_results_dir(directory), list(problems)
    tuned = [v for v in (variants if tune_here is None else tune_here) if v.candidates is not None]
    run_experiment(tuning, problems, tuned, directory=directory, cudnn=False, tune=True, timing=TUNING_TIMING,
                   progress=progress)  # fmt: skip
    knobs = first_of([knob_table(directory, t) for t in (tuning, *knobs_from)])
    run_experiment(experiment, problems, variants, directory=directory, peers=peers, timing=timing, progress=progress,
                   remeasure_changed=True, tuned=knobs)  # fmt: skip
    return directory


def build_first(
    problems: Iterable[ConvProblem],
    variants: Sequence[Variant],
    workers: int,
    *,
    progress: Callable[[str], None] | None = print,
) -> int:
    """Every kernel build that ``variants``' default launches and tuning candidates need on ``problems``, built in
    ``workers`` processes into the on-disk caches (:func:`convkit.op.prebuild.build_in_parallel`): a sweep builds
    each as it first meets it, one at a time, about a second a build (155 builds in the 3xTF32 chapter's tuning on
    Hopper). Ahead of the sweep and no part of it: a launch that cannot be listed, or a build that fails, is left
    to the sweep, which records why. Returns the builds' count (0 where building stopped, said by ``progress``)."""
    from convkit.op.prebuild import build_in_parallel, launch_builds

    def listed(variant: Variant, problem: ConvProblem) -> set[Any]:
        found: set[Any] = set()
        candidates = variant.candidates(problem) if variant.candidates is not None else []
        for launch in dict.fromkeys([variant.default(problem), *candidates]):
            try:
                found |= launch_builds(variant, problem, launch)
            except Exception:  # not runnable here: the sweep's row says why
                continue
        return found

    builds: set[Any] = set()
    for problem in problems:
        for variant in (v for v in variants if v.default is not None):
            try:
                builds |= listed(variant, problem) if variant.supports(problem) else set()
            except Exception:  # no launches to list: the sweep's rows say why
                continue
    ordered = sorted(builds, key=lambda b: (b.source, b.kernel, b.options))
    try:
        return build_in_parallel(ordered, max(1, min(workers, len(ordered)))) if ordered else 0
    except Exception as exc:  # a build that fails: the sweep builds the rest as it meets them, and records it
        if progress:
            progress(f"building ahead stopped ({type(exc).__name__}: {str(exc)[:300]}); the sweep builds as it goes")
        return 0
