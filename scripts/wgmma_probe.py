"""The 3xTF32 kernel on Hopper's wgmma (kernels/wgmma_tf32x3.cu, the family's igemm_wgmma_tf32x3), checked and timed
apart from the sweeps (prints; records nothing): each setting it builds (the staged one its tuning candidate),
through the family's launcher, on irregular shapes against float64 (convkit's reference, on the GPU), a bias added,
every output poisoned with NaN first; then on the 3xTF32 probe's network layers beside convkit's mma.sync 3xTF32
kernel at its default launch, both timed as the study times (CUDA events after warm-up, median of repeats), the
weights' split also alone. Needs an sm_90 GPU (H100, H200) and CuPy. Run from the repository root:
    PYTHONPATH=$PWD python3 scripts/wgmma_probe.py [--check [--small]]    # --check: the irregular shapes alone
    PYTHONPATH=$PWD ncu --section ... python3 scripts/wgmma_probe.py --profile  # one launch each, profiled
    PYTHONPATH=$PWD ncu --set full ... python3 scripts/wgmma_probe.py --profile-floor  # the split-ahead kernel
    PYTHONPATH=$PWD python3 scripts/wgmma_probe.py --parts   # the main loop's products and staging timed apart
    PYTHONPATH=$PWD python3 scripts/wgmma_probe.py --ceiling # the products alone, no staging: the tensor cores' pace
    PYTHONPATH=$PWD python3 scripts/wgmma_probe.py --layers [--tuned] # the 3xTF32 chapter's layers of >= 20 GFLOP
    PYTHONPATH=$PWD python3 scripts/wgmma_probe.py --ones [--part=k/n] [--at-most=64] [--early | --clustered]  # 1x1
    PYTHONPATH=$PWD python3 scripts/wgmma_probe.py --gathered [--part=k/n] [--offset=0 | --k-split-picks]  # elsewhere
    PYTHONPATH=$PWD python3 scripts/wgmma_probe.py --pixel-rows [--part=k/n]  # layers of <= 32 filters
    PYTHONPATH=$PWD python3 scripts/wgmma_probe.py --tap-pairs [--part=k/n]  # layers of <= 16 channels
    PYTHONPATH=$PWD python3 scripts/wgmma_probe.py --ones-anatomy [--odd]  # where 16 1x1 layers' time goes
    PYTHONPATH=$PWD python3 scripts/wgmma_probe.py --batch-one  # where the 1x1 layers' time goes at batch 1
    PYTHONPATH=$PWD python3 scripts/wgmma_probe.py --batch-one-settings [--part=k/n]  # their pixel rows' K splits
    PYTHONPATH=$PWD python3 scripts/wgmma_probe.py --batch-one-parts  # the picks still behind, their loop in parts
    PYTHONPATH=$PWD python3 scripts/wgmma_probe.py --batch-one-timeline  # where their blocks spend a call
    PYTHONPATH=$PWD python3 scripts/wgmma_probe.py --weights-in-block  # the picks with the weights split in block
    PYTHONPATH=$PWD python3 scripts/wgmma_probe.py --early-launches  # launched early: do launches overlap?
    PYTHONPATH=$PWD python3 scripts/wgmma_probe.py --moved-picks  # batch 8-128 layers whose pick 7e2e283 moved
    PYTHONPATH=$PWD python3 scripts/wgmma_probe.py --small-grids [--part=k/n]  # 1x1 of few tiles: smaller blocks
    PYTHONPATH=$PWD python3 scripts/wgmma_probe.py --cutlass-ones | --cutlass-taps  # every setting where CUTLASS won
    PYTHONPATH=$PWD python3 scripts/wgmma_probe.py --ahead-early [--part=k/n]  # 3x3, 5x5: split ahead, early or not
    PYTHONPATH=$PWD python3 scripts/wgmma_probe.py --producer-halves [--part=k/n]  # 1x1 of <= 64 filters, halves
    PYTHONPATH=$PWD ncu --profile-from-start off --set full ... \
        python3 scripts/wgmma_probe.py --ones-profile [--batch-one]  # --batch-one: the first-use picks furthest behind
    PYTHONPATH=$PWD python3 scripts/wgmma_probe.py --winograd [--check [--small] | --timed] [--part=k/n]  # on wgmma
    PYTHONPATH=$PWD python3 scripts/wgmma_probe.py --winograd-parts  # Winograd's products kernel timed in parts
    PYTHONPATH=$PWD ncu ... python3 scripts/wgmma_probe.py --winograd-profile  # one Winograd call, for ncu
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from convkit.core import reference
from convkit.core.problem import ConvProblem
from convkit.core.reference import DIRECT_TOLERANCE
from convkit.cuda.launch import KernelLaunch
from convkit.cuda.launch import launch as launch_kernel
from convkit.cuda.timing import CudaEventClock, benchmark
from convkit.families.fp32.winograd import conv2d_winograd, winograd_default
from convkit.families.tf32x3.launch import conv2d_tf32x3, split_elements, split_weights, winograd_launch
from convkit.families.tf32x3.wgmma import (
    BLOCK_M,
    TILE_K,
    WgmmaGemmLaunch,
    WgmmaLaunch,
    WgmmaWsLaunch,
    conv2d_wgmma_tf32x3,
)
from convkit.families.tf32x3.wgmma_operands import k_tiles
from convkit.families.tf32x3.wgmma_settings import (
    GATHERED_NARROW,
    GATHERED_PERSISTENT,
    GATHERED_PINGPONG,
    GATHERED_SPLIT,
    SPLIT_AHEAD,
    SPLIT_AHEAD_NARROW,
    SPLIT_STAGED,
    WGMMA_SETTINGS,
    WS_SETTINGS,
    output_tiles,
    split_fits,
)
from convkit.families.tf32x3.wgmma_winograd import (
    INPUTS,
    WgmmaWinogradLaunch,
    WinogradProductsLaunch,
    winograd_wgmma_candidates,
)

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


def launch_text(spec: WgmmaLaunch) -> str:
    if isinstance(spec, WgmmaWsLaunch):
        split = {None: "", "split ahead": ", inputs split ahead", "split staged": ", inputs split staged"}[spec.inputs]
        narrow = f", {spec.filters} filters a block" if spec.filters else ""
        k_split = f", K split in {spec.splits}{' over a cluster' if spec.cluster else ''}" if spec.splits else ""
        persistent, early = ", persistent" if spec.persistent else "", ", early" if spec.early else ""
        pingpong, pairs = ", ping-pong" if spec.pingpong else "", ", two taps a K-tile" if spec.tap_pairs else ""
        halves = ", producer halves" if spec.producer_halves else ""
        in_block = ", weights split in the block" if spec.weights_in_block else ""
        width = f", {spec.width} pixels a block" if spec.width else ""
        return (f"warp-specialised, {spec.in_flight} in flight{split}{persistent}{narrow}{width}{pingpong}{k_split}"
                f"{early}{pairs}{halves}{in_block}")  # fmt: skip
    return f"N={spec.n} {'staged' if spec.staged else 'unstaged'} {spec.stages} stages"


def by_name(specs: Iterable[WgmmaLaunch]) -> dict[str, WgmmaLaunch]:
    """``specs`` by :func:`launch_text`, a launch named twice kept once; two launches of one name refused (a run keyed
    by it would replace the other's unseen)."""
    named: dict[str, WgmmaLaunch] = {}
    for spec in specs:
        if named.setdefault(launch_text(spec), spec) != spec:
            raise ValueError(f"two launches named {launch_text(spec)!r}: {named[launch_text(spec)]} and {spec}")
    return named


def wgmma_call(x: Any, w: Any, bias: Any, p: ConvProblem, spec: WgmmaLaunch) -> Callable[[Any], Any]:
    """A call of the family's launcher with ``spec`` (either kernel's) into ``out`` (the weights' split and the
    kernel, as the op runs them), its workspace allocated once."""
    import cupy

    workspace = cupy.empty(spec.workspace_bytes(p), dtype=cupy.uint8)
    return lambda out: conv2d_wgmma_tf32x3(x, w, pad=p.pad, stride=p.stride, launch=spec, out=out, bias=bias,
                                    workspace=workspace)  # fmt: skip


def expected(x: Any, w: Any, bias: Any, p: ConvProblem) -> Any:
    """The float64 convolution plus the bias, on the GPU (convkit's reference)."""
    return reference.bias_add(reference.conv2d(x, w, pad=p.pad, stride=p.stride), bias)


def median_us(call: Callable[[], Any]) -> float:
    """The study's timing of ``call``: CUDA events after warm-up, the median of the repeats, in microseconds."""
    return 1e3 * benchmark(call, clock=CudaEventClock()).median_ms


def inputs(p: ConvProblem, rng: Any) -> tuple[Any, Any, Any]:
    """Fresh random x, w and bias of ``p`` (CuPy, float32)."""
    import cupy

    shapes = (p.input_shape, p.filter_shape, (p.m,))
    return tuple(rng.standard_normal(shape, dtype=cupy.float32) for shape in shapes)


def calls(
    x: Any, w: Any, bias: Any, p: ConvProblem, settings: tuple[WgmmaLaunch, ...] = (*WGMMA_SETTINGS, *WS_SETTINGS)
) -> list[tuple[str, Callable[[Any], Any]]]:
    """(name, a call into ``out``) of each wgmma kernel in each setting it builds (or of ``settings``): the first,
    then the warp-specialised one (:class:`~convkit.families.tf32x3.wgmma.WgmmaWsLaunch`), the weights' split
    included."""
    return [(f"wgmma {launch_text(spec)}", wgmma_call(x, w, bias, p, spec)) for spec in settings]


def check(p: ConvProblem, rng: Any, settings: tuple[WgmmaLaunch, ...] = (*WGMMA_SETTINGS, *WS_SETTINGS)) -> None:
    """The wgmma kernel's output of ``p`` in each setting it builds (or of ``settings``) against float64, poisoned
    with NaN first."""
    import cupy

    x, w, bias = inputs(p, rng)
    ref = expected(x, w, bias, p)
    for name, call in calls(x, w, bias, p, settings):
        out = cupy.full(p.output_shape, cupy.nan, dtype=cupy.float32)
        call(out)
        err = reference.relative_error(out, ref)
        verdict = "" if err < 1e-5 else "  WRONG"
        print(f"{p.label} pad={p.pad} stride={p.stride} {name}: error {err:.2e}, "
              f"{int(cupy.isnan(out).sum())} NaN{verdict}")  # fmt: skip


def speed(p: ConvProblem, rng: Any) -> None:
    """The wgmma kernel's time on ``p`` beside the mma.sync 3xTF32 kernel's default launch."""
    import cupy

    x, w, bias = inputs(p, rng)
    out = cupy.empty(p.output_shape, dtype=cupy.float32)
    ref, tflop = expected(x, w, bias, p), p.flops / 1e12
    mma = median_us(lambda: conv2d_tf32x3(x, w, pad=p.pad, stride=p.stride))
    planes = cupy.empty(split_elements(p), dtype=cupy.float32)
    split = median_us(lambda: split_weights(p, w, planes))
    print(f"{p.label}: mma.sync 3xTF32 at its default launch {mma:8.1f} us {tflop / mma * 1e6:6.1f} TFLOP/s; the "
          f"weights' split alone {split:6.1f} us")  # fmt: skip
    for name, run in calls(x, w, bias, p):
        wg = median_us(lambda run=run: run(out))
        err = reference.relative_error(run(out), ref)
        print(f"    {name:58s} {wg:8.1f} us {tflop / wg * 1e6:6.1f} TFLOP/s (the split included), error {err:.1e}")


class _Part:
    """A launch built with ``CONVKIT_WG_PART`` = ``part`` (a field of the dataclass it is mixed into; what each
    leaves out, :data:`PART_NAMES`); its output is wrong, its time is the experiment."""

    part: int

    def options(self, problem: ConvProblem) -> tuple[str, ...]:
        return (*super().options(problem), f"-DCONVKIT_WG_PART={self.part}")  # type: ignore[misc]


@dataclass(frozen=True)
class PartLaunch(_Part, WgmmaGemmLaunch):
    part: int = 0


@dataclass(frozen=True)
class PartWsLaunch(_Part, WgmmaWsLaunch):
    part: int = 0


def rebuilt(spec: WgmmaLaunch, kind: type[WgmmaLaunch], **extra: Any) -> WgmmaLaunch:
    """``spec``'s settings as a launch of ``kind`` (a class that builds its kernel otherwise), with ``extra``'s."""
    return kind(**{f.name: getattr(spec, f.name) for f in fields(spec)}, **extra)


def one_kernel(spec: WgmmaLaunch, p: ConvProblem) -> bool:
    """Whether ``spec``'s kernel writes ``p``'s output itself: no K split over planes of partial outputs, which a
    second kernel adds up."""
    return not isinstance(spec, WgmmaWsLaunch) or spec.effective_splits(p) == 1 or spec.sums_in_cluster(p)


def part_of(spec: WgmmaLaunch, part: int) -> WgmmaLaunch:
    """``spec`` built to run ``part`` of its main loop alone (:class:`_Part`)."""
    return rebuilt(spec, PartWsLaunch if isinstance(spec, WgmmaWsLaunch) else PartLaunch, part=part)


PART_NAMES = (
    "whole",
    "products alone",
    "staging alone",
    "no weights after the first stages",
    "no proxy fence",
    "barriers alone",
    "barriers alone, no fence",
    "barriers alone, B unswizzled",
    "barriers alone, A swizzled",
    "whole, descriptors moved on",
    "whole, no output stored",
)  # the parts CONVKIT_WG_PART 0-10 time (the kernel's text)


def parts(p: ConvProblem, rng: Any) -> None:
    """The main loop's time on ``p`` whole, the products alone and the staging alone (the weights' copies, the
    inputs gathered, split and stored), per setting of either kernel: which half sets the pace; for the
    warp-specialised kernel also without the weights' traffic after the first stages (what it costs), and for the
    split-ahead one without the consumers' proxy fence and with no copies at all (the barriers' cost)."""
    import cupy

    x, w, bias = inputs(p, rng)
    out = cupy.empty(p.output_shape, dtype=cupy.float32)
    tflop = p.flops / 1e12
    for spec in (WGMMA_SETTINGS[0], *WS_SETTINGS):  # the first kernel's candidate; its other settings no faster
        ws = isinstance(spec, WgmmaWsLaunch)
        count = len(PART_NAMES) if ws and spec.inputs else 4 if ws else 3
        times = []
        for part in range(count):
            run = wgmma_call(x, w, bias, p, part_of(spec, part))
            times.append(median_us(lambda run=run: run(out)))
        named = zip(PART_NAMES, times, strict=False)
        line = ", ".join(f"{name} {t:7.1f} us ({tflop / t * 1e6:5.1f})" for name, t in named)
        print(f"{p.label} {launch_text(spec)}: {line}")


@dataclass(frozen=True)
class CeilingLaunch(KernelLaunch):
    """``wgmma_products_ceiling`` (kernels/wgmma_tf32x3.cu): a block a GPU's SM, ``warpgroups`` of 128 threads each
    running ``iters`` K-tiles of 12 products on a stage of zeros, ``n`` pixels wide, ``in_flight`` K-tiles at a time,
    in the kernels' unswizzled layout or (``swizzle`` 1) CUTLASS's 128-byte swizzle, or (2) B alone in it."""

    n: int = 128
    in_flight: int = 1
    swizzle: int = 0
    warpgroups: int = 2

    kind: ClassVar[str] = "wgmma_products_ceiling"
    source: ClassVar[str] = "wgmma_tf32x3"
    arch: ClassVar[str | None] = "sm_90a"

    def kernel_name(self, problem: Any) -> str:
        return "wgmma_products_ceiling"

    def options(self, problem: Any) -> tuple[str, ...]:
        return (
            f"-DCONVKIT_WG_N={self.n}",
            "-DCONVKIT_STAGED=0",
            f"-DCONVKIT_WS_IN_FLIGHT={self.in_flight}",
            f"-DCONVKIT_CEILING_SWIZZLE={int(self.swizzle)}",
            f"-DCONVKIT_CEILING_WARPGROUPS={self.warpgroups}",
        )

    def grid(self, problem: Any) -> tuple[int, ...]:
        import cupy

        return (cupy.cuda.Device().attributes["MultiProcessorCount"],)

    def block(self, problem: Any) -> tuple[int, ...]:
        return (128 * self.warpgroups,)

    def shared_bytes(self, problem: Any) -> int:
        return (2 * BLOCK_M + 2 * self.n) * TILE_K * 4

    def tflops(self, ms: float, iters: int) -> float:
        """The TF32 rate (TFLOP/s) of ``iters`` K-tiles a warpgroup in ``ms``: 12 products of 64 x n x 8 each."""
        flops = 2 * 64 * self.n * 8 * 12 * iters * self.warpgroups * self.grid(None)[0]
        return flops / (ms * 1e-3) / 1e12


CEILINGS = (
    CeilingLaunch(), CeilingLaunch(swizzle=True), CeilingLaunch(in_flight=2), CeilingLaunch(in_flight=2, swizzle=True),
    CeilingLaunch(warpgroups=3), CeilingLaunch(warpgroups=3, swizzle=True), CeilingLaunch(256),
    CeilingLaunch(256, swizzle=True), CeilingLaunch(256, warpgroups=3), CeilingLaunch(swizzle=2),
    CeilingLaunch(in_flight=2, swizzle=2),
)  # fmt: skip


def ceiling(iters: int = 4096) -> None:
    """Each :data:`CEILINGS` setting timed: the TF32 rate of the kernels' products with nothing else to do, and the
    3xTF32 rate (a third of it) it leaves the kernels' main loop at best."""
    import cupy

    out = cupy.empty(384 * 1024, dtype=cupy.float32)
    for spec in CEILINGS:
        ms = median_us(lambda spec=spec: launch_kernel(spec, None, (out, cupy.int32(iters)))) / 1e3
        rate = spec.tflops(ms, iters)
        layout = ("no swizzle", "128B swizzle", "B swizzled")[spec.swizzle]
        print(f"products' ceiling n={spec.n} in flight {spec.in_flight} {layout:12s} {spec.warpgroups} warpgroups: "
              f"{rate:6.1f} TF32 TFLOP/s, {rate / 3:6.1f} 3xTF32")  # fmt: skip


def profiled(p: ConvProblem, rng: Any) -> None:
    """One launch of each wgmma setting and of the mma.sync kernel on ``p``, for Nsight Compute to profile (each
    built by a call before, whose launch ``ncu``'s kernel filter and launch count skip: see the chain ``wgmma_why``
    in scripts/ready_node_device.sh)."""
    import cupy

    x, w, bias = inputs(p, rng)
    out = cupy.empty(p.output_shape, dtype=cupy.float32)
    for _, call in calls(x, w, bias, p):
        call(out)
    conv2d_tf32x3(x, w, pad=p.pad, stride=p.stride)
    cupy.cuda.runtime.deviceSynchronize()


#: For ``--ones-profile``: a 1x1 layer whose stores weigh most (two K-tiles a tile, 1,458 tiles), and a batch-1 one
#: of few tiles (7 at 128 filters, 8 K-tiles), the two kinds of layer still under 1.2x cuBLAS SGEMM or near it. H200,
#: ``ncu --set full`` (its clocks, 2026-12-02, at e641076): on the first, ping-pong 74.4 us, persistent 92.4, SGEMM
#: 90.8; ping-pong issues on 42% of cycles, its tensor pipe busy 26%, DRAM 18%, its warps waiting most on fixed
#: latencies and on the producer's loads (1.8 and 1.7 cycles an instruction). On the second, K split in 8 9.6 us and
#: its planes' sum 4.9, beside the weights' split 3.5 (each call), against SGEMM's 8.4 and its split-K reduce 3.6: the
#: sum's launch and traffic, which K split over a cluster (:data:`GATHERED_CLUSTER`) leaves out.
ONES_PROFILED = (ConvProblem(128, 48, 27, 27, 192, 1, 1), ConvProblem(1, 256, 28, 28, 128, 1, 1))


#: The batch-1 1x1 layers furthest behind the best FP32 library in the 3xTF32 probe's run of 2026-12-04 (cuConv's
#: labels: 0.61x, 0.73x, 0.76x, 0.78x), for ``--ones-profile --batch-one``: where a call of a few K-tiles a block, or
#: of 16, spends its time.
BATCH_ONE_PROFILED = ("7-1-1-512-2048", "54-1-1-16-96", "28-1-1-16-192", "27-1-1-192-48")
#: Those and three more of the batch-1 1x1 layers still behind the library (7x7 512->2,048, 14x14 1,024->256, 28x28
#: 64->64), for ``--batch-one-parts``.
BATCH_ONE_BEHIND = (*BATCH_ONE_PROFILED, "7-1-1-2048-512", "14-1-1-256-1024", "28-1-1-64-64")


def ones_profiled(rng: Any, batch_one: bool = False) -> None:
    """For Nsight Compute (``ncu --profile-from-start off``): on each of :data:`ONES_PROFILED`, one call each of the
    gathering kernel persistent, with ping-pong, with K split in 8 (kernel and sum), and of cuBLAS SGEMM, between
    the profiler's start and stop, each built and run once before it starts; with ``batch_one``, on
    :data:`BATCH_ONE_PROFILED` the first-use pick (the weights' split and the kernel) and SGEMM."""
    import cupy

    from convkit.families.tf32x3.wgmma_pick import wgmma_default
    from convkit.libs import cublas

    settings = (GATHERED_PERSISTENT, GATHERED_PINGPONG, dataclasses.replace(GATHERED_SPLIT, splits=8))
    problems = [p for p in batch_one_layers() if p.label in BATCH_ONE_PROFILED] if batch_one else ONES_PROFILED
    runs = []
    for p in problems:
        x, w, bias = inputs(p, rng)
        out = cupy.empty(p.output_shape, dtype=cupy.float32)
        runs += [functools.partial(wgmma_call(x, w, bias, p, spec), out)
                 for spec in ((wgmma_default(p),) if batch_one else settings)]  # fmt: skip
        runs.append(functools.partial(cublas.conv1x1, x, w, out))
    for run in runs:
        run()
    cupy.cuda.runtime.deviceSynchronize()
    cupy.cuda.runtime.profilerStart()
    for run in runs:
        run()
    cupy.cuda.runtime.deviceSynchronize()
    cupy.cuda.runtime.profilerStop()


def profiled_floor(p: ConvProblem, rng: Any) -> None:
    """For Nsight Compute, one launch each of the split-ahead kernel's tuning setting (:data:`SPLIT_AHEAD`) on ``p``
    whole, with the barriers alone (part 5) and with its descriptors moved on (part 9), and of the products' ceiling
    in the same schedule (two K-tiles in flight, B swizzled): where the kernel's time goes beyond the ceiling's."""
    import cupy

    x, w, bias = inputs(p, rng)
    out = cupy.empty(p.output_shape, dtype=cupy.float32)
    for part in (0, 5, 9):
        wgmma_call(x, w, bias, p, part_of(SPLIT_AHEAD, part))(out)
    launch_kernel(CeilingLaunch(in_flight=2, swizzle=2), None, (cupy.empty(384 * 1024, dtype=cupy.float32),
                                                               cupy.int32(512)))  # fmt: skip
    cupy.cuda.runtime.deviceSynchronize()


def chapter_layers(min_gflop: float = 20.0) -> list[ConvProblem]:
    """The 3xTF32 chapter's layers of at least ``min_gflop`` GFLOP, as its recorded H100 sweep names them (the
    layers alone: the numbers beside them are that run's)."""
    import csv
    from pathlib import Path

    rows = csv.DictReader(Path("results/nvidia-h100-80gb-hbm3/tf32x3.csv").open())
    sizes = ("N", "C", "H", "W", "M", "R", "S")
    keys = {tuple(int(row[k]) for k in (*sizes, "pad", "stride")) for row in rows}
    problems = [ConvProblem(*key[:7], pad=key[7], stride=key[8]) for key in sorted(keys)]
    return [p for p in problems if p.flops >= min_gflop * 1e9]


#: A problem's runs by name, each a call into ``out``, from its inputs: ``runs(p, x, w, bias)``.
Runs = Callable[[ConvProblem, Any, Any, Any], dict[str, Callable[[Any], Any]]]


def wgmma_runs(settings: dict[str, WgmmaLaunch], mma_sync: bool) -> Runs:
    """``settings`` (by name) through the family's launcher, and (``mma_sync``) the mma.sync 3xTF32 kernel's default
    launch."""

    def runs(p: ConvProblem, x: Any, w: Any, bias: Any) -> dict[str, Callable[[Any], Any]]:
        out = {name: wgmma_call(x, w, bias, p, spec) for name, spec in settings.items()}
        if mma_sync:
            out["mma.sync"] = lambda y: conv2d_tf32x3(x, w, pad=p.pad, stride=p.stride, out=y)
        return out

    return runs


def rates_table(
    problems: list[ConvProblem],
    runs: Runs,
    check_every: int,
    checked: Callable[[ConvProblem], int] = lambda p: 1,
    bar: float = DIRECT_TOLERANCE,
    against: str = "",
) -> list[dict[str, float]]:
    """TFLOP/s (of the direct method's FLOPs) on each of ``problems`` of each of ``runs``, every ``check_every``-th
    problem's first ``checked(problem)`` runs checked against float64 (a bias added; "WRONG" past ``bar``); the
    medians last, and the median of each problem's best; with ``against`` (a run's name, last in each problem's runs
    and not among "the best"), the median of the best over it and on how many problems the best is faster. Returns
    each problem's rates by run name."""
    import statistics

    import cupy

    rng = cupy.random.default_rng(11)
    rates = []
    for i, p in enumerate(problems):
        x, w, bias = inputs(p, rng)
        out = cupy.empty(p.output_shape, dtype=cupy.float32)
        named = runs(p, x, w, bias)
        rates.append({name: p.flops / median_us(lambda r=run, y=out: r(y)) / 1e6 for name, run in named.items()})
        line = "; ".join(f"{name} {rate:6.2f}" for name, rate in rates[-1].items())
        if i % check_every == 0:
            ref = expected(x, w, bias, p)
            for name in list(named)[: checked(p)]:
                out.fill(cupy.nan)
                named[name](out)
                err = reference.relative_error(out, ref)
                line += f"; {name} error {err:.1e}{'  WRONG' if not err < bar else ''}"
        print(f"{p.label} pad={p.pad} stride={p.stride} ({p.flops / 1e9:.0f} GFLOP): {line}")
    names = dict.fromkeys(name for r in rates for name in r)  # runs a problem lacks (a tile) left out of its median
    medians = "; ".join(f"{name} {statistics.median(r[name] for r in rates if name in r):.1f}" for name in names)
    ours = [max(rate for name, rate in r.items() if name != against) for r in rates]
    print(f"median TFLOP/s over {len(rates)} layers: {medians}; the best of them {statistics.median(ours):.1f}")
    if against:
        print(over_line(f"the best over {against}", [best / r[against] for best, r in zip(ours, rates, strict=True)]))
    return rates


def over_line(what: str, ratios: list[float]) -> str:
    """``what``: the median and the geometric mean of ``ratios`` (ours over a peer's rate) and on how many ours is
    faster."""
    import statistics

    if not ratios:
        return f"{what}: none"
    return (f"{what}: median {statistics.median(ratios):.2f}x, geomean {statistics.geometric_mean(ratios):.3f}x, "
            f"faster on {sum(o > 1 for o in ratios)} of {len(ratios)}")  # fmt: skip


def tuned_layers() -> None:
    """The split-ahead kernel's tuning candidates (:data:`SPLIT_AHEAD`, at 128 filters, and
    :data:`SPLIT_AHEAD_NARROW`, at 64) and its inputs split as staged (:data:`SPLIT_STAGED`: a candidate again if it
    wins) on :func:`chapter_layers` (:func:`rates_table`, every fifth layer checked)."""
    settings = {"128 filters": SPLIT_AHEAD, "64 filters": SPLIT_AHEAD_NARROW, "split staged": SPLIT_STAGED}
    rates_table(chapter_layers(), wgmma_runs(settings, False), 5)


def layers() -> None:
    """The split-ahead warp-specialised kernel in each setting (one or two K-tiles in flight, a block a tile or
    persistent, 128 or 64 filters a block), the gathered one (a block a tile, and persistent) and the mma.sync
    kernel's default launch on :func:`chapter_layers` (:func:`rates_table`, every fifth layer checked)."""
    split = {
        name.removeprefix("warp-specialised, "): spec for name, spec in by_name(WS_SETTINGS).items() if spec.inputs
    }
    gathered = {"gathered": WgmmaWsLaunch(), "gathered, persistent": GATHERED_PERSISTENT}
    rates_table(chapter_layers(), wgmma_runs({**split, **gathered}, True), 5)


def ones(
    part: tuple[int, int] = (1, 1), most_filters: int | None = None, early: bool = False, clustered: bool = False
) -> None:
    """The 3xTF32 chapter's stride-1 1x1 layers (every one, its ``part`` = (k, n): the k-th of n shares), each of the
    family's tuning candidates there (:func:`one_tap_candidates` among them), the inputs split as staged
    (:data:`SPLIT_STAGED`, split by the consumers: a candidate if it wins), the gathering kernel with K split in 4 and
    8 (:data:`GATHERED_SPLIT`) and at 64 filters a block where the layer has at most 64 (:data:`GATHERED_NARROW`) on
    every layer, where the candidates' rule leaves them out too (to test the rule), K split at 64 filters a block too
    there, and the mma.sync kernel (``most_filters``: the layers of at most that many filters alone; ``early``: the
    gathering kernel's settings that won a layer each launched early and not, beside the split-ahead one), beside
    cuBLAS SGEMM (the 1x1 layers' library peer, FP32 math), the wgmma runs checked on every tenth layer
    (:func:`rates_table`): the chapter's 1x1 target is the best's median over SGEMM; then the same of the op's
    first-use pick (:func:`~convkit.families.tf32x3.wgmma_pick.wgmma_default` or the mma.sync kernel).
    ``clustered``: on the layers where K split in 4 is a candidate, K split in 4 and 8 over planes and over a cluster
    (:data:`GATHERED_CLUSTER`) beside the persistent settings and the mma.sync kernel: each cluster's over its planes,
    and the best with clusters and without over SGEMM."""
    from convkit.families.tf32x3.wgmma_pick import wgmma_default
    from convkit.families.tf32x3.wgmma_settings import wgmma_candidates
    from convkit.libs import cublas

    problems = [p for p in chapter_layers(0.0) if cublas.supports(p) and p.m <= (most_filters or p.m)]
    problems = [p for p in problems if split_fits(p, 4, 8)] if clustered else problems
    problems = problems[part[0] - 1 :: part[1]]

    def settings(p: ConvProblem) -> dict[str, WgmmaLaunch]:
        k_split = (GATHERED_SPLIT, dataclasses.replace(GATHERED_SPLIT, splits=8))
        if clustered:
            over_cluster = [dataclasses.replace(s, cluster=True) for s in k_split]
            ok = [s for s in over_cluster if not s.not_supported_reasons(p)]
            return by_name((GATHERED_PERSISTENT, GATHERED_PINGPONG, *k_split, *ok))
        narrow = (GATHERED_NARROW, *(dataclasses.replace(s, filters=64) for s in k_split)) if p.m <= 64 else ()
        chosen = (*wgmma_candidates(p), SPLIT_STAGED, *k_split, *narrow)
        if early:  # (a block a tile, one K-tile in flight, won no layer: left out)
            gathered = [s for s in dict.fromkeys(chosen) if isinstance(s, WgmmaWsLaunch) and s.in_flight == 2
                        and not s.inputs]  # fmt: skip
            toggled = (dataclasses.replace(s, early=None if s.early else True) for s in gathered)
            chosen = (SPLIT_AHEAD, *gathered, *toggled)
        return by_name(chosen)

    def runs(p: ConvProblem, x: Any, w: Any, bias: Any) -> dict[str, Callable[[Any], Any]]:
        out = wgmma_runs(settings(p), True)(p, x, w, bias)
        return out | {"cuBLAS SGEMM": lambda y: cublas.conv1x1(x, w, y)}  # (the unchecked runs add no bias)

    # the wgmma runs checked alone: the mma.sync kernel and SGEMM are called with no bias
    rates = rates_table(problems, runs, 10, checked=lambda p: len(settings(p)), against="cuBLAS SGEMM")
    if clustered:
        for split in (GATHERED_SPLIT, dataclasses.replace(GATHERED_SPLIT, splits=8)):
            planes, cluster = launch_text(split), launch_text(dataclasses.replace(split, cluster=True))
            print(over_line(f"{cluster} over its planes", [r[cluster] / r[planes] for r in rates if cluster in r]))
        for with_cluster in (False, True):
            best = [max(v for k, v in r.items() if k != "cuBLAS SGEMM" and (with_cluster or "cluster" not in k))
                    / r["cuBLAS SGEMM"] for r in rates]  # fmt: skip
            print(over_line(f"the best {'with' if with_cluster else 'without'} clusters over cuBLAS SGEMM", best))
        return
    if not early:  # the op's first-use tuner times the heuristic launch beside the mma.sync kernel
        picked = [max(r[launch_text(wgmma_default(p))], r["mma.sync"]) / r["cuBLAS SGEMM"]
                  for p, r in zip(problems, rates, strict=True)]  # fmt: skip
        print(over_line("the heuristic launch (wgmma_default) or mma.sync over cuBLAS SGEMM", picked))


def gathered(part: tuple[int, int] = (1, 1), offset: int = 0, k_split_picks: bool = False) -> None:
    """Whether the 1x1 layers' settings of the gathering kernel (:func:`one_tap_candidates`: persistent, ping-pong, 64
    filters a block, K split; and the split-ahead kernel with ping-pong at 64, and on two taps a K-tile at most 16
    channels) would serve other filters too: on cuConv's 3x3 and 5x5 layers (every third from ``offset``, its ``part`` =
    (k, n) of them), each of the tuner's candidates there (:func:`wgmma_candidates`) and each of those settings that
    supports the layer, every tenth layer checked (:func:`rates_table`); then the best with them over the best without,
    and which won, by the layer's K-tiles; and the first-use launch (:func:`wgmma_default`) over the fastest. With
    ``k_split_picks``: instead of every third, each of those layers where the first-use launch is a K split."""

    from convkit.families.tf32x3.wgmma_pick import wgmma_default
    from convkit.families.tf32x3.wgmma_settings import TAP_PAIR_SETTINGS, one_tap_candidates, wgmma_candidates
    from convkit.papers import cuconv

    problems = [p for p in cuconv.problems()[offset::3] if p.r * p.s > 1][part[0] - 1 :: part[1]]
    if k_split_picks:
        picks = [p for p in cuconv.problems() if p.r * p.s > 1 and (getattr(wgmma_default(p), "splits", None) or 1) > 1]
        problems = picks[part[0] - 1 :: part[1]]
    tuned = {p.key: by_name(wgmma_candidates(p)) for p in problems}
    ahead_pingpong = dataclasses.replace(SPLIT_AHEAD_NARROW, pingpong=True)  # (at most 64 filters)

    def others(p: ConvProblem) -> dict[str, WgmmaLaunch]:
        settings = (*one_tap_candidates(p), *([ahead_pingpong] if p.m <= 64 else []), *TAP_PAIR_SETTINGS)
        return {k: v for k, v in by_name(s for s in settings if not s.not_supported_reasons(p)).items()
                if k not in tuned[p.key]}  # fmt: skip

    extra = {p.key: others(p) for p in problems}

    def runs(p: ConvProblem, x: Any, w: Any, bias: Any) -> dict[str, Callable[[Any], Any]]:
        return wgmma_runs({**tuned[p.key], **extra[p.key]}, False)(p, x, w, bias)

    rates = rates_table(problems, runs, 10, checked=lambda p: len(tuned[p.key]) + len(extra[p.key]))
    ratios = []
    for p, r in zip(problems, rates, strict=True):
        before = max(r[name] for name in tuned[p.key])
        best = max(r, key=r.get)
        ratios.append(r[best] / before)
        print(f"  {p.label} pad={p.pad}: {k_tiles(p)} K-tiles, {p.m} filters: {r[best] / before:.2f}x ({best})")
    print(over_line("the best with the gathering settings over the candidates", ratios))
    print(first_use_line(problems, rates))


def first_use_line(problems: list[ConvProblem], rates: list[dict[str, float]]) -> str:
    """The first-use launch's rate (:func:`~convkit.families.tf32x3.wgmma_pick.wgmma_default`) over the fastest
    wgmma setting's on each of ``problems`` (``rates`` by run name, :func:`rates_table`'s; the mma.sync kernel left
    out): geometric mean, lowest, how many under 0.9, and on how many the pick was not among the runs; then a line
    for each layer under 0.9, its pick beside the fastest."""
    import statistics

    from convkit.families.tf32x3.wgmma_pick import wgmma_default

    picked, misses = [], []
    for p, r in zip(problems, rates, strict=True):
        wgmma = {name: rate for name, rate in r.items() if name != "mma.sync"}
        pick, best = launch_text(wgmma_default(p)), max(wgmma, key=wgmma.get)
        picked.append(wgmma.get(pick, math.nan) / wgmma[best])
        if picked[-1] < 0.9:
            misses.append(f"  under 0.9: {p.label} pad={p.pad} at {picked[-1]:.3f}: {pick}, the fastest {best}")
    known = [v for v in picked if v == v]
    return "\n".join([
        f"the first-use launch over the fastest: geometric mean {statistics.geometric_mean(known):.3f}, lowest "
        f"{min(known):.3f}, under 0.9 on {sum(v < 0.9 for v in known)} of {len(known)} (not timed on "
        f"{len(picked) - len(known)})", *misses])  # fmt: skip


def beside_candidates(
    problems: list[ConvProblem],
    new: Callable[[ConvProblem], dict[str, WgmmaLaunch]],
    check_every: int,
    what: str,
    sgemm: bool = False,
) -> None:
    """Settings not yet among the tuner's (``new``: by name, for a problem) on ``problems`` beside the tuner's other
    candidates and the mma.sync kernel, every ``check_every``-th problem checked (:func:`rates_table`); then, for
    each problem and over them all, the fastest of the new over the fastest of the rest, and the first-use launch
    over the fastest (:func:`first_use_line`); with ``sgemm`` (1x1 layers), cuBLAS SGEMM timed too, and the fastest
    of ours over it with and without the new settings."""
    from convkit.families.tf32x3.wgmma_settings import wgmma_candidates
    from convkit.libs import cublas

    def others(p: ConvProblem) -> dict[str, WgmmaLaunch]:
        return {k: v for k, v in by_name(wgmma_candidates(p)).items() if k not in new(p)}

    def runs(p: ConvProblem, x: Any, w: Any, bias: Any) -> dict[str, Callable[[Any], Any]]:
        named = wgmma_runs({**new(p), **others(p)}, True)(p, x, w, bias)
        return {**named, "SGEMM": lambda y: cublas.conv1x1(x, w, y)} if sgemm else named

    rates = rates_table(problems, runs, check_every, checked=lambda p: len(new(p)) + len(others(p)),
                        against="SGEMM" if sgemm else "")  # fmt: skip
    ratios, before = [], []
    for p, r in zip(problems, rates, strict=True):
        mine = max(r[name] for name in new(p))
        rest = max(v for k, v in r.items() if k not in new(p) and k != "SGEMM")
        ratios.append(mine / rest)
        before.append(rest / r["SGEMM"] if sgemm else math.nan)
        print(f"  {p.label}: {p.c} channels, {p.m} filters, {p.r}x{p.s}: {ratios[-1]:.2f}x ({max(r, key=r.get)})")
    print(over_line(f"the fastest {what} over the rest", ratios))
    if sgemm:
        print(over_line("without them, the best over SGEMM", before))
    print(first_use_line(problems, [{k: v for k, v in r.items() if k != "SGEMM"} for r in rates]))


def pixel_rows(part: tuple[int, int] = (1, 1)) -> None:
    """The gathering kernel with the block's pixels the products' rows (:data:`GATHERED_PIXEL_ROWS`: 32 filters a block,
    and 16 where the layer has at most 16; persistent or a block a tile, one or two K-tiles in flight) on cuConv's
    layers of at most 32 filters (its ``part`` = (k, n) of them), every fifth checked (:func:`beside_candidates`)."""
    from convkit.families.tf32x3.wgmma_settings import GATHERED_PIXEL_ROWS
    from convkit.papers import cuconv

    problems = [p for p in cuconv.problems() if p.m <= 32][part[0] - 1 :: part[1]]

    @functools.cache
    def rows_settings(p: ConvProblem) -> dict[str, WgmmaLaunch]:
        widths = (32, 16) if p.m <= 16 else (32,)
        return by_name(dataclasses.replace(GATHERED_PIXEL_ROWS, filters=f, persistent=persistent, in_flight=flight)
                       for f in widths for persistent in (True, None) for flight in (2, 1))  # fmt: skip

    beside_candidates(problems, rows_settings, 5, "with the pixels on the rows")


def tap_pairs(part: tuple[int, int] = (1, 1)) -> None:
    """The split-ahead kernel on K-tiles of two taps (:data:`TAP_PAIR_SETTINGS`: 128 and 64 filters a block, and with
    ping-pong at 64) on cuConv's layers of at most 16 channels and more than one tap (its ``part`` = (k, n) of them),
    every third checked (:func:`beside_candidates`)."""
    from convkit.families.tf32x3.wgmma_settings import tap_pair_candidates
    from convkit.papers import cuconv

    problems = [p for p in cuconv.problems() if tap_pair_candidates(p)][part[0] - 1 :: part[1]]

    @functools.cache
    def pair_settings(p: ConvProblem) -> dict[str, WgmmaLaunch]:
        return by_name(tap_pair_candidates(p))

    beside_candidates(problems, pair_settings, 3, "on K-tiles of two taps")


def small_grids(part: tuple[int, int] = (1, 1)) -> None:
    """The 3xTF32 chapter's 1x1 layers (its three suites; stride 1, more than one channel) where the small grids' own
    candidates apply (more than 32 filters, output tiles of 128 filters by 128 pixels filling at most half the SMs;
    batch 1 among them: the lowest cell), its ``part`` = (k, n) of them: those candidates and, where the layer has more
    than 64 filters, the gathering kernel at 64 filters a block (persistent, without ping-pong), beside the other
    candidates, the mma.sync kernel and cuBLAS SGEMM; every layer checked (:func:`beside_candidates`). More blocks,
    each storing less of the output: on a layer of a few microseconds, a block's stores of its tile weigh most
    (``--batch-one``)."""
    from convkit.families.tf32x3.wgmma_settings import small_grid_candidates
    from convkit.libs import cublas
    from convkit.study.layer_sets import three_chapter_suites

    suites = three_chapter_suites()
    chosen = {p: None for name in ("cuconv", "lu2020", "chang2022") for p in suites[name]
              if p.c > 1 and p.stride == 1 and cublas.supports(p) and small_grid_candidates(p)}  # fmt: skip
    problems = sorted(chosen, key=lambda q: (q.n, q.flops))[part[0] - 1 :: part[1]]

    @functools.cache
    def wider(p: ConvProblem) -> dict[str, WgmmaLaunch]:
        narrow = (GATHERED_NARROW,) if p.m > 64 else ()  # (ping-pong, at 64 too, a 1x1 candidate already)
        return by_name((*narrow, *small_grid_candidates(p)))

    beside_candidates(problems, wider, 1, "with smaller blocks", sgemm=True)


def ones_anatomy(count: int = 16, odd: bool = False) -> None:
    """Where a small or middling 1x1 layer's time goes (``count`` of the chapter's stride-1 1x1 layers of 0.05-5
    GFLOP, spread evenly by size; ``odd``: of any size, those whose images have an odd number of output pixels,
    which the epilogue stores a float at a time), in microseconds (:func:`layer_anatomy`)."""
    import cupy

    from convkit.libs import cublas

    def chosen(p: ConvProblem) -> bool:
        return p.out_h * p.out_w % 2 == 1 if odd else 0.05e9 <= p.flops <= 5e9

    problems = sorted((p for p in chapter_layers(0.0) if cublas.supports(p) and chosen(p)), key=lambda p: p.flops)
    rng = cupy.random.default_rng(5)
    for i in range(min(count, len(problems))):
        p = problems[round(i * (len(problems) - 1) / max(count - 1, 1))]
        times = layer_anatomy(p, rng)
        line = ", ".join(f"{name} {t:.1f}" for name, t in times.items())
        print(f"{p.label} N={p.n} ({p.flops / 1e9:.2f} GFLOP, {output_tiles(p)} tiles, {k_tiles(p)} K-tiles): {line}")


def batch_one_anatomy() -> None:
    """Where the time goes on the 3xTF32 chapter's 1x1 layers at batch 1 (cuConv's and Chang's multi-channel suites:
    the lowest (filter, batch) cell and the layers the chapter loses to cuBLAS SGEMM), in microseconds
    (:func:`batch_one_times`)."""
    import cupy

    from convkit.families.tf32x3.wgmma_pick import wgmma_default

    rng = cupy.random.default_rng(5)
    for p in batch_one_layers():
        times = ", ".join(f"{name} {t:.1f}" for name, t in batch_one_times(p, rng).items())
        print(f"{p.label} ({p.flops / 1e9:.4f} GFLOP; {launch_text(wgmma_default(p))}): {times}", flush=True)


#: cuConv's 1x1 layers of at most 64 filters where CUTLASS's fastest 3xTF32 tile beat the wgmma kernel's tuned best
#: (H200, ``tf32x3_probe.py --suite=cuconv --cutlass --every=4``, 2026-12-03), by cuConv's labels.
CUTLASS_ONES = ("56-1-1-64-64", "28-8-1-32-256", "28-8-1-64-192", "28-128-1-32-256", "54-1-1-16-96", "27-8-1-48-384",
                "28-128-1-64-192", "27-8-1-32-256", "27-128-1-48-384", "14-32-1-24-512", "54-8-1-64-16",
                "27-128-1-32-256", "27-16-1-64-384", "27-256-1-64-384", "56-1-1-64-256", "14-128-1-32-528",
                "27-32-1-48-256", "56-64-1-64-256")  # fmt: skip
#: cuConv's 3x3 and 5x5 layers (every fourth) where CUTLASS's fastest 3xTF32 tile beat ours, H200, 2026-12-03
#: (``tf32x3_probe.py --suite=cuconv --cutlass --every=4``, the producer's halves among the candidates; of 152, ours
#: lost 36, these 16 of them of more than one tap); and 28 x 28 512->512 at batch 1, where CUTLASS's 64 x 64 tile beat
#: ours in the H200's quick recording (2026-12-05), for the split-ahead kernel at 64 pixels a block.
CUTLASS_TAPS = ("14-8-3-288-144", "7-32-3-320-160", "54-8-3-64-16", "28-1-3-512-256", "14-32-5-64-32",
                "13-16-3-256-64", "14-16-3-208-96", "7-128-5-128-32", "14-16-3-320-160", "14-8-5-48-16",
                "27-1-3-192-48", "28-32-5-32-16", "14-128-5-48-16", "13-8-3-256-384", "27-64-3-192-48",
                "54-128-3-64-16", "28-1-3-512-512")  # fmt: skip


def by_halves(p: ConvProblem) -> dict[str, WgmmaLaunch]:
    """Each of the tuner's gathering settings on ``p`` with the producer in halves (``producer_halves``), one K-tile
    of products in flight where the filters a block are more than 32, by name (those the launch refuses left out)."""
    from convkit.families.tf32x3.wgmma_settings import wgmma_candidates

    gathering = [s for s in wgmma_candidates(p) if isinstance(s, WgmmaWsLaunch) and not s.inputs]
    halves = (dataclasses.replace(s, producer_halves=True, in_flight=s.in_flight if (s.filters or 128) <= 32 else 1)
              for s in gathering)  # fmt: skip
    return by_name(s for s in halves if not s.not_supported_reasons(p))


def producer_halves(part: tuple[int, int] = (1, 1)) -> None:
    """cuConv's 1x1 layers of at most 64 filters (its ``part`` = (k, n) of them; the layers CUTLASS's 3xTF32 tiles
    won most): the tuner's gathering settings with the producer in halves (:func:`by_halves`) beside its candidates
    (two of them in halves), the mma.sync kernel and cuBLAS SGEMM, every third layer checked
    (:func:`beside_candidates`)."""
    beside_candidates(few_filter_ones(part), functools.cache(by_halves), 3, "by the producer's halves", sgemm=True)


def ahead_early(part: tuple[int, int] = (1, 1)) -> None:
    """Every fourth of cuConv's 3x3 and 5x5 layers (its ``part`` = (k, n) of them): the tuner's split-ahead settings,
    launched early (as the operands' split ends, ``early``: the candidates since 2026-12-03), beside each launched
    after the split, the other candidates and the mma.sync kernel, every third layer checked
    (:func:`beside_candidates`: "the fastest launched after the split over the rest")."""
    from convkit.families.tf32x3.wgmma_settings import wgmma_candidates
    from convkit.papers import cuconv

    def launched_after(p: ConvProblem) -> dict[str, WgmmaLaunch]:
        ahead = [s for s in wgmma_candidates(p) if isinstance(s, WgmmaWsLaunch) and s.inputs == "split ahead"]
        return by_name(dataclasses.replace(s, early=None) for s in ahead)

    problems = [p for p in cuconv.problems() if p.r * p.s > 1][::4][part[0] - 1 :: part[1]]
    beside_candidates(problems, functools.cache(launched_after), 3, "launched after the split")


def few_filter_ones(part: tuple[int, int]) -> list[ConvProblem]:
    """cuConv's 1x1 layers of at most 64 filters, its ``part`` = (k, n) of them."""
    from convkit.papers import cuconv

    return [p for p in cuconv.problems() if p.r * p.s == 1 and p.m <= 64][part[0] - 1 :: part[1]]


def cutlass_ones(labels: tuple[str, ...] = CUTLASS_ONES) -> None:
    """On ``labels`` (:data:`CUTLASS_ONES` or :data:`CUTLASS_TAPS`): CUTLASS's 64x64 and 128x64 3xTF32 tiles (the
    kernel alone, NHWC), the mma.sync kernel's first-use launch, and the five fastest of every wgmma setting that runs
    the layer (``*``: a tuning candidate), each checked against float64: whether a setting the tuner leaves out would
    close the gap; then the fastest in parts (:func:`call_parts`): what of its call is the split ahead of its kernel
    (the weights', or with inputs split ahead both operands'), which CUTLASS's kernel does inside."""
    import cupy

    from convkit.families.tf32x3.wgmma_settings import wgmma_candidates
    from convkit.libs import cutlass

    rng = cupy.random.default_rng(3)
    for label in labels:
        p = ConvProblem.from_label(label)
        x, w, bias = inputs(p, rng)
        ref, out = expected(x, w, bias, p), cupy.empty(p.output_shape, dtype=cupy.float32)
        candidates, times = wgmma_candidates(p), []
        for spec in dict.fromkeys((*WGMMA_SETTINGS, *WS_SETTINGS, *candidates, *by_halves(p).values())):
            if spec.not_supported_reasons(p):
                continue
            call = wgmma_call(x, w, bias, p, spec)
            call(out)
            err = reference.relative_error(out, ref)
            mark = "*" if spec in candidates else " "
            times.append((median_us(functools.partial(call, out)), f"{mark}{launch_text(spec)}", err, spec))
        tiles = [(tile, median_us(cutlass.prepared(tile, p, x, w, out)[0]))
                 for tile in ("cutlass_tf32x3_64x64", "cutlass_tf32x3_128x64")
                 if cutlass.supports(tile, p)]  # fmt: skip
        mma_sync = median_us(functools.partial(conv2d_tf32x3, x, w, pad=p.pad, stride=p.stride, out=out))
        print(f"{label}: CUTLASS {', '.join(f'{tile[15:]} {us:.1f}' for tile, us in tiles)}; mma.sync {mma_sync:.1f}",
              flush=True)  # fmt: skip
        fastest = sorted(times, key=lambda t: t[0])[:5]
        for us, name, err, _ in fastest:
            print(f"    {us:7.1f} {name} (error {err:.1e}{', WRONG' if err > 1e-5 else ''})", flush=True)
        parts = call_parts(p, fastest[0][3], x, w, bias, out)
        print(f"    the fastest in parts: {', '.join(f'{k} {median_us(v):.1f}' for k, v in parts.items())}", flush=True)


def batch_one_times(p: ConvProblem, rng: Any) -> dict[str, float]:
    """Microseconds on the 1x1 layer ``p``: the first-use pick (:func:`wgmma_default`) in parts beside cuBLAS SGEMM
    (:func:`call_parts`); the FP32 implicit GEMM at one split (one launch) at 64x64 and 128x64; the mma.sync kernel's
    default launch."""
    import cupy

    from convkit.families.fp32.launch import ImplicitGemmLaunch, conv2d_implicit_gemm
    from convkit.families.tf32x3.wgmma_pick import wgmma_default

    x, w, bias = inputs(p, rng)
    out = cupy.empty(p.output_shape, dtype=cupy.float32)
    spec = wgmma_default(p)
    runs = call_parts(p, spec, x, w, bias, out)
    for tile in ("64x64", "128x64"):
        runs[f"fp32 {tile}"] = functools.partial(conv2d_implicit_gemm, x, w, launch=ImplicitGemmLaunch(tile), out=out)
    runs["mma.sync"] = lambda: conv2d_tf32x3(x, w, out=out)
    return {name: median_us(run) for name, run in runs.items()}


def batch_one_layers(part: tuple[int, int] = (1, 1)) -> list[ConvProblem]:
    """The 3xTF32 chapter's 1x1 layers at batch 1 (cuConv's and Chang's multi-channel suites), its ``part`` = (k, n)
    of them, by FLOPs."""
    from convkit.libs import cublas
    from convkit.study.layer_sets import three_chapter_suites

    suites = three_chapter_suites()
    chosen = {p for name in ("cuconv", "chang2022") for p in suites[name]
              if p.n == 1 and p.r * p.s == 1 and p.c > 1 and cublas.supports(p)}  # fmt: skip
    return sorted(chosen, key=lambda q: q.flops)[part[0] - 1 :: part[1]]


def launch_floors() -> None:
    """An empty kernel's launch in the study's timing at the gathering kernel's shapes (384 threads, its pixel rows'
    shared memory, a cluster of 4 or 8 along z): what a launch of that shape costs before any work. H200, 2026-12-04:
    3.26 us for a block of 32 threads, 3.33 for 28 blocks of 384 with or without 160 KiB each, 3.36 in clusters of 4
    and 3.49 of 8 (16 clusters): the shape adds at most 0.23 us to a call of 7-25 us."""
    import cupy

    source = """extern "C" __global__ void __launch_bounds__(384, 1) plain() {}
extern "C" __global__ void __cluster_dims__(1, 1, 4) __launch_bounds__(384, 1) four() {}
extern "C" __global__ void __cluster_dims__(1, 1, 8) __launch_bounds__(384, 1) eight() {}"""
    module = cupy.RawModule(code=source, options=("-arch=sm_90a",))
    shapes = (("plain", (1,), 32, 0), ("plain", (28,), 384, 0), ("plain", (28,), 384, 160 * 1024),
              ("four", (16, 1, 4), 384, 160 * 1024), ("eight", (16, 1, 8), 384, 160 * 1024),
              ("eight", (8, 1, 8), 384, 0))  # fmt: skip
    for name, grid, threads, shared in shapes:
        kernel = module.get_function(name)
        kernel.max_dynamic_shared_size_bytes = shared
        us = median_us(lambda k=kernel, g=grid, t=threads, b=shared: k(g, (t,), (), shared_mem=b))
        print(f"empty {name}: grid {grid}, {threads} threads, {shared // 1024} KiB: {us:.2f} us", flush=True)


def halves_the_other_way(spec: WgmmaLaunch, p: ConvProblem) -> WgmmaWsLaunch | None:
    """``spec`` (a warp-specialised launch) with its producer in halves where it is not, and not where it is, where
    that runs ``p``; else None."""
    if not isinstance(spec, WgmmaWsLaunch):
        return None
    other = dataclasses.replace(spec, producer_halves=None if spec.producer_halves else True)
    return None if other.not_supported_reasons(p) else other


class _Timeline:
    """A gathering kernel's launch built with ``CONVKIT_WG_TIMELINE``: each block's phases stamped past its output's
    end (the kernel's text says where and which); the output right."""

    def options(self, problem: ConvProblem) -> tuple[str, ...]:
        return (*super().options(problem), "-DCONVKIT_WG_TIMELINE=1")  # type: ignore[misc]


@functools.cache
def timeline_kind(kind: type[WgmmaWsLaunch]) -> type[WgmmaWsLaunch]:
    """``kind``, a gathering kernel's launch, built with ``CONVKIT_WG_TIMELINE``."""
    return dataclass(frozen=True)(type(f"Timeline{kind.__name__}", (_Timeline, kind), {}))


def timeline_of(spec: WgmmaWsLaunch) -> WgmmaWsLaunch:
    """``spec`` built with ``CONVKIT_WG_TIMELINE`` (:func:`timeline_kind`)."""
    return rebuilt(spec, timeline_kind(type(spec)))


#: The stamps a block of a timeline build writes (the kernel's TIMELINE_STAMPS; its text says which).
STAMPS = 10


def block_timeline(p: ConvProblem, spec: WgmmaWsLaunch, x: Any, w: Any, bias: Any) -> str:
    """Where the blocks of ``spec``'s kernel (one kernel a call: its sums in one plane) spend a call on ``p``, from
    its timeline build's stamps: the medians over its blocks of each phase from the block's start, in microseconds
    (cycles over the SM clock each block's stamps give), the spread of the blocks' starts and the kernel's span from
    the first start to the last end; the output checked against float64. Twice: "in a row", the last of 20 launches
    (launched early, its blocks may start while the launch before runs, and wait for its end: "the kernel before
    done"), and "alone", one more launch once the GPU is idle."""
    import cupy
    import numpy

    if not one_kernel(spec, p):  # (its stamps lie past one plane of outputs)
        raise ValueError(f"a timeline needs one plane of outputs: {launch_text(spec)} splits K over planes")
    timed = timeline_of(spec)
    workspace = cupy.empty(timed.workspace_bytes(p), dtype=cupy.uint8)
    _, tiled = timed.operands(p, x, w, workspace)
    outputs, blocks = math.prod(p.output_shape), math.prod(timed.grid(p))
    buffer = cupy.full((outputs + 1) // 2 * 2 + 2 * STAMPS * blocks, cupy.nan, dtype=cupy.float32)
    sizes = tuple(cupy.int32(v) for v in (p.n, p.c, p.h, p.w, p.m, p.out_h, p.out_w, p.pad, p.stride))
    phases = {"barriers ready": 2, "the kernel before done": 8, "first K-tile staged": 3, "first stage full": 9,
              "last staged": 4, "products and rows": 5, "cluster's sums": 6}  # fmt: skip

    def read() -> str:
        err = reference.relative_error(buffer[:outputs].reshape(p.output_shape), expected(x, w, bias, p))
        stamps = buffer[(outputs + 1) // 2 * 2 :].view(cupy.uint64).reshape(blocks, STAMPS).get().astype(float)
        ghz = (stamps[:, 6] - stamps[:, 1]) / (stamps[:, 7] - stamps[:, 0])  # (cycles a nanosecond)
        us = {name: float(numpy.median((stamps[:, at] - stamps[:, 1]) / ghz)) / 1e3 for name, at in phases.items()}
        starts, ends = stamps[:, 0] / 1e3, stamps[:, 7] / 1e3
        text = ", ".join(f"{name} {t:.2f}" for name, t in us.items())
        spread, span = starts.max() - starts.min(), ends.max() - starts.min()
        return f"at {numpy.median(ghz):.2f} GHz, {text}; starts over {spread:.2f}, span {span:.2f} (error {err:.1e})"

    for _ in range(20):
        launch_kernel(timed, p, (x, tiled, bias, buffer, *sizes))
    in_row = read()
    cupy.cuda.get_current_stream().synchronize()
    launch_kernel(timed, p, (x, tiled, bias, buffer, *sizes))
    return f"{blocks} blocks; in a row: {in_row}; alone: {read()}"


def batch_one_timeline() -> None:
    """On the batch-1 1x1 layers under 0.2 GFLOP of at most 8 K-tiles (and :data:`BATCH_ONE_BEHIND`), where the pick's
    (:func:`wgmma_default`) blocks spend a call (:func:`block_timeline`), beside the kernel alone, an empty launch and
    cuBLAS SGEMM (the study's timing, microseconds), where the pick is one kernel a call. H200, 2026-12-04 (31
    layers; the globaltimer's steps 0.25 us): the blocks start within 0.5 us of each other; each stages its first
    K-tile 1.1-1.3 us after its start, 1.6-1.9 with the producer in halves (the weights' copy and one gather's
    latency), a second K-tile 0.8-0.9 later at one in flight; the last K-tile's products and the rows' store about
    1.0; and a K split over a cluster adds its sums in 1.6-2.5 more (3.7 at 128 filters in 8: the kernel's
    add_cluster_sums). The span of a 2-K-tile layer's kernel, 3.25-3.75 us of its 6.9-7.3 (an empty launch 3.3).
    Those stamps were the last of 20 launches in a row, each launched early: a block's start may precede the end of
    the launch before, and its time to the first K-tile include the wait for it; the timeline now says when that
    kernel ended and when the first stage was full (the weights landed), and times one launch alone as well."""
    import cupy

    from convkit.families.tf32x3.wgmma_pick import wgmma_default

    rng = cupy.random.default_rng(5)
    for p in (q for q in batch_one_layers() if q.flops < 0.2e9 and (k_tiles(q) <= 8 or q.label in BATCH_ONE_BEHIND)):
        spec = wgmma_default(p)
        if not isinstance(spec, WgmmaWsLaunch) or spec.inputs or not one_kernel(spec, p):
            continue
        x, w, bias = inputs(p, rng)
        out = cupy.empty(p.output_shape, dtype=cupy.float32)
        runs = call_parts(p, spec, x, w, bias, out)
        times = ", ".join(f"{name} {median_us(runs[name]):.1f}" for name in ("SGEMM", "empty launch", "kernel alone"))
        timeline = block_timeline(p, spec, x, w, bias)
        print(f"{p.label} ({k_tiles(p)} K-tiles; {launch_text(spec)}): {times}; {timeline}", flush=True)


@functools.cache  # (asked for each layer's again and again: the list, the builds, the runs, the timelines)
def picks_of(p: ConvProblem) -> dict[str, WgmmaLaunch]:
    """The first-use pick on ``p`` by name, and where it splits the weights in the block, the pick with the weights
    split ahead (:func:`~convkit.families.tf32x3.wgmma_pick.pick_weights_split_ahead`), and that taken a block a tile
    where it is persistent."""
    from convkit.families.tf32x3.wgmma_pick import pick_weights_split_ahead, wgmma_default

    pick, ahead = wgmma_default(p), pick_weights_split_ahead(p)
    if pick == ahead:
        return {"pick": pick}
    named: dict[str, WgmmaLaunch] = {"pick": pick, "weights split ahead": ahead}
    if isinstance(ahead, WgmmaWsLaunch) and ahead.persistent:
        named["split ahead, a block a tile"] = dataclasses.replace(ahead, persistent=None)
    return named


def weights_in_block() -> None:
    """The first-use picks with their weights split in the block beside them split ahead (:func:`picks_of`), on the
    batch-1 1x1 layers (:func:`batch_one_layers`) and :data:`PICKS_MOVED`, wherever the pick splits them in the
    block: each call whole in microseconds (the study's timing; the pick's kernel alone too), cuBLAS SGEMM, every run
    checked against float64, and on the first five the timelines of the pick and the fastest
    (:func:`block_timeline`)."""
    import cupy

    from convkit.cuda.launch import Build
    from convkit.libs import cublas
    from convkit.op.prebuild import build_in_parallel
    from convkit.papers import cuconv

    moved = [p for p in cuconv.problems() if p.label in PICKS_MOVED and p.r * p.s == 1]
    problems = [p for p in (*batch_one_layers(), *moved) if len(picks_of(p)) > 1]
    builds = set()  # (every kernel built first, 12 at a time; the timelines' on the first five layers)
    for index, p in enumerate(problems):
        for spec in picks_of(p).values():
            for built in (spec, timeline_of(spec)) if index < 5 else (spec,):
                builds.add(Build.of(built, p))
    print(f"built {build_in_parallel(sorted(builds, key=lambda b: b.options), 12)} kernels", flush=True)
    rng = cupy.random.default_rng(17)
    every: list[tuple[ConvProblem, dict[str, float]]] = []  # (layer, microseconds by name, SGEMM's as "SGEMM")
    for index, p in enumerate(problems):
        x, w, bias = inputs(p, rng)
        out = cupy.empty(p.output_shape, dtype=cupy.float32)
        ref = expected(x, w, bias, p)
        line, times = [], {}
        for name, spec in picks_of(p).items():
            run = wgmma_call(x, w, bias, p, spec)
            out.fill(cupy.nan)
            run(out)
            err = reference.relative_error(out, ref)
            times[name] = median_us(functools.partial(run, out))
            line.append(f"{name} (error {err:.1e}{', WRONG' if not err < DIRECT_TOLERANCE else ''}) "
                        f"{times[name]:.1f} us")  # fmt: skip
            if name == "pick" and (alone := call_parts(p, spec, x, w, bias, out).get("kernel alone")):
                line[-1] += f", kernel alone {median_us(alone):.1f}"
        every.append((p, times | {"SGEMM": median_us(functools.partial(cublas.conv1x1, x, w, out))}))
        line.append(f"SGEMM {every[-1][1]['SGEMM']:.1f} us")
        for name in dict.fromkeys(("pick", min(times, key=times.get))) if index < 5 else ():
            try:  # (a timeline's build can be one the kernel refuses)
                line.append(f"{name}'s timeline: {block_timeline(p, picks_of(p)[name], x, w, bias)}")
            except ValueError as exc:
                line.append(f"{name}'s timeline: not built ({str(exc)[:60]})")
        print(f"{p.label} ({k_tiles(p)} K-tiles; {launch_text(picks_of(p)['pick'])}): {'; '.join(line)}", flush=True)
    if every:
        picks_summary(every)


def early_launches(count: int = 8, in_row: int = 20) -> None:
    """Whether a launch early lets a kernel start behind the one before it, in the study's timing (CUDA events around
    each run) and with nothing between launches: on the first ``count`` batch-1 1x1 layers whose pick is one kernel a
    call, the pick's kernel alone and its whole call (the weights' split, then the kernel), each launched early (as
    the op launches it) and the ordinary way, timed a run between events and ``in_row`` runs between one pair of
    events (the time a run), in microseconds. Where "in a row" is shorter early than the ordinary way, launches
    overlap; where a run between events is too, the events let them (the timeline's first view reads launches in a
    row: :func:`block_timeline`)."""
    import cupy

    from convkit.families.tf32x3.wgmma_pick import wgmma_default

    rng = cupy.random.default_rng(11)
    shown = 0
    for p in batch_one_layers():
        spec = wgmma_default(p)
        if shown == count or not isinstance(spec, WgmmaWsLaunch) or spec.inputs or not one_kernel(spec, p):
            continue
        shown += 1
        x, w, bias = inputs(p, rng)
        out = cupy.empty(p.output_shape, dtype=cupy.float32)
        line = []
        for how, launch in (("early", spec), ("ordinary", dataclasses.replace(spec, early=None))):
            runs = call_parts(p, launch, x, w, bias, out)
            for part in ("kernel alone", "whole"):
                one = median_us(runs[part])
                row = median_us(lambda run=runs[part]: [run() for _ in range(in_row)]) / in_row
                line.append(f"{part} {how} {one:.2f} ({row:.2f} in a row)")
        err = reference.relative_error(out, expected(x, w, bias, p))
        print(f"{p.label} ({k_tiles(p)} K-tiles; {launch_text(spec)}): {'; '.join(line)} (error {err:.1e})", flush=True)


def picks_summary(every: list[tuple[ConvProblem, dict[str, float]]]) -> None:
    """What :func:`weights_in_block` found, over the layers where each ran: the pick over each other launch (its time
    over the pick's), and the pick, and the fastest of all per layer, over cuBLAS SGEMM on the batch-1 layers of cuConv
    (its cell of 1x1 layers at batch 1, 47) and of Chang (21)."""
    from convkit.study.layer_sets import three_chapter_suites

    for name in dict.fromkeys(n for _, times in every for n in times if n not in ("pick", "SGEMM")):
        print(over_line(f"the pick over {name}", [t[name] / t["pick"] for _, t in every if name in t]))
    suites = three_chapter_suites()
    for what, suite in (("cuConv's cell", "cuconv"), ("Chang's", "chang2022")):
        rows = [t for p, t in every if p.n == 1 and p in set(suites[suite])]
        for whose, us in (("the pick", lambda t: t["pick"]),
                          ("the fastest", lambda t: min(v for n, v in t.items() if n != "SGEMM"))):  # fmt: skip
            print(over_line(f"{whose} over SGEMM on {what}", [t["SGEMM"] / us(t) for t in rows]), flush=True)


def batch_one_parts() -> None:
    """Where a K-tile's turn goes in the first-use pick on :data:`BATCH_ONE_BEHIND`, in microseconds: the call
    in parts (:func:`call_parts`), the call with its kernel built to run part of its main loop (:data:`PART_NAMES` 1,
    2, 3 and 10: the products alone, the staging alone, no weights copied after the first stages, no output stored),
    and with the producer's halves the other way where the kernel takes them. At 16 K-tiles a block and about 1.1 us
    a K-tile (7x7 2,048->512), the part whose removal takes most of that is what sets the chain."""
    import cupy

    from convkit.families.tf32x3.wgmma_pick import wgmma_default

    rng = cupy.random.default_rng(5)
    for p in (q for q in batch_one_layers() if q.label in BATCH_ONE_BEHIND):
        x, w, bias = inputs(p, rng)
        out = cupy.empty(p.output_shape, dtype=cupy.float32)
        spec = wgmma_default(p)
        runs = call_parts(p, spec, x, w, bias, out)
        for part in (1, 2, 3, 10):
            runs[PART_NAMES[part]] = functools.partial(wgmma_call(x, w, bias, p, part_of(spec, part)), out)
        if other := halves_the_other_way(spec, p):
            runs["halves the other way"] = functools.partial(wgmma_call(x, w, bias, p, other), out)
        times = ", ".join(f"{name} {median_us(run):.1f}" for name, run in runs.items())
        print(f"{p.label} ({k_tiles(p)} K-tiles; {launch_text(spec)}): {times}", flush=True)


def batch_one_settings(part: tuple[int, int] = (1, 1)) -> None:
    """The batch-1 1x1 layers (:func:`batch_one_layers`, its ``part``): the pixel rows with K split over a cluster in
    2, 4 and 8 wherever a split has a K-tile, each with the producer in halves and without, whether or not the
    clusters run at once, and in 16 over planes (what :func:`pixel_rows_splits` chooses from: its rules were fitted on
    this run), beside the tuner's other candidates, the mma.sync kernel and cuBLAS SGEMM, every third checked
    (:func:`beside_candidates`), on those under 0.5 GFLOP (the rest are won); the launch floors first
    (:func:`launch_floors`)."""
    from convkit.families.tf32x3.wgmma_settings import PIXEL_ROWS_CLUSTER

    launch_floors()

    @functools.cache
    def relaxed(p: ConvProblem) -> dict[str, WgmmaLaunch]:
        specs = [dataclasses.replace(PIXEL_ROWS_CLUSTER, filters=f, splits=s, producer_halves=h)
                 for f in (32, 16) for s in (2, 4, 8) for h in (None, True)]  # fmt: skip
        specs += [dataclasses.replace(PIXEL_ROWS_CLUSTER, filters=f, splits=16, cluster=None) for f in (32, 16)]
        return by_name(s for s in specs if s.effective_splits(p) > 1 and not s.not_supported_reasons(p))

    problems = [p for p in batch_one_layers(part) if p.flops < 0.5e9 and relaxed(p)]
    beside_candidates(problems, relaxed, 3, "of the relaxed pixel-row splits", sgemm=True)


#: cuConv's 1x1 layers of batch 8-128 whose first-use pick 7e2e283 moved to the pixel rows' K split (in 2, in halves,
#: or a K-tile a split), its rules fitted at batch 1 alone (a mocked H200, the driver's cluster slots), by labels.
PICKS_MOVED = ("28-8-1-16-192", "28-8-1-32-256", "14-8-1-16-480", "14-16-1-16-480", "14-32-1-16-480",
               "14-8-1-160-512", "14-16-1-24-512", "14-32-1-24-512", "14-8-1-144-512", "14-16-1-32-512",
               "14-32-1-32-512", "14-8-1-160-528", "14-16-1-32-528", "14-32-1-32-528", "7-8-1-160-832",
               "7-32-1-160-832", "7-8-1-32-832", "7-16-1-32-832", "7-32-1-32-832", "7-64-1-32-832", "7-128-1-32-832",
               "7-8-1-192-832", "7-8-1-48-832", "7-16-1-48-832", "7-32-1-48-832", "7-64-1-48-832", "27-8-1-32-256",
               "13-8-1-64-512", "13-16-1-64-512", "7-8-1-512-2048")  # fmt: skip


def moved_picks() -> None:
    """:data:`PICKS_MOVED`: the pixel rows' K splits (:func:`pixel_rows_splits`) beside the tuner's other candidates,
    the mma.sync kernel and cuBLAS SGEMM, every third checked (:func:`beside_candidates`): whether the first-use pick
    fitted at batch 1 holds at batch 8-128."""
    from convkit.families.tf32x3.wgmma_settings import pixel_rows_splits
    from convkit.papers import cuconv

    problems = [p for p in cuconv.problems() if p.label in PICKS_MOVED and p.r * p.s == 1]
    beside_candidates(problems, lambda p: by_name(pixel_rows_splits(p)), 3, "pixel-row split", sgemm=True)


def call_parts(p: ConvProblem, spec: WgmmaLaunch, x: Any, w: Any, bias: Any, out: Any) -> dict[str, Callable[[], Any]]:
    """A call of ``spec`` on the 1x1 layer ``p`` in parts, into ``out``: cuBLAS SGEMM ("SGEMM"); a launch of an empty
    kernel, one launch's floor in this timing ("empty launch"); ``spec`` as the op calls it, the weights' split then
    the kernel ("whole"); the split alone ("split alone"); and where the call is one kernel (not K split over planes)
    the kernel alone ("kernel alone")."""
    import cupy

    from convkit.libs import cublas

    workspace = cupy.empty(spec.workspace_bytes(p), dtype=cupy.uint8)
    sizes = tuple(cupy.int32(v) for v in (p.n, p.c, p.h, p.w, p.m, p.out_h, p.out_w, p.pad, p.stride))
    _, tiled = spec.operands(p, x, w, workspace)
    empty = cupy.RawKernel('extern "C" __global__ void nothing() {}', "nothing")
    parts = {
        "SGEMM": lambda: cublas.conv1x1(x, w, out),
        "empty launch": lambda: empty((1,), (32,), ()),
        "whole": functools.partial(wgmma_call(x, w, bias, p, spec), out),
        "split alone": lambda: spec.operands(p, x, w, workspace),
    }
    if one_kernel(spec, p):
        parts["kernel alone"] = lambda: launch_kernel(spec, p, (x, tiled, bias, out, *sizes))
    return parts


def layer_anatomy(p: ConvProblem, rng: Any) -> dict[str, float]:
    """Microseconds on the 1x1 layer ``p``: the gathering kernel persistent (:data:`GATHERED_PERSISTENT`) in parts
    beside cuBLAS SGEMM (:func:`call_parts`: its kernel launched early), the same launched the ordinary way, and its
    main loop's parts (:data:`PART_NAMES` 1, 2, 3, 10); the gathering kernel a block a tile, and with K split in 4
    and 8 (:data:`GATHERED_SPLIT`); persistent at 64 filters a block (:data:`GATHERED_NARROW`), and so with its
    consumers taking alternate tiles (:data:`GATHERED_PINGPONG`); the mma.sync kernel's default launch."""
    import cupy

    spec = GATHERED_PERSISTENT
    x, w, bias = inputs(p, rng)
    out = cupy.empty(p.output_shape, dtype=cupy.float32)

    def call(launch: WgmmaLaunch) -> Callable[[], Any]:
        return functools.partial(wgmma_call(x, w, bias, p, launch), out)

    runs = {
        **call_parts(p, spec, x, w, bias, out),
        "whole, not early": call(dataclasses.replace(spec, early=None)),
        **{PART_NAMES[part]: call(part_of(spec, part)) for part in (1, 2, 3, 10)},
        "a block a tile": call(WgmmaWsLaunch()),
        "K split in 4": call(GATHERED_SPLIT),
        "K split in 8": call(dataclasses.replace(GATHERED_SPLIT, splits=8)),
        "64 filters a block": call(GATHERED_NARROW),
        "ping-pong": call(GATHERED_PINGPONG),
        "mma.sync": lambda: conv2d_tf32x3(x, w, out=out),
    }
    return {name: median_us(run) for name, run in runs.items()}


def narrow(check_only: bool) -> None:
    """The split-ahead kernel at 64 filters a block (``SPLIT_AHEAD_NARROW``) against float64 on the irregular shapes
    (the four smallest where ``check_only``, under compute-sanitizer) and on a 1x1 layer of one K-tile (the second
    consumer adding nothing); then timed beside ``SPLIT_AHEAD`` (128) and the gathered kernel on the 3xTF32
    chapter's layers of at least 20 GFLOP whose filters leave a block of 128 at most half full (:func:`rates_table`,
    every third layer checked)."""
    import cupy

    rng = cupy.random.default_rng(5)
    print("=== 64 filters a block against float64 (relative error, norm-wise; bar 1e-5)")
    for p in (*(CHECKED[:4] if check_only else CHECKED), ConvProblem.same(2, 16, 6, 6, 70, 1)):
        check(p, rng, (SPLIT_AHEAD_NARROW,))
    if check_only:
        return
    print("=== TFLOP/s, the splits included")
    settings = {"64 filters": SPLIT_AHEAD_NARROW, "128 filters": SPLIT_AHEAD, "gathered": WgmmaWsLaunch()}
    rates_table([q for q in chapter_layers() if 0 < q.m % 128 <= 64], wgmma_runs(settings, False), 3)


#: Winograd's irregular shapes: odd sizes, batches, padding and none, 5x5, more channels than a K-tile, more filters
#: than a block, and more tiles than a block's 128 pixels.
WINOGRAD_CHECKED = (
    ConvProblem.same(1, 3, 17, 19, 5, 3), ConvProblem.same(2, 37, 23, 29, 131, 3), ConvProblem(2, 19, 31, 33, 70, 5, 5),
    ConvProblem.same(1, 256, 14, 14, 256, 3), ConvProblem.same(3, 40, 20, 19, 130, 5), ConvProblem(1, 8, 6, 6, 4, 3, 3),
)  # fmt: skip


def winograd_runs(p: ConvProblem, x: Any, w: Any, bias: Any) -> dict[str, Callable[[Any], Any]]:
    """Winograd with its products on wgmma at each tile it builds for ``p``, then beside it: the split-ahead direct
    kernel (:data:`SPLIT_AHEAD`), FP32 Winograd and Winograd on the mma.sync 3xTF32 GEMM at their default launches,
    and cuDNN's fastest forward algorithm in FMA math (no bias), each with its workspace allocated once."""
    import cupy

    from convkit.libs.cudnn import FORWARD_ALGORITHMS, CudnnConvolution

    def winograd(spec: Any) -> Callable[[Any], Any]:
        workspace = cupy.empty(spec.workspace_bytes(p), dtype=cupy.uint8)
        return lambda y: conv2d_winograd(x, w, pad=p.pad, launch=spec, out=y, bias=bias, workspace=workspace)

    out = {winograd_name(spec): winograd(spec) for spec in winograd_wgmma_candidates(p)}
    out["direct split ahead"] = wgmma_call(x, w, bias, p, SPLIT_AHEAD)
    for name, spec in (("FP32 Winograd", winograd_default(p)), ("mma.sync Winograd", winograd_launch(p))):
        if not spec.not_supported_reasons(p):  # (their default tile's workspace may not hold one image)
            out[name] = winograd(spec)
    conv = CudnnConvolution(p)
    algorithms = [a for a in FORWARD_ALGORITHMS if conv.workspace(a).status == "ok"]
    y = cupy.empty(p.output_shape, dtype=cupy.float32)
    fastest = min(algorithms, key=lambda a: median_us(lambda: conv.forward(a, x, w, y)))
    print(f"{p.label}: cuDNN's fastest forward algorithm {fastest}")
    out["cuDNN fastest"] = lambda y: conv.forward(fastest, x, w, y)
    return out


def winograd_name(spec: WgmmaWinogradLaunch) -> str:
    """How the logs name a Winograd-on-wgmma launch: its tile, and where its inputs are split if not ahead."""
    return f"F({spec.m}) wgmma" + (", inputs split staged" if spec.inputs == "split staged" else "")


def winograd_launches_apart(p: ConvProblem, spec: Any, x: Any, w: Any, out: Any) -> dict[str, float]:
    """Microseconds of each of ``spec``'s launches on ``p`` (one pass of every image): the transforms (the filters'
    and the inputs'), the inputs' alone, the products, the output transform; and the whole call."""
    import cupy

    v, u, prod = (cupy.empty(n, dtype=cupy.float32) for n in spec.workspace_elements(p))
    return {
        "transforms": median_us(lambda: spec.enqueue_transforms(p, w, v, x, u, with_filters=True)),
        "inputs' transform": median_us(lambda: spec.enqueue_transforms(p, w, v, x, u, with_filters=False)),
        "products": median_us(lambda: spec.enqueue_products(p, u, v, prod)),
        "output": median_us(lambda: spec.enqueue_output(p, prod, out, cupy.uint64(0))),
        "whole": median_us(lambda: conv2d_winograd(x, w, pad=p.pad, launch=spec, out=out)),
    }


def winograd_parts(p: ConvProblem, rng: Any) -> None:
    """Winograd on wgmma's launches on ``p`` timed apart, each tile (:func:`winograd_launches_apart`), against the
    direct split-ahead kernel."""
    import cupy

    x, w, bias = inputs(p, rng)
    out = cupy.empty(p.output_shape, dtype=cupy.float32)
    direct = median_us(lambda: wgmma_call(x, w, bias, p, SPLIT_AHEAD)(out))
    print(f"{p.label}: direct split ahead {direct:8.1f} us")
    for spec in winograd_wgmma_candidates(p):
        if spec.images_per_pass(p) < p.n:
            print(f"    {winograd_name(spec)}: in passes of {spec.images_per_pass(p)} images; not timed apart")
            continue
        times = winograd_launches_apart(p, spec, x, w, out)
        gflop = 2 * spec.alpha(p) ** 2 * p.m * p.c * spec.tiles(p)[3] / 1e9
        parts = ", ".join(f"{name} {us:.1f}" for name, us in times.items() if name != "whole")
        print(f"    {winograd_name(spec)}: whole {times['whole']:8.1f} us ({direct / times['whole']:.2f}x direct); "
              f"{parts} us; the products {gflop / times['products'] * 1e3:.1f} TFLOP/s of their own")  # fmt: skip


@dataclass(frozen=True)
class PartProductsLaunch(_Part, WinogradProductsLaunch):
    part: int = 0


@dataclass(frozen=True)
class PartWinogradLaunch(WgmmaWinogradLaunch):
    """Winograd on wgmma with its products built to run ``part`` of their main loop alone (:data:`PART_NAMES`)."""

    part: int = 0

    def products_launch(self, problem: ConvProblem) -> WinogradProductsLaunch:
        return PartProductsLaunch(self.alpha(problem) ** 2, self.inputs, part=self.part)


WINOGRAD_PARTS = (0, 1, 2, 3, 10)  # whole, products alone, staging alone, weights' first stages alone, no store
WINOGRAD_PART_LAYERS = (
    TIMED[0], TIMED[2], ConvProblem.same(16, 64, 56, 56, 128, 3), ConvProblem.same(16, 256, 13, 13, 384, 3),
    ConvProblem.same(16, 128, 112, 112, 128, 3),
)  # fmt: skip


def winograd_products_parts() -> None:
    """The products launch of Winograd on wgmma (each tile built) timed whole and in parts
    (:data:`WINOGRAD_PARTS`) on :data:`WINOGRAD_PART_LAYERS`, the transforms run first so that its operands are
    real: what sets the pace of a GEMM of few K-tiles (8 at 256 channels, where the direct kernel's 3x3 has 72)."""
    import cupy

    rng = cupy.random.default_rng(5)
    for p in WINOGRAD_PART_LAYERS:
        x, w, _ = inputs(p, rng)
        for spec in winograd_wgmma_candidates(p):
            if spec.m == 2 or spec.images_per_pass(p) < p.n:
                continue
            v, u, prod = (cupy.empty(n, dtype=cupy.float32) for n in spec.workspace_elements(p))
            spec.enqueue_transforms(p, w, v, x, u, with_filters=True)
            gflop = 2 * spec.alpha(p) ** 2 * p.m * p.c * spec.tiles(p)[3] / 1e9
            line = []
            for part in WINOGRAD_PARTS:
                parted = PartWinogradLaunch(spec.m, inputs=spec.inputs, part=part)
                run = functools.partial(parted.enqueue_products, p, u, v, prod)
                us = median_us(run)
                line.append(f"{PART_NAMES[part]} {us:7.1f} us ({gflop / us * 1e3:5.1f})")
            tiles = spec.products_launch(p).output_tiles(spec.gemm_problem(p))
            print(f"{p.label} {winograd_name(spec)} products, {tiles} output tiles of {-(-p.c // TILE_K)} K-tiles: "
                  + ", ".join(line))  # fmt: skip


def winograd_profiled(p: ConvProblem) -> None:
    """A call of Winograd on wgmma at F(4x4, 3x3) on ``p`` with its inputs split ahead, then one with them split as
    staged, for Nsight Compute to profile their three launches each (in that order)."""
    import cupy

    x, w, _ = inputs(p, cupy.random.default_rng(5))
    for inputs_split in INPUTS:
        conv2d_winograd(x, w, pad=p.pad, launch=WgmmaWinogradLaunch(4, inputs=inputs_split))
    cupy.cuda.runtime.deviceSynchronize()


def winograd(
    check_only: bool,
    small: bool = False,
    timed_only: bool = False,
    part: tuple[int, int] = (1, 1),
    apart_only: bool = False,
) -> None:
    """Winograd with its products on the split-ahead wgmma kernel (:class:`WgmmaWinogradLaunch`), each tile, against
    float64 on :data:`WINOGRAD_CHECKED` (``small``: its first three and its last) beside FP32 Winograd's error at the
    same tile (the bar both are held to: the transform methods', 1e-3); unless ``check_only``, its launches timed
    apart on two layers and then every tile on the 3xTF32 chapter's stride-1 3x3 and 5x5 layers of at least 20 GFLOP
    (:func:`rates_table`, beside the direct kernel, FP32 Winograd, Winograd on mma.sync and cuDNN's fastest; every
    fourth layer's Winograd runs checked). ``timed_only``: the last alone; ``part`` (k, n): the k-th of every n layers
    alone (a device call's share); ``apart_only``: the checks and the launches timed apart, not the layers."""
    import cupy

    from convkit.core.reference import TRANSFORM_TOLERANCE

    rng = cupy.random.default_rng(3)
    if not timed_only:
        winograd_checks(small, rng)
    if check_only:
        return
    if not timed_only:
        print("=== Winograd on wgmma's launches timed apart")
        for p in (TIMED[0], TIMED[2]):
            winograd_parts(p, rng)
    if apart_only:
        return
    print("=== TFLOP/s (the direct method's FLOPs: Winograd's effective rate), the transforms and splits included")
    layers = [q for q in chapter_layers() if q.stride == 1 and q.r == q.s and q.r in (3, 5)][part[0] - 1 :: part[1]]
    rates_table(layers, winograd_runs, 4, checked=lambda p: len(winograd_wgmma_candidates(p)), bar=TRANSFORM_TOLERANCE)


def winograd_checks(small: bool, rng: Any) -> None:
    """:func:`winograd`'s checks against float64."""
    import cupy

    from convkit.core.reference import TRANSFORM_TOLERANCE
    from convkit.families.fp32.winograd import WinogradLaunch

    print("=== Winograd on wgmma against float64 (relative error, norm-wise; FP32 Winograd's at the same tile beside)")
    for p in (*WINOGRAD_CHECKED[:3], WINOGRAD_CHECKED[-1]) if small else WINOGRAD_CHECKED:
        x, w, bias = inputs(p, rng)
        ref = expected(x, w, bias, p)
        for spec in winograd_wgmma_candidates(p):
            errors = []
            for launch in (spec, WinogradLaunch(spec.m)):
                out = cupy.full(p.output_shape, cupy.nan, dtype=cupy.float32)
                conv2d_winograd(x, w, pad=p.pad, launch=launch, out=out, bias=bias)
                errors.append((reference.relative_error(out, ref), int(cupy.isnan(out).sum())))
            (err, nan), (fp32, _) = errors
            verdict = "" if err < TRANSFORM_TOLERANCE and not nan else "  WRONG"
            print(f"{p.label} pad={p.pad} {winograd_name(spec)}: error {err:.2e} (FP32 Winograd {fp32:.2e}), {nan} NaN"
                  f"{verdict}")  # fmt: skip


def main(speeds: bool = True, small: bool = False) -> None:
    """The checks (``small``: the four smallest problems alone; then K-tiles of two taps on two of at most 16
    channels), then (``speeds``) the timings."""
    import cupy

    from convkit.families.tf32x3.wgmma_settings import TAP_PAIR_SETTINGS

    rng = cupy.random.default_rng(7)
    print("=== against float64 (relative error, norm-wise; bar 1e-5)")
    for p in (CHECKED[:4] if small else CHECKED) + (TIMED[-2:] if speeds else ()):
        check(p, rng)
    for p in (CHECKED[0], ConvProblem(1, 13, 15, 13, 40, 5, 5, pad=1, stride=2)):  # (3 and 13 channels)
        check(p, rng, TAP_PAIR_SETTINGS)
    if speeds:
        print("=== speed (TFLOP/s of the direct method's FLOPs)")
        for p in TIMED:
            speed(p, rng)


if __name__ == "__main__":  # --check: the checks alone; --small: the four smallest problems (under compute-sanitizer)
    import sys

    if "--profile" in sys.argv[1:]:  # one launch each on the first timed layer, under ncu
        import cupy

        profiled(TIMED[0], cupy.random.default_rng(7))
    elif "--ones-profile" in sys.argv[1:]:  # 1x1 settings and SGEMM on two layers, under ncu from the start off
        import cupy

        ones_profiled(cupy.random.default_rng(7), batch_one="--batch-one" in sys.argv[1:])
    elif "--profile-floor" in sys.argv[1:]:  # the split-ahead kernel whole, parts 5 and 9, and the ceiling, under ncu
        import cupy

        profiled_floor(TIMED[0], cupy.random.default_rng(7))
    elif "--layers" in sys.argv[1:]:  # the 3xTF32 chapter's layers of at least 20 GFLOP (--tuned: the candidates)
        tuned_layers() if "--tuned" in sys.argv[1:] else layers()
    elif "--gathered" in sys.argv[1:]:  # the 1x1 layers' settings on cuConv's 3x3 and 5x5 layers
        share = next((arg.split("=")[1] for arg in sys.argv if arg.startswith("--part=")), "1/1")
        offset = next((int(arg.split("=")[1]) for arg in sys.argv if arg.startswith("--offset=")), 0)
        gathered(tuple(map(int, share.split("/"))), offset, k_split_picks="--k-split-picks" in sys.argv[1:])
    elif "--pixel-rows" in sys.argv[1:]:  # the pixels on the products' rows, on layers of at most 32 filters
        share = next((arg.split("=")[1] for arg in sys.argv if arg.startswith("--part=")), "1/1")
        pixel_rows(tuple(map(int, share.split("/"))))
    elif "--tap-pairs" in sys.argv[1:]:  # K-tiles of two taps, on layers of at most 16 channels
        share = next((arg.split("=")[1] for arg in sys.argv if arg.startswith("--part=")), "1/1")
        tap_pairs(tuple(map(int, share.split("/"))))
    elif "--small-grids" in sys.argv[1:]:  # 1x1 layers of few output tiles: smaller blocks
        share = next((arg.split("=")[1] for arg in sys.argv if arg.startswith("--part=")), "1/1")
        small_grids(tuple(map(int, share.split("/"))))
    elif "--producer-halves" in sys.argv[1:]:  # the producer's halves, on 1x1 layers of at most 64 filters
        share = next((arg.split("=")[1] for arg in sys.argv if arg.startswith("--part=")), "1/1")
        producer_halves(tuple(map(int, share.split("/"))))
    elif "--cutlass-ones" in sys.argv[1:]:  # every setting on the 1x1 layers where CUTLASS won
        cutlass_ones()
    elif "--cutlass-taps" in sys.argv[1:]:  # the same on the 3x3 and 5x5 layers where CUTLASS won
        cutlass_ones(CUTLASS_TAPS)
    elif "--ahead-early" in sys.argv[1:]:  # the split-ahead settings launched early or not, on 3x3 and 5x5 layers
        share = next((arg.split("=")[1] for arg in sys.argv if arg.startswith("--part=")), "1/1")
        ahead_early(tuple(map(int, share.split("/"))))
    elif "--moved-picks" in sys.argv[1:]:  # batch 8-128: the picks 7e2e283 moved
        moved_picks()
    elif "--weights-in-block" in sys.argv[1:]:  # the picks with the weights split in the block, beside split ahead
        weights_in_block()
    elif "--early-launches" in sys.argv[1:]:  # batch-1 picks launched early or not, a run or many between events
        early_launches()
    elif "--batch-one-timeline" in sys.argv[1:]:  # batch-1 1x1 layers: where the pick's blocks spend a call
        batch_one_timeline()
    elif "--batch-one-parts" in sys.argv[1:]:  # batch-1 1x1 layers behind: the pick's main loop in parts
        batch_one_parts()
    elif "--batch-one-settings" in sys.argv[1:]:  # batch-1 1x1 layers: the pixel rows' K split, relaxed
        share = next((arg.split("=")[1] for arg in sys.argv if arg.startswith("--part=")), "1/1")
        batch_one_settings(tuple(map(int, share.split("/"))))
    elif "--batch-one" in sys.argv[1:]:  # where a 1x1 layer's time goes at batch 1
        batch_one_anatomy()
    elif "--ones-anatomy" in sys.argv[1:]:  # where a small 1x1 layer's time goes (--odd: images of odd pixel counts)
        ones_anatomy(odd="--odd" in sys.argv[1:])
    elif "--ones" in sys.argv[1:]:  # the 1x1 layers beside cuBLAS SGEMM (--part=k/n: a share of them)
        share = next((arg.split("=")[1] for arg in sys.argv if arg.startswith("--part=")), "1/1")
        most = next((int(arg.split("=")[1]) for arg in sys.argv if arg.startswith("--at-most=")), None)  # filters
        ones(
            tuple(map(int, share.split("/"))),
            most,
            early="--early" in sys.argv[1:],
            clustered="--clustered" in sys.argv[1:],
        )
    elif "--winograd-parts" in sys.argv[1:]:
        winograd_products_parts()
    elif "--winograd-profile" in sys.argv[1:]:
        winograd_profiled(TIMED[0])
    elif "--winograd" in sys.argv[1:]:  # Winograd's products on wgmma: checked (--check: alone), then timed
        share = next((arg.split("=")[1] for arg in sys.argv if arg.startswith("--part=")), "1/1")  # k/n
        winograd(check_only="--check" in sys.argv[1:], small="--small" in sys.argv[1:],
                 timed_only="--timed" in sys.argv[1:], part=tuple(map(int, share.split("/"))),
                 apart_only="--apart" in sys.argv[1:])  # fmt: skip
    elif "--narrow" in sys.argv[1:]:  # 64 filters a block: checked (--check: small shapes alone), then timed
        narrow(check_only="--check" in sys.argv[1:])
    elif "--ceiling" in sys.argv[1:]:
        ceiling()
    elif "--parts" in sys.argv[1:]:  # the main loop's halves timed apart, on the large timed layers
        import cupy

        for problem in (TIMED[0], TIMED[2]):  # two 3x3 layers (the 1x1 one: products and staging ~ as long)
            parts(problem, cupy.random.default_rng(7))
    else:
        main(speeds="--check" not in sys.argv[1:], small="--small" in sys.argv[1:])
