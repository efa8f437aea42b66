"""The 3xTF32 kernels on edge shapes, each output checked against float64 (compute-sanitizer's driver): the FP32
implicit GEMM's edge launches (:func:`convkit.families.fp32.edges.gemm_edges`) on the kernel of the same design, at
its shallowest and deepest pipeline (16-deep slices in dynamic shared memory), as first designed and with CUTLASS's
warps, the weights split ahead and two slices a flush; and FP32 Winograd's edges with the products on it
(:func:`~convkit.families.fp32.edges.winograd_edges`), the transformed filters split in the loop and ahead; where
the GPU has TF32 tensor cores; then, on Hopper, every launch of the wgmma kernel on the implicit GEMM's edges, and
Winograd's edges with its products on wgmma.
"""

from __future__ import annotations

from convkit.core import reference
from convkit.core.gpu import has_tf32_tensor_cores
from convkit.core.reference import DIRECT_TOLERANCE
from convkit.families.fp32.edges import GEMM_EDGES, edge_inputs, gemm_edges, winograd_edges
from convkit.families.tf32x3.launch import TensorCoreGemmLaunch, TensorCoreWinogradLaunch
from convkit.families.tf32x3.wgmma import conv2d_wgmma_tf32x3
from convkit.families.tf32x3.wgmma_gemm import WgmmaGemmLaunch
from convkit.families.tf32x3.wgmma_settings import IN_BLOCK_SETTINGS, TAP_PAIR_SETTINGS, WGMMA_SETTINGS, WS_SETTINGS
from convkit.families.tf32x3.wgmma_winograd import WgmmaWinogradLaunch


def edge_check() -> None:
    """Every tile, split and depth 2 and 5 of the 3xTF32 kernel on the implicit GEMM's edge problems, as first
    designed and with every further knob set, then Winograd's tiles on it (nothing on a GPU without TF32 tensor
    cores); on Hopper the wgmma kernels' and Winograd's on them; raises AssertionError naming the launch that is
    wrong."""
    if has_tf32_tensor_cores():
        gemm_edges(TensorCoreGemmLaunch, (2, 5))
        gemm_edges(TensorCoreGemmLaunch, (2, 5), warp="64x32", weights="split", flush=2)
        winograd_edges(TensorCoreWinogradLaunch)
        winograd_edges(TensorCoreWinogradLaunch, weights="split")
    if not WgmmaGemmLaunch().not_supported_reasons(GEMM_EDGES[0]):  # Hopper
        wgmma_edges()
        winograd_edges(WgmmaWinogradLaunch)
        winograd_edges(WgmmaWinogradLaunch, inputs="split staged")  # the inputs split by the products' staging


def wgmma_edges() -> None:
    """Every launch of the wgmma kernels (each setting of the first, and the warp-specialised one, its K-tiles of two
    taps where the problem has at most 16 channels, its weights split in the block where a block has at most its
    stages' K-tiles) on the implicit GEMM's edge problems, a bias added, inputs and outputs aligned and not; raises
    AssertionError naming the launch that is wrong."""
    import cupy
    import numpy as np

    for p in GEMM_EDGES:
        for unaligned in (False, True):
            x, w, ref, out = edge_inputs(p, unaligned=unaligned)
            bias = np.random.default_rng().standard_normal(p.m, dtype=np.float32)
            expected = reference.bias_add(ref, bias)
            # (K-tiles of two taps: at most 16 channels; the weights split in the block: a block's K-tiles its stages)
            apt = [spec for spec in (*TAP_PAIR_SETTINGS, *IN_BLOCK_SETTINGS) if not spec.not_supported_reasons(p)]
            for spec in (*WGMMA_SETTINGS, *WS_SETTINGS, *apt):
                out.fill(cupy.nan)
                conv2d_wgmma_tf32x3(x, w, pad=p.pad, stride=p.stride, launch=spec, out=out, bias=cupy.asarray(bias))
                err = reference.relative_error(out.get(), expected)
                assert err < DIRECT_TOLERANCE, (p.label, spec, unaligned, err)
