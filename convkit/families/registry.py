"""The registry's records, in the library: a kernel as the op and the benchmark see it (how to run it, where it
applies, its launch knobs), and a kernel family.

A :class:`Variant` is declared once, in its kernel family (``convkit.families``), and carries its knob
candidates beside the kernel, as Triton keeps its configs beside the kernel. Which knobs it runs with on a
problem is its heuristic default unless a :data:`KnobTable` says what a tuning run found fastest: the
study's tuning table of the sweep's own folder (:func:`convkit.study.tuning.knob_table`) or the knobs the
package ships for the op (:func:`convkit.core.shipped.knob_table`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.core.reference import DIRECT_TOLERANCE

#: The tuned knobs of a variant (by name) on a problem, or None where nothing was tuned for it.
KnobTable = Callable[[ConvProblem, str], "dict[str, Any] | None"]


def first_of(tables: Sequence[KnobTable]) -> KnobTable:
    """One knob table of several: the first that has knobs for a (problem, variant)."""

    def lookup(problem: ConvProblem, variant: str) -> dict[str, Any] | None:
        return next((found for table in tables if (found := table(problem, variant)) is not None), None)

    return lookup


def _no_knobs(problem: ConvProblem) -> dict[str, Any]:
    return {}


def _everywhere(problem: ConvProblem) -> bool:
    return True


@dataclass(frozen=True)
class Variant:
    """A kernel as the benchmark sees it: its launch knobs for a problem, and how to run it.

    ``run(x, w, problem, out, **knobs)`` enqueues the kernel writing ``out``; ``default_knobs(problem)``
    gives its heuristic launch there and ``candidates(problem)`` the knob sets a tuning run measures;
    :meth:`knobs` is what it runs with, recorded in a row's ``params``. ``impl`` is ``"convkit"`` for the
    study's kernels and the library's name for a peer (``"cupyx"``); ``precision`` is how it multiplies
    (:mod:`convkit.core.precision`: ``"ieee"``, FP32 FMA, or ``"tf32x3"``).
    """

    name: str
    run: Callable[..., Any]
    default_knobs: Callable[[ConvProblem], dict[str, Any]] = _no_knobs
    candidates: Callable[[ConvProblem], list[dict[str, Any]]] | None = None
    tolerance: float = DIRECT_TOLERANCE
    supports: Callable[[ConvProblem], bool] = _everywhere
    impl: str = "convkit"
    precision: str = "ieee"

    def knobs(self, problem: ConvProblem, tuned: KnobTable | None = None) -> dict[str, Any]:
        """The knobs it runs ``problem`` with: ``tuned``'s where this variant tunes and the table has them,
        else :attr:`default_knobs`."""
        found = tuned(problem, self.name) if tuned is not None and self.candidates is not None else None
        return found if found is not None else self.default_knobs(problem)


@dataclass(frozen=True)
class Kernels:
    """The variants and peers one measurement knows, by name (what a row's ``variant`` names)."""

    variants: Sequence[Variant] = ()
    peers: Sequence[Variant] = ()
    by_name: dict[str, Variant] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", {v.name: v for v in (*self.variants, *self.peers)})

    def __getitem__(self, name: str) -> Variant:
        return self.by_name[name]


@dataclass(frozen=True)
class Family:
    """A kernel family: one ``kernels/<source>.cu`` file's kernels as variants, and the library peers measured
    beside them on the problems only they serve (impl other than ``convkit``). ``convkit.conv2d`` knows its
    kernels through these records alone (:data:`convkit.families.FAMILIES`); a chapter imports its family.

    ``words``: each variant's method in words, the book's one name for it (its notation page lists them);
    ``tuned_on_first_use``: whether ``convkit.conv2d``'s first-use tuner (:mod:`convkit.op.tune`) measures its
    variants on a problem no table records (the families whose kernels run every filter, stride and padding)."""

    name: str
    variants: tuple[Variant, ...]
    peers: tuple[Variant, ...] = ()
    sources: tuple[str, ...] = ()
    words: Mapping[str, str] = field(default_factory=dict, compare=False)  # a dict: out of the hash
    tuned_on_first_use: bool = False
