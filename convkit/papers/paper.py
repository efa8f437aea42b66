"""What a chapter of the study declares about itself, once, in its folder under ``convkit/papers/``.

A :class:`Paper` is to the study what an OpInfo is to PyTorch's tests: the one record that the
command line, the notebooks' measuring step, the ncu profiler, the generic GPU test and the
sanitizer's edge launches iterate, so that a new paper is its folder plus one line in
``convkit/papers/__init__.py`` (and one in ``book/_toc.yml``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from convkit.bench.measure import measure_problem, variant_checks
from convkit.core.problem import ConvProblem
from convkit.families.registry import Family, Kernels, KnobTable, Variant
from convkit.op.cases import Case, cases, float64_reference, prepare_case, random_inputs, tolerance_for
from convkit.study.claims import Claim


class ChapterSweep(Protocol):
    """A chapter's measuring step: tune, then sweep into ``<directory>/<experiment>.csv``, resumable."""

    def __call__(
        self, directory: Path, *, quick: bool = False, experiment: str = ..., progress: Any = ..., **options: Any
    ) -> None: ...


@dataclass(frozen=True)
class ProfiledCase:
    """One case the profiler checks and then launches once between its markers.

    ``entry`` names it in the profile's rows (table, config, label, impl, variant, params);
    ``prepare()`` gives ``(run, check_run)`` as for :func:`convkit.bench.measure.check_and_time`, or a refusal
    saying why it cannot run; ``out`` is what the checked run writes, ``ref`` its float64 value.
    """

    entry: dict[str, Any]
    prepare: Callable[[], Any]
    out: Any
    ref: Any
    tolerance: float


@dataclass(frozen=True)
class Profile:
    """A chapter's ncu profile: its results experiment, the metrics beyond the launch shape and time, and
    the cases to profile (built in the profiled process, on the GPU, at the knobs tuned in the folder the
    profile is recorded in)."""

    experiment: str
    cases: Callable[[Path], Iterable[ProfiledCase]]
    metrics: tuple[str, ...] = ()


#: The experiment suffix of a chapter's run-to-run sample (:meth:`Paper.measure_repeat`).
REPEAT_SUFFIX = "_repeat"

#: The book's findings table: one row per claim of a paper, its number beside ours.
FINDING_COLUMNS: tuple[str, ...] = (
    "paper", "claim", "paper's number", "paper's design on the H100", "our best on the H100",
    "best library on the H100", "efficiency", "what changed",
)  # fmt: skip


def convolution_cases(
    named: Iterable[tuple[str, str, ConvProblem]], kernels: Kernels, *, cudnn: bool, tuned: KnobTable | None = None
) -> Iterator[ProfiledCase]:
    """A profile's cases on plain convolutions: on each (table, config, problem) of ``named``, fresh inputs
    and their float64 reference, then every variant of ``kernels`` at its own launch, every cuDNN forward
    algorithm (with ``cudnn``; no PyTorch: its kernels are cuDNN's) and the peers, in that order."""
    for table, config, problem in named:
        x, w, y = random_inputs(problem)
        ref = float64_reference(problem, x, w)
        for case in cases(problem, kernels.variants, cudnn=cudnn, pytorch=False, peers=kernels.peers, tuned=tuned):
            entry = {"table": table, "config": config, "label": problem.label, "impl": case.impl,
                     "variant": case.variant, "params": case.params}  # fmt: skip
            prepare = prepare_case(problem, case, kernels, x, w, y)
            yield ProfiledCase(entry, prepare, y, ref, tolerance_for(case, kernels))


