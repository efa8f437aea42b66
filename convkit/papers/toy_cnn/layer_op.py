"""The fused layer as ``convkit.conv2d_relu_pool`` runs it: which tile, or none where a library was faster.

The chapter's tiled kernel takes one pre-padded image with 5x5 filters; the op runs it on each image of a
batch. Its knobs come from this chapter's recorded sweep of the GPU where the layer is recorded (the fastest
whole-layer row: the fused kernel's, or a library's conv+bias+ReLU+pool, in which case the op composes its
own convolution with ReLU and the pool), and the default tile where it is not.
"""

from __future__ import annotations

import json
from typing import Any

from convkit.core.paths import results_dir
from convkit.core.problem import ConvProblem
from convkit.papers.toy_cnn import launch as toy
from convkit.papers.toy_cnn.results import TOY_EXPERIMENT
from convkit.study.results import load_results
from convkit.study.tables import timed

#: Whole-layer rows by GPU, then by label: (microseconds, variant, params).
_ROWS: dict[str, dict[str, list[tuple[float, str, str]]]] = {}


def _whole_layer_rows(gpu: str) -> dict[str, list[tuple[float, str, str]]]:
    """The recorded whole-layer rows of ``gpu``: the fused kernel's and the libraries' conv+bias+ReLU+pool
    (not the report's ladder, nor convolutions alone)."""
    found = _ROWS.get(gpu)
    if found is None:
        found = {}
        directory = results_dir() / gpu
        if (directory / f"{TOY_EXPERIMENT}.csv").is_file():
            ok = timed(load_results(directory, TOY_EXPERIMENT)[0])
            fused = (ok["impl"] == "convkit") & (ok["variant"] == "toy_tiled")
            whole = ok["params"].astype(str).str.contains("conv+bias+relu+pool", regex=False)
            library = (ok["impl"] != "convkit") & whole
            for r in ok[fused | library].itertuples():
                found.setdefault(r.label, []).append((float(r.us), r.variant, str(r.params)))
        _ROWS[gpu] = found
    return found


def choose(problem: ConvProblem, gpu: str) -> dict[str, Any] | None:
    """The tiled kernel's knobs for ``problem`` (5x5, stride 1, no padding) on ``gpu``; None where the
    kernel does not apply or the recorded sweep has a library's layer faster."""
    if (problem.r, problem.s, problem.stride, problem.pad) != (toy.KERNEL_SIZE, toy.KERNEL_SIZE, 1, 0):
        return None
    if min(toy.pooled_shape(problem)) < 1:
        return None
    one_image = ConvProblem(1, problem.c, problem.h, problem.w, problem.m, problem.r, problem.s)
    rows = _whole_layer_rows(gpu).get(one_image.label)
    if not rows:
        return toy.default_tile().as_params()
    _, variant, params = min(rows)
    return json.loads(params) if variant == "toy_tiled" else None


def run(x: Any, w: Any, bias: Any, problem: ConvProblem, out: Any, knobs: dict[str, Any]) -> None:
    """Enqueue the tiled kernel with ``knobs`` on every image of ``x`` (CuPy arrays) into ``out``."""
    tile = toy.ToyTiledLaunch(**knobs)
    for image in range(problem.n):
        toy.conv_relu_pool(x[image : image + 1], w, bias, tile=tile, out=out[image : image + 1])
