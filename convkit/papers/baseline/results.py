"""The baseline chapter's numbers, from the recorded sweep of its configurations (CPU only).

:func:`baseline_summary` gives one row per configuration (its layer label): the direct kernel's time, the best
single legacy cuDNN algorithm's, PyTorch's autotuned cuDNN measured in the same run, and the best library (the
faster of the two); :func:`headline` holds the numbers that :func:`result_lines` (the chapter's result box) and
:func:`findings` (the intro's row) both state; :func:`floors_table` and :func:`roofline_points` place them under
the roofline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.papers.baseline.anchors import ANCHORS
from convkit.study import tables
from convkit.study.roofline import floor_us, launch_us, roof

#: The MyST labels of the chapter's sections the findings row links to.
SECTION, FLOORS_SECTION = "baseline-legacy-pytorch", "baseline-floors"


def baseline_summary(frame: Any) -> Any:
    """Per configuration (indexed by its layer label), times in microseconds: the direct kernel, the best single
    legacy cuDNN algorithm, PyTorch's autotuned cuDNN measured in the same run (where PyTorch was present), and
    the best library (the faster of those two); ``origin`` says where the configuration comes from."""
    import pandas as pd

    origins = {(a.problem.label, a.problem.pad): a.origin for a in ANCHORS}
    records = []
    for (label, pad), group in frame.groupby(["label", "pad"], sort=False):
        ok = tables.timed(group)
        best_cudnn, best_cudnn_us = tables.fastest(ok[ok["impl"] == "cudnn"])
        pytorch = ok[ok["impl"] == "pytorch"]
        records.append({
            "layer": label,
            "label": label,
            "origin": origins.get((label, int(pad)), ""),
            "GFLOP": ConvProblem.from_row(group.iloc[0]).flops / 1e9,
            "direct_us": tables.fastest(ok[(ok["impl"] == tables.CONVKIT) & (ok["variant"] == "direct")])[1],
            "best_cudnn": best_cudnn or "none",
            "best_cudnn_us": best_cudnn_us,
            "pytorch_us": tables.fastest(pytorch)[1],
            "pytorch_rel_err": float(pytorch["rel_err"].max()),
        })  # fmt: skip
    table = pd.DataFrame(records).set_index("layer")
    table["best_lib_us"] = table[["best_cudnn_us", "pytorch_us"]].min(axis=1)
    table["best_vs_pytorch"] = table["best_cudnn_us"] / table["pytorch_us"]
    table["direct_vs_best"] = table["direct_us"] / table["best_cudnn_us"]
    table["direct_vs_library"] = table["direct_us"] / table["best_lib_us"]
    return table


#: Within this factor of PyTorch's time, the best legacy algorithm counts as matching it.
MATCH = 1.25


def comparison_table(summary: Any) -> Any:
    """Per configuration: the best legacy cuDNN algorithm against PyTorch's autotuned cuDNN measured in the same
    run, and the plain direct kernel against the best library (the faster of the two)."""
    import pandas as pd

    return pd.DataFrame({
        "best legacy algorithm": summary["best_cudnn"].map(tables.library_name),
        "legacy (us)": summary["best_cudnn_us"], "PyTorch (us)": summary["pytorch_us"],
        "legacy / PyTorch": summary["best_vs_pytorch"], "direct kernel (us)": summary["direct_us"],
        "direct / best library": summary["direct_vs_library"],
    }, index=summary.index)  # fmt: skip


def origins_table(summary: Any) -> Any:
    """Per configuration: where it comes from, in words, and its work in GFLOP."""
    import pandas as pd

    return pd.DataFrame({"where it comes from": summary["origin"], "GFLOP": summary["GFLOP"]}, index=summary.index)


def status_table(frame: Any) -> Any:
    """Per implementation, on how many anchors it ran and passed its check, or why it did not run."""
    counts = tables.status_counts(frame)
    counts.index = ["direct kernel (convkit)" if i == "convkit direct" else tables.library_name(i.split(" ", 1)[1])
                    for i in counts.index]  # fmt: skip
    counts.index.name = "implementation"
    words = {"ok": "ran, checked", "not_supported": "not supported", "workspace_too_large": "workspace over 1 GiB",
             "wrong": "wrong output", "oom": "out of memory", "error": "error"}  # fmt: skip
    return counts.rename(columns=words)


def headline(frame: Any, ceilings: dict[str, float] | None = None) -> dict[str, Any]:
    """The numbers the result box and the findings row both state: the best legacy algorithm over PyTorch's
    time (median, range, configurations within :data:`MATCH`), where PyTorch is faster by more than
    :data:`MATCH`, the direct kernel (our best) over the best library's time and, with ``ceilings``, its median
    share of the floor."""
    summary = baseline_summary(frame)
    ratio = summary["best_vs_pytorch"].dropna()
    gap = summary["direct_vs_library"].dropna()
    out = {
        "configurations": len(summary), "ratio": ratio, "gap": gap,
        "legacy_vs_pytorch": f"{ratio.median():.2f}x", "within": f"{int((ratio <= MATCH).sum())} of {len(ratio)}",
        "slower": ratio[ratio > MATCH].sort_values(ascending=False),
        "direct_vs_library": f"{gap.median():.1f}x",
        "direct_share": "",
    }  # fmt: skip
    if ceilings is not None:
        out["direct_share"] = f"{floors_table(summary, frame, ceilings)['direct kernel (%)'].median():.1f}%"
    return out


def result_lines(frame: Any, ceilings: dict[str, float] | None = None) -> list[str]:
    """The chapter's result box: the best legacy algorithm against PyTorch in the same run, the algorithms
    cuDNN does not run, the direct kernel's gap to the best library (and, with ``ceilings``, its share of the
    floor), what the later chapters take from it."""
    h = headline(frame, ceilings)
    ratio, gap, slower = h["ratio"], h["gap"], h["slower"]
    origins = baseline_summary(frame)["origin"]
    counts = tables.status_counts(frame)
    never = [i.split(" ", 1)[1] for i in counts.index if i.startswith("cudnn ")
             and counts.loc[i].get("not_supported", 0) == h["configurations"]]  # fmt: skip
    lines = [
        f"On the {h['configurations']} configurations, the best of cuDNN's eight legacy forward algorithms (true "
        f"FP32, each output checked against float64) takes **{h['legacy_vs_pytorch']}** the time of PyTorch's "
        f"autotuned cuDNN measured in the same run (median; {ratio.min():.2f}x to {ratio.max():.2f}x); within "
        f"{MATCH}x on {h['within']}.",
    ]
    if len(slower):
        lines.append(f"PyTorch is faster by more than {MATCH}x on {len(slower)} of {len(ratio)}: "
                     + ", ".join(f"{name} ({origins[name]}, {r:.2f}x)" for name, r in slower.items())
                     + "; its graph-API engines include kernels that no legacy algorithm selects.")  # fmt: skip
    if never:
        lines.append(
            f"{' and '.join(never)} never run: cuDNN answers not supported on every configuration (they are not "
            "implemented for this GPU)."
        )
    share = f", at **{h['direct_share']}** of the floor (median)" if h["direct_share"] else ""
    lines += [
        f"The plain direct kernel, one thread an output, takes **{h['direct_vs_library']}** the best library's "
        f"time (median; {gap.min():.2f}x on {gap.idxmin()} to {gap.max():.1f}x on {gap.idxmax()}){share}.",
        "**Verdict**: neither the legacy algorithms nor PyTorch is the faster on every layer, so every later "
        "chapter's best library is the faster of all of them in the same run.",
    ]
    return lines


def floors_table(summary: Any, frame: Any, ceilings: dict[str, float]) -> Any:
    """Per configuration: the floor, what bounds it, and the share of it the best legacy algorithm, PyTorch and
    the direct kernel reach (floor over time)."""
    import pandas as pd

    problems = {label: ConvProblem.from_row(g.iloc[0]) for label, g in frame.groupby("label", sort=False)}
    floors, bound = [], []
    gbps, tflops = roof(ceilings)  # the floor's own roof: copy bandwidth and SGEMM rate
    for label in summary["label"]:
        p = problems[label]
        floors.append(floor_us(p, ceilings))
        memory, compute = p.min_bytes / (gbps * 1e3), p.flops / (tflops * 1e6)
        bound.append("launch" if max(memory, compute) < launch_us(ceilings) else
                     "memory" if memory > compute else "arithmetic")  # fmt: skip
    floor = pd.Series(floors, index=summary.index)
    return pd.DataFrame({
        "floor (us)": floor, "bound by": bound, "best legacy (%)": 100 * floor / summary["best_cudnn_us"],
        "PyTorch (%)": 100 * floor / summary["pytorch_us"], "direct kernel (%)": 100 * floor / summary["direct_us"],
    }, index=summary.index)  # fmt: skip


def floors_text(floors: Any) -> str:
    """The floors table in two sentences."""
    by = floors["bound by"].value_counts()
    words = {"launch": "launch-bound (memory and arithmetic both take less than the launch floor)",
             "memory": "memory-bound", "arithmetic": "bound by FP32 arithmetic"}  # fmt: skip
    return (
        f"The best legacy algorithm runs at a median {floors['best legacy (%)'].median():.0f}% of the floor "
        f"(floor time over its time; PyTorch {floors['PyTorch (%)'].median():.0f}%, the direct kernel "
        f"{floors['direct kernel (%)'].median():.1f}%). Of the {len(floors)} configurations, "
        + ", ".join(f"{n} are {words[what]}" for what, n in by.items())
        + ": the small batch-1 layers sit far below both roofs, the room the papers' ideas aim at."
    )


def findings(directory: Path) -> list[dict[str, str]]:
    """The intro's row: the direct kernel (our best here) against the best library, and the best legacy cuDNN
    algorithm against PyTorch's autotuned cuDNN in the same run (the numbers of :func:`result_lines`, through
    :func:`headline`)."""
    from convkit.study.results import load_results
    from convkit.study.roofline import recorded_ceilings

    frame, _ = load_results(Path(directory), "baseline")
    h = headline(frame, recorded_ceilings(Path(directory)))
    slower = h["slower"]
    return [{
        "paper": "cuDNN baseline",
        "claim": "a plain direct kernel against the best library; the legacy cuDNN algorithms against PyTorch",
        "paper's number": "n/a (no paper)",
        "paper's design on the H100": "n/a",
        "our best on the H100": f"direct kernel: {h['direct_vs_library']} the best library's time (median)",
        "best library on the H100": f"best legacy algorithm: {h['legacy_vs_pytorch']} PyTorch's time (median), "
                                    f"within {MATCH}x on {h['within']}",
        "efficiency": f"{h['direct_share']} of the floor" if h["direct_share"] else "",
        "what changed": (f"PyTorch's graph-API engines are faster by more than {MATCH}x on "
                         f"{', '.join(slower.index)}" if len(slower)
                         else "the legacy algorithms match PyTorch on every configuration"),
        "section": SECTION, "claims": ("baseline.direct", "baseline.legacy"),
    }]  # fmt: skip


def roofline_points(frame: Any) -> list[tuple[str, float, float, str]]:
    """(label, FLOP/byte, GFLOP/s, kind) per configuration: the best legacy cuDNN algorithm, PyTorch's autotuned
    cuDNN and the direct kernel, as measured in the same run."""
    ok = frame[frame["status"] == "ok"]
    kinds = (("cudnn", None, "best legacy cuDNN algorithm"), ("pytorch", None, "PyTorch (cuDNN autotuned)"),
             (tables.CONVKIT, "direct", "direct kernel (convkit)"))  # fmt: skip
    points = []
    for _, group in ok.groupby(["label", "pad"], sort=False):
        intensity = ConvProblem.from_row(group.iloc[0]).arithmetic_intensity
        for impl, variant, kind in kinds:
            rows = group[(group["impl"] == impl) & ((group["variant"] == variant) if variant else True)]
            if len(rows):
                points.append(("", intensity, float(rows["gflops"].astype(float).max()), kind))
    return points
