"""The cuConv chapter's numbers, computed from the recorded sweep and profile (CPU only).

:func:`speedup_table` turns the sweep's rows into one row per problem (each variant's time, the
best cuDNN algorithm's, PyTorch's); :func:`headlines` sets the paper's claims beside ours;
:func:`kernel_table` and :func:`totals_table` lay out the profile like the paper's Tables 3-5.
:mod:`.claims` builds the chapter's result box, findings and the paper's further numbers from these.
Every number here is computed from ``results/``; the paper's own numbers are quoted as data.
"""

from __future__ import annotations

import math
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.study.tables import CONVKIT, fastest, geomean, share_faster, timed

#: The ladder's variants as the chapter names them.
VARIANT_NAMES: dict[str, str] = {
    "cuconv_paper": "paper", "cuconv_fused": "fused", "cuconv_split": "split", "cuconv_tiled": "tiled",
}  # fmt: skip

#: The paper's section 4.1 claims (V100, cuDNN 7.1).
PAPER_CLAIMS: dict[str, float] = {
    "share_faster": 8.31, "mean_speedup_where_faster": 1.46,
    "1x1_batch1_mean": 1.23, "1x1_batch1_max": 2.29, "5x5_batch1_mean": 1.36, "5x5_batch1_max": 1.97,
}  # fmt: skip
#: Configurations the paper found faster (section 4.1: these 50 are its 8.31%).
PAPER_FASTER_COUNT = 50

#: The paper's Tables 3-5: total microseconds per algorithm and configuration (V100), and the thread
#: blocks its section 4.2 counts for Table 3's A and B.
PAPER_KERNEL_TOTALS_US: dict[str, dict[str, dict[str, float]]] = {
    "Table 3 (1x1)": {"IMPLICIT_GEMM": {"A": 128.13, "B": 47.87, "C": 19.20},
                      "IMPLICIT_PRECOMP_GEMM": {"A": 107.29, "B": 45.23, "C": 24.29},
                      "cuConv": {"A": 58.56, "B": 73.86, "C": 22.53}},
    "Table 4 (3x3)": {"WINOGRAD": {"A": 111.03, "B": 232.35}, "WINOGRAD_NONFUSED": {"A": 105.63, "B": 327.55},
                      "IMPLICIT_PRECOMP_GEMM": {"A": 203.45, "B": 389.08},
                      "cuConv": {"A": 57.79, "B": 466.68}},
    "Table 5 (5x5)": {"WINOGRAD_NONFUSED": {"A": 74.80, "B": 76.58}, "cuConv": {"A": 22.50, "B": 116.60}},
}  # fmt: skip
PAPER_BLOCKS: dict[str, dict[str, int]] = {
    "A": {"cuConv": 256, "IMPLICIT_GEMM": 16, "IMPLICIT_PRECOMP_GEMM": 4},
    "B": {"cuConv": 1024, "IMPLICIT_GEMM": 224, "IMPLICIT_PRECOMP_GEMM": 32},
}  # fmt: skip
#: The algorithms each of the paper's kernel tables shows.
PAPER_TABLE_ALGORITHMS: dict[str, tuple[str, ...]] = {
    "Table 3 (1x1)": ("IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM"),
    "Table 4 (3x3)": ("WINOGRAD", "WINOGRAD_NONFUSED", "IMPLICIT_PRECOMP_GEMM"),
    "Table 5 (5x5)": ("WINOGRAD_NONFUSED",),
}


#: The paper's named configurations: table -> (letter, label).
NAMED_CONFIGS: dict[str, tuple[tuple[str, str], ...]] = {
    "Table 3 (1x1)": (("A", "7-1-1-256-832"), ("B", "14-1-1-1024-256"), ("C", "27-1-1-256-64")),
    "Table 4 (3x3)": (("A", "7-1-3-384-192"), ("B", "13-1-3-384-384")),
    "Table 5 (5x5)": (("A", "7-1-5-128-48"), ("B", "7-8-5-128-48")),
}


