"""Which implementation runs a convolution, per GPU and problem: the dispatch table of ``convkit.conv2d``.

A :class:`Choice` names the fastest checked implementation of one problem on one GPU: a convkit kernel
(its paper, variant and launch knobs) or a library (cuDNN's algorithm, cuBLAS, PyTorch). Choices come from:

1. the tables shipped inside the package (``convkit/data/dispatch-<gpu>.json``), written by
   :func:`write_shipped_table` from every chapter's recorded sweep of that GPU: per problem, the fastest row
   that passed its float64 check, convkit's or a library's;
2. the user's cache (:func:`cache_path`: per GPU and convkit version, under ``$XDG_CACHE_HOME``), where
   choices tuned on first use are kept; written atomically, and a file that cannot be read is ignored with a
   warning rather than trusted.

:func:`explain` lists every recorded candidate of a problem with its time, fastest first.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from convkit._version import __version__
from convkit.core.problem import ConvProblem
from convkit.study.results import replace_text

#: Rows of a sweep that never run a plain convolution (fused layers have their own op).
NOT_CONVOLUTIONS = frozenset({"toy_cnn", "ceilings"})


@dataclass(frozen=True)
class Choice:
    """The implementation that runs one problem: ``impl`` (``convkit`` or the library), the paper a convkit
    kernel belongs to, its ``variant`` and launch ``params`` (JSON text), its median time and where the
    choice came from (``recorded``, ``tuned`` or ``heuristic``)."""

    impl: str
    variant: str
    params: str = ""
    paper: str = ""
    time_us: float = math.nan
    source: str = "recorded"


def key(problem: ConvProblem) -> str:
    """A problem's key in every dispatch table: its label, padding and stride."""
    return f"{problem.label}-p{problem.pad}-s{problem.stride}"


def problem_of(k: str) -> ConvProblem:
    """The problem of a dispatch-table key (:func:`key`'s inverse)."""
    label, pad, stride = k.rsplit("-", 2)
    return ConvProblem.from_label(label, pad=int(pad.removeprefix("p")), stride=int(stride.removeprefix("s")))


def recorded_candidates(directory: Path) -> Any:
    """Every checked and timed row of every chapter's sweep in ``directory`` that runs a plain convolution,
    with its paper and problem key (a pandas DataFrame; empty where nothing is recorded)."""
    import pandas as pd

    from convkit.papers import PAPERS
    from convkit.study.results import load_results
    from convkit.study.tables import timed

    frames = []
    for paper in PAPERS:
        if paper.name in NOT_CONVOLUTIONS or not (Path(directory) / f"{paper.experiment}.csv").is_file():
            continue
        frame = timed(load_results(Path(directory), paper.experiment)[0])
        if frame.empty:
            continue
        frame = frame.assign(paper=paper.name)  # the key as key() writes it, from the row's label
        frame["key"] = frame["label"] + "-p" + frame["pad"].astype(str) + "-s" + frame["stride"].astype(str)
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=["key", "paper", "impl", "variant", "params", "us"])
    return pd.concat(frames, ignore_index=True)[["key", "paper", "impl", "variant", "params", "us"]]


def table_from_results(directory: Path) -> dict[str, Choice]:
    """Per problem recorded in ``directory``, the fastest checked implementation (convkit's or a library's)."""
    rows = recorded_candidates(directory)
    if rows.empty:
        return {}
    best = rows.loc[rows.groupby("key")["us"].idxmin()]
    return {
        r.key: Choice(r.impl, r.variant, "" if r.impl != "convkit" else str(r.params),
                      r.paper if r.impl == "convkit" else "", float(r.us))
        for r in best.itertuples()
    }  # fmt: skip


