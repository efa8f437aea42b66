"""The ceilings chapter's numbers (notebook 00), from the recorded ceilings experiment (CPU only).

The measured ceilings (:func:`convkit.study.roofline.ceilings_summary`) beside the specification's H100
anchors and the datasheet arithmetic of the device's reported properties: :func:`comparison_table`,
:func:`result_lines` (the chapter's result box), :func:`findings` (the intro's row); the reader's
tables of every property and measurement, with readable names, units and settings.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from convkit.study.roofline import ceilings_summary, latency_curve

#: The specification's H100 anchors (PyTorch and cuBLAS on one H100 80GB HBM3 SXM, measured by the study).
SPEC_COPY_GBPS = 3006.0
SPEC_SGEMM_TFLOPS = 51.7
SPEC_TF32_TFLOPS = 377.8
#: Within this fraction of an anchor, a measurement reproduces it.
AGREE = 0.05

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
    "tf32_mma_peak": "TF32 mma.sync, own kernel", "load_latency": "load latency",
}  # fmt: skip
#: How each ceiling was taken, in a table cell's length (the recorded notes say more).
METHODS = {
    "sm_clock_measured": "clock64 over %globaltimer, one thread", "copy_bandwidth": "cupy.copyto, read + written",
    "fp32_fma_peak": "own kernel, 8 FMA chains a thread", "sgemm": "cuBLAS via cupy.matmul, TF32 off",
    "launch_floor": "empty kernel, one block an SM", "tf32_gemm": "cuBLAS via torch.matmul, TF32",
    "tf32_mma_peak": "own kernel, 8 m16n8k8 tiles a warp",
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
COMPARISON_MISSING = "the specification quotes none; TF32 is not measured: every kernel in this study is FP32"


def comparison_table(frame: Any) -> Any:
    """One row per ceiling: the specification's H100 anchor, our measurement, the datasheet arithmetic of the
    reported properties (for the clock: the driver's maximum), and the measurement's share of it (NaN where
    a column has no number: :data:`COMPARISON_MISSING`)."""
    import pandas as pd

    s = ceilings_summary(frame)
    dram, peak = dram_gbps(frame), s["fp32_theoretical_tflops"]
    rows = [
        ("copy, device to device", "GB/s", SPEC_COPY_GBPS, s["copy_gbps"], dram),
        ("SGEMM 8192³, TF32 off", "TFLOP/s", SPEC_SGEMM_TFLOPS, s["sgemm_tflops"], peak),
        ("FP32 FMA, own kernel", "TFLOP/s", math.nan, s["fma_tflops"], peak),
        ("TF32 GEMM 8192³", "TFLOP/s", SPEC_TF32_TFLOPS, math.nan, math.nan),
        ("SM clock under load", "MHz", math.nan, s["sm_clock_mhz"], _value(frame, "sm_clock_max")),
    ]
    table = pd.DataFrame(rows, columns=["ceiling", "unit", "specification (H100)", "measured here", "datasheet"])
    table["of datasheet (%)"] = 100 * table["measured here"] / table["datasheet"]
    return table.set_index("ceiling")


def _agrees(measured: float, anchor: float) -> bool:
    return abs(measured / anchor - 1) <= AGREE


def result_lines(frame: Any, provenance: dict[str, Any] | None = None) -> list[str]:
    """The chapter's result box: the specification's anchors, what we measured against them and against the
    datasheet arithmetic, and the verdict."""
    s = ceilings_summary(frame)
    dram, peak = dram_gbps(frame), s["fp32_theoretical_tflops"]
    gpu = gpu_name(provenance or {})
    copy_ok, sgemm_ok = _agrees(s["copy_gbps"], SPEC_COPY_GBPS), _agrees(s["sgemm_tflops"], SPEC_SGEMM_TFLOPS)
    verdict = ("both within {:.0%} of the anchors: every chapter's roofline floor uses these measured numbers"
               if copy_ok and sgemm_ok else "not within {:.0%} of both anchors: the floors use our numbers, "
               "and this GPU's differ from the specification's").format(AGREE)  # fmt: skip
    return [
        f"The specification's H100 anchors: device-to-device copy **{SPEC_COPY_GBPS:.0f} GB/s** (bytes read + "
        f"written), FP32 SGEMM **{SPEC_SGEMM_TFLOPS} TFLOP/s** with TF32 off.",
        f"Measured on the {gpu}: copy **{s['copy_gbps']:.0f} GB/s** ({s['copy_gbps'] / SPEC_COPY_GBPS:.1%} of the "
        f"anchor; {s['copy_gbps'] / dram:.0%} of the {dram:.0f} GB/s its memory's bus and clock allow), SGEMM "
        f"**{s['sgemm_tflops']:.1f} TFLOP/s** ({s['sgemm_tflops'] / SPEC_SGEMM_TFLOPS:.1%} of the anchor; "
        f"{s['sgemm_tflops'] / peak:.0%} of the {peak:.1f} TFLOP/s FP32 peak).",
        f"Our own FMA kernel reaches {s['fma_tflops']:.1f} TFLOP/s ({s['fma_tflops'] / peak:.0%} of peak); an empty "
        f"kernel costs {s.get('launch_us', math.nan):.1f} us; a dependent load from DRAM "
        f"{s['dram_latency_cycles']:.0f} cycles.",
        f"**Verdict**: {verdict}.",
    ]


def findings(directory: Path) -> list[dict[str, str]]:
    """The intro's row: copy bandwidth and SGEMM measured against the specification's anchors."""
    from convkit.study.results import load_results

    frame, _ = load_results(Path(directory), "ceilings")
    s = ceilings_summary(frame)
    dram, peak = dram_gbps(frame), s["fp32_theoretical_tflops"]
    copy, sgemm = s["copy_gbps"] / SPEC_COPY_GBPS, s["sgemm_tflops"] / SPEC_SGEMM_TFLOPS
    changed = (f"nothing: both within {max(abs(copy - 1), abs(sgemm - 1)):.1%} of the anchors"
               if _agrees(s["copy_gbps"], SPEC_COPY_GBPS) and _agrees(s["sgemm_tflops"], SPEC_SGEMM_TFLOPS)
               else f"copy {copy:.0%}, SGEMM {sgemm:.0%} of the anchors")  # fmt: skip
    return [{
        "paper": "The H100's ceilings",
        "claim": "copy bandwidth and FP32 SGEMM (TF32 off)",
        "paper's number": f"{SPEC_COPY_GBPS:.0f} GB/s, {SPEC_SGEMM_TFLOPS} TFLOP/s (H100, specification)",
        "paper's design on the H100": "n/a",
        "our best on the H100": f"{s['copy_gbps']:.0f} GB/s, {s['sgemm_tflops']:.1f} TFLOP/s",
        "best library on the H100": "n/a",
        "efficiency": f"{s['copy_gbps'] / dram:.0%} / {s['sgemm_tflops'] / peak:.0%} of datasheet",
        "what changed": changed,
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
    knobs = json.loads(params or "{}")
    if metric == "copy_bandwidth":
        return f"{_size(knobs['bytes'])[0]:.0f} {_size(knobs['bytes'])[1]} copied"
    if metric in ("sgemm", "tf32_gemm"):
        return f"n = {knobs['n']}"
    if metric == "sm_clock_measured":
        return f"one thread spinning {knobs['spin_ms']:g} ms"
    if metric in ("fp32_fma_peak", "tf32_mma_peak"):
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