def speedup_table(frame: Any) -> Any:
    """One row per problem: each variant's and the best cuDNN algorithm's median time, speedups.

    Columns: label, batch, size, filter, filters, depth, fig_label (``[input]-[filters]-[depth]``),
    ``<variant>_us`` for each of :data:`VARIANT_NAMES`, best_variant, best_us, best_cudnn,
    best_cudnn_us, pytorch_us, speedup_paper and speedup_best (best cuDNN time over ours: above 1,
    convkit is faster), speedup_best_vs_pytorch. Variants that did not run correctly have NaN times.
    """
    import pandas as pd

    records = []
    for (label, _pad, _stride), group in frame.groupby(["label", "pad", "stride"], sort=False):
        p = ConvProblem.from_row(group.iloc[0])
        times = timed(group)
        mine = times[times["impl"] == CONVKIT]
        rec: dict[str, Any] = {"label": label, "batch": p.n, "size": p.h, "filter": p.r, "filters": p.m,
                               "depth": p.c, "fig_label": f"{p.h}-{p.m}-{p.c}", "gflop": p.flops / 1e9}  # fmt: skip
        for variant, short in VARIANT_NAMES.items():
            rec[f"{short}_us"] = fastest(mine[mine["variant"] == variant])[1]
        best_variant, best_us = fastest(mine)
        rec["best_variant"], rec["best_us"] = VARIANT_NAMES.get(best_variant, best_variant) or "none", best_us
        best_cudnn, best_cudnn_us = fastest(times[times["impl"] == "cudnn"])
        rec["best_cudnn"], rec["best_cudnn_us"] = best_cudnn or "none", best_cudnn_us
        rec["pytorch_us"] = fastest(times[times["impl"] == "pytorch"])[1]
        records.append(rec)
    table = pd.DataFrame(records)
    table["speedup_paper"] = table["best_cudnn_us"] / table["paper_us"]
    table["speedup_best"] = table["best_cudnn_us"] / table["best_us"]
    table["speedup_best_vs_pytorch"] = table["pytorch_us"] / table["best_us"]
    return table


def headlines(table: Any) -> Any:
    """The paper's section 4.1 numbers beside ours (paper design and best variant), one row per claim.

    Columns ``paper (V100)`` (text: the paper's number, or what it says instead), ``paper design (H100)``
    and ``best variant (H100)``.
    """
    import pandas as pd

    def stats(column: str) -> dict[str, Any]:
        s = table[column]
        faster = s[s > 1]
        b1 = table[table["batch"] == 1]

        def of(filter_size: int, how: str) -> float:
            v = b1[b1["filter"] == filter_size][column].dropna()
            if not len(v):
                return math.nan
            return float(v.mean()) if how == "mean" else float(v.max())

        return {
            "configurations measured": int(s.notna().sum()),
            "configurations faster than best cuDNN": int((s > 1).sum()),
            "share faster than best cuDNN (%)": share_faster(s),
            "mean speedup where faster (x)": float(faster.mean()) if len(faster) else math.nan,
            "1x1 batch 1: mean speedup (x)": of(1, "mean"),
            "1x1 batch 1: max speedup (x)": of(1, "max"),
            "5x5 batch 1: mean speedup (x)": of(5, "mean"),
            "5x5 batch 1: max speedup (x)": of(5, "max"),
            "3x3 batch 1: mean speedup (x)": of(3, "mean"),
            "3x3 batch 1: share faster (%)": share_faster(b1[b1["filter"] == 3][column]),
            "batch 1: geometric-mean speedup (x)": geomean(b1[column]),
            "max speedup, any batch (x)": float(s.max()),
        }

    c = PAPER_CLAIMS
    paper = {"configurations measured": f"about {PAPER_FASTER_COUNT / c['share_faster'] * 100:.0f} (50 / 8.31%)",
             "configurations faster than best cuDNN": f"{PAPER_FASTER_COUNT}",
             "share faster than best cuDNN (%)": f"{c['share_faster']}",
             "mean speedup where faster (x)": f"{c['mean_speedup_where_faster']}",
             "1x1 batch 1: mean speedup (x)": f"{c['1x1_batch1_mean']}",
             "1x1 batch 1: max speedup (x)": f"{c['1x1_batch1_max']} (7-32-832)",
             "5x5 batch 1: mean speedup (x)": f"{c['5x5_batch1_mean']}",
             "5x5 batch 1: max speedup (x)": f"{c['5x5_batch1_max']}",
             "3x3 batch 1: mean speedup (x)": "not given (below 1 but 3 bars)",
             "3x3 batch 1: share faster (%)": "3 bars of Figure 6",
             "batch 1: geometric-mean speedup (x)": "not given",
             "max speedup, any batch (x)": f"{c['1x1_batch1_max']} (7-32-832)"}  # fmt: skip
    ours_paper, ours_best = stats("speedup_paper"), stats("speedup_best")
    out = pd.DataFrame({"paper (V100)": pd.Series(paper), "paper design (H100)": pd.Series(ours_paper, dtype=object),
                        "best variant (H100)": pd.Series(ours_best, dtype=object)})  # fmt: skip
    return out.loc[list(ours_best)].rename_axis("claim")


