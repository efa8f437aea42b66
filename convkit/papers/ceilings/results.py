"""The ceilings chapter's tables and verdict, from the recorded ceilings (CPU only).

The headline numbers themselves (:func:`convkit.roofline.ceilings_summary`) are shared: every chapter's
floors are computed from them. Here: the rows as a reader sees them, and the numbers set beside the
specification's H100 anchors and the datasheet arithmetic.
"""

from __future__ import annotations

from typing import Any

#: shared/papers/README.md: the H100's ceilings as measured through PyTorch.
README_COPY_GBPS = 3006.0
README_SGEMM_TFLOPS = 51.7


def ceilings_table(frame: Any) -> Any:
    """The ceilings rows a reader needs: metric, value, unit, timing and check (pointer chase apart)."""
    rows = frame[frame["metric"] != "load_latency"].copy()
    cols = ["metric", "value", "unit", "status", "time_ms_median", "time_ms_min", "time_ms_max", "reps", "rel_err",
            "params", "note"]  # fmt: skip
    table = rows[[c for c in cols if c in rows]].set_index("metric").fillna("")
    table["value"] = [f"{v:,.6g}" if isinstance(v, float) else v for v in table["value"]]
    return table


def ceilings_verdict(summary: dict[str, float], gpu: str) -> str:
    """Markdown: the measured ceilings (:func:`convkit.roofline.ceilings_summary`) against the README's H100
    anchors and the datasheet arithmetic."""
    lines = [
        f"- **Copy bandwidth** {summary['copy_gbps']:.0f} GB/s (bytes read + written); "
        f"the specification's H100 measurement: {README_COPY_GBPS:.0f} GB/s "
        f"({summary['copy_gbps'] / README_COPY_GBPS:.0%}).",
        f"- **SGEMM, TF32 off** {summary['sgemm_tflops']:.1f} TFLOP/s; the specification's H100: "
        f"{README_SGEMM_TFLOPS} TFLOP/s ({summary['sgemm_tflops'] / README_SGEMM_TFLOPS:.0%}).",
        f"- **Own FMA kernel** {summary['fma_tflops']:.1f} TFLOP/s = "
        f"{summary['fma_tflops'] / summary['fp32_theoretical_tflops']:.0%} of "
        f"{summary['sm_count']:.0f} SMs x {summary['fp32_lanes_per_sm']:.0f} lanes x 2 x "
        f"{summary['sm_clock_mhz']:.0f} MHz = {summary['fp32_theoretical_tflops']:.1f} TFLOP/s.",
        f"- **Ridge point** {summary['ridge_flops_per_byte']:.1f} FLOP/byte: a layer below it is bound "
        "by memory on this GPU, above it by FP32 arithmetic.",
        f"- **Load latency** {summary['dram_latency_cycles']:.0f} cycles from DRAM "
        f"({summary['dram_latency_cycles'] / summary['sm_clock_mhz'] * 1e3:.0f} ns at the measured clock), "
        f"{summary['l2_latency_cycles']:.0f} cycles from L2.",
    ]
    if "launch_us" in summary:
        lines.append(f"- **Launch floor** {summary['launch_us']:.1f} us: an empty kernel timed as every kernel "
                     "here is timed, the least any of them can take.")  # fmt: skip
    if "H100" not in gpu:
        lines.append(f"- These results come from {gpu}; the specification's anchors are for the H100.")
    return "\n".join(lines)
