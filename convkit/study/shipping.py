"""What the study ships inside the package for ``convkit.conv2d``: ``convkit/data/dispatch-<gpu>.json``.

From one GPU's recorded results (:mod:`convkit.core.shipped` describes the document): per problem, the
fastest row that passed its float64 check across the recorded sweeps of plain convolutions that :class:`Sources`
names (a chapter's, or any other sweep of a family's variants), convkit's or a library's, each counted no faster
than the host cost of the path a call takes to it, where recorded (:func:`host_floors`); the knobs of its tuning
tables; the fused layer's choices; and the GPU's measured ceilings. :func:`explain` lists every recorded candidate
of a problem with its time. The study's sources are its chapters' (:func:`convkit.papers.shipping_sources`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convkit.core.precision import ALLOWED, INPUT_PRECISIONS
from convkit.core.shipped import shipped, shipped_path
from convkit.op.dispatch import Choice, path_of, shipped_choices, table_key, write_table
from convkit.study.results import load_results
from convkit.study.roofline import recorded_ceilings
from convkit.study.tables import OWN_PEERS, REFERENCES, fastest_per, problem_keys, timed
from convkit.study.tuning import tuned_knobs

#: The candidates' columns.
CANDIDATE_COLUMNS = ["key", "paper", "impl", "variant", "params", "us"]


@dataclass(frozen=True)
class Sources:
    """What a shipped table is written from, in a GPU's results folder.

    Attributes:
        sweeps: each source's name (what the table's ``paper`` field says; a chapter's name) -> the experiment of
            its recorded sweep of plain convolutions.
        tunings: the tuning tables whose knobs ship.
        fused: functions giving the fused layer's choices recorded in a folder.
        host_paths: the experiment of the host cost per call of each path (:func:`host_floors`), or "".
    """

    sweeps: Mapping[str, str]
    tunings: Sequence[str] = ()
    fused: Sequence[Callable[[Path], dict[str, dict[str, Any] | None]]] = ()
    host_paths: str = ""


def host_floors(directory: Path, sources: Sources) -> dict[str, float]:
    """Per path a call from PyTorch takes (:func:`convkit.op.dispatch.path_of`), the host's microseconds per call
    recorded in ``directory`` (the median over the layers measured); ``{}`` where none is recorded.

    A call's wall time is at least what the host spends issuing it: a choice whose GPU time is below its path's
    floor waits on the host, so a path that costs the host less wins such a layer (the GPU finishes first either
    way). On the H100 the op's own kernels cost the host least, cuBLAS and PyTorch's convolution more. Under CUDA
    graphs the host cost is gone and such a choice can be a few microseconds slower on the GPU."""
    if not sources.host_paths or not (Path(directory) / f"{sources.host_paths}.csv").is_file():
        return {}
    rows = timed(load_results(Path(directory), sources.host_paths)[0])
    return {str(path): float(us) for path, us in rows.groupby("impl")["us"].median().items()}


def counted_us(candidates: Any, floors: Mapping[str, float]) -> Any:
    """Each candidate's time as the table ranks it: its GPU time (``us``), no less than the host floor of the path
    a call takes to it (:func:`host_floors`; none where ``floors`` has no such path)."""
    return candidates["us"].clip(lower=candidates["impl"].map(lambda impl: floors.get(path_of(impl), 0.0)))


def recorded_candidates(directory: Path, sources: Sources) -> Any:
    """Every checked and timed row of the ``sources``' sweeps in ``directory`` that ``convkit.conv2d`` can run (not
    the peers of their own, :data:`convkit.study.tables.OWN_PEERS`, nor the reference lines,
    :data:`~convkit.study.tables.REFERENCES`), with its source and problem key (a pandas
    DataFrame; empty where nothing is recorded)."""
    import pandas as pd

    frames = []
    for name, experiment in sources.sweeps.items():
        if not (Path(directory) / f"{experiment}.csv").is_file():
            continue
        frame = timed(load_results(Path(directory), experiment)[0])
        frame = frame[~frame["impl"].isin((*OWN_PEERS, *REFERENCES))]
        if not frame.empty:
            frames.append(frame.assign(paper=name, key=problem_keys(frame)))
    if not frames:
        return pd.DataFrame(columns=CANDIDATE_COLUMNS)
    return pd.concat(frames, ignore_index=True)[CANDIDATE_COLUMNS]


def table_from_results(directory: Path, sources: Sources) -> dict[str, Choice]:
    """Per problem recorded in ``directory``, the fastest checked implementation (convkit's or a library's; its GPU
    time counted as no less than its path's host floor, :func:`host_floors`) for the default input precision, and
    under ``<key>@<precision>`` the fastest a narrower request allows where the default's is not one
    (:func:`convkit.op.dispatch.table_key`)."""
    from convkit.families import precision_of

    candidates = recorded_candidates(directory, sources)
    rows = zip(candidates["impl"], candidates["variant"], strict=True)
    candidates = candidates.assign(precision=[precision_of(impl, variant) for impl, variant in rows])
    # ranked by the wall time a call can take, max(GPU time, its path's host floor); the GPU time breaks ties
    candidates = candidates.sort_values("us", kind="stable")
    candidates = candidates.assign(gpu_us=candidates["us"], us=counted_us(candidates, host_floors(directory, sources)))
    out: dict[str, Choice] = {}
    for request in INPUT_PRECISIONS:  # the default first
        allowed = ALLOWED[request]
        for r in fastest_per(candidates[candidates["precision"].isin(allowed)], ["key"]).itertuples():
            default = out.get(r.key)
            if default is None or default.precision not in allowed:
                out[table_key(r.key, request)] = Choice(
                    r.impl, r.variant, "" if r.impl != "convkit" else str(r.params),
                    r.paper if r.impl == "convkit" else "", float(r.gpu_us), precision=r.precision)  # fmt: skip
    return out


def knobs_from_results(directory: Path, sources: Sources) -> dict[str, dict[str, dict[str, Any]]]:
    """The knobs of the ``sources``' tuning tables in ``directory``: per variant, per problem key, the knobs (a JSON
    object)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for tuning in sources.tunings:
        for (label, pad, stride, variant), knobs in tuned_knobs(directory, tuning).items():
            out.setdefault(variant, {})[f"{label}-p{pad}-s{stride}"] = dict(knobs)
    return {variant: dict(sorted(by_key.items())) for variant, by_key in sorted(out.items())}


