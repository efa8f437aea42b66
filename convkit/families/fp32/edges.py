"""Every FP32-ceiling kernel on edge shapes, each output checked against float64 (compute-sanitizer's driver).

Each block tile and pipeline depth of the implicit GEMM (:func:`gemm_edges`, which the 3xTF32 family runs on its
kernel of the same design), split and unsplit, on shapes no tile divides (1x1 with H*W a multiple
of 4 and not, an input and an output that are not 16-byte aligned, stride 2, a 7x7 filter), and every
built Winograd tile on sizes its tiles do not divide, and in passes of fewer images than the batch; then
cuBLAS's 1x1 peer.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from convkit.core import reference
from convkit.core.problem import ConvProblem
from convkit.core.reference import DIRECT_TOLERANCE, TRANSFORM_TOLERANCE
from convkit.families.fp32.launch import STAGES, TILES, ImplicitGemmLaunch, conv2d_implicit_gemm
from convkit.families.fp32.winograd import TILES as WINOGRAD_TILES
from convkit.families.fp32.winograd import WinogradLaunch, conv2d_winograd
from convkit.libs import cublas

#: Implicit-GEMM edge problems.
GEMM_EDGES = (
    ConvProblem(2, 5, 7, 9, 70, 1, 1), ConvProblem(1, 3, 6, 6, 3, 1, 1), ConvProblem(3, 9, 11, 10, 65, 3, 3, pad=1),
    ConvProblem(1, 20, 13, 9, 7, 7, 7, pad=3, stride=2), ConvProblem(2, 33, 8, 8, 129, 1, 1, stride=2),
    ConvProblem(1, 3, 35, 30, 10, 11, 11, pad=2, stride=4),  # more taps than a mask holds: AlexNet's first layer
)  # fmt: skip
#: Winograd edge problems (R from each built tile).
WINOGRAD_EDGES = ((1, 5, 9, 7, 6), (2, 3, 6, 11, 3))


def edge_inputs(p: ConvProblem, *, unaligned: bool = False) -> tuple:
    """(x, w as CuPy arrays, the float64 reference, an output poisoned with NaN) for ``p``, fresh random; with
    ``unaligned``, x and the output one float past a 16-byte boundary."""
    import cupy

    rng = np.random.default_rng()
    x = rng.standard_normal(p.input_shape, dtype=np.float32)
    w = rng.standard_normal(p.filter_shape, dtype=np.float32)
    ref = reference.conv2d(x, w, pad=p.pad, stride=p.stride)
    if unaligned:  # one float past a 256-byte allocation: 4-byte alignment only
        xs = cupy.empty(x.size + 1, dtype=cupy.float32)[1:].reshape(x.shape)
        xs[...] = cupy.asarray(x)
        out = cupy.full(int(np.prod(p.output_shape)) + 1, cupy.nan, dtype=cupy.float32)[1:].reshape(p.output_shape)
        return xs, cupy.asarray(w), ref, out
    return cupy.asarray(x), cupy.asarray(w), ref, cupy.full(p.output_shape, cupy.nan, dtype=cupy.float32)


def gemm_edges(kind: type[ImplicitGemmLaunch], depths: tuple[int, ...], **knobs: object) -> None:
    """Launch ``kind`` (a kernel of the implicit GEMM's design, with its further ``knobs``) at every tile, each of
    ``depths`` and splits on :data:`GEMM_EDGES`, aligned and not; raises AssertionError naming the launch that is
    wrong."""
    import cupy

    for p in GEMM_EDGES:
        for unaligned in (False, True):
            x, w, ref, out = edge_inputs(p, unaligned=unaligned)
            k = p.c * p.r * p.s
            for tile in TILES:
                for stages in depths:
                    whole = -(-k // kind.slice_k)  # slices in C*R*S
                    for splits in sorted({1, min(2, whole), max(1, k // kind.slice_k)}):
                        spec = kind(tile, splits, stages, **knobs)
                        out.fill(cupy.nan)
                        conv2d_implicit_gemm(x, w, pad=p.pad, stride=p.stride, launch=spec, out=out)
                        err = reference.relative_error(out.get(), ref)
                        assert err < DIRECT_TOLERANCE, (p.label, spec, unaligned, err)


def winograd_edges(kind: type[WinogradLaunch], **knobs: object) -> None:
    """Every built tile of ``kind`` (FP32 Winograd's launch, or one with its products on another GEMM; with its
    further ``knobs``) on :data:`WINOGRAD_EDGES`, and in passes of fewer images than the batch; raises
    AssertionError naming the tile."""
    for m, r in WINOGRAD_TILES:
        for n, c, h, wd, filters in WINOGRAD_EDGES:
            for pad in {0, r // 2, r - 1}:
                p = ConvProblem(n, c, h, wd, filters, r, r, pad=pad)
                if p.out_h < 1 or p.out_w < 1:
                    continue
                x, w, ref, out = edge_inputs(p)
                conv2d_winograd(x, w, pad=pad, launch=kind(m, "64x64", 2, **knobs), out=out)
                err = reference.relative_error(out.get(), ref)
                assert err < TRANSFORM_TOLERANCE, (p.label, m, r, err)
        # three images, a workspace that holds two at a time: a full pass and a partial one
        p = ConvProblem(3, 4, 9, 7, 5, r, r, pad=r // 2)
        x, w, ref, out = edge_inputs(p)
        one = kind(m, **knobs).pass_bytes(dataclasses.replace(p, n=2))
        spec = kind(m, "64x64", 2, workspace_limit=one, **knobs)
        assert spec.images_per_pass(p) == 2, spec.images_per_pass(p)
        conv2d_winograd(x, w, pad=p.pad, launch=spec, out=out)
        assert reference.relative_error(out.get(), ref) < TRANSFORM_TOLERANCE, (p.label, m, r, "in passes")


def edge_check() -> None:
    """The FP32 implicit GEMM at every depth (:func:`gemm_edges`), cuBLAS's 1x1 peer, every Winograd tile on
    :data:`WINOGRAD_EDGES`; raises AssertionError naming the launch that is wrong."""
    import cupy

    gemm_edges(ImplicitGemmLaunch, STAGES)
    for p in GEMM_EDGES:
        if cublas.supports(p):
            x, w, ref, out = edge_inputs(p)
            cublas.conv1x1(x, w, out)
            assert reference.relative_error(out.get(), ref) < DIRECT_TOLERANCE, (p.label, "cublas")
    winograd_edges(WinogradLaunch)
    cupy.cuda.runtime.deviceSynchronize()
