"""The GPU's ceilings (notebook 00): the measurements of the roofline every chapter measures against.

Measured, not looked up: device-to-device copy bandwidth (bytes read plus written), the FP32
FMA rate of an own kernel and of cuBLAS SGEMM with TF32 off, the TF32 tensor-core rate of an own
mma.sync kernel and of cuBLAS GEMM in TF32 (the rates the 3xTF32 kernels divide by three), the INT8 rate of an own
mma.sync kernel (the products of FP32 emulated on INT8, the Ozaki scheme's), on Hopper the TF32 and INT8 rates of
its own instruction (wgmma), the SM
clock under load, the event time of an empty kernel (the least any timed kernel costs), and the
global-memory load latency in cycles by pointer chasing over footprints from L1-sized to far beyond L2 (Chang 2022's
latency-hiding model starts from that number). Every measurement is
checked before it is timed; SGEMM's error against float64 also proves TF32 was off (TF32 lands
near 1e-4, FP32 near 1e-6).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from convkit.bench.rows import error_text, timing_columns
from convkit.core.gpu import FP32_LANES_PER_SM, build_target, require_cupy
from convkit.core.reference import relative_error
from convkit.cuda.nvrtc import load_kernel
from convkit.cuda.timing import Timing, benchmark
from convkit.op.cases import params_text
from convkit.study import provenance
from convkit.study.results import ResultStore
from convkit.study.roofline import CEILINGS_EXPERIMENT

EXPERIMENT = CEILINGS_EXPERIMENT
COLUMNS = ("experiment", "measurement", "metric", "value", "unit", "params", "status", "time_ms_median",
           "time_ms_min", "time_ms_max", "reps", "rel_err", "note", "run_id")  # fmt: skip
KEY_COLUMNS = ("measurement", "metric")

#: FMA_CHAINS and the inner unroll of fma_peak in kernels/ceilings.cu.
FMA_CHAINS, FMA_UNROLL = 8, 16
#: MMA_CHAINS of tf32_mma_peak and int8_mma_peak, and the FLOPs of one mma.sync.m16n8k8 (16 x 8 outputs, 8
#: products each) and the operations of one mma.sync.m16n8k32 (32 products each).
MMA_CHAINS, MMA_FLOPS, INT8_MMA_OPS = 8, 2 * 16 * 8 * 8, 2 * 16 * 8 * 32
#: WGMMA_WARPGROUPS and WGMMA_BATCH of the wgmma ceilings, and each one's k (a product is 64 x 256 x k).
WGMMA_WARPGROUPS, WGMMA_BATCH, WGMMA_K = 2, 8, {"tf32": 8, "int8": 32}
#: The GPUs (as convkit builds for them) with Hopper's warpgroup MMA.
WGMMA_TARGETS = ("sm_90",)
#: The tensor-core ceilings' operands by precision: the output's dtype and poison, the 32-bit word every operand
#: element is made of, the value of each product, the rate's unit. TF32 2^-4 (each product a power of two: every sum
#: exact), INT8 four ones a word.
TENSOR_OPERANDS = {"tf32": (np.float32, math.nan, np.float32(2.0**-4), 2.0**-8, "TFLOP/s"),
                   "int8": (np.int32, -1, np.uint32(0x01010101), 1, "TOP/s")}  # fmt: skip
#: Pointer-chase footprints, bytes: L1-resident up to well past any current L2.
CHASE_FOOTPRINTS = tuple(2**k for k in range(14, 31, 2))  # 16 KiB .. 1 GiB
#: Distance between consecutive chain entries: one 128-byte cache line... times two, so that
#: adjacent-line prefetching cannot serve the next load.
CHASE_STRIDE_BYTES = 256


def _row(
    metric: str,
    value: float | int | str,
    unit: str,
    *,
    params: dict | None = None,
    timing: Timing | None = None,
    rel_err: float | None = None,
    note: str = "",
) -> dict[str, Any]:
    row: dict[str, Any] = {"metric": metric, "value": value, "unit": unit, "status": "ok",
                           "params": params_text(params),
                           "rel_err": error_text(rel_err), "note": note}  # fmt: skip
    return row | (timing_columns(timing) if timing is not None else {})


def device_properties() -> list[dict[str, Any]]:
    """The device's reported properties as ceilings rows (no timing)."""
    cupy = require_cupy()
    dev = cupy.cuda.Device()
    attrs = dev.attributes
    major, minor = int(dev.compute_capability[:-1]), int(dev.compute_capability[-1])
    _free, total = cupy.cuda.runtime.memGetInfo()
    rows = [
        _row("compute_capability", f"{major}.{minor}", ""),
        _row("sm_count", attrs["MultiProcessorCount"], "SMs"),
        _row("global_memory", total, "bytes"),
        _row("l2_cache", attrs["L2CacheSize"], "bytes"),
        _row("shared_memory_per_sm", attrs["MaxSharedMemoryPerMultiprocessor"], "bytes"),
        _row("shared_memory_per_block_optin", attrs["MaxSharedMemoryPerBlockOptin"], "bytes"),
        _row("registers_per_sm", attrs["MaxRegistersPerMultiprocessor"], "32-bit registers"),
        _row("max_threads_per_sm", attrs["MaxThreadsPerMultiProcessor"], "threads"),
        _row("memory_bus_width", attrs["GlobalMemoryBusWidth"], "bits"),
    ]
    lanes = FP32_LANES_PER_SM.get((major, minor))
    if lanes:
        rows.append(_row("fp32_lanes_per_sm", lanes, "lanes", note="CUDA programming guide, by compute capability"))
    # CUDA 13 dropped the clock fields from cudaDeviceProp; the attributes may remain.
    for key, metric in (("ClockRate", "sm_clock_max"), ("MemoryClockRate", "memory_clock")):
        if attrs.get(key):
            rows.append(_row(metric, attrs[key] / 1e3, "MHz", note="reported by the driver"))
    return rows


