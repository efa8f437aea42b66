"""The baseline's problems: the anchor configurations.

``ANCHORS`` are the configurations of ``shared/papers/README.md`` with what cuDNN costs there on
the H100 through PyTorch (the study's anchors to beat). Their ``cudnn_*_us`` fields are the
specification's numbers, quoted for comparison; every number convkit reports is measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from convkit.core.problem import ConvProblem


@dataclass(frozen=True)
class Anchor:
    """A configuration from the papers' README and its quoted cuDNN times (PyTorch 2.11, H100)."""

    name: str
    problem: ConvProblem
    cudnn_fp32_us: float | None
    cudnn_tf32_us: float | None = None


def _same(n: int, c: int, m: int, hw: int, r: int) -> ConvProblem:
    return ConvProblem.same(n, c, hw, hw, m, r)


#: shared/papers/README.md, "What the same work costs on the H100 today".
ANCHORS: tuple[Anchor, ...] = (
    Anchor("cuConv Table 3 A", _same(1, 832, 256, 7, 1), 43.1, 13.6),
    Anchor("cuConv Table 3 B", _same(1, 256, 1024, 14, 1), 15.4, 8.3),
    Anchor("cuConv Table 3 C", _same(1, 64, 256, 27, 1), 9.6, 11.5),
    Anchor("cuConv max case 7-32-832", _same(1, 832, 32, 7, 1), 38.3, 11.1),
    Anchor("cuConv Table 4 A", _same(1, 192, 384, 7, 3), 64.5, 25.6),
    Anchor("cuConv Table 4 B", _same(1, 384, 384, 13, 3), 117.8, 32.1),
    Anchor("cuConv Table 5 A", _same(1, 48, 128, 7, 5), 54.4, 22.3),
    Anchor("cuConv Table 5 B", _same(8, 48, 128, 7, 5), 50.8, 22.2),
    Anchor("toy CNN conv", _same(1, 256, 256, 224, 5), 3678.0, 494.0),
    Anchor("single channel 224, 3x3", _same(1, 1, 64, 224, 3), 16.4, 15.8),
    Anchor("single channel 1024, 5x5", _same(1, 1, 32, 1024, 5), 144.5, 144.4),
    Anchor("multi channel 56, 3x3", _same(1, 256, 256, 56, 3), 148.7, 40.8),
    # single-channel peers: one image, one filter
    Anchor("one filter 1024, 5x5", _same(1, 1, 1, 1024, 5), 28.1),
    Anchor("one filter 2048, 7x7", _same(1, 1, 1, 2048, 7), 146.4),
    Anchor("one filter 4096, 3x3", _same(1, 1, 1, 4096, 3), 151.3),
    Anchor("one filter 4096, 5x5", _same(1, 1, 1, 4096, 5), 356.7),
    Anchor("one filter 8192, 7x7", _same(1, 1, 1, 8192, 7), 2213.0),
)

#: A few small anchors for --quick runs (seconds on any GPU).
QUICK_ANCHORS: tuple[Anchor, ...] = tuple(a for a in ANCHORS if a.problem.flops < 1e9)[:4]


def anchors(quick: bool = False) -> tuple[Anchor, ...]:
    """The anchor configurations; a small subset with ``quick``."""
    return QUICK_ANCHORS if quick else ANCHORS
