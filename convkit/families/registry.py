"""The registry's records, in the library: a kernel as the op and the benchmark see it (how to run it, where it
applies, its launch knobs), and a kernel family.

A :class:`Variant` is declared once, in its kernel family (``convkit.families``), and carries its candidate
launches beside the kernel, as Triton keeps its configs beside the kernel. Which launch it runs on a problem
is its heuristic default unless a :data:`KnobTable` says what a tuning run found fastest: the
study's tuning table of the sweep's own folder (:func:`convkit.study.tuning.knob_table`) or the knobs the
package ships for the op (:func:`convkit.core.shipped.knob_table`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.core.reference import DIRECT_TOLERANCE
from convkit.cuda.launch import Launch

#: The tuned knobs of a variant (by name) on a problem, or None where nothing was tuned for it.
KnobTable = Callable[[ConvProblem, str], "dict[str, Any] | None"]


def first_of(tables: Sequence[KnobTable]) -> KnobTable:
    """One knob table of several: the first that has knobs for a (problem, variant)."""

    def lookup(problem: ConvProblem, variant: str) -> dict[str, Any] | None:
        return next((found for table in tables if (found := table(problem, variant)) is not None), None)

    return lookup


def called_when_run(module: str, function: str) -> Callable[[], None]:
    """``module.function``, imported only when it is called: a family's edge launches (``<family>.edges``) import
    what the family's package need not load, and may import other families."""

    def call() -> None:
        getattr(importlib.import_module(module), function)()

    return call


def _everywhere(problem: ConvProblem) -> bool:
    return True


@dataclass(frozen=True)
class Variant:
    """A kernel as the benchmark and the op see it: its launch on a problem, and how to run it.

    ``run(args, problem, launch)`` enqueues the kernel on ``args`` (a :class:`convkit.cuda.operands.ConvArgs`: it
    writes ``args.out``, adds ``args.bias`` where given, which only a launch that :meth:`adds_bias
    <convkit.cuda.launch.Launch.adds_bias>` is given, and keeps its temporaries in ``args.workspace``, of the launch's
    ``workspace_bytes``) with ``launch`` (a :class:`convkit.cuda.launch.Launch`; None for a library peer, which has
    no launch and takes x, w and out only). ``default(problem)``
    gives its heuristic launch there, ``candidates(problem)`` the launches a tuning run measures, and
    ``launch_from(params)`` reads a recorded launch back (its ``to_params``, a row's ``params`` or a table's),
    rejecting a knob it does not have. Where it runs is said once, by its launch (:meth:`not_supported_reasons`);
    ``applies_to`` narrows it to a domain no launch checks (a peer's, or a family's problems such as "same"
    padding that its launcher checks on the arrays). ``impl`` is ``"convkit"`` for the study's kernels and the
    library's name for a peer (``"cupyx"``); ``precision`` is how it multiplies (:mod:`convkit.core.precision`:
    ``"ieee"``, FP32 FMA, or ``"tf32x3"``).
    """

    name: str
    run: Callable[..., Any]
    default: Callable[[ConvProblem], Launch] | None = None
    candidates: Callable[[ConvProblem], list[Launch]] | None = None
    launch_from: Callable[[Mapping[str, Any]], Launch] | None = None
    tolerance: float = DIRECT_TOLERANCE
    applies_to: Callable[[ConvProblem], bool] = _everywhere
    impl: str = "convkit"
    precision: str = "ieee"

    def not_supported_reasons(self, problem: ConvProblem) -> list[str]:
        """Why it does not run ``problem`` (empty: it does): outside :attr:`applies_to`, or what its default launch
        cannot implement there (:meth:`convkit.cuda.launch.Launch.not_supported_reasons`)."""
        if not self.applies_to(problem):
            return [f"{self.name} does not apply to {problem.key}"]
        if self.default is None:
            return []
        try:
            return self.default(problem).not_supported_reasons(problem)
        except ValueError as exc:  # no launch at all there
            return [str(exc)]

    def supports(self, problem: ConvProblem) -> bool:
        """Whether it runs ``problem``: no :meth:`not_supported_reasons`."""
        return not self.not_supported_reasons(problem)

    def launch(self, problem: ConvProblem, tuned: KnobTable | None = None) -> Launch | None:
        """The launch it runs ``problem`` with: ``tuned``'s where this variant tunes and the table has one, else
        :attr:`default`'s; None for a peer."""
        found = tuned(problem, self.name) if tuned is not None and self.candidates is not None else None
        if found is not None:
            return self.launch_of(found)
        return self.default(problem) if self.default is not None else None

    def knobs(self, problem: ConvProblem, tuned: KnobTable | None = None) -> dict[str, Any]:
        """:meth:`launch`'s knobs, as a row's ``params`` records them (none for a peer)."""
        found = self.launch(problem, tuned)
        return found.to_params() if found is not None else {}

    def launch_of(self, params: Mapping[str, Any]) -> Launch | None:
        """The launch recorded as ``params``; None for a peer, which takes none (ValueError if given some)."""
        if self.launch_from is None:
            if params:
                raise ValueError(f"{self.name} takes no launch knobs, got {dict(params)}")
            return None
        return self.launch_from(params)


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
    ``sample_problems``: small problems no block or tile divides, on which the generic GPU test checks every variant
    against float64; ``edge_check``: launches its kernels on edge shapes (no block or tile divides them, unaligned
    pointers) and checks each output against float64, raising AssertionError: compute-sanitizer's driver
    (``scripts/edge_launch.py``); ``tuned_on_first_use``: whether ``convkit.conv2d``'s first-use tuner
    (:mod:`convkit.op.tune`) measures its variants on a problem no table records (the families whose kernels run
    every filter, stride and padding)."""

    name: str
    variants: tuple[Variant, ...]
    peers: tuple[Variant, ...] = ()
    sources: tuple[str, ...] = ()
    words: Mapping[str, str] = field(default_factory=dict, compare=False)  # a dict: out of the hash
    sample_problems: tuple[ConvProblem, ...] = ()
    edge_check: Callable[[], None] | None = field(default=None, compare=False)
    tuned_on_first_use: bool = False
