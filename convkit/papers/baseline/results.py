"""The baseline chapter's numbers, from the recorded sweep of the anchors (CPU only).

:func:`baseline_summary` gives one row per anchor configuration: the direct kernel's time, the best
single legacy cuDNN algorithm's, PyTorch's autotuned cuDNN measured in the same run and the time the
specification quotes; :func:`baseline_verdict` says what they show, :func:`roofline_points` places them
under the roofline.
"""

from __future__ import annotations

import math
from typing import Any

from convkit import tables
from convkit.papers.baseline.anchors import ANCHORS
from convkit.problem import ConvProblem


def baseline_summary(frame: Any) -> Any:
    """Per anchor configuration, times in microseconds: the direct kernel, the best single cuDNN
    algorithm, PyTorch's autotuned cuDNN measured in the same run (where PyTorch was present), and
    PyTorch's time quoted from the specification."""
    import pandas as pd

    quoted = {(a.problem.label, a.problem.pad): a for a in ANCHORS}
    records = []
    for (label, pad), group in frame.groupby(["label", "pad"], sort=False):
        ok = tables.timed(group)
        best_cudnn, best_cudnn_us = tables.fastest(ok[ok["impl"] == "cudnn"])
        pytorch = ok[ok["impl"] == "pytorch"]
        anchor = quoted.get((label, int(pad)))
        records.append({
            "configuration": anchor.name if anchor else label,
            "label": label,
            "GFLOP": ConvProblem.from_row(group.iloc[0]).flops / 1e9,
            "direct_us": tables.fastest(ok[(ok["impl"] == tables.CONVKIT) & (ok["variant"] == "direct")])[1],
            "best_cudnn": best_cudnn or "none",
            "best_cudnn_us": best_cudnn_us,
            "pytorch_us": tables.fastest(pytorch)[1],
            "pytorch_rel_err": float(pytorch["rel_err"].max()),
            "pytorch_quoted_us": anchor.cudnn_fp32_us if anchor else math.nan,
        })  # fmt: skip
    table = pd.DataFrame(records).set_index("configuration")
    table["best_vs_pytorch"] = table["best_cudnn_us"] / table["pytorch_us"]
    table["best_vs_quoted"] = table["best_cudnn_us"] / table["pytorch_quoted_us"]
    table["direct_vs_best"] = table["direct_us"] / table["best_cudnn_us"]
    return table


def baseline_table(summary: Any) -> Any:
    """The columns of :func:`baseline_summary` a reader compares, rounded for display."""
    columns = ["best_cudnn", "best_cudnn_us", "pytorch_us", "pytorch_quoted_us", "direct_us",
               "best_vs_pytorch", "direct_vs_best"]  # fmt: skip
    return summary[columns].round({c: 1 for c in columns[1:5]} | {"best_vs_pytorch": 2, "direct_vs_best": 1})


def baseline_verdict(summary: Any) -> str:
    """Markdown: the legacy algorithms' best against PyTorch's autotuned cuDNN, and the direct kernel."""
    lines = []
    for column, whose in (
        ("best_vs_pytorch", "measured in the same run"),
        ("best_vs_quoted", "quoted from the specification"),
    ):
        ratio = summary[column].dropna()
        if not len(ratio):
            continue
        lines.append(
            f"- Best single legacy cuDNN algorithm (FMA math) over PyTorch's autotuned FP32 time {whose}: "
            f"median {ratio.median():.2f}x, range {ratio.min():.2f}x..{ratio.max():.2f}x, within 1.25x in "
            f"{int((ratio <= 1.25).sum())} of {len(ratio)} configurations (below 1: the legacy call is faster)."
        )
    measured = summary["best_vs_pytorch"].dropna()
    for name in measured[measured > 1.25].index:
        row = summary.loc[name]
        lines.append(
            f"- {name}: PyTorch {row['pytorch_us']:.1f} us against {row['best_cudnn']} {row['best_cudnn_us']:.1f} us, "
            f"in true FP32 (relative error {row['pytorch_rel_err']:.1e}; TF32 lands near 1e-4). The same cuDNN is "
            "faster through PyTorch, which uses the graph API: its engines include kernels that none of the "
            "eight legacy forward algorithms selects. The paper chapters compare with both."
        )
    slowest, fastest = summary["direct_vs_best"].idxmax(), summary["direct_vs_best"].idxmin()
    lines.append(
        f"- The plain direct kernel takes {summary['direct_vs_best'].median():.1f}x the best cuDNN time "
        f"(median), from {summary.loc[fastest, 'direct_vs_best']:.2f}x on {fastest} to "
        f"{summary.loc[slowest, 'direct_vs_best']:.1f}x on {slowest}: the gap a naive kernel leaves, "
        "which the papers' kernels set out to close."
    )
    return "\n".join(lines)


def roofline_points(frame: Any) -> list[tuple[str, float, float, str]]:
    """(label, FLOP/byte, GFLOP/s, kind) per configuration: the best cuDNN algorithm and the direct kernel."""
    ok = frame[frame["status"] == "ok"]
    points = []
    for label, group in ok.groupby("label", sort=False):
        intensity = ConvProblem.from_row(group.iloc[0]).arithmetic_intensity
        cudnn = group[group["impl"] == "cudnn"]
        if len(cudnn):
            points.append((label, intensity, float(cudnn["gflops"].astype(float).max()), "best cuDNN algorithm"))
        direct = group[(group["impl"] == tables.CONVKIT) & (group["variant"] == "direct")]
        if len(direct):
            points.append(("", intensity, float(direct["gflops"].astype(float).iloc[0]), "convkit direct"))
    return points
