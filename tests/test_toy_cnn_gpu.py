"""The fused layer's launches past the generic check (tests/test_variants_gpu.py), outputs poisoned before
launch (GPU): blocks straddling the output, grid.z above and below one pass, every tile shape, the lab layer,
an unaligned input, argument errors before launch."""

from __future__ import annotations

import numpy as np
import pytest

from convkit.core import reference
from convkit.core.problem import ConvProblem
from convkit.core.reference import DIRECT_TOLERANCE
from convkit.families.toy_cnn.launch import LAB_LAYER, ToyLadderLaunch, ToyTiledLaunch, conv_relu_pool, report_grid
from convkit.papers.toy_cnn.measure import reference_layer

pytestmark = pytest.mark.gpu

# (C, H, W, M): pre-padded inputs; odd sizes whose pooled output no block or tile divides, C = 1,
# M = 1, a conv output of odd size (its last row and column are dropped by the pool), the minimum.
SHAPES = [(3, 36, 36, 8), (19, 41, 29, 37), (1, 6, 6, 1), (64, 23, 47, 70), (5, 9, 100, 9), (32, 68, 68, 128)]
# (variant, launch): the report's best block, blocks straddling the output, grid.z above and
# below one pass over the channels (the report's Table 3 has both), every tiled candidate's shape.
RUNS = [
    ("v0", {"block": (16, 8, 4)}),
    ("v0", {"block": (5, 3, 2), "grid_z": 3}),
    ("v1", {"block": (16, 8, 4)}),
    ("v1", {"block": (7, 5, 3), "grid_z": 1}),
    ("v2", {"block": (16, 16, 2), "grid_z": 200}),
    ("v3", {"block": (8, 4, 8)}),
    ("v4", {"block": (16, 8, 4)}),
    ("v4", {"block": (32, 2, 1), "grid_z": 2}),
    ("tiled", {}),
    ("tiled", {"tile": ToyTiledLaunch(32, 16, 16, 4)}),
    ("tiled", {"tile": ToyTiledLaunch(128, 16, 16, 2)}),
    ("tiled", {"tile": ToyTiledLaunch(64, 8, 32, 3)}),
    ("tiled", {"tile": ToyTiledLaunch(64, 32, 16, 1)}),
    ("unfused", {}),
    ("unfused", {"tile": ToyTiledLaunch(32, 16, 16, 4)}),
]  # a ladder run's grid: the report's for its block, or with grid_z that many channel blocks


def _inputs(cupy, c, h, w, m):
    rng = np.random.default_rng()
    return tuple(cupy.asarray(rng.standard_normal(s, dtype=np.float32)) for s in ((1, c, h, w), (m, c, 5, 5), (m,)))


def _launch(variant, launch, problem_shape):
    """The launch a run names: a tile, or a ladder variant's block and grid."""
    if "tile" in launch or not launch:
        return launch.get("tile")
    grid = None
    if "grid_z" in launch:
        c, h, w, m = problem_shape
        grid = report_grid(ConvProblem(1, c, h, w, m, 5, 5), launch["block"], launch["grid_z"])
    return ToyLadderLaunch(variant, launch["block"], grid)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize(("variant", "launch"), RUNS, ids=[f"{v}-{i}" for i, (v, _) in enumerate(RUNS)])
def test_variant_matches_reference(shape, variant, launch):
    import cupy

    x, w, b = _inputs(cupy, *shape)
    ref = reference_layer(x.get(), w.get(), b.get())
    out = cupy.full(ref.shape, np.nan, dtype=cupy.float32)
    conv_relu_pool(x, w, b, variant=variant, launch=_launch(variant, launch, shape), out=out)
    err = reference.relative_error(out.get(), ref)
    assert err < DIRECT_TOLERANCE, err


def test_unaligned_input_takes_the_four_byte_path():
    """A contiguous view 4 bytes into its buffer: the 16-byte row copies must not be used."""
    import cupy

    from convkit.core import reference

    x, w, b = _inputs(cupy, 4, 24, 24, 16)
    buffer = cupy.empty(x.size + 1, dtype=cupy.float32)
    shifted = buffer[1:].reshape(x.shape)
    shifted[...] = x
    out = conv_relu_pool(shifted, w, b, variant="tiled")
    assert reference.relative_error(out.get(), reference_layer(x.get(), w.get(), b.get())) < DIRECT_TOLERANCE


@pytest.mark.parametrize("variant", ["v0", "v1", "v2", "v3", "v4", "tiled", "unfused"])
def test_lab_layer(variant):
    """The full 256 x 228 x 228 -> 256 x 112 x 112 layer, reference in float64 on the GPU."""
    import cupy

    from convkit.core import reference

    p = LAB_LAYER
    x, w, b = _inputs(cupy, p.c, p.h, p.w, p.m)
    ref = reference_layer(x, w, b)
    out = cupy.full(ref.shape, np.nan, dtype=cupy.float32)
    launch = ToyLadderLaunch(variant, (16, 8, 4), (7, 14, 96)) if variant.startswith("v") else None
    conv_relu_pool(x, w, b, variant=variant, launch=launch, out=out)
    assert reference.relative_error(out, ref) < DIRECT_TOLERANCE


def test_bad_arguments_are_named_before_launch():
    import cupy

    x, w, b = _inputs(cupy, 3, 12, 12, 4)
    with pytest.raises(ValueError, match="bias"):
        conv_relu_pool(x, w, b[:3])
    with pytest.raises(TypeError, match="bias"):
        conv_relu_pool(x, w, b.get())
    with pytest.raises(ValueError, match="5x5"):
        conv_relu_pool(x, w[:, :, :3, :3].copy(), b)
    with pytest.raises(ValueError, match="N = 1"):
        conv_relu_pool(cupy.concatenate([x, x]), w, b)
    with pytest.raises(ValueError, match="C-contiguous"):
        conv_relu_pool(x[:, :, :, ::2], w, b)
    with pytest.raises(ValueError, match="block"):
        conv_relu_pool(x, w, b, variant="v1", launch=ToyLadderLaunch("v1", (32, 32, 2)))
    with pytest.raises(ValueError, match="grid"):
        conv_relu_pool(x, w, b, variant="v0", launch=ToyLadderLaunch("v0", (2, 2, 1), (1, 1, 4)))
    with pytest.raises(TypeError, match="launch must be a ToyLadderLaunch of variant 'v2'"):
        conv_relu_pool(x, w, b, variant="v2", launch=ToyLadderLaunch("v1"))
    with pytest.raises(ValueError, match="variant"):
        conv_relu_pool(x, w, b, variant="v9")
    with pytest.raises(ValueError, match="pooled"):
        conv_relu_pool(x[:, :, :5, :5].copy(), w, b)
