"""Which implementation runs a convolution, per GPU and problem: the dispatch table of ``convkit.conv2d``.

A :class:`Choice` names the fastest checked implementation of one problem on one GPU: a convkit kernel
(its family, variant and launch knobs) or a library (cuDNN's algorithm, cuBLAS, PyTorch). Choices come from:

1. the user's cache (:func:`cache_path`: per GPU and convkit version, under ``$XDG_CACHE_HOME``), where
   choices tuned on first use are kept (:mod:`convkit.op.tune`);
2. the table shipped inside the package (:mod:`convkit.core.shipped`), written by the study from every
   chapter's recorded sweep of that GPU (:mod:`convkit.study.shipping`).

A file that cannot be read is ignored with a warning rather than trusted.
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

from convkit._version import __version__
from convkit.core.memo import memoize
from convkit.core.paths import cache_dir
from convkit.core.precision import ALLOWED, DEFAULT_INPUT_PRECISION
from convkit.core.problem import ConvProblem
from convkit.core.shipped import read_document, shipped, write_document
from convkit.op.cases import params_text


@dataclass(frozen=True)
class Choice:
    """The implementation that runs one problem: ``impl`` (``convkit`` or the library), the family a convkit
    kernel belongs to (``paper``, as the tables have always named it), its ``variant`` and launch ``params``
    (JSON text), its median time, where the choice came from (``recorded``, ``tuned`` or ``heuristic``) and
    how it multiplies (:mod:`convkit.core.precision`)."""

    impl: str
    variant: str
    params: str = ""
    paper: str = ""
    time_us: float = math.nan
    source: str = "recorded"
    precision: str = "ieee"


#: The paths a call from PyTorch takes (:func:`path_of`).
PATHS = ("convkit", "cublas", "pytorch")


def path_of(impl: str) -> str:
    """The path a call from PyTorch takes to run a choice of ``impl``: convkit's kernels, cuBLAS, or PyTorch's own
    convolution (autotuned cuDNN), which runs every other library's choice in one call, bias included."""
    return impl if impl in ("convkit", "cublas") else "pytorch"


def choices_of(doc: dict, where: object = "the dispatch table") -> dict[str, Choice]:
    """The choices of a dispatch document (:mod:`convkit.core.shipped`), by problem key; ``{}`` with a warning
    where a choice is malformed. A choice's ``params`` is a JSON object (null for a library); a table written
    before convkit wrote objects holds them as JSON text, read the same."""
    try:
        return {k: Choice(**(v | {"params": _params_text(v.get("params"))})) for k, v in doc.get("choices", {}).items()}
    except (TypeError, ValueError) as error:
        warnings.warn(f"ignoring the unreadable dispatch table {where}: {error}", stacklevel=2)
        return {}


def read_table(path: Path, *, gpu: str | None = None) -> dict[str, Choice]:
    """The choices of a dispatch table file; ``{}`` with a warning where it is unreadable, of another convkit
    version or (``gpu``) of another GPU, so that a damaged or stale file is never trusted."""
    return choices_of(read_document(path, gpu=gpu), path)


def _params_text(params: object) -> str:
    """A choice's ``params`` as :class:`Choice` holds them (canonical JSON text, "" for none), from a document's
    JSON object, null, or (a table of an earlier convkit) JSON text; raises ValueError for anything else."""
    if params is None or params == "":
        return ""
    if isinstance(params, str):
        params = json.loads(params)
    if not isinstance(params, dict):
        raise ValueError(f"params must be a JSON object, got {params!r}")
    return params_text(params)


def write_table(path: Path, gpu: str, choices: dict[str, Choice], **fields: object) -> None:
    """Write a dispatch table atomically, each choice's ``params`` a JSON object (null for a library's) (``fields``:
    the shipped table's knobs, fused choices, figures)."""
    document = {
        k: asdict(c) | {"params": json.loads(c.params) if c.params else None} for k, c in sorted(choices.items())
    }
    write_document(path, gpu, choices=document, **fields)


def cache_path(gpu: str, home: str | Path | None = None) -> Path:
    """The user's cache of choices tuned on this machine, per GPU and convkit version (:func:`cache_dir`'s
    ``home``: that of a process started with another ``XDG_CACHE_HOME``)."""
    return cache_dir(home) / f"dispatch-{gpu}-{__version__}.json"


def table_key(problem_key: str, input_precision: str = DEFAULT_INPUT_PRECISION) -> str:
    """Where a table keeps the choice for a problem (:attr:`ConvProblem.key`) at ``input_precision``: the problem
    key for the default request, ``<key>@<precision>`` for a narrower one."""
    return problem_key if input_precision == DEFAULT_INPUT_PRECISION else f"{problem_key}@{input_precision}"


@memoize()
def shipped_choices(gpu: str) -> dict[str, Choice]:
    """The choices of ``gpu``'s shipped table (:func:`convkit.core.shipped.shipped`), made once per process, to be
    read and never changed: the first call of each problem looks one up, and making 1,500 choices takes
    milliseconds."""
    return choices_of(shipped(gpu))


def lookup(problem: ConvProblem, gpu: str, input_precision: str = DEFAULT_INPUT_PRECISION) -> Choice | None:
    """The choice for ``problem`` on ``gpu`` within ``input_precision``: the user's cache first (tuned here), then
    the shipped table; a narrower request also takes the default request's choice where that is of a precision
    it allows."""
    allowed = ALLOWED[input_precision]
    for table in (read_table(cache_path(gpu), gpu=gpu), shipped_choices(gpu)):
        for key in dict.fromkeys((table_key(problem.key, input_precision), problem.key)):
            found = table.get(key)
            if found is not None and found.precision in allowed:
                return found
    return None
