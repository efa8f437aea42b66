"""One implicit-GEMM launch on a large 3x3 layer, for ncu."""
import cupy
from convkit.papers.fp32 import launch
from convkit.problem import ConvProblem

p = ConvProblem.same(32, 256, 56, 56, 256, 3)
x = cupy.random.standard_normal(p.input_shape, dtype=cupy.float32)
w = cupy.random.standard_normal(p.filter_shape, dtype=cupy.float32)
for _ in range(2):
    launch.conv2d_implicit_gemm(x, w, pad=1)
cupy.cuda.runtime.deviceSynchronize()
