"""The warp-specialised gathering wgmma kernel (persistent, two K-tiles in flight) on two 1x1 layers alike but for
their images' pixel counts, odd (27 x 27) and even (28 x 28), two launches each, for Nsight Compute to count the
epilogue's store requests and sectors on each (kernels/wgmma_tf32x3.cu, store_tile_staged). Run on an sm_90 GPU:
    PYTHONPATH=$PWD ncu --kernel-name regex:implicit_gemm_wgmma_ws_tf32x3 --launch-count 4 \
        --metrics gpu__time_duration.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum python3 scripts/store_sectors.py
"""

from __future__ import annotations

import cupy

from convkit.core.problem import ConvProblem
from convkit.families.tf32x3.wgmma import conv2d_wgmma_tf32x3
from convkit.families.tf32x3.wgmma_settings import GATHERED_PERSISTENT

if __name__ == "__main__":
    rng = cupy.random.default_rng(1)
    for side in (27, 28):
        p = ConvProblem(128, 48, side, side, 192, 1, 1)
        x, w = (rng.standard_normal(shape, dtype=cupy.float32) for shape in (p.input_shape, p.filter_shape))
        for _ in range(2):
            conv2d_wgmma_tf32x3(x, w, launch=GATHERED_PERSISTENT)
    cupy.cuda.runtime.deviceSynchronize()
