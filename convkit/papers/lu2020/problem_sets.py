"""The chapter's problems: single images of every size and filter, and the networks' 3x3 layers."""

from __future__ import annotations

from convkit.core.problem import ConvProblem
from convkit.families.lu2020.launch import FILTER_SIZES
from convkit.study.layer_sets import network_3x3_layers

#: Single-channel images (square) and the filter widths, as the issue sets them.
IMAGE_SIZES = (256, 512, 1024, 2048, 4096, 8192)


def single_problems() -> list[ConvProblem]:
    """One image, one filter, "same" padding: sizes 256..8192 square, K 3, 5, 7."""
    return [ConvProblem.same(1, 1, h, h, 1, k) for h in IMAGE_SIZES for k in FILTER_SIZES]


def multi_problems() -> list[ConvProblem]:
    """The VGG19 and ResNet-50 3x3 layers (stride 1, "same"), batch 1 then 32 (:mod:`convkit.study.layer_sets`)."""
    return network_3x3_layers()