def batch_summary(table: Any) -> Any:
    """Per batch size: configurations, share faster and geometric-mean speedup, paper design and best variant."""
    import pandas as pd

    rows = []
    for batch, g in table.groupby("batch"):
        rows.append({"batch": batch, "configurations": len(g),
                     "paper design: faster (%)": share_faster(g["speedup_paper"]),
                     "paper design: geometric mean (x)": geomean(g["speedup_paper"]),
                     "best variant: faster (%)": share_faster(g["speedup_best"]),
                     "best variant: geometric mean (x)": geomean(g["speedup_best"]),
                     "best variant over PyTorch (x)": geomean(g["speedup_best_vs_pytorch"])})  # fmt: skip
    return pd.DataFrame(rows).set_index("batch")


def short_kernel_name(name: str) -> str:
    """A profiler's kernel name without ``void``, template arguments and parameter list."""
    base = str(name).split("(")[0].removeprefix("void ").strip()
    depth, out = 0, []
    for ch in base:
        depth += ch == "<"
        if depth == 0:
            out.append(ch)
        depth -= ch == ">"
    return "".join(out).split("::")[-1]


def kernel_table(kernels: Any, table: str) -> Any:
    """One of the paper's Tables 3-5 from the profile: microseconds per kernel and configuration.

    Rows: (implementation, kernel) for every convkit variant and every cuDNN algorithm the paper's
    table shows, a ``total`` row per implementation, and ``not supported`` where cuDNN refuses.
    Columns: the table's configurations (A, B, C), each labelled with its problem.
    """
    import pandas as pd

    rows = kernels[kernels["table"] == table]
    algorithms = PAPER_TABLE_ALGORITHMS[table]
    wanted = rows[(rows["impl"] == "convkit") | rows["variant"].isin(algorithms)]
    configs = {c: lbl for c, lbl in wanted[["config", "label"]].drop_duplicates().itertuples(index=False)}
    records: dict[tuple[str, str], dict[str, Any]] = {}
    for (impl, variant), group in wanted.groupby(["impl", "variant"], sort=False):
        name = VARIANT_NAMES.get(variant, variant) if impl == "convkit" else variant
        name = f"convkit {name}" if impl == "convkit" else f"cuDNN {name}"
        for config, g in group.groupby("config"):
            if (g["status"] != "ok").all():
                records.setdefault((name, g["status"].iloc[0].replace("_", " ")), {})[config] = math.nan
                continue
            for r in g.sort_values("kernel_index").itertuples():
                key = (name, f"{int(r.kernel_index)}: {short_kernel_name(r.kernel)}")
                records.setdefault(key, {})[config] = float(r.time_us)
            records.setdefault((name, "total"), {})[config] = float(g["time_us"].astype(float).sum())
    out = pd.DataFrame.from_dict(records, orient="index")
    out.index = pd.MultiIndex.from_tuples(out.index, names=["implementation", "kernel"])
    out = out.reindex(columns=sorted(configs))
    out.columns = [f"{c}: {configs[c]}" for c in out.columns]
    return out


def paper_kernel_totals(table: str) -> Any:
    """The paper's totals (V100, us) for a Tables 3-5 table, in the layout of :func:`kernel_table`."""
    import pandas as pd

    return pd.DataFrame(PAPER_KERNEL_TOTALS_US[table]).T.rename_axis("paper (V100), total us")


