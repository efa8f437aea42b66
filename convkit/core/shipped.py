"""What the package ships for ``convkit.conv2d``, per GPU: ``convkit/data/dispatch-<gpu>.json``.

One document per GPU (a results folder name), written by the study (:mod:`convkit.study.shipping`) from
that GPU's recorded results and read here, with no pandas and nothing under ``results/``:

- ``choices``: per problem key (:attr:`convkit.core.problem.ConvProblem.key`), the fastest checked
  implementation, convkit's (its variant and launch knobs, a JSON object) or a library's;
- ``knobs``: per variant and problem key, the launch a tuning run found fastest, a JSON object (the knobs of a
  variant that runs a problem no choice records);
- ``fused``: per one-image problem key of the fused layer, the tiled kernel's knobs, or null where a
  library's conv + bias + ReLU + pool was faster;
- ``figures``: the GPU's measured ceilings (the latency model of the Pascal-era kernels sizes from them).

The user's cache of choices tuned on first use has the same format (``choices`` only). A document of
another convkit version or GPU, or one that cannot be read, is ignored with a warning, never trusted.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from convkit._version import __version__
from convkit.core.memo import memoize
from convkit.core.paths import replace_text
from convkit.core.problem import ConvProblem

DATA_DIR = Path(__file__).resolve().parents[1] / "data"


def shipped_path(gpu: str) -> Path:
    """Where the package carries the document of ``gpu`` (a results folder name)."""
    return DATA_DIR / f"dispatch-{gpu}.json"


def read_document(path: Path, *, gpu: str | None = None) -> dict[str, Any]:
    """The document at ``path``; ``{}`` (with a warning) where it is unreadable, of another convkit version or
    (``gpu``) of another GPU, and where there is none."""
    if not Path(path).is_file():
        return {}
    try:
        doc = json.loads(Path(path).read_text())
        if doc.get("convkit") != __version__ or (gpu is not None and doc.get("gpu") != gpu):
            warnings.warn(f"ignoring {path}: written for convkit {doc.get('convkit')} on {doc.get('gpu')}",
                          stacklevel=2)  # fmt: skip
            return {}
        if not isinstance(doc.get("choices"), dict):
            raise TypeError("no choices")
        return doc
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        warnings.warn(f"ignoring the unreadable dispatch table {path}: {error}", stacklevel=2)
        return {}


def write_document(path: Path, gpu: str, **fields: Any) -> None:
    """Write a document atomically (a temporary file and a rename: a kill leaves the old or the new)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    doc = {"convkit": __version__, "gpu": gpu, **fields}
    replace_text(Path(path), json.dumps(doc, indent=1, sort_keys=True) + "\n")


@memoize()
def shipped(gpu: str) -> dict[str, Any]:
    """The package's document of ``gpu`` (read once per process; ``{}`` where none ships)."""
    return read_document(shipped_path(gpu), gpu=gpu)


def knob_table(gpu: str) -> Callable[[ConvProblem, str], dict[str, Any] | None]:
    """The shipped tuned knobs of ``gpu`` as a :data:`convkit.families.registry.KnobTable`."""
    knobs = shipped(gpu).get("knobs", {})

    def lookup(problem: ConvProblem, variant: str) -> dict[str, Any] | None:
        found = knobs.get(variant, {}).get(problem.key)
        return json.loads(found) if isinstance(found, str) else found  # text: a table of an earlier convkit

    return lookup
