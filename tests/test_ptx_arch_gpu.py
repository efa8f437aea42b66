"""The setting that builds every kernel as PTX for an older architecture (the T4's paths on any GPU) (GPU)."""

from __future__ import annotations

import pytest

from convkit.core.gpu import PTX_SHARED_LIMITS, ptx_arch, shared_memory_limits
from convkit.cuda.nvrtc import load_kernel

pytestmark = pytest.mark.gpu


def test_the_device_code_runs_for_the_architecture_built():
    import cupy

    out = cupy.zeros(1, dtype=cupy.int32)
    load_kernel("timing", "cuda_arch")((1,), (1,), (out,))
    major, minor = (int(v) for v in cupy.cuda.Device().compute_capability)
    arch = ptx_arch()
    expected = int(arch.removeprefix("compute_")) * 10 if arch else major * 100 + minor * 10
    assert int(out.get()[0]) == expected


def test_the_shared_memory_limit_is_the_target_s():
    block, sm = shared_memory_limits()
    arch = ptx_arch()
    if arch:
        assert (block, sm) == PTX_SHARED_LIMITS[arch]
    else:
        assert block >= 48 * 1024 and sm >= block
