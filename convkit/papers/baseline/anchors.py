"""The baseline's problems: seventeen configurations drawn from the later chapters.

``ANCHORS`` are layers of the cuConv paper's tables, the toy CNN's layer, single-channel images with many
filters and with one, each with where it comes from in words (:attr:`Anchor.origin`). Every number the
chapter reports about them is measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from convkit.core.problem import ConvProblem


@dataclass(frozen=True)
class Anchor:
    """A configuration and where it comes from, in words (the paper's own designation where it has one)."""

    origin: str
    problem: ConvProblem


def _same(n: int, c: int, m: int, hw: int, r: int) -> ConvProblem:
    return ConvProblem.same(n, c, hw, hw, m, r)


#: The configurations, in the order the chapter shows them.
ANCHORS: tuple[Anchor, ...] = (
    Anchor("the cuConv paper's Table 3, layer A", _same(1, 832, 256, 7, 1)),
    Anchor("the cuConv paper's Table 3, layer B", _same(1, 256, 1024, 14, 1)),
    Anchor("the cuConv paper's Table 3, layer C", _same(1, 64, 256, 27, 1)),
    Anchor("the layer of the cuConv paper's largest speed-up", _same(1, 832, 32, 7, 1)),
    Anchor("the cuConv paper's Table 4, layer A", _same(1, 192, 384, 7, 3)),
    Anchor("the cuConv paper's Table 4, layer B", _same(1, 384, 384, 13, 3)),
    Anchor("the cuConv paper's Table 5, layer A", _same(1, 48, 128, 7, 5)),
    Anchor("the cuConv paper's Table 5, layer B", _same(8, 48, 128, 7, 5)),
    # the fused-layer chapter runs it unpadded on a 228 x 228 input (228-1-5-256-256 p0): the same output and work
    Anchor("the toy CNN's convolution, with same padding", _same(1, 256, 256, 224, 5)),
    Anchor("a single-channel image, many filters", _same(1, 1, 64, 224, 3)),
    Anchor("a single-channel image, many filters", _same(1, 1, 32, 1024, 5)),
    Anchor("a 3x3 layer of VGG19 (56 x 56, 256 channels)", _same(1, 256, 256, 56, 3)),
    Anchor("a single-channel image, one filter", _same(1, 1, 1, 1024, 5)),
    Anchor("a single-channel image, one filter", _same(1, 1, 1, 2048, 7)),
    Anchor("a single-channel image, one filter", _same(1, 1, 1, 4096, 3)),
    Anchor("a single-channel image, one filter", _same(1, 1, 1, 4096, 5)),
    Anchor("a single-channel image, one filter", _same(1, 1, 1, 8192, 7)),
)

#: A few small anchors for --quick runs (seconds on any GPU).
QUICK_ANCHORS: tuple[Anchor, ...] = tuple(a for a in ANCHORS if a.problem.flops < 1e9)[:4]


def anchors(quick: bool = False) -> tuple[Anchor, ...]:
    """The anchor configurations; a small subset with ``quick``."""
    return QUICK_ANCHORS if quick else ANCHORS
