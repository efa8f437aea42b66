"""The first 3xTF32 kernel on Hopper's wgmma (kernels/wgmma_tf32x3.cu), checked and timed before it joins a family
(prints; records nothing): with each of its knob settings (:data:`KNOBS`), on irregular shapes against float64
(PyTorch's convolution in float64 on the GPU), every output poisoned with NaN first; then on the 3xTF32 probe's
network layers beside convkit's mma.sync 3xTF32 kernel at its default launch, both timed as the study times (CUDA
events after warm-up, median of repeats), the weights' split timed apart.
Needs an sm_90 GPU (H100, H200), CuPy and PyTorch. Run from the repository root:
    PYTHONPATH=$PWD python3 scripts/wgmma_probe.py [--check [--small]]    # --check: the irregular shapes alone
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

#: The kernel's knobs (its macros): the wgmma's N (the block's pixels) and whether each K-tile is summed apart.
KNOBS = ({"WG_N": 128, "STAGED": 1, "STAGES": 2}, {"WG_N": 128, "STAGED": 0, "STAGES": 2},
         {"WG_N": 128, "STAGED": 0, "STAGES": 3}, {"WG_N": 256, "STAGED": 0, "STAGES": 2})  # fmt: skip
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


def knob_text(knobs: dict[str, int]) -> str:
    return f"N={knobs['WG_N']} {'staged' if knobs['STAGED'] else 'unstaged'} {knobs['STAGES']} stages"


def wgmma_conv(x: Any, w: Any, bias: Any, p: ConvProblem, knobs: dict[str, int]) -> tuple[Any, Callable[[Any], Any]]:
    """(the weights split into planes, a function running the wgmma kernel with ``knobs`` into ``out``) for ``p``."""
    import cupy

    split = load_kernel("implicit_gemm_tf32x3", "split_weights_tf32x3")
    k = p.c * p.r * p.s
    planes = cupy.empty(2 * p.m * ((k + 3) // 4 * 4), dtype=cupy.float32)
    split((264,), (256,), (w, planes, cupy.int32(p.m), cupy.int32(k)))
    macros = (f"-DCONVKIT_R={p.r}", f"-DCONVKIT_S={p.s}", *(f"-DCONVKIT_{k}={v}" for k, v in knobs.items()))
    kernel = load_kernel("wgmma_tf32x3", "implicit_gemm_wgmma_tf32x3", options=macros, arch="sm_90a")
    n = knobs["WG_N"]
    shared = knobs["STAGES"] * (2 * 128 + 2 * n) * 32 * 4  # stages of the weights' two planes and the inputs' two
    with_dynamic_shared(kernel, shared, "implicit_gemm_wgmma_tf32x3")
    pixels = p.n * p.out_h * p.out_w
    grid = ((pixels + n - 1) // n, (p.m + 127) // 128)
    ints = (p.n, p.c, p.h, p.w, p.m, p.out_h, p.out_w, p.pad, p.stride)

    def run(out: Any) -> Any:
        kernel(grid, (256,), (x, planes, bias, out, *(cupy.int32(v) for v in ints)), shared_mem=shared)
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
    """The wgmma kernel's output of ``p`` with each of :data:`KNOBS` against float64, poisoned with NaN first."""
    import cupy

    x, w, bias = inputs(p, rng)
    ref = reference(x, w, bias, p)
    for knobs in KNOBS:
        out = cupy.full(p.output_shape, cupy.nan, dtype=cupy.float32)
        wgmma_conv(x, w, bias, p, knobs)[1](out)
        err = relative_error(out, ref)
        verdict = "" if err < 1e-5 else "  WRONG"
        print(f"{p.label} pad={p.pad} stride={p.stride} {knob_text(knobs)}: error {err:.2e}, "
              f"{int(cupy.isnan(out).sum())} NaN{verdict}")  # fmt: skip


def speed(p: ConvProblem, rng: Any) -> None:
    """The wgmma kernel's time on ``p`` beside the mma.sync 3xTF32 kernel's default launch."""
    import cupy

    x, w, bias = inputs(p, rng)
    out = cupy.empty(p.output_shape, dtype=cupy.float32)
    ref, tflop = reference(x, w, bias, p), p.flops / 1e12
    mma = median_us(lambda: conv2d_tf32x3(x, w, pad=p.pad, stride=p.stride))
    print(f"{p.label}: mma.sync 3xTF32 at its default launch {mma:8.1f} us {tflop / mma * 1e6:6.1f} TFLOP/s")
    for knobs in KNOBS:
        _, run = wgmma_conv(x, w, bias, p, knobs)
        wg = median_us(lambda run=run: run(out))
        setup = median_us(lambda knobs=knobs: wgmma_conv(x, w, bias, p, knobs))
        err = relative_error(run(out), ref)
        print(f"    wgmma {knob_text(knobs):26s} {wg:8.1f} us {tflop / wg * 1e6:6.1f} TFLOP/s, error {err:.1e}; "
              f"the weights' split and setup {setup:6.1f} us")  # fmt: skip


def main(speeds: bool = True, small: bool = False) -> None:
    """The checks (``small``: the four smallest problems alone), then (``speeds``) the timings."""
    import cupy

    rng = cupy.random.default_rng(7)
    print("=== against float64 (relative error, norm-wise; bar 1e-5)")
    for p in (CHECKED[:4] if small else CHECKED) + (TIMED[-2:] if speeds else ()):
        check(p, rng)
    if speeds:
        print("=== speed (TFLOP/s of the direct method's FLOPs)")
        for p in TIMED:
            speed(p, rng)


if __name__ == "__main__":  # --check: the checks alone; --small: the four smallest problems (under compute-sanitizer)
    import sys

    main(speeds="--check" not in sys.argv[1:], small="--small" in sys.argv[1:])