def sm_clock_under_load(spin_ms: float = 20.0) -> dict[str, Any]:
    """SM cycles counted against the global nanosecond timer: the clock kernels actually run at."""
    cupy = require_cupy()
    result = cupy.zeros(2, dtype=cupy.int64)
    kernel = load_kernel("ceilings", "clock_rate")
    kernel((1,), (1,), (cupy.int64(int(spin_ms * 1e6)), result))
    cycles, ns = (int(v) for v in result.get())
    return _row(
        "sm_clock_measured",
        cycles / ns * 1e3,
        "MHz",
        params={"spin_ms": spin_ms},
        note="clock64 cycles over %globaltimer ns, one thread spinning",
    )


def launch_floor(threads: int = 256) -> dict[str, Any]:
    """Event time of a kernel that does nothing, one block per SM (``kernels/ceilings.cu``: launch_floor),
    timed as every kernel here is timed: the launch share of a small layer's time, and the roofline
    floors' launch term."""
    cupy = require_cupy()
    blocks = int(cupy.cuda.Device().attributes["MultiProcessorCount"])
    ran = cupy.full(blocks, -1, dtype=cupy.int32)
    kernel = load_kernel("ceilings", "launch_floor")

    def run() -> None:
        kernel((blocks,), (threads,), (ran,))

    run()
    if not bool(cupy.array_equal(ran, cupy.arange(blocks, dtype=cupy.int32))):
        raise RuntimeError("launch_floor: not every block ran")
    timing = benchmark(run, warmup=10, min_reps=200, max_reps=400)
    return _row("launch_floor", timing.median_ms * 1e3, "us", params={"blocks": blocks, "threads": threads},
                timing=timing, note="empty kernel, one block per SM, CUDA events")  # fmt: skip


