"""Chang, Onishi, Maruyama 2022, section 2.2: how much must be in flight to hide the global-memory latency.

The paper turns a GPU's figures (:class:`GpuFigures`) into its Table 1 (:func:`latency_model`): the
bytes per clock, the data that covers one latency, the threads and warps per SM that carry it and the
FMAs per SM over one latency (C_FMA). Both kernels' planners size their work from it. The figures
come from the paper (:data:`GTX_1080TI`), from a GPU's measured ceilings
(:func:`figures_from_ceilings`) or from the GPU in use (:func:`current_figures`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from convkit.core.gpu import FP32_LANES_PER_SM, device_name, gpu_slug, require_cupy, shared_memory_limits
from convkit.core.shipped import shipped

FLOAT_BYTES = 4
WARP = 32
#: Filter sizes the kernels are built for (a thread reads 8 staged columns per row).
FILTER_SIZES = (1, 3, 5)
#: Filters each thread of both kernels computes (two float4 weight reads per tap).
FILTERS_PER_THREAD = 8
#: Blocks per SM in both of the paper's kernels ("two blocks are assigned to each SM").
BLOCKS_PER_SM = 2


@dataclass(frozen=True)
class GpuFigures:
    """What the model needs to know about a GPU.

    Args:
        name: the GPU.
        latency_cycles: global-memory load latency, SM clock cycles.
        bandwidth_gbps: global-memory bandwidth, GB/s (1e9 bytes).
        clock_mhz: SM clock the latency is counted in.
        sm_count: streaming multiprocessors.
        fp32_lanes_per_sm: FP32 cores per SM.
        shared_bytes_per_sm: shared memory per SM.
        registers_per_sm: 32-bit registers per SM.
        source: where the figures come from.
    """

    name: str
    latency_cycles: float
    bandwidth_gbps: float
    clock_mhz: float
    sm_count: int
    fp32_lanes_per_sm: int
    shared_bytes_per_sm: int
    registers_per_sm: int
    source: str = ""


#: The paper's Table 1 inputs: latency from Mei and Chu's microbenchmarks, base clock, 96 KB shared memory.
GTX_1080TI = GpuFigures("GeForce GTX 1080 Ti", latency_cycles=258, bandwidth_gbps=484, clock_mhz=1480, sm_count=28,
                        fp32_lanes_per_sm=128, shared_bytes_per_sm=96 * 1024, registers_per_sm=65536,
                        source="the paper's Table 1")  # fmt: skip
#: The paper counts two operations per core per clock ("Flops/clock cycle/core"; one FMA is two).
PAPER_OPS_PER_LANE_CLOCK = 2


@dataclass(frozen=True)
class LatencyModel:
    """Table 1: what must be in flight to hide the latency (the paper's quantities, per GPU and SM)."""

    figures: GpuFigures
    bytes_per_clock: int  # bandwidth / clock, rounded as the paper does (327)
    data_requirement_bytes: int  # bytes in flight to cover one latency (84,366)
    threads_required: int  # 4-byte loads in flight, whole warps (21,120)
    warps_per_sm: int  # (24)
    threads_per_sm: int  # (768)
    data_per_sm_bytes: int  # (3,072)
    min_volume_bytes: int  # threads_per_sm * SMs * 4 (86,016)
    fma_requirement_per_sm: int  # C_FMA: operations per SM over one latency (256 x 258)

    def table(self) -> dict[str, Any]:
        """The rows of the paper's Table 1 (plus the FMA requirement), for display."""
        f = self.figures
        return {
            "global memory latency (clock cycles)": f.latency_cycles,
            "bandwidth (GB/s)": round(f.bandwidth_gbps, 1),
            "clock (MHz)": round(f.clock_mhz, 1),
            "SMs": f.sm_count,
            "transmission rate (bytes/clock)": self.bytes_per_clock,
            "data requirement (bytes)": self.data_requirement_bytes,
            "thread requirement (whole GPU)": self.threads_required,
            "thread requirement/SM": self.threads_per_sm,
            "warp requirement/SM": self.warps_per_sm,
            "data requirement/SM (bytes)": self.data_per_sm_bytes,
            "minimum volume (bytes)": self.min_volume_bytes,
            "FMA requirement/SM (C_FMA, paper's count)": self.fma_requirement_per_sm,
            "shared memory/SM (bytes)": f.shared_bytes_per_sm,
        }


def latency_model(figures: GpuFigures) -> LatencyModel:
    """The paper's section 2.2 arithmetic for ``figures``.

    Bytes per clock is bandwidth over clock, rounded; the data requirement is that times the latency;
    it takes one 4-byte load per thread, in whole warps, spread over the SMs (rounded up to warps).
    The FMA requirement is the SM's operations over one latency, counted as the paper does (two per
    core per clock: 256 x 258 = 66,048 on the 1080 Ti).

    Example:
        >>> m = latency_model(GTX_1080TI)
        >>> m.bytes_per_clock, m.data_requirement_bytes, m.threads_per_sm, m.warps_per_sm, m.data_per_sm_bytes
        (327, 84366, 768, 24, 3072)
    """
    f = figures
    bytes_per_clock = round(f.bandwidth_gbps * 1e9 / (f.clock_mhz * 1e6))
    data = round(bytes_per_clock * f.latency_cycles)
    warps = math.ceil(math.ceil(data / FLOAT_BYTES) / WARP)
    warps_per_sm = math.ceil(warps / f.sm_count)
    threads_per_sm = warps_per_sm * WARP
    return LatencyModel(
        figures=f, bytes_per_clock=bytes_per_clock, data_requirement_bytes=data, threads_required=warps * WARP,
        warps_per_sm=warps_per_sm, threads_per_sm=threads_per_sm, data_per_sm_bytes=threads_per_sm * FLOAT_BYTES,
        min_volume_bytes=threads_per_sm * f.sm_count * FLOAT_BYTES,
        fma_requirement_per_sm=round(PAPER_OPS_PER_LANE_CLOCK * f.fp32_lanes_per_sm * f.latency_cycles),
    )  # fmt: skip


def figures_from_ceilings(summary: dict[str, float], name: str, registers_per_sm: int = 65536) -> GpuFigures:
    """A GPU's figures from its measured ceilings (:func:`convkit.study.roofline.ceilings_summary`): the
    latency beyond L2 (DRAM), the copy bandwidth, the clock under load."""
    return GpuFigures(name, latency_cycles=round(summary["dram_latency_cycles"]), bandwidth_gbps=summary["copy_gbps"],
                      clock_mhz=summary["sm_clock_mhz"], sm_count=int(summary["sm_count"]),
                      fp32_lanes_per_sm=int(summary["fp32_lanes_per_sm"]),
                      shared_bytes_per_sm=int(summary["shared_memory_per_sm"]), registers_per_sm=registers_per_sm,
                      source="measured ceilings (notebook 00)")  # fmt: skip


#: Latency assumed where a GPU's ceilings were never recorded (cycles; the H100 measures 694).
ASSUMED_LATENCY_CYCLES = 600


def current_figures() -> GpuFigures:
    """The figures of the GPU in use: its measured ceilings where the package ships them
    (:mod:`convkit.core.shipped`), else its properties with the theoretical bandwidth and
    :data:`ASSUMED_LATENCY_CYCLES`."""
    name = device_name()
    summary = shipped(gpu_slug(name)).get("figures")
    if summary is not None and not math.isnan(summary.get("dram_latency_cycles", math.nan)):
        return figures_from_ceilings(summary, name)
    cupy = require_cupy()
    attrs = cupy.cuda.Device().attributes
    major, minor = (int(v) for v in cupy.cuda.Device().compute_capability)
    memory_mhz = attrs.get("MemoryClockRate", 0) / 1e3
    return GpuFigures(name, ASSUMED_LATENCY_CYCLES, 2 * memory_mhz * 1e6 * attrs["GlobalMemoryBusWidth"] / 8 / 1e9,
                      attrs.get("ClockRate", 1e6) / 1e3, attrs["MultiProcessorCount"],
                      FP32_LANES_PER_SM.get((major, minor), 64), shared_memory_limits()[1],
                      attrs["MaxRegistersPerMultiprocessor"], source="device properties, latency assumed")  # fmt: skip
