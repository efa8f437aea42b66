"""The first 3xTF32 kernel on Hopper's wgmma (kernels/wgmma_tf32x3.cu), checked and timed before it joins a family
(prints; records nothing): on irregular shapes against float64 (PyTorch's convolution in float64 on the GPU), every
output poisoned with NaN first; then on the 3xTF32 probe's network layers beside convkit's mma.sync 3xTF32 kernel
at its default launch, both timed as the study times (CUDA events after warm-up, median of repeats), the weights'
split timed apart.
Needs an sm_90 GPU (H100, H200), CuPy and PyTorch. Run from the repository root:
    PYTHONPATH=$PWD python3 scripts/wgmma_probe.py [--check]    # --check: the irregular shapes alone
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.core.reference import relative_error
from convkit.cuda.launch import with_dynamic_shared
from convkit.cuda.nvrtc import load_kernel
from convkit.cuda.timing import CudaEventClock, benchmark
from convkit.families.tf32x3.launch import conv2d_tf32x3

SHARED_BYTES = 2 * 4 * 128 * 32 * 4  # two stages of four planes of 128 x 32 floats
CHECKED = (
    ConvProblem.same(1, 3, 17, 19, 5, 3), ConvProblem.same(2, 37, 23, 29, 131, 3),
    ConvProblem.same(3, 64, 9, 9, 200, 1), ConvProblem(2, 19, 31, 33, 70, 5, 5, pad=1, stride=2),
    ConvProblem.same(1, 256, 14, 14, 256, 3), ConvProblem.same(2, 130, 12, 12, 257, 7),
)  # fmt: skip
TIMED = (
    ConvProblem.same(16, 256, 56, 56, 256, 3), ConvProblem.same(32, 256, 56, 56, 256, 3),
    ConvProblem.same(16, 512, 28, 28, 512, 3), ConvProblem.same(16, 1024, 14, 14, 256, 1),
    ConvProblem.same(8, 48, 7, 7, 128, 5),
)  # fmt: skip


def wgmma_conv(x: Any, w: Any, bias: Any, p: ConvProblem) -> tuple[Any, Callable[[Any], Any]]:
    """(the weights split into planes, a function running the wgmma kernel into a fresh output) for ``p``."""
    import cupy

    split = load_kernel("implicit_gemm_tf32x3", "split_weights_tf32x3")
    k = p.c * p.r * p.s
    planes = cupy.empty(2 * p.m * ((k + 3) // 4 * 4), dtype=cupy.float32)
    split((264,), (256,), (w, planes, cupy.int32(p.m), cupy.int32(k)))
    kernel = load_kernel("wgmma_tf32x3", "implicit_gemm_wgmma_tf32x3",
                         options=(f"-DCONVKIT_R={p.r}", f"-DCONVKIT_S={p.s}"), arch="sm_90a")  # fmt: skip
    with_dynamic_shared(kernel, SHARED_BYTES, "implicit_gemm_wgmma_tf32x3")
    pixels = p.n * p.out_h * p.out_w
    grid = ((pixels + 127) // 128, (p.m + 127) // 128)
    ints = (p.n, p.c, p.h, p.w, p.m, p.out_h, p.out_w, p.pad, p.stride)

    def run(out: Any) -> Any:
        kernel(grid, (256,), (x, planes, bias, out, *(cupy.int32(v) for v in ints)), shared_mem=SHARED_BYTES)
        return out

    return planes, run


def reference(x: Any, w: Any, bias: Any, p: ConvProblem) -> Any:
    """The float64 convolution (PyTorch on the GPU), as a CuPy float64 array."""
    import cupy
    import torch

    xt, wt, bt = (torch.from_dlpack(a).double() for a in (x, w, bias))
    return cupy.from_dlpack(torch.nn.functional.conv2d(xt, wt, bt, stride=p.stride, padding=p.pad).contiguous())


def median_us(call: Callable[[], Any]) -> float:
    """The study's timing of ``call``: CUDA events after warm-up, the median of the repeats, in microseconds."""
    return 1e3 * benchmark(call, clock=CudaEventClock()).median_ms


def inputs(p: ConvProblem, rng: Any) -> tuple[Any, Any, Any]:
    """Fresh random x, w and bias of ``p`` (CuPy, float32)."""
    import cupy

    shapes = (p.input_shape, p.filter_shape, (p.m,))
    return tuple(rng.standard_normal(shape, dtype=cupy.float32) for shape in shapes)


def check(p: ConvProblem, rng: Any) -> None:
    """The wgmma kernel's output of ``p`` against float64, poisoned with NaN before the launch."""
    import cupy

    x, w, bias = inputs(p, rng)
    out = cupy.full(p.output_shape, cupy.nan, dtype=cupy.float32)
    wgmma_conv(x, w, bias, p)[1](out)
    err = relative_error(out, reference(x, w, bias, p))
    verdict = "" if err < 1e-5 else "  WRONG"
    print(f"{p.label} pad={p.pad} stride={p.stride}: error {err:.2e}, {int(cupy.isnan(out).sum())} NaN{verdict}")


def speed(p: ConvProblem, rng: Any) -> None:
    """The wgmma kernel's time on ``p`` beside the mma.sync 3xTF32 kernel's default launch."""
    import cupy

    x, w, bias = inputs(p, rng)
    out = cupy.empty(p.output_shape, dtype=cupy.float32)
    _, run = wgmma_conv(x, w, bias, p)
    wg = median_us(lambda: run(out))
    mma = median_us(lambda: conv2d_tf32x3(x, w, pad=p.pad, stride=p.stride))
    setup = median_us(lambda: wgmma_conv(x, w, bias, p))
    err = relative_error(run(out), reference(x, w, bias, p))
    tflop = p.flops / 1e12
    print(f"{p.label}: wgmma {wg:8.1f} us {tflop / wg * 1e6:6.1f} TFLOP/s (error {err:.1e}); mma.sync default "
          f"{mma:8.1f} us {tflop / mma * 1e6:6.1f}; the weights' split and setup {setup:6.1f} us")  # fmt: skip


def main(speeds: bool = True) -> None:
    """The checks, then (``speeds``) the timings."""
    import cupy

    rng = cupy.random.default_rng(7)
    print("=== against float64 (relative error, norm-wise; bar 1e-5)")
    for p in CHECKED + (TIMED[-2:] if speeds else ()):
        check(p, rng)
    if speeds:
        print("=== speed (TFLOP/s of the direct method's FLOPs)")
        for p in TIMED:
            speed(p, rng)


if __name__ == "__main__":  # --check: the small checks alone (under compute-sanitizer)
    import sys

    main(speeds="--check" not in sys.argv[1:])
