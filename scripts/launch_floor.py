"""The event time of an empty kernel as convkit.timing measures it: the launch share of every small
configuration's time (the roofline floors assume 3 us). Run on a GPU: python3 scripts/launch_floor.py"""

import cupy

from convkit.timing import benchmark

noop = cupy.RawKernel('extern "C" __global__ void noop(float* p){ if (p == nullptr) p[threadIdx.x] = 0.f; }', "noop")
buf = cupy.zeros(1 << 20, dtype=cupy.float32)
for blocks in (1, 132, 264):
    t = benchmark(lambda b=blocks: noop((b,), (256,), (buf,)), warmup=10, min_reps=200, max_reps=400)
    print(f"empty kernel, {blocks} blocks: median {t.median_ms * 1e3:.2f} us, min {t.min_ms * 1e3:.2f} us")