@dataclass(frozen=True)
class Paper:
    """A chapter: the paper it reproduces, its kernels, what it measures and how it is checked.

    Attributes:
        name: the folder, the command line's name and the prefix of its results (``"lu2020"``).
        title: how the book's table of contents names it.
        notebook: its notebook's stem (``"02_lu2020"``).
        experiment: the results experiment its sweep writes (``"lu2020"``).
        measure: tunes, then sweeps (:class:`ChapterSweep`).
        family: its kernels (:mod:`convkit.families`): the variants, the library peers measured beside them
            besides cuDNN and PyTorch, the ``kernels/*.cu`` sources.
        tuning: the experiment of its tuning table, if it tunes.
        convolutions: whether its sweep's rows are plain convolutions (the op's dispatch table is written from
            those; the fused layer's and the ceilings' are not).
        problems: the problems its sweep measures (``quick``: the subset), for ``convkit bench --suite``.
        findings: the rows it adds to the book's findings table (:data:`FINDING_COLUMNS`), computed from the
            results recorded in a folder.
        profile: its ncu profile, if it has one.
        edge_check: launches its kernels on edge shapes and checks them (compute-sanitizer's driver).
        sample_checks: (problem, cases) for the generic GPU test, given the knobs tuned on this GPU; default:
            each variant on each sample problem it supports, at its knobs.
        measure_rows: checks and times cases of one problem (default :func:`convkit.bench.measure.measure_problem`
            over ``variants`` and ``peers``); a chapter whose cases are not plain convolutions gives its own.
        fused_choices: the fused layer's choices per problem key, from the sweep recorded in a folder, for
            ``convkit.conv2d_relu_pool`` (:mod:`convkit.core.shipped`), if it has a fused layer.
        repeat: measures its run-to-run sample into ``<experiment>_repeat`` (:meth:`measure_repeat`); default: its
            quick subset, as its sweep measures it.
        claims: its findings as checked claims (:mod:`convkit.study.claims`).
        measured_after: the chapters whose tuning tables its sweep reads (measured before it where chapters are
            measured side by side, :mod:`convkit.book.node`).
    """

    name: str
    title: str
    notebook: str
    experiment: str
    measure: ChapterSweep
    family: Family | None = None
    tuning: str | None = None
    convolutions: bool = True
    problems: Callable[[bool], list[ConvProblem]] | None = None
    findings: Callable[[Path], list[dict[str, str]]] | None = None
    profile: Profile | None = None
    edge_check: Callable[[], None] | None = None
    sample_checks: Callable[[KnobTable | None], Iterable[tuple[ConvProblem, list[Case]]]] | None = None
    measure_rows: Callable[..., Iterator[dict[str, Any]]] | None = None
    fused_choices: Callable[[Path], dict[str, dict[str, Any] | None]] | None = None
    repeat: Callable[[Path], Any] | None = None
    claims: Callable[[], list[Claim]] | None = None
    measured_after: tuple[str, ...] = ()
    kernels: Kernels = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kernels", Kernels(self.variants, self.peers))

    @property
    def variants(self) -> tuple[Variant, ...]:
        """Its family's kernels (none for a chapter without kernels)."""
        return self.family.variants if self.family is not None else ()

    @property
    def peers(self) -> tuple[Variant, ...]:
        return self.family.peers if self.family is not None else ()

    def sample_problems(self) -> list[ConvProblem]:
        """Its family's sample problems (:attr:`convkit.families.registry.Family.sample_problems`)."""
        return list(self.family.sample_problems) if self.family is not None else []

    @property
    def sources(self) -> tuple[str, ...]:
        return self.family.sources if self.family is not None else ()

    def tuned(self, directory: Path) -> KnobTable | None:
        """Its tuning table in ``directory`` as a knob table (None where it does not tune)."""
        from convkit.study.tuning import knob_table

        return knob_table(directory, self.tuning) if self.tuning else None

    def checks(self, tuned: KnobTable | None = None) -> list[tuple[ConvProblem, list[Case]]]:
        """What the generic GPU test checks: :attr:`sample_checks`, or each variant on the sample problems, at
        the knobs of ``tuned`` (see :meth:`tuned`) where it has them."""
        if self.sample_checks is not None:
            return list(self.sample_checks(tuned))
        return list(variant_checks(self.variants, self.sample_problems(), tuned))

    def build_first(self, quick: bool, workers: int) -> int:
        """Every kernel build its variants' default launches and tuning candidates need on its problems (``quick``:
        the subset), built in ``workers`` processes before a sweep times them (:func:`convkit.study.sweep.build_first`);
        the builds' count (none for a chapter without kernels or problems)."""
        from convkit.study.sweep import build_first

        return build_first(self.problems(quick), self.variants, workers) if self.problems is not None else 0

    def measure_repeat(self, directory: Path) -> None:
        """Measure the chapter's sample again, the same cases at the launches tuned in ``directory``, into
        ``<experiment>_repeat``: run in a process of its own after the sweep, it gives the run-to-run spread within
        which two times are a tie, and each claim's tolerance. Default sample: the quick subset (every table of the
        chapter has rows in it)."""
        if self.repeat is not None:
            self.repeat(directory)
        else:
            self.measure(directory, quick=True, experiment=self.experiment + REPEAT_SUFFIX)

    def rows(self, problem: ConvProblem, todo: list[Case], **measuring: Any) -> Iterator[dict[str, Any]]:
        """Check and time ``todo`` on ``problem`` (``seed``, ``timing``) the way this chapter measures."""
        if self.measure_rows is not None:
            return self.measure_rows(problem, todo, **measuring)
        return measure_problem(problem, todo, self.kernels, **measuring)
