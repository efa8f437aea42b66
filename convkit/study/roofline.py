"""The roofline every chapter measures against: the ceilings' headline numbers, floors, the launch floor.

:func:`ceilings_summary` reads the ceilings experiment (the ceilings chapter) into numbers; :func:`floor_us`
is the least time a convolution can take on that GPU: its minimal traffic at the copy bandwidth or
its FLOPs at the SGEMM rate, whichever is longer, plus the launch floor. The roof is named once,
:data:`ROOF` (:func:`roof`): every floor, efficiency and roofline plot of the book uses it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from convkit.core.problem import ConvProblem

#: The ceilings experiment (``results/<gpu>/ceilings.csv``).
CEILINGS_EXPERIMENT = "ceilings"
#: The measured roofline every floor and plot uses: (the memory roof, the compute roof) as keys of
#: :func:`ceilings_summary`: the copy bandwidth (GB/s) and cuBLAS's SGEMM rate with TF32 off (TFLOP/s).
#: The FMA peak (our own FMA kernel's rate, near the datasheet's arithmetic) is not a roof: no convolution
#: reaches it with the loads a real kernel needs.
ROOF = ("copy_gbps", "sgemm_tflops")
#: Launch cost added to the roofline floor (microseconds) where the ceilings record no launch floor.
LAUNCH_US = 3.0

#: Colab's Tesla T4 by its datasheet (no T4 measured here): GDDR6 bandwidth and FP32 peak at the boost clock.
T4_DATASHEET = {"copy_gbps": 320.0, "fma_tflops": 8.1}


def slowdown_range(ceilings: dict[str, float], other: dict[str, float] = T4_DATASHEET) -> tuple[float, float]:
    """How many times longer work measured under ``ceilings`` would take on a GPU with ``other``'s bandwidth and
    FP32 rate: (the smaller, the larger) of the two ratios, for compute-bound and memory-bound work."""
    ratios = (ceilings["copy_gbps"] / other["copy_gbps"], ceilings["fma_tflops"] / other["fma_tflops"])
    return min(ratios), max(ratios)


def latency_curve(frame: Any) -> Any:
    """The pointer-chase rows as (footprint_bytes, cycles), sorted by footprint."""
    import pandas as pd

    rows = frame[(frame["metric"] == "load_latency") & (frame["status"] == "ok")]
    curve = pd.DataFrame({"footprint_bytes": [json.loads(p)["footprint_bytes"] for p in rows["params"]],
                          "cycles": rows["value"].astype(float).to_numpy()})  # fmt: skip
    return curve.sort_values("footprint_bytes").reset_index(drop=True)


def ceilings_summary(frame: Any) -> dict[str, float]:
    """The headline ceilings as numbers: copy GB/s, FMA and SGEMM TFLOP/s, SMs, clocks, latencies, and
    ``launch_us`` (an empty kernel's time) where the results record it."""
    ok = frame[frame["status"] == "ok"]

    def value(metric: str) -> float:
        rows = ok[ok["metric"] == metric]
        return float(rows["value"].iloc[0]) if len(rows) else float("nan")

    latency = latency_curve(frame)
    l2 = value("l2_cache")
    dram = latency[latency["footprint_bytes"] >= 4 * l2]
    in_l2 = latency[(latency["footprint_bytes"] <= l2 / 4) & (latency["footprint_bytes"] > 2**20)]
    out = {
        "sm_count": value("sm_count"),
        "sm_clock_mhz": value("sm_clock_measured"),
        "l2_bytes": l2,
        "shared_memory_per_sm": value("shared_memory_per_sm"),
        "copy_gbps": value("copy_bandwidth"),
        "fma_tflops": value("fp32_fma_peak"),
        "sgemm_tflops": value("sgemm"),
        "fp32_lanes_per_sm": value("fp32_lanes_per_sm"),
        "dram_latency_cycles": float(dram["cycles"].iloc[0]) if len(dram) else float("nan"),
        "l2_latency_cycles": float(in_l2["cycles"].iloc[-1]) if len(in_l2) else float("nan"),
    }
    if not math.isnan(launch := value("launch_floor")):  # older ceilings files lack it
        out["launch_us"] = launch
    for metric in ("tf32_gemm", "tf32_mma_peak", "tf32_wgmma_peak"):  # the tensor-core ceilings, where recorded
        if not math.isnan(rate := value(metric)):
            out[f"{metric}_tflops"] = rate
    for metric in ("int8_mma_peak", "int8_wgmma_peak"):
        if not math.isnan(rate := value(metric)):
            out[f"{metric}_tops"] = rate
    out["fp32_theoretical_tflops"] = out["sm_count"] * out["fp32_lanes_per_sm"] * 2 * out["sm_clock_mhz"] / 1e6
    out["ridge_flops_per_byte"] = out["sgemm_tflops"] * 1e3 / out["copy_gbps"]
    return out


def recorded_ceilings(directory: Path) -> dict[str, float] | None:
    """:func:`ceilings_summary` of ``<directory>/ceilings.csv`` (its quick run's where only that is recorded: a
    chapter run alone and quick measures the ceilings quick), or None where none is recorded."""
    from convkit.study.results import full_or_quick, load_results

    experiment = full_or_quick(Path(directory), CEILINGS_EXPERIMENT)
    if not (Path(directory) / f"{experiment}.csv").is_file():
        return None
    return ceilings_summary(load_results(Path(directory), experiment)[0])


def launch_us(ceilings: dict[str, float]) -> float:
    """The floors' launch term: the measured launch floor (``ceilings["launch_us"]``) where recorded, else
    :data:`LAUNCH_US`."""
    return ceilings.get("launch_us", LAUNCH_US)


def launch_text(ceilings: dict[str, float]) -> str:
    """The floors' launch term in words, for the chapters: measured, or the assumed :data:`LAUNCH_US`."""
    if "launch_us" in ceilings:
        return f"The floors' launch: {ceilings['launch_us']:.1f} us, an empty kernel measured in the ceilings chapter."
    return (f"The floors' launch: {LAUNCH_US:.0f} us, assumed: these ceilings record no launch floor "
            "(the ceilings chapter measures one where it runs on a GPU).")  # fmt: skip


def roof(ceilings: dict[str, float]) -> tuple[float, float]:
    """The roofline of :data:`ROOF`: (copy bandwidth in GB/s, SGEMM rate in TFLOP/s) of ``ceilings``."""
    bandwidth, compute = ROOF
    return float(ceilings[bandwidth]), float(ceilings[compute])


def floor_us(problem: ConvProblem, ceilings: dict[str, float]) -> float:
    """Roofline floor: the minimal traffic at the copy bandwidth or the FLOPs at the SGEMM rate (the roof of
    :func:`roof`), whichever is longer, plus the launch (:func:`launch_us`).

    Example:
        >>> ceilings = {"copy_gbps": 1000.0, "sgemm_tflops": 10.0, "launch_us": 0.0}
        >>> floor_us(ConvProblem.same(1, 1, 28, 28, 1, 3), ceilings)  # memory-bound: 6,308 bytes at 1 TB/s
        0.006308
    """
    gbps, tflops = roof(ceilings)
    memory = problem.min_bytes / (gbps * 1e3)
    compute = problem.flops / (tflops * 1e6)
    return max(memory, compute) + launch_us(ceilings)
