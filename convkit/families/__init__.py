"""The kernel families ``convkit.conv2d`` runs: the only list of them.

Each family (:class:`convkit.families.registry.Family`) is a folder here: its Launch classes, its variants with
their knob candidates and the library peers measured beside them. Importing a family imports no chapter; a
chapter (``convkit.papers.<name>``) imports its family. A new family is its folder and one line here.
"""

from __future__ import annotations

from convkit.core.memo import memoize
from convkit.families import baseline, chang2022, cuconv, fp32, lu2020, tf32x3, toy_cnn
from convkit.families.registry import Family, Variant

FAMILIES: tuple[Family, ...] = (
    baseline.FAMILY,
    lu2020.FAMILY,
    cuconv.FAMILY,
    toy_cnn.FAMILY,
    chang2022.FAMILY,
    fp32.FAMILY,
    tf32x3.FAMILY,
)


@memoize()
def variants_by_name() -> dict[str, Variant]:
    """Every family's variants and peers by name (names are unique across families)."""
    return {v.name: v for f in FAMILIES for v in (*f.variants, *f.peers)}


def precision_of(impl: str, variant: str) -> str:
    """How a results row's implementation multiplies (:mod:`convkit.core.precision`): a family's kernel or peer
    says; cuDNN in FMA math and PyTorch with TF32 off are ``"ieee"``."""
    found = variants_by_name().get(variant)
    return found.precision if found is not None and found.impl == impl else "ieee"


def owner(variant: str) -> str:
    """The family a variant (or peer) belongs to ("" for none)."""
    return next((f.name for f in FAMILIES for v in (*f.variants, *f.peers) if v.name == variant), "")