def blocks_table(kernels: Any) -> Any:
    """Thread blocks each implementation launches on the named configurations (its longest kernel),
    beside the paper's counts for Table 3's A and B (256 vs 16 vs 4; 1,024 vs 224 vs 32)."""
    import pandas as pd

    ok = kernels[kernels["status"] == "ok"].copy()
    ok["time_us"] = ok["time_us"].astype(float)
    main = ok.loc[ok.groupby(["table", "config", "impl", "variant"], sort=False)["time_us"].idxmax()]
    records = []
    for r in main.itertuples():
        name = f"convkit {VARIANT_NAMES.get(r.variant, r.variant)}" if r.impl == "convkit" else f"cuDNN {r.variant}"
        records.append({"configuration": f"{r.table} {r.config}: {r.label}", "implementation": name,
                        "longest kernel": short_kernel_name(r.kernel), "blocks": int(r.blocks),
                        "threads per block": int(r.threads_per_block), "us": float(r.time_us)})  # fmt: skip
    out = pd.DataFrame(records)
    paper = {"cuConv": "convkit paper", "IMPLICIT_GEMM": "cuDNN IMPLICIT_GEMM",
             "IMPLICIT_PRECOMP_GEMM": "cuDNN IMPLICIT_PRECOMP_GEMM"}  # fmt: skip
    out["paper's blocks (V100)"] = [
        PAPER_BLOCKS[c.split(":")[0][-1]].get(next((k for k, v in paper.items() if v == i), ""), math.nan)
        if c.startswith("Table 3") and c.split(":")[0][-1] in PAPER_BLOCKS
        else math.nan
        for c, i in zip(out["configuration"], out["implementation"], strict=True)
    ]
    return out.set_index(["configuration", "implementation"])


def totals_table(kernels: Any, table: str) -> Any:
    """The paper's Tables 3-5 as totals: per implementation the paper has (and our best variant), each
    configuration's V100 microseconds beside the H100's; text where an algorithm does not run here."""
    import pandas as pd

    detail = kernel_table(kernels, table)
    paper = PAPER_KERNEL_TOTALS_US[table]
    names = {"cuConv": "convkit paper", **{a: f"cuDNN {a}" for a in PAPER_TABLE_ALGORITHMS[table]}}
    configs = [c.split(":")[0] for c in detail.columns]
    rows = []
    for ours in [*names.values(), "convkit tiled"]:
        theirs = next((k for k, v in names.items() if v == ours), None)
        row: dict[str, Any] = {"implementation": ours if theirs != "cuConv" else "cuConv, the paper's design"}
        for config, column in zip(configs, detail.columns, strict=True):
            row[f"{config}: V100 (us)"] = paper[theirs].get(config, math.nan) if theirs else "not in the paper"
            if (ours, "total") in detail.index and not math.isnan(detail.loc[(ours, "total"), column]):
                row[f"{config}: H100 (us)"] = float(detail.loc[(ours, "total"), column])
            else:
                row[f"{config}: H100 (us)"] = "not supported" if ours in detail.index.get_level_values(0) else "not run"
        rows.append(row)
    return pd.DataFrame(rows).set_index("implementation")


def blocks_comparison(kernels: Any) -> Any:
    """The paper's section 4.2 comparison (Table 3's A and B): thread blocks of cuConv, IMPLICIT_GEMM and
    IMPLICIT_PRECOMP_GEMM on the V100 beside the blocks of their longest kernel here."""
    full = blocks_table(kernels).reset_index()
    keep = full[full["paper's blocks (V100)"].notna()].copy()
    keep["paper's blocks (V100)"] = keep["paper's blocks (V100)"].astype(int)
    return keep[["configuration", "implementation", "paper's blocks (V100)", "blocks", "threads per block", "us"]
                ].rename(columns={"blocks": "blocks (H100)", "us": "longest kernel (us)"}).set_index(
                    ["configuration", "implementation"])  # fmt: skip


def roofline_points(table: Any, batch: int = 1) -> list[tuple[str, float, float, str]]:
    """(label, FLOP/byte, GFLOP/s, kind) at one batch size: the best convkit variant and the best cuDNN
    algorithm per configuration, for :func:`convkit.book.plots.roofline`."""
    points = []
    for r in table[table["batch"] == batch].itertuples():
        p = ConvProblem.from_label(r.label)
        points.append(("", p.arithmetic_intensity, r.gflop * 1e6 / r.best_cudnn_us, "best cuDNN algorithm"))
        points.append(("", p.arithmetic_intensity, r.gflop * 1e6 / r.best_us, "best convkit variant"))
    return points


def main(directory: str) -> None:
    """Print the headline table of a results folder (the device script's last word)."""
    from pathlib import Path

    import pandas as pd

    from convkit.study.results import load_results

    frame, _ = load_results(Path(directory), "cuconv")
    table = speedup_table(frame)
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.max_rows", 200):
        print(table.groupby("best_variant").size().to_string())
        print(batch_summary(table).round(2).to_string())
        print(headlines(table).to_string())


if __name__ == "__main__":
    import sys

    main(sys.argv[1])
