"""The concurrency soak: ``convkit.conv2d`` where inference servers put it, every output against float64:
``results/<gpu>/concurrency.csv`` (columns problem, implementation, mode, calls, wrong, hung).

Modes, each on inputs of its own per thread or graph (three sets each, in turn), every output poisoned with NaN
before its memory is handed out again:

- ``threads4``: 4 threads, each on its own PyTorch stream, :data:`CALLS` calls each;
- ``graphs2``, ``graphs4``: 2 or 4 CUDA graphs, each captured in a memory pool of its own (all on PyTorch's one
  default capture stream), replayed at once on separate streams, :data:`REPLAYS` replays each with new inputs;
- ``cupy_threads4``: 4 threads on 4 CuPy streams with CuPy arrays (cuDNN's algorithms run as the table names
  them here; on tensors the library's choices run PyTorch's cuDNN);
- ``compile_threads2``: a ``torch.compile``d patched ResNet-18 at batch 1 (two of its layers are split
  launches) called from two threads, each on its own stream.

The implementations are every one the shipped table of this GPU names (``impl:variant``), on at least three
problems each (one shipped for a narrower request alone included): its own shipped problems first (the smallest,
middle and largest that fit), then problems no other case uses, forced to it through the user's cache; the
channel-split launches on every problem they ship
for. PyTorch's ``F.conv2d`` runs every problem in the PyTorch modes as the control (``control:F.conv2d``; the
unpatched compiled network in the network mode): a failing control is a harness bug, not a finding.

Each case runs in a worker process the driver watches: a case that reports nothing for :data:`CASE_TIMEOUT_S`
(:data:`COMPILE_TIMEOUT_S` for a network) is killed and recorded as hung, and a new worker goes on with the
cases left. The sweep resumes: a case recorded is not run again, none is recorded twice.

The plan is here, the modes a worker runs in :mod:`.modes`, the driver in :mod:`.driver`:
``python -m convkit.papers.summary.concurrency [results folder] [--short] [--budget-s S]``
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.core.reference import DIRECT_TOLERANCE, TRANSFORM_TOLERANCE

EXPERIMENT = "concurrency"
COLUMNS = ("experiment", "problem", "implementation", "mode", "calls", "wrong", "hung", "max_rel_err", "note",
           "run_id")  # fmt: skip
KEY_COLUMNS = ("problem", "implementation", "mode")
#: Calls per thread, replays per graph (the short form's in :data:`SHORT`).
CALLS, REPLAYS, NETWORK_CALLS = 50, 10, 20
#: Seconds a case may go without reporting before its worker is killed and the case recorded as hung.
CASE_TIMEOUT_S, COMPILE_TIMEOUT_S = 60.0, 420.0
TORCH_MODES = ("threads4", "graphs2", "graphs4")
MODES = (*TORCH_MODES, "cupy_threads4")
NETWORK = "resnet18-b1"
NETWORK_MODE = "compile_threads2"
CONTROL, PATCHED = "control:F.conv2d", "convkit.patch"
#: Problems a case may use: inputs, filters and outputs within this many bytes (a thread holds 3 sets).
MAX_PROBLEM_BYTES = 48 << 20
#: The short form (a GPU test): the two layers whose split launches hung on two streams, a layer with scratch
#: (Winograd) and one run by cuBLAS, each in two modes, the control beside the first, CuPy threads on the second.
SHORT = {"calls": 10, "replays": 4}
#: What starts a worker's report line on its stdout (other lines are the op's own).
MESSAGE = "@@soak "


@dataclass(frozen=True)
class SoakCase:
    """One row of the soak: a problem key (or :data:`NETWORK`), an implementation and a mode."""

    problem: str
    implementation: str
    mode: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.problem, self.implementation, self.mode)

    @property
    def timeout_s(self) -> float:
        return COMPILE_TIMEOUT_S if self.mode == NETWORK_MODE else CASE_TIMEOUT_S


def implementation_name(choice: Any) -> str:
    """How the soak names a dispatch choice: ``impl:variant`` (``convkit:chang_multi_async``, ``cudnn:FFT``)."""
    return f"{choice.impl}:{choice.variant}"


def bar(implementation: str) -> float:
    """The relative error an output may have against float64: a convkit kernel's own bar, the transforms' for
    cuDNN's FFT and Winograd and for PyTorch's autotuned cuDNN (it may pick either), the direct methods'
    otherwise."""
    from convkit.families import variants_by_name
    from convkit.libs.cudnn import TRANSFORM_ALGORITHMS

    impl, variant = implementation.split(":", 1)
    if impl == "convkit":
        return variants_by_name()[variant].tolerance
    transform = variant in TRANSFORM_ALGORITHMS if impl == "cudnn" else impl in ("pytorch", "control")
    return TRANSFORM_TOLERANCE if transform else DIRECT_TOLERANCE


def _fits(problem: ConvProblem) -> bool:
    elements = math.prod(problem.input_shape) + math.prod(problem.filter_shape) + math.prod(problem.output_shape)
    return 4 * elements <= MAX_PROBLEM_BYTES


def _spread(keys: list[str]) -> list[str]:
    """The smallest, middle and largest of ``keys`` (sorted by work), without repeats."""
    if len(keys) <= 3:
        return keys
    return list(dict.fromkeys((keys[0], keys[len(keys) // 2], keys[-1])))


def is_split(choice: Any) -> bool:
    """Whether a choice is a launch whose channel splits sum into each tile in one launch (split counters)."""
    return choice.variant.startswith("chang_multi") and json.loads(choice.params or "{}").get("split", 1) > 1


def soak_plan(
    choices: dict[str, Any], supports: Callable[[str, ConvProblem], bool], *, per_implementation: int = 3
) -> tuple[list[SoakCase], dict[str, Any]]:
    """(the cases, the choices to force through the user's cache) for a shipped table's ``choices`` (problem key
    -> :class:`~convkit.op.dispatch.Choice`); ``supports(implementation, problem)`` says where a forced choice
    may run. Cases come grouped by problem, so a worker builds a problem's kernels once."""
    from convkit.op.dispatch import Choice

    keys = sorted((k for k in choices if "@" not in k), key=lambda k: (ConvProblem.from_key(k).flops, k))
    by_impl: dict[str, list[str]] = {}
    for k in keys:
        by_impl.setdefault(implementation_name(choices[k]), []).append(k)
    # the spread of those that fit, else the smallest (single-channel images of a megapixel and more)
    # an implementation a narrower request alone ships (cuDNN's IMPLICIT_GEMM for an IEEE request) is forced onto
    # the default request's problems, as its own shipped choice
    example = {implementation_name(c): c for k, c in choices.items() if "@" in k} | {
        impl: choices[found[0]] for impl, found in by_impl.items()}  # fmt: skip
    picked = {impl: _spread(fit) if len(fit := [k for k in found if _fits(ConvProblem.from_key(k))]) >= 3
              else found[:3] for impl, found in by_impl.items()}  # fmt: skip
    picked |= {impl: [] for impl in example if impl not in picked}
    keys = [k for k in keys if _fits(ConvProblem.from_key(k))]  # forced choices: problems that fit
    for impl, found in by_impl.items():  # every split launch shipped
        picked[impl] += [k for k in found if is_split(choices[k]) and k not in picked[impl]]
    used = {k for found in picked.values() for k in found}
    forced: dict[str, Any] = {}
    for impl in sorted(picked, key=lambda i: (len(picked[i]), i)):
        for k in keys:
            if len(picked[impl]) >= per_implementation:
                break
            if k not in used and supports(impl, ConvProblem.from_key(k)):
                family, variant = impl.split(":", 1)
                shipped = example[impl]
                forced[k] = Choice(family, variant, "", shipped.paper, source="tuned", precision=shipped.precision)
                picked[impl].append(k)
                used.add(k)
    cases = []
    for problem in sorted(used, key=lambda k: (ConvProblem.from_key(k).flops, k)):
        impl = next(i for i, found in picked.items() if problem in found)
        cases += [SoakCase(problem, impl, mode) for mode in MODES]
        cases += [SoakCase(problem, CONTROL, mode) for mode in TORCH_MODES]
    cases += [SoakCase(NETWORK, PATCHED, NETWORK_MODE), SoakCase(NETWORK, "control:" + NETWORK, NETWORK_MODE)]
    return cases, forced


def short_plan(choices: dict[str, Any]) -> list[SoakCase]:
    """The short form: the two split layers that hung, a Winograd layer and a cuBLAS layer (see :data:`SHORT`)."""
    wanted = ["14-1-5-512-512-p2-s1", "7-1-3-512-512-p1-s1"]
    keys = sorted((k for k in choices if "@" not in k), key=lambda k: ConvProblem.from_key(k).flops)
    wanted += [next(k for k in keys if choices[k].variant == variant) for variant in ("fp32_winograd", "sgemm")]
    cases = [SoakCase(wanted[0], CONTROL, "threads4"), SoakCase(wanted[1], implementation_name(choices[wanted[1]]),
                                                                "cupy_threads4")]  # fmt: skip
    for k in wanted:
        cases += [SoakCase(k, implementation_name(choices[k]), mode) for mode in ("threads4", "graphs2")]
    return cases


# ---------------------------------------------------------------------------------------------
# What the chapter shows of it

#: The modes in words, as the summary chapter names them.
MODE_WORDS = {"threads4": "4 threads, 4 streams", "graphs2": "2 graphs at once", "graphs4": "4 graphs at once",
              "cupy_threads4": "4 threads, CuPy", NETWORK_MODE: "compiled network, 2 threads"}  # fmt: skip


def soak_table(directory: Any, experiment: str = EXPERIMENT) -> Any:
    """Per mode (pandas): the problems, and the calls checked against float64 with the wrong and the hung among
    them, of convkit.conv2d and of the control (PyTorch's own) side by side; empty where the soak is not recorded.
    A case stopped by an error counts its calls as 0 and is in ``failed``."""
    import pandas as pd

    from convkit.papers.summary.networks_tables import recorded
    from convkit.study.results import notes

    frame = recorded(directory, experiment)
    if frame.empty:
        return pd.DataFrame()
    failed = (notes(frame) != "").astype(int)
    frame = frame.assign(control=frame["implementation"].str.startswith("control"), failed=failed,
                         calls=frame["calls"].astype(int), wrong=frame["wrong"].astype(int),
                         hung=frame["hung"].astype(int))  # fmt: skip
    rows = []
    for mode, words in MODE_WORDS.items():
        ours, control = (frame[(frame["mode"] == mode) & (frame["control"] == c)] for c in (False, True))
        if len(ours):
            row = {"mode": words, "problems": ours["problem"].nunique()}
            for who, part in (("op", ours), ("PyTorch", control)):
                for column in ("calls", "wrong", "hung"):
                    row[f"{who} {column}"] = int(part[column].sum()) if len(part) else None
            row["stopped by an error"] = int(ours["failed"].sum() + control["failed"].sum())
            rows.append(row)
    table = pd.DataFrame(rows).set_index("mode")
    table.attrs["implementations"] = int(
        frame[~frame["control"] & (frame["mode"] != NETWORK_MODE)]["implementation"].nunique()
    )
    return table if table["stopped by an error"].any() else table.drop(columns="stopped by an error")


def _totals(table: Any) -> dict[str, int]:
    """:func:`soak_table`'s counts summed over its modes, by column (op calls, op wrong, ..., stopped by an error)."""
    return {column: int(table[column].fillna(0).sum()) for column in table.columns if " " in column}


def other_gpu_lines(directory: Any, experiment: str = EXPERIMENT) -> list[str]:
    """A sentence per other GPU whose results hold the whole soak (not its quick run): the calls checked there, the
    wrong and the hung, the op's and PyTorch's."""
    from pathlib import Path

    from convkit.study.results import recorded_folders

    lines = []
    for gpu, folder, stem in recorded_folders(experiment):
        table = soak_table(folder, stem)
        if stem != experiment or Path(folder).resolve() == Path(directory).resolve() or table.empty:
            continue
        total = _totals(table)
        lines.append(f"On the {gpu}, the same soak: {total['op calls']:,} calls of the op "
                     f"({table.attrs['implementations']} implementations, {int(table['problems'].max())} problems), "
                     f"{total['op wrong']} wrong and {total['op hung']} hung; PyTorch's own conv2d "
                     f"{total['PyTorch wrong']} wrong and {total['PyTorch hung']} hung.")  # fmt: skip
    return lines


def result_lines(table: Any) -> list[str]:
    """The chapter's result-box line on the soak (none where it is not recorded)."""
    if table.empty:
        return []
    total = _totals(table)
    line = (f"**Several threads, streams and graphs at once**: {total['op calls']:,} calls of the op "
            f"({table.attrs['implementations']} implementations, {int(table['problems'].max())} problems) "
            f"checked against float64: {total['op wrong']} wrong, {total['op hung']} hung; PyTorch's own "
            f"conv2d, run the same way, {total['PyTorch wrong']} wrong, {total['PyTorch hung']} hung.")  # fmt: skip
    failed = total.get("stopped by an error", 0)
    return [line + (f" {failed} cases stopped with an error (see the table)." if failed else "")]
