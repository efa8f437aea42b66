"""The CUTLASS peer without a GPU: the shim builds from the nvidia-cutlass wheel's headers, and CUTLASS's own
can_implement (host code) takes the problems convkit sends it and refuses what its 128-bit accesses cannot do."""

from __future__ import annotations

import pytest

from convkit.core.problem import ConvProblem
from convkit.libs import cutlass


@pytest.fixture(scope="module")
def shim():
    if not cutlass.available():
        pytest.skip("the CUTLASS peer needs the nvidia-cutlass wheel (pip install convkit[cutlass]) and nvcc")
    return cutlass.library()


def test_every_kernel_is_in_the_shim_and_can_implement_a_layer(shim):
    p = ConvProblem.same(2, 64, 14, 14, 32, 3)
    for name, _ in cutlass.KERNELS:
        assert cutlass._call(name, cutlass._CAN_IMPLEMENT, p) == 0, name
        assert cutlass._call(name, cutlass._WORKSPACE, p) >= 0, name


def test_channels_that_break_the_tensor_core_kernels_alignment_are_refused_there_only(shim):
    p = ConvProblem.same(1, 3, 16, 16, 8, 3)  # C = 3: not a multiple of the tensor-core kernels' 4-float accesses
    assert cutlass._call("cutlass_tf32x3_128x64", cutlass._CAN_IMPLEMENT, p) != 0
    assert cutlass._call("cutlass_simt_128x128", cutlass._CAN_IMPLEMENT, p) == 0
    assert shim.convkit_cutlass_fprop(len(cutlass.KERNELS), 1, *([1] * 12), None, None, None, None, None) == -1000
