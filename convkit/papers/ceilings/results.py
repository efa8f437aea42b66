"""The ceilings chapter's numbers, from the recorded ceilings experiment (CPU only).

The measured ceilings (:func:`convkit.study.roofline.ceilings_summary`) beside the datasheet arithmetic of the
device's reported properties: :func:`comparison_table`, :func:`result_lines` (the chapter's result box),
:func:`findings` (the intro's row, the same numbers through :func:`headline`); the reader's tables of every
property and measurement, with readable names, units and settings.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from convkit.study.roofline import ceilings_summary, latency_curve

#: The MyST label of the chapter's section on the ceilings (the findings row links to it).
SECTION = "ceilings-measured"

#: Readable names of the recorded metrics, in the order a reader meets them.
NAMES = {
    "compute_capability": "compute capability", "sm_count": "SMs", "fp32_lanes_per_sm": "FP32 lanes per SM",
    "sm_clock_max": "SM clock, driver's maximum", "memory_clock": "memory clock",
    "memory_bus_width": "memory bus width", "global_memory": "global memory", "l2_cache": "L2 cache",
    "shared_memory_per_sm": "shared memory per SM", "shared_memory_per_block_optin": "shared memory per block",
    "registers_per_sm": "registers per SM", "max_threads_per_sm": "threads per SM",
    "sm_clock_measured": "SM clock under load", "launch_floor": "launch floor (empty kernel)",
    "copy_bandwidth": "copy bandwidth (device to device)", "fp32_fma_peak": "FP32 FMA, own kernel",
    "sgemm": "FP32 SGEMM (cuBLAS), TF32 off", "tf32_gemm": "TF32 GEMM (cuBLAS)",
    "tf32_mma_peak": "TF32 mma.sync, own kernel", "int8_mma_peak": "INT8 mma.sync, own kernel",
    "tf32_wgmma_peak": "TF32 wgmma, own kernel", "int8_wgmma_peak": "INT8 wgmma, own kernel",
    "load_latency": "load latency",
}  # fmt: skip
#: How each ceiling was taken, in a table cell's length (the recorded notes say more).
METHODS = {
    "sm_clock_measured": "clock64 over %globaltimer, one thread", "copy_bandwidth": "cupy.copyto, read + written",
    "fp32_fma_peak": "own kernel, 8 FMA chains a thread", "sgemm": "cuBLAS via cupy.matmul, TF32 off",
    "launch_floor": "empty kernel, one block an SM", "tf32_gemm": "cuBLAS via torch.matmul, TF32",
    "tf32_mma_peak": "own kernel, 8 m16n8k8 tiles a warp", "int8_mma_peak": "own kernel, 8 m16n8k32 tiles a warp",
    "tf32_wgmma_peak": "own kernel, 2 warpgroups an SM, m64n256k8",
    "int8_wgmma_peak": "own kernel, 2 warpgroups an SM, m64n256k32",
}  # fmt: skip
SOURCES = {"CUDA programming guide, by compute capability": "CUDA guide, by compute capability"}


def _value(frame: Any, metric: str) -> float:
    rows = frame[(frame["metric"] == metric) & (frame["status"] == "ok")]
    return float(rows["value"].iloc[0]) if len(rows) else math.nan


def dram_gbps(frame: Any) -> float:
    """The memory's datasheet bandwidth from the reported properties: bus width x 2 (double data rate) x
    memory clock, in GB/s (the H100 SXM: 5120 bits x 2 x 2619 MHz = 3352 GB/s)."""
    return _value(frame, "memory_bus_width") / 8 * 2 * _value(frame, "memory_clock") / 1e3


def gpu_name(provenance: dict[str, Any]) -> str:
    """The GPU the recorded runs name (the first run's)."""
    return str(next(iter(provenance.get("runs", {}).values()), {}).get("gpu", "this GPU"))


#: Why a cell of :func:`comparison_table` has no number.
COMPARISON_MISSING = "no datasheet rate is derived from the reported properties for the tensor cores"


def comparison_table(frame: Any) -> Any:
    """One row per ceiling: our measurement, the datasheet arithmetic of the reported properties (for the
    clock: the driver's maximum) and the measurement's share of it (NaN where a column has no number:
    :data:`COMPARISON_MISSING`)."""
    import pandas as pd

    s = ceilings_summary(frame)
    dram, peak = dram_gbps(frame), s["fp32_theoretical_tflops"]
    rows = [
        ("copy, device to device", "GB/s", s["copy_gbps"], dram),
        ("SGEMM 8192³, FP32", "TFLOP/s", s["sgemm_tflops"], peak),
        ("FP32 FMA, own kernel", "TFLOP/s", s["fma_tflops"], peak),
        ("TF32 GEMM 8192³", "TFLOP/s", s.get("tf32_gemm_tflops", math.nan), math.nan),
        ("SM clock under load", "MHz", s["sm_clock_mhz"], _value(frame, "sm_clock_max")),
    ]
    table = pd.DataFrame(rows, columns=["ceiling", "unit", "measured", "datasheet"])
    table["of datasheet (%)"] = 100 * table["measured"] / table["datasheet"]
    return table.set_index("ceiling")


def headline(frame: Any) -> dict[str, float]:
    """The chapter's headline numbers, shared by :func:`result_lines` and :func:`findings`: copy bandwidth and
    SGEMM measured, the datasheet's bandwidth and FP32 FMA peak, and the share of each reached."""
    s = ceilings_summary(frame)
    dram, peak = dram_gbps(frame), s["fp32_theoretical_tflops"]
    return {"copy_gbps": s["copy_gbps"], "sgemm_tflops": s["sgemm_tflops"], "dram_gbps": dram, "peak_tflops": peak,
            "copy_share": s["copy_gbps"] / dram, "sgemm_share": s["sgemm_tflops"] / peak}  # fmt: skip


def _copy_text(h: dict[str, float]) -> str:
    return f"{h['copy_gbps']:,.0f} GB/s"


def _sgemm_text(h: dict[str, float]) -> str:
    return f"{h['sgemm_tflops']:.1f} TFLOP/s"


def result_lines(frame: Any, provenance: dict[str, Any] | None = None) -> list[str]:
    """The chapter's result box: what we measured against the datasheet arithmetic, the smaller bounds, and what
    every later chapter takes from them."""
    s, h = ceilings_summary(frame), headline(frame)
    gpu = gpu_name(provenance or {})
    return [
        f"**Measured on the {gpu}**: device-to-device copy **{_copy_text(h)}** (bytes read + written), "
        f"{h['copy_share']:.0%} of the {h['dram_gbps']:,.0f} GB/s its memory's bus width and clock allow; cuBLAS "
        f"SGEMM in FP32 **{_sgemm_text(h)}**, {h['sgemm_share']:.0%} of the {h['peak_tflops']:.1f} TFLOP/s FMA "
        "peak (datasheet).",
        f"Our own FMA kernel reaches {s['fma_tflops']:.1f} TFLOP/s ({s['fma_tflops'] / h['peak_tflops']:.0%} of "
        f"the FMA peak); an empty kernel costs {s.get('launch_us', math.nan):.1f} us; a dependent load from DRAM "
        f"{s['dram_latency_cycles']:.0f} cycles.",
        f"**What the book takes from them**: the floor of every problem is its minimal bytes at {_copy_text(h)} "
        f"or its FLOPs at {_sgemm_text(h)}, whichever takes longer, plus the launch floor.",
    ]


def findings(directory: Path) -> list[dict[str, str]]:
    """The intro's row: copy bandwidth and SGEMM measured against the datasheet arithmetic (the numbers of
    :func:`result_lines`, through :func:`headline`)."""
    from convkit.study.results import load_results

    frame, _ = load_results(Path(directory), "ceilings")
    h = headline(frame)
    return [{
        "paper": "The H100's ceilings",
        "claim": "copy bandwidth and FP32 SGEMM, measured",
        "paper's number": f"datasheet: {h['dram_gbps']:,.0f} GB/s, {h['peak_tflops']:.1f} TFLOP/s (FMA peak)",
        "paper's design on the H100": "n/a",
        "our best on the H100": f"{_copy_text(h)}, {_sgemm_text(h)}",
        "best library on the H100": "n/a",
        "efficiency": f"{h['copy_share']:.0%} / {h['sgemm_share']:.0%} of datasheet",
        "what changed": "every floor in the book uses these two measured rates, not the datasheet's",
        "section": SECTION, "claims": ("ceilings.copy", "ceilings.sgemm"),
    }]  # fmt: skip


def _size(nbytes: float) -> tuple[float, str]:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return nbytes / scale, unit
    return nbytes, "bytes"


def _text(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def properties_table(frame: Any) -> Any:
    """The device's reported properties: readable names, sizes in KiB/MiB/GiB, and where each comes from."""
    import pandas as pd

    rows = frame[frame["measurement"] == "properties"]
    records = []
    for r in rows.itertuples():
        value, unit = _size(float(r.value)) if r.unit == "bytes" else (r.value, r.unit)
        if r.metric == "compute_capability":
            value, unit = f"{float(r.value):.1f}", "major.minor"
        source = SOURCES.get(_text(r.note), _text(r.note)) or "reported by the driver"
        name = NAMES.get(r.metric, r.metric.replace("_", " "))
        records.append({"property": name, "value": value, "unit": _text(unit), "source": source})
    return pd.DataFrame(records).set_index("property")


def _settings(params: str, metric: str) -> str:
    knobs = json.loads(params if isinstance(params, str) and params else "{}")  # empty cells read as NaN
    if not knobs:  # not measured here (a T4 has no TF32 tensor cores): no settings
        return ""
    if metric == "copy_bandwidth":
        return f"{_size(knobs['bytes'])[0]:.0f} {_size(knobs['bytes'])[1]} copied"
    if metric in ("sgemm", "tf32_gemm"):
        return f"n = {knobs['n']}"
    if metric == "sm_clock_measured":
        return f"one thread spinning {knobs['spin_ms']:g} ms"
    if metric in ("fp32_fma_peak", "tf32_mma_peak", "int8_mma_peak", "tf32_wgmma_peak", "int8_wgmma_peak"):
        return f"{knobs['blocks']} x {knobs['threads']} threads, {knobs['iters']} iterations"
    if metric == "launch_floor":
        return f"{knobs['blocks']} blocks x {knobs['threads']} threads"
    return ", ".join(f"{k} {v}" for k, v in knobs.items())


def measurements_table(frame: Any) -> Any:
    """The measured ceilings (pointer chase apart): value, time per run in microseconds, runs, the check's
    relative error, the settings and how each was taken."""
    import pandas as pd

    rows = frame[(frame["measurement"] != "properties") & (frame["metric"] != "load_latency")]
    records = [{
        "measurement": NAMES.get(r.metric, r.metric), "value": float(r.value), "unit": r.unit,
        "median time a run (us)": float(r.time_ms_median) * 1e3, "fastest run (us)": float(r.time_ms_min) * 1e3,
        "runs": r.reps, "relative error": r.rel_err, "settings": _settings(r.params, r.metric),
        "method": METHODS.get(r.metric, r.note),
    } for r in rows.itertuples()]  # fmt: skip
    table = pd.DataFrame(records).set_index("measurement")
    table["runs"] = pd.Series(
        [None if math.isnan(v) else int(v) for v in table["runs"]], index=table.index, dtype=object
    )
    return table


def latency_table(frame: Any) -> Any:
    """The pointer chase: footprint, cycles and nanoseconds a dependent load (at the measured clock), the
    spread over the chains."""
    import pandas as pd

    curve = latency_curve(frame)
    clock = ceilings_summary(frame)["sm_clock_mhz"]
    notes = frame[(frame["metric"] == "load_latency") & (frame["status"] == "ok")]
    spread = {json.loads(p)["footprint_bytes"]: n.split(";")[0].replace("median of ", "")
              for p, n in zip(notes["params"], notes["note"], strict=True)}  # fmt: skip
    return pd.DataFrame({
        "footprint": ["{:.0f} {}".format(*_size(b)) for b in curve["footprint_bytes"]],
        "cycles a load": curve["cycles"], "ns a load": curve["cycles"] / clock * 1e3,
        "spread": [spread.get(b, "") for b in curve["footprint_bytes"]],
    }).set_index("footprint")  # fmt: skip


def bounds_table(frame: Any) -> Any:
    """What bounds a kernel on this GPU, beyond the two roofs: the ridge point, the launch floor, the load
    latencies from L2 and DRAM."""
    import pandas as pd

    s = ceilings_summary(frame)
    ns = 1e3 / s["sm_clock_mhz"]
    rows = [
        ("ridge point (SGEMM / copy)", s["ridge_flops_per_byte"], "FLOP/byte",
         "below: memory-bound; above: FP32-bound"),
        ("launch floor", s.get("launch_us", math.nan), "us", "the least any timed kernel here takes"),
        ("load latency, L2", s["l2_latency_cycles"], "cycles", f"{s['l2_latency_cycles'] * ns:.0f} ns"),
        ("load latency, DRAM", s["dram_latency_cycles"], "cycles", f"{s['dram_latency_cycles'] * ns:.0f} ns"),
        ("bytes in flight to hide DRAM latency", s["copy_gbps"] / 2 * s["dram_latency_cycles"] * ns / 2**10, "KiB",
         "read bandwidth x latency (Little's law)"),
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=["bound", "value", "unit", "what it means"]).set_index("bound")
