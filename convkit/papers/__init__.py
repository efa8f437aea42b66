"""The registry: every chapter of the study, in the book's reading order.

The only list of papers. Each entry is the :class:`convkit.papers.paper.Paper` its folder declares; only the
top of the stack (the command line, the notebooks' chapter API, the profiler, the book) iterates it.
A new paper is its folder, one line here and one line in ``book/_toc.yml``.
"""

from __future__ import annotations

from pathlib import Path

from convkit.families.registry import KnobTable, first_of
from convkit.papers import baseline, ceilings, chang2022, cuconv, fp32, lu2020, tf32x3, toy_cnn
from convkit.papers.paper import Paper
from convkit.study.shipping import Sources

PAPERS: tuple[Paper, ...] = (
    ceilings.PAPER,
    baseline.PAPER,
    lu2020.PAPER,
    cuconv.PAPER,
    toy_cnn.PAPER,
    chang2022.PAPER,
    fp32.PAPER,
    tf32x3.PAPER,
)


def paper(name: str) -> Paper:
    """The registered paper called ``name``; raises ValueError listing the names."""
    for entry in PAPERS:
        if entry.name == name:
            return entry
    raise ValueError(f"no paper {name!r}; the study has {[p.name for p in PAPERS]}")


def names() -> list[str]:
    """Every paper's name, in reading order."""
    return [p.name for p in PAPERS]


def shipping_sources() -> Sources:
    """What the study ships for ``convkit.conv2d`` (:mod:`convkit.study.shipping`): every chapter's sweep of plain
    convolutions and the summary's of the networks' layers no chapter measures, every chapter's tuning table, the
    fused layer's choices, the summary's host cost of each path a call takes."""
    from convkit.papers.summary import network_layers, overhead

    chapters = {p.name: p.experiment for p in PAPERS if p.convolutions}
    return Sources(sweeps=chapters | {"summary": network_layers.EXPERIMENT},
                   tunings=tuple(p.tuning for p in PAPERS if p.tuning),
                   fused=tuple(p.fused_choices for p in PAPERS if p.fused_choices is not None),
                   host_paths=overhead.PATHS_EXPERIMENT)  # fmt: skip


def tuned_knobs(directory: Path) -> KnobTable:
    """Every chapter's tuning table in ``directory`` as one knob table (variant names are unique)."""
    return first_of([table for p in PAPERS if (table := p.tuned(directory)) is not None])