def fused_from_results(directory: Path, sources: Sources) -> dict[str, dict[str, Any] | None]:
    """The fused layer's choices recorded in ``directory`` (see :attr:`convkit.papers.paper.Paper.fused_choices`)."""
    return {k: v for choices in sources.fused for k, v in sorted(choices(directory).items())}


def figures_from_results(directory: Path) -> dict[str, float] | None:
    """The GPU's measured ceilings in ``directory`` (NaN left out: JSON has none), or None."""
    summary = recorded_ceilings(directory)
    return None if summary is None else {k: v for k, v in summary.items() if not math.isnan(v)}


def write_shipped_table(directory: Path, sources: Sources) -> Path:
    """Write the package's dispatch document of the GPU whose results are in ``directory``, from ``sources``;
    returns its path."""
    gpu = Path(directory).name
    path = shipped_path(gpu)
    write_table(path, gpu, table_from_results(directory, sources), knobs=knobs_from_results(directory, sources),
                fused=fused_from_results(directory, sources), figures=figures_from_results(directory),
                host_floors=host_floors(directory, sources))  # fmt: skip
    shipped.cache_clear()
    shipped_choices.cache_clear()
    return path


def explain(problem: Any, directory: Path, sources: Sources) -> Any:
    """Every recorded implementation of ``problem`` in ``directory`` (of ``sources``) with its median time, in the
    order the shipped table ranks them: fastest first, where the host cost of each path is recorded by the time it
    is counted as (``counted us``: no less than its path's floor, :func:`host_floors`), then by its own."""
    rows = recorded_candidates(directory, sources)
    mine = rows[rows["key"] == problem.key].sort_values("us", kind="stable")
    floors = host_floors(directory, sources)
    if floors:
        mine = mine.assign(**{"counted us": counted_us(mine, floors)}).sort_values("counted us", kind="stable")
    return mine.drop(columns="key").reset_index(drop=True)
