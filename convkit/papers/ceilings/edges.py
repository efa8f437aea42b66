"""The ceilings' own kernels, each run once small (compute-sanitizer's driver); each checks its own result."""

from __future__ import annotations

from convkit.core.gpu import build_target, has_tf32_tensor_cores
from convkit.papers.ceilings.measure import (
    WGMMA_TARGETS,
    fma_peak,
    launch_floor,
    load_latency,
    mma_peak,
    sm_clock_under_load,
    wgmma_peak,
)


def edge_check() -> None:
    """Launch the FMA, pointer-chase, clock and empty kernels, the TF32 and INT8 mma.sync kernels where the GPU has
    TF32 tensor cores and the wgmma ones on Hopper, once each with small sizes; each measurement raises RuntimeError
    where its check fails."""
    import cupy

    fma_peak(iters=4, blocks_per_sm=1)
    load_latency(1 << 14, steps=100, repeats=1)
    sm_clock_under_load(spin_ms=1)
    launch_floor(threads=32)
    if has_tf32_tensor_cores():
        mma_peak("tf32", iters=4, blocks_per_sm=1)
        mma_peak("int8", iters=4, blocks_per_sm=1)
    if build_target() in WGMMA_TARGETS:
        wgmma_peak("tf32", iters=4)
        wgmma_peak("int8", iters=4)
    cupy.cuda.runtime.deviceSynchronize()