def _document(gpu: str, choices: dict[str, Choice]) -> str:
    doc = {"convkit": __version__, "gpu": gpu, "choices": {k: asdict(c) for k, c in sorted(choices.items())}}
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def read_table(path: Path, *, gpu: str | None = None) -> dict[str, Choice]:
    """The choices of a dispatch table file; ``{}`` with a warning where it is unreadable, of another convkit
    version or (``gpu``) of another GPU, so that a damaged or stale file is never trusted."""
    if not Path(path).is_file():
        return {}
    try:
        doc = json.loads(Path(path).read_text())
        if doc.get("convkit") != __version__ or (gpu is not None and doc.get("gpu") != gpu):
            warnings.warn(f"ignoring {path}: written for convkit {doc.get('convkit')} on {doc.get('gpu')}",
                          stacklevel=2)  # fmt: skip
            return {}
        return {k: Choice(**v) for k, v in doc["choices"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        warnings.warn(f"ignoring the unreadable dispatch table {path}: {error}", stacklevel=2)
        return {}


def write_table(path: Path, gpu: str, choices: dict[str, Choice]) -> None:
    """Write a dispatch table atomically (a temporary file and a rename: a kill leaves the old or the new)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    replace_text(Path(path), _document(gpu, choices))


def shipped_table_path(gpu: str) -> Path:
    """Where the package carries the dispatch table of ``gpu`` (a results folder name)."""
    return Path(__file__).resolve().parents[1] / "data" / f"dispatch-{gpu}.json"


def write_shipped_table(directory: Path) -> Path:
    """Write the package's dispatch table of the GPU whose results are in ``directory``; returns its path."""
    gpu = Path(directory).name
    path = shipped_table_path(gpu)
    write_table(path, gpu, table_from_results(directory))
    return path


def cache_path(gpu: str) -> Path:
    """The user's cache of choices tuned on this machine, per GPU and convkit version."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "convkit" / f"dispatch-{gpu}-{__version__}.json"


def lookup(problem: ConvProblem, gpu: str) -> Choice | None:
    """The choice for ``problem`` on ``gpu``: the user's cache first (tuned here), then the shipped table."""
    k = key(problem)
    for table in (read_table(cache_path(gpu), gpu=gpu), read_table(shipped_table_path(gpu), gpu=gpu)):
        if k in table:
            return table[k]
    return None


def explain(problem: ConvProblem, directory: Path) -> Any:
    """Every recorded implementation of ``problem`` in ``directory`` with its median time, fastest first."""
    rows = recorded_candidates(directory)
    mine = rows[rows["key"] == key(problem)].sort_values("us", kind="stable")
    return mine.drop(columns="key").reset_index(drop=True)


def tune(problem: ConvProblem, gpu: str) -> Choice:
    """Check and time every registered kernel that runs ``problem`` (at its heuristic or tuned launch), every
    cuDNN algorithm and the library peers, once, on fresh random inputs against float64; keep the fastest that
    passed in the user's cache (:func:`cache_path`) and return it. Needs the GPU."""
    from convkit.bench.measure import Kernels, cases, measure_problem
    from convkit.papers import PAPERS
    from convkit.study import tuning

    papers = [p for p in PAPERS if p.name not in NOT_CONVOLUTIONS]
    kernels = Kernels(tuple(v for p in papers for v in p.variants), tuple(v for p in papers for v in p.peers))
    owner = {v.name: p.name for p in papers for v in (*p.variants, *p.peers)}
    todo = cases(problem, kernels.variants, cudnn=True, pytorch=False, peers=kernels.peers)
    rows = [r for r in measure_problem(problem, todo, kernels, timing=tuning.TIMING) if r["status"] == "ok"]
    if not rows:
        raise RuntimeError(f"no implementation passed its check on {key(problem)}")
    best = min(rows, key=lambda r: float(r["time_ms_median"]))
    mine = best["impl"] == "convkit"
    choice = Choice(best["impl"], best["variant"], best["params"] if mine else "", owner.get(best["variant"], "")
                    if mine else "", 1e3 * float(best["time_ms_median"]), "tuned")  # fmt: skip
    path = cache_path(gpu)
    write_table(path, gpu, read_table(path, gpu=gpu) | {key(problem): choice})
    return choice
