"""Grisett's fused CNN layer (``kernels/toy_cnn.cu``): conv 5x5 + bias + ReLU + 2x2 max-pool in one kernel.

The report's ladder V0..V4 and the study's register-tiled V5 (:mod:`.launch`). Its cases are whole layers,
not plain convolutions, so the family declares no variant for ``convkit.conv2d``: ``convkit.conv2d_relu_pool``
runs the tiled kernel through :func:`run_fused`, with the knobs the package ships for the GPU.
"""

from __future__ import annotations

from typing import Any

from convkit.core.problem import ConvProblem
from convkit.families.registry import Family
from convkit.families.toy_cnn.launch import KERNEL_SIZE, ToyTiledLaunch, conv_relu_pool, pooled_shape

FAMILY = Family("toy_cnn", (), sources=("toy_cnn",))


def fused_applies(problem: ConvProblem) -> bool:
    """Whether the tiled kernel runs ``problem`` (5x5 filters, stride 1, no padding, a pooled output)."""
    if (problem.r, problem.s, problem.stride, problem.pad) != (KERNEL_SIZE, KERNEL_SIZE, 1, 0):
        return False
    return min(pooled_shape(problem)) >= 1


def one_image(problem: ConvProblem) -> ConvProblem:
    """The layer of one image of ``problem``: what the kernel runs, and what its choices are recorded for."""
    return ConvProblem(1, problem.c, problem.h, problem.w, problem.m, problem.r, problem.s)


def run_fused(x: Any, w: Any, bias: Any, problem: ConvProblem, out: Any, knobs: dict[str, Any]) -> None:
    """Enqueue the tiled kernel with ``knobs`` on every image of ``x`` (CuPy arrays) into ``out``: it takes one
    pre-padded image at a time."""
    tile = ToyTiledLaunch.from_params(knobs)
    for image in range(problem.n):
        conv_relu_pool(x[image : image + 1], w, bias, launch=tile, out=out[image : image + 1])