def copy_bandwidth(nbytes: int = 1 << 30) -> dict[str, Any]:
    """Device-to-device copy of ``nbytes``; GB/s counts bytes read plus bytes written."""
    cupy = require_cupy()
    src = cupy.random.default_rng().integers(0, 2**31 - 1, size=nbytes // 4, dtype=cupy.int32)
    dst = cupy.full_like(src, -1)
    cupy.copyto(dst, src)
    if not bool(cupy.array_equal(dst, src)):
        raise RuntimeError("device-to-device copy produced wrong data")
    dst.fill(-1)
    timing = benchmark(lambda: cupy.copyto(dst, src), warmup=3, min_reps=20, max_reps=100)
    return _row("copy_bandwidth", 2 * nbytes / (timing.median_ms * 1e6), "GB/s", params={"bytes": nbytes},
                timing=timing, note="cupy.copyto, bytes read + written")  # fmt: skip


def fma_peak(iters: int = 2048, threads: int = 256, blocks_per_sm: int = 16) -> dict[str, Any]:
    """FP32 FMA rate of an own kernel (``kernels/ceilings.cu``: fma_peak), checked against float64."""
    cupy = require_cupy()
    dev = cupy.cuda.Device()
    blocks = dev.attributes["MultiProcessorCount"] * blocks_per_sm
    out = cupy.full(blocks * threads, math.nan, dtype=cupy.float32)
    seed = 0.5
    a = float(np.float32(1.1 ** (1.0 / (iters * FMA_UNROLL))))
    b = float(np.float32(1.0 - a))  # fixed point f = b / (1 - a) = 1
    kernel = load_kernel("ceilings", "fma_peak")

    def run() -> None:
        kernel((blocks,), (threads,), (out, cupy.float32(seed), cupy.float32(a), cupy.float32(b), cupy.int32(iters)))

    run()
    # acc_{k+1} = a*acc_k + b  =>  acc_n = a^n (acc_0 - f) + f, f = b / (1 - a). float32 rounding
    # drifts along the n dependent FMAs (~1e-4 seen at n = 8192), so the check allows 1e-2; a is
    # chosen so that a^n = 1.1: a kernel that skipped the work would be off by ~10%.
    err = relative_error(out, _fma_expected(cupy, a, b, seed, iters * FMA_UNROLL, blocks, threads))
    if not err < 1e-2:
        raise RuntimeError(f"fma_peak result off by {err:.2e} from the closed form")
    timing = benchmark(run, warmup=3, min_reps=10, max_reps=50)
    flops = 2 * FMA_CHAINS * FMA_UNROLL * iters * blocks * threads
    return _row("fp32_fma_peak", flops / (timing.median_ms * 1e9), "TFLOP/s", timing=timing, rel_err=err,
                params={"iters": iters, "threads": threads, "blocks": int(blocks)},
                note="own kernel, 8 independent FMA chains per thread")  # fmt: skip


def _fma_expected(cupy: Any, a: float, b: float, seed: float, steps: int, blocks: int, threads: int) -> Any:
    """Closed form of what fma_peak leaves in each thread's output, in float64."""
    fixed = b / (1 - a)
    tid = cupy.arange(blocks * threads) % threads
    acc0 = seed + (tid[:, None] + cupy.arange(FMA_CHAINS)[None, :]).astype(cupy.float64)
    return (a**steps * (acc0 - fixed) + fixed).sum(axis=1)


def sgemm(n: int = 8192) -> dict[str, Any]:
    """cuBLAS SGEMM n^3 through ``cupy.matmul`` with TF32 off; rows checked against float64."""
    cupy = require_cupy()
    if os.environ.get("CUPY_TF32", "0") != "0":
        raise RuntimeError("CUPY_TF32 is set: SGEMM would run in TF32, not FP32")
    rng = cupy.random.default_rng()
    a = rng.standard_normal((n, n), dtype=cupy.float32)
    b = rng.standard_normal((n, n), dtype=cupy.float32)
    c = cupy.full((n, n), math.nan, dtype=cupy.float32)
    cupy.matmul(a, b, out=c)
    rows = slice(0, 256)  # a sample of rows: the float64 product of all would cost more than the timing
    err = relative_error(c[rows], a[rows].astype(cupy.float64) @ b.astype(cupy.float64))
    if not err < 1e-5:
        raise RuntimeError(f"SGEMM error {err:.2e}: not FP32 (TF32 gives ~1e-4)")
    timing = benchmark(lambda: cupy.matmul(a, b, out=c), warmup=2, min_reps=5, max_reps=20)
    return _row("sgemm", 2 * n**3 / (timing.median_ms * 1e9), "TFLOP/s", params={"n": n}, timing=timing,
                rel_err=err, note="cuBLAS via cupy.matmul, CUPY_TF32=0")  # fmt: skip


def _exact_rate(metric: str, kernel: Any, grid: tuple[int, int], args: tuple, *, precision: str, products: int,
                ops: int, iters: int, note: str) -> dict[str, Any]:  # fmt: skip
    """A tensor-core ceiling's row: ``kernel`` run on ``grid`` (blocks, threads) with ``(out, *args)``, ``out``
    poisoned first, every thread's sum checked against its exact value (``products`` products of
    :data:`TENSOR_OPERANDS`' value for ``precision``), then timed; ``ops`` a run."""
    cupy = require_cupy()
    dtype, poison, _, product, unit = TENSOR_OPERANDS[precision]
    out = cupy.full(grid[0] * grid[1], poison, dtype=dtype)

    def run() -> None:
        kernel((grid[0],), (grid[1],), (out, *args))

    run()
    if wrong := int(cupy.count_nonzero(out != dtype(products * product))):
        raise RuntimeError(f"{metric} left {wrong} of {out.size} threads' sums off the exact {products * product:g}")
    timing = benchmark(run, warmup=3, min_reps=10, max_reps=50)
    return _row(metric, ops / (timing.median_ms * 1e9), unit, timing=timing, rel_err=0.0, note=note,
                params={"iters": iters, "blocks": grid[0], "threads": grid[1]})  # fmt: skip


def mma_peak(precision: str, iters: int = 4096, threads: int = 256, blocks_per_sm: int = 8) -> dict[str, Any]:
    """The ``precision`` ("tf32" or "int8") tensor-core rate of ``mma.sync`` (``kernels/ceilings.cu``: tf32_mma_peak,
    m16n8k8, the 3xTF32 kernels' instruction; int8_mma_peak, m16n8k32, the products of an FP32 GEMM emulated on INT8,
    the Ozaki scheme's), checked exactly."""
    from convkit.core.gpu import has_tf32_tensor_cores

    cupy = require_cupy()
    if not has_tf32_tensor_cores():  # both shapes came with compute capability 8.0
        raise RuntimeError(f"this GPU (or CONVKIT_PTX_ARCH) has no {precision.upper()} mma.sync")
    blocks = cupy.cuda.Device().attributes["MultiProcessorCount"] * blocks_per_sm
    word = TENSOR_OPERANDS[precision][2]
    k, ops = (8, MMA_FLOPS) if precision == "tf32" else (32, INT8_MMA_OPS)
    note = f"own kernel, {MMA_CHAINS} independent mma.sync.m16n8k{k} {precision.upper()} tiles a warp"
    return _exact_rate(f"{precision}_mma_peak", load_kernel("ceilings", f"{precision}_mma_peak"), (blocks, threads),
                       (word, word, cupy.int32(iters)), precision=precision, products=MMA_CHAINS * 4 * iters * k,
                       ops=ops * MMA_CHAINS * iters * blocks * threads // 32, iters=iters, note=note)  # fmt: skip


def wgmma_peak(precision: str, iters: int = 4096) -> dict[str, Any]:
    """Hopper's dense tensor-core rate on its own instruction (``kernels/ceilings.cu``: tf32_wgmma_peak and
    int8_wgmma_peak), ``precision`` "tf32" or "int8", checked exactly: the rate its TF32 (and 3xTF32, a third of it)
    and INT8 GEMMs can reach."""
    cupy = require_cupy()
    if (here := build_target()) not in WGMMA_TARGETS:
        raise RuntimeError(f"wgmma is Hopper's (sm_90a); this build targets {here}")
    blocks, threads = cupy.cuda.Device().attributes["MultiProcessorCount"], 128 * WGMMA_WARPGROUPS
    k = WGMMA_K[precision]
    kernel = load_kernel("ceilings", f"{precision}_wgmma_peak", arch="sm_90a")
    note = (f"own kernel, {WGMMA_WARPGROUPS} warpgroups an SM, groups of {WGMMA_BATCH} wgmma m64n256k{k} "
            f"{precision.upper()}, operands in shared memory")  # fmt: skip
    return _exact_rate(f"{precision}_wgmma_peak", kernel, (blocks, threads),
                       (TENSOR_OPERANDS[precision][2], cupy.int32(iters)), precision=precision,
                       products=128 * iters * WGMMA_BATCH * k, iters=iters, note=note,
                       ops=2 * 64 * 256 * k * WGMMA_BATCH * iters * blocks * WGMMA_WARPGROUPS)  # fmt: skip


def tf32_gemm(n: int = 8192) -> dict[str, Any]:
    """cuBLAS GEMM n^3 in TF32 through PyTorch (``allow_tf32``), its error against float64 recorded: the tensor
    cores' rate for a library GEMM, which 3xTF32 divides by three."""
    import torch

    from convkit.op.interop import cupy_stream

    a = torch.randn((n, n), device="cuda")
    b = torch.randn((n, n), device="cuda")
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        c = a @ b
        rows = slice(0, 256)  # a sample of rows, as for SGEMM
        err = float((c[rows].double() - a[rows].double() @ b.double()).norm() / (a[rows].double() @ b.double()).norm())
        if not 1e-6 < err < 1e-2:
            raise RuntimeError(f"TF32 GEMM error {err:.2e}: not TF32 (FP32 gives ~1e-6, TF32 ~1e-4)")
        with cupy_stream():
            timing = benchmark(lambda: torch.matmul(a, b, out=c), warmup=2, min_reps=5, max_reps=20)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return _row("tf32_gemm", 2 * n**3 / (timing.median_ms * 1e9), "TFLOP/s", params={"n": n}, timing=timing,
                rel_err=err, note="cuBLAS via torch.matmul, allow_tf32: a reference rate, not FP32")  # fmt: skip


def _chase_once(footprint: int, steps: int) -> float:
    """Cycles per load along one fresh random cycle through ``footprint`` bytes, checked."""
    cupy = require_cupy()
    stride = CHASE_STRIDE_BYTES // 4
    lines = footprint // CHASE_STRIDE_BYTES
    order = cupy.asarray(np.random.default_rng().permutation(lines).astype(np.uint32))
    chain = cupy.zeros(lines * stride, dtype=cupy.uint32)
    # entry at line order[i] points at line order[i+1]: one cycle through every line
    chain[order * stride] = cupy.roll(order, -1) * stride
    sink = cupy.zeros(1, dtype=cupy.uint32)
    cycles = cupy.zeros(1, dtype=cupy.int64)
    load_kernel("ceilings", "pointer_chase")((1,), (1,), (chain, cupy.int32(steps), sink, cycles))
    # check: the chain is a single cycle, so 2 * steps hops (warm pass + timed pass) from entry 0
    # land where the host says
    start = int(cupy.flatnonzero(order == 0)[0])
    expected = int(order[(start + 2 * steps) % lines]) * stride
    if int(sink.get()[0]) != expected:
        raise RuntimeError("pointer chase ended at the wrong entry")
    return int(cycles.get()[0]) / steps


def load_latency(footprint: int, steps: int = 20000, repeats: int = 5) -> dict[str, Any]:
    """Cycles per dependent global load: the median over ``repeats`` fresh random chains.

    Each chain lands on different pages and L2 slices, so single chains vary (up to ~15% at DRAM
    footprints on the H100); the row's note gives the spread.
    """
    samples = sorted(_chase_once(footprint, int(steps)) for _ in range(repeats))
    median = float(np.median(samples))
    return _row(
        "load_latency",
        median,
        "cycles",
        params={"footprint_bytes": footprint, "steps": int(steps), "repeats": repeats},
        note=f"median of {repeats} chains (min {samples[0]:.0f}, max {samples[-1]:.0f}); one thread, "
        f"dependent __ldcg loads, {CHASE_STRIDE_BYTES}-byte stride, random order",
    )


def measurements(quick: bool = False) -> Iterator[tuple[str, Callable[[], list[dict[str, Any]] | dict[str, Any]]]]:
    """(metric key, function) for every ceiling, in the order they are measured."""
    yield "properties", device_properties
    yield "sm_clock_measured", sm_clock_under_load
    yield "launch_floor", launch_floor
    yield "copy_bandwidth", lambda: copy_bandwidth(1 << (28 if quick else 30))
    yield "fp32_fma_peak", lambda: fma_peak(iters=512 if quick else 2048)
    yield "sgemm", lambda: sgemm(4096 if quick else 8192)
    yield "tf32_gemm", lambda: tf32_gemm(4096 if quick else 8192)
    for precision in ("tf32", "int8"):
        yield f"{precision}_mma_peak", lambda p=precision: mma_peak(p, iters=1024 if quick else 4096)
    if build_target() in WGMMA_TARGETS:  # Hopper's own instruction, where there is one
        for precision in WGMMA_K:
            yield f"{precision}_wgmma_peak", lambda p=precision: wgmma_peak(p, iters=1024 if quick else 4096)
    for footprint in CHASE_FOOTPRINTS[:: 2 if quick else 1]:
        yield (
            f"load_latency:{footprint}",
            lambda f=footprint: load_latency(f, steps=5000 if quick else 20000, repeats=3 if quick else 5),
        )


def run(store: ResultStore, *, quick: bool = False, progress: Callable[[str], None] | None = None) -> int:
    """Take every measurement the store does not hold yet; a failure is recorded and the rest go on."""
    done = {measurement for measurement, _ in store.done_keys()}
    written = 0
    for name, measure in measurements(quick):
        if name in done:
            continue
        if progress:
            progress(name)
        try:
            result = measure()
            rows = result if isinstance(result, list) else [result]
        except Exception as exc:  # recorded, and the sweep goes on
            rows = [{"metric": name.split(":")[0], "status": "error", "note": f"{type(exc).__name__}: {exc}"[:500]}]
        for row in rows:
            store.append(row | {"measurement": name})
            written += 1
    return written


def open_store(directory: Any, provenance: dict[str, Any], *, experiment: str = EXPERIMENT) -> ResultStore:
    """The ceilings experiment's store in ``directory`` (``results/<gpu-slug>``)."""
    return ResultStore.open(directory, experiment, provenance, columns=COLUMNS, key_columns=KEY_COLUMNS)


def _announce(name: str) -> None:
    print("measuring", name, flush=True)


def record(
    directory: Path,
    *,
    quick: bool = False,
    experiment: str = EXPERIMENT,
    progress: Callable[[str], None] | None = _announce,
    **options: Any,
) -> None:
    """The chapter's measuring step: every ceiling ``<directory>/<experiment>.csv`` does not hold yet, with
    this run's provenance (``quick``: smaller sizes, fewer footprints and repeats)."""
    if options:
        raise TypeError(f"the ceilings take no options, got {sorted(options)}")
    run(open_store(directory, provenance.collect(), experiment=experiment), quick=quick, progress=progress)
