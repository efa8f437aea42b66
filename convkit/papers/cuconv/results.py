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
from convkit.libs.cudnn import ALGORITHM_WORDS
from convkit.study.tables import CONVKIT, fastest, geomean, share_faster, timed

#: The ladder's variants as the chapter names them.
VARIANT_NAMES: dict[str, str] = {
    "cuconv_paper": "paper", "cuconv_fused": "fused", "cuconv_split": "split", "cuconv_tiled": "tiled",
}  # fmt: skip
#: The variants in words, as tables and prose name them (the short names stay in dropdowns).
VARIANT_WORDS: dict[str, str] = {
    "paper": "the paper's design", "fused": "several filters a thread", "split": "split channel reduction",
    "tiled": "register tiles (implicit GEMM)",
}  # fmt: skip
#: The baseline of the paper's own comparison, as the chapter labels it.
AS_THE_PAPER = "as the paper compares: cuDNN alone"

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
    """One row per problem: each variant's, the best cuDNN algorithm's and the best library's median time, speedups.

    Columns: label (the layer label), batch, size, filter, filters, depth, ``<variant>_us`` for each of
    :data:`VARIANT_NAMES`, best_variant, best_us (our best), best_cudnn, best_cudnn_us, pytorch_us, best_lib
    and best_lib_us (the best library: the faster of every cuDNN algorithm and PyTorch's autotuned cuDNN),
    speedup_paper and speedup_best (the best library's time over ours: above 1, ours is faster), and
    cudnn_speedup_paper and cudnn_speedup_best (over the best cuDNN algorithm alone, as the paper compares).
    Variants that did not run correctly have NaN times.
    """
    import pandas as pd

    records = []
    for (label, _pad, _stride), group in frame.groupby(["label", "pad", "stride"], sort=False):
        p = ConvProblem.from_row(group.iloc[0])
        times = timed(group)
        mine = times[times["impl"] == CONVKIT]
        rec: dict[str, Any] = {"label": label, "batch": p.n, "size": p.h, "filter": p.r, "filters": p.m,
                               "depth": p.c, "gflop": p.flops / 1e9}  # fmt: skip
        for variant, short in VARIANT_NAMES.items():
            rec[f"{short}_us"] = fastest(mine[mine["variant"] == variant])[1]
        best_variant, best_us = fastest(mine)
        rec["best_variant"], rec["best_us"] = VARIANT_NAMES.get(best_variant, best_variant) or "none", best_us
        best_cudnn, best_cudnn_us = fastest(times[times["impl"] == "cudnn"])
        rec["best_cudnn"], rec["best_cudnn_us"] = best_cudnn or "none", best_cudnn_us
        rec["pytorch_us"] = fastest(times[times["impl"] == "pytorch"])[1]
        records.append(rec)
    table = pd.DataFrame(records)
    pytorch_faster = table["pytorch_us"] < table["best_cudnn_us"]
    table["best_lib"] = table["best_cudnn"].where(~pytorch_faster, "PyTorch (cuDNN autotuned)")
    table["best_lib_us"] = table["best_cudnn_us"].where(~pytorch_faster, table["pytorch_us"])
    table["speedup_paper"] = table["best_lib_us"] / table["paper_us"]
    table["speedup_best"] = table["best_lib_us"] / table["best_us"]
    table["cudnn_speedup_paper"] = table["best_cudnn_us"] / table["paper_us"]
    table["cudnn_speedup_best"] = table["best_cudnn_us"] / table["best_us"]
    return table


#: The columns of :func:`headlines`: the speed-up column of :func:`speedup_table` behind each.
HEADLINE_COLUMNS: dict[str, str] = {
    "paper's design: over the best library": "speedup_paper",
    "our best: over the best library": "speedup_best",
    f"paper's design ({AS_THE_PAPER})": "cudnn_speedup_paper",
    f"our best ({AS_THE_PAPER})": "cudnn_speedup_best",
}


def stats(table: Any, column: str) -> dict[str, float]:
    """The paper's section 4.1 numbers of one speed-up column of :func:`speedup_table` (the rows of
    :func:`headlines`): counts, share faster (%), mean speed-up where faster, per filter size at batch 1."""
    s = table[column]
    faster = s[s > 1]
    b1 = table[table["batch"] == 1]

    def of(filter_size: int, how: str) -> float:
        v = b1[b1["filter"] == filter_size][column].dropna()
        if not len(v):
            return math.nan
        return float(v.mean()) if how == "mean" else float(v.max())

    return {
        "problems measured": int(s.notna().sum()),
        "problems faster": int((s > 1).sum()),
        "share faster (%)": share_faster(s),
        "mean speed-up where faster (x)": float(faster.mean()) if len(faster) else math.nan,
        "1x1, batch 1: mean speed-up (x)": of(1, "mean"),
        "1x1, batch 1: largest speed-up (x)": of(1, "max"),
        "5x5, batch 1: mean speed-up (x)": of(5, "mean"),
        "5x5, batch 1: largest speed-up (x)": of(5, "max"),
        "3x3, batch 1: mean speed-up (x)": of(3, "mean"),
        "3x3, batch 1: share faster (%)": share_faster(b1[b1["filter"] == 3][column]),
        "batch 1: share faster (%)": share_faster(b1[column]),
        "batch 1: geometric-mean speed-up (x)": geomean(b1[column]),
        "largest speed-up, any batch (x)": float(s.max()),
    }


def headlines(table: Any) -> Any:
    """The paper's section 4.1 numbers beside ours, one row per claim: the paper's (V100, over cuDNN alone),
    then the paper's design and our best on the H100, over the best library and over cuDNN alone (as the paper
    compares; :data:`HEADLINE_COLUMNS`)."""
    import pandas as pd

    c = PAPER_CLAIMS
    paper = {"problems measured": f"about {PAPER_FASTER_COUNT / c['share_faster'] * 100:.0f}",
             "problems faster": f"{PAPER_FASTER_COUNT}",
             "share faster (%)": f"{c['share_faster']}",
             "mean speed-up where faster (x)": f"{c['mean_speedup_where_faster']}",
             "1x1, batch 1: mean speed-up (x)": f"{c['1x1_batch1_mean']}",
             "1x1, batch 1: largest speed-up (x)": f"{c['1x1_batch1_max']} (7-1-1-32-832)",
             "5x5, batch 1: mean speed-up (x)": f"{c['5x5_batch1_mean']}",
             "5x5, batch 1: largest speed-up (x)": f"{c['5x5_batch1_max']}",
             "3x3, batch 1: mean speed-up (x)": "not given (below 1)",
             "3x3, batch 1: share faster (%)": "3 layers",
             "batch 1: share faster (%)": "not given",
             "batch 1: geometric-mean speed-up (x)": "not given",
             "largest speed-up, any batch (x)": f"{c['1x1_batch1_max']} (7-1-1-32-832)"}  # fmt: skip
    out = pd.DataFrame({"paper (V100, over cuDNN alone)": pd.Series(paper)}
                       | {name: pd.Series(stats(table, column), dtype=object)
                          for name, column in HEADLINE_COLUMNS.items()})  # fmt: skip
    return out.loc[list(stats(table, "speedup_best"))].rename_axis("claim")


def batch_summary(table: Any) -> Any:
    """Per batch size, against the best library: layers, share faster and geometric-mean speed-up of the paper's
    design and of our best."""
    import pandas as pd

    rows = []
    for batch, g in table.groupby("batch"):
        rows.append({"batch": batch, "layers": len(g),
                     "paper's design: faster (%)": share_faster(g["speedup_paper"]),
                     "paper's design: geometric mean (x)": geomean(g["speedup_paper"]),
                     "our best: faster (%)": share_faster(g["speedup_best"]),
                     "our best: geometric mean (x)": geomean(g["speedup_best"])})  # fmt: skip
    return pd.DataFrame(rows).set_index("batch")


def implementation(impl: str, variant: str) -> str:
    """A profiled implementation as the chapter's tables name it: our variant in words, or the cuDNN algorithm."""
    if impl == "convkit":
        short = VARIANT_NAMES.get(variant, variant)
        return VARIANT_WORDS.get(short, short)
    return f"cuDNN {variant}"


def in_words(name: str) -> str:
    """An implementation as :func:`implementation` names it, with a cuDNN algorithm in words (``cuDNN implicit
    GEMM``) for the chapter's tables."""
    algorithm = name.removeprefix("cuDNN ")
    return f"cuDNN {ALGORITHM_WORDS[algorithm]}" if name.startswith("cuDNN ") and algorithm in ALGORITHM_WORDS else name


def named_label(table: str, config: str) -> str:
    """The layer label of the paper's named configuration ``config`` (A, B, C) of ``table``."""
    return dict(NAMED_CONFIGS[table])[config]


def paper_name(table: str, config: str) -> str:
    """The paper's designation of a named layer, in words: ``Table 3, layer A``."""
    return f"{table.split(' (')[0]}, layer {config}"


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
    Columns: the table's configurations (A, B, C), each named by its layer label.
    """
    import pandas as pd

    rows = kernels[kernels["table"] == table]
    algorithms = PAPER_TABLE_ALGORITHMS[table]
    wanted = rows[(rows["impl"] == "convkit") | rows["variant"].isin(algorithms)]
    configs = {c: lbl for c, lbl in wanted[["config", "label"]].drop_duplicates().itertuples(index=False)}
    records: dict[tuple[str, str], dict[str, Any]] = {}
    for (impl, variant), group in wanted.groupby(["impl", "variant"], sort=False):
        name = implementation(impl, variant)
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
    out.columns = [configs[c] for c in out.columns]
    return out


#: Longest kernel name the chapter's tables show: a longer one is cut (no footnote, whose full name would not wrap).
KERNEL_NAME_WIDTH = 30


def clipped(name: str, width: int = KERNEL_NAME_WIDTH) -> str:
    """``name`` cut to ``width`` characters, the cut marked with an ellipsis."""
    name = str(name).removesuffix("...")
    return name if len(name) <= width else name[: width - 1] + "…"


def kernel_rows(kernels: Any, table: str) -> Any:
    """:func:`kernel_table` one row per layer, implementation (in words) and kernel that ran there, with its time
    in microseconds (a dash where cuDNN refuses the algorithm): four narrow columns, kernel names cut to
    :data:`KERNEL_NAME_WIDTH`, so that the table fits the book's column."""
    detail = kernel_table(kernels, table).rename(index=in_words, level="implementation")
    detail = detail.rename(index=clipped, level="kernel")
    detail.columns.name = "layer"
    rows = detail.stack(future_stack=True).rename("time (us)").reset_index()
    order = {label: i for i, label in enumerate(detail.columns)}
    rows = rows.sort_values("layer", key=lambda s: s.map(order), kind="stable")
    status = ~rows["kernel"].str.match(r"\d+: ") & (rows["kernel"] != "total")  # "not supported", on every layer
    return rows[rows["time (us)"].notna() | status].set_index(["layer", "implementation", "kernel"])


def paper_kernel_totals(table: str) -> Any:
    """The paper's totals (V100, us) for a Tables 3-5 table, in the layout of :func:`kernel_table`."""
    import pandas as pd

    return pd.DataFrame(PAPER_KERNEL_TOTALS_US[table]).T.rename_axis("paper (V100), total us")


def blocks_table(kernels: Any) -> Any:
    """Thread blocks each implementation (cuDNN's algorithms in words: :func:`in_words`) launches on the named
    configurations (its longest kernel), beside the paper's counts for Table 3's A and B (256 vs 16 vs 4; 1,024 vs
    224 vs 32)."""
    import pandas as pd

    ok = kernels[kernels["status"] == "ok"].copy()
    ok["time_us"] = ok["time_us"].astype(float)
    main = ok.loc[ok.groupby(["table", "config", "impl", "variant"], sort=False)["time_us"].idxmax()]
    records = []
    for r in main.itertuples():
        records.append({"layer": r.label, "implementation": implementation(r.impl, r.variant), "table": r.table,
                        "config": r.config,
                        "longest kernel": short_kernel_name(r.kernel), "blocks": int(r.blocks),
                        "threads per block": int(r.threads_per_block), "us": float(r.time_us)})  # fmt: skip
    out = pd.DataFrame(records)
    paper = {"cuConv": VARIANT_WORDS["paper"], "IMPLICIT_GEMM": "cuDNN IMPLICIT_GEMM",
             "IMPLICIT_PRECOMP_GEMM": "cuDNN IMPLICIT_PRECOMP_GEMM"}  # fmt: skip
    out["paper's blocks (V100)"] = [
        PAPER_BLOCKS[c].get(next((k for k, v in paper.items() if v == i), ""), math.nan)
        if t.startswith("Table 3") and c in PAPER_BLOCKS
        else math.nan
        for t, c, i in zip(out["table"], out["config"], out["implementation"], strict=True)
    ]
    out["implementation"] = out["implementation"].map(in_words)
    return out.drop(columns=["table", "config"]).set_index(["layer", "implementation"])


def totals_table(kernels: Any, table: str) -> Any:
    """The paper's Tables 3-5 as totals: per implementation the paper has (and our best variant), each
    configuration's V100 microseconds beside the H100's; text where an algorithm does not run here."""
    import pandas as pd

    detail = kernel_table(kernels, table)
    paper = PAPER_KERNEL_TOTALS_US[table]
    names = {"cuConv": VARIANT_WORDS["paper"], **{a: f"cuDNN {a}" for a in PAPER_TABLE_ALGORITHMS[table]}}
    letters = {label: letter for letter, label in NAMED_CONFIGS[table]}
    rows = []
    for ours in [*names.values(), VARIANT_WORDS["tiled"]]:
        theirs = next((k for k, v in names.items() if v == ours), None)
        row: dict[str, Any] = {"implementation": ours}
        for column in detail.columns:
            config = letters[column]
            row[f"{column}: V100 (us)"] = paper[theirs].get(config, math.nan) if theirs else "not in the paper"
            if (ours, "total") in detail.index and not math.isnan(detail.loc[(ours, "total"), column]):
                row[f"{column}: H100 (us)"] = float(detail.loc[(ours, "total"), column])
            else:
                row[f"{column}: H100 (us)"] = "not supported" if ours in detail.index.get_level_values(0) else "not run"
        rows.append(row)
    out = pd.DataFrame(rows)
    out["implementation"] = out["implementation"].map(in_words)
    return out.set_index("implementation")


def blocks_comparison(kernels: Any) -> Any:
    """The paper's section 4.2 comparison (Table 3's A and B): thread blocks of cuConv, IMPLICIT_GEMM and
    IMPLICIT_PRECOMP_GEMM on the V100 beside the blocks of their longest kernel here."""
    full = blocks_table(kernels).reset_index()
    keep = full[full["paper's blocks (V100)"].notna()].copy()
    keep["paper's blocks (V100)"] = keep["paper's blocks (V100)"].astype(int)
    return keep[["layer", "implementation", "paper's blocks (V100)", "blocks", "threads per block", "us"]
                ].rename(columns={"blocks": "blocks (H100)", "us": "longest kernel (us)"}).set_index(
                    ["layer", "implementation"])  # fmt: skip


def roofline_points(table: Any, batch: int = 1) -> list[tuple[str, float, float, str]]:
    """(label, FLOP/byte, GFLOP/s, kind) at one batch size: our best and the best library per layer, for
    :func:`convkit.book.plots.roofline`."""
    points = []
    for r in table[table["batch"] == batch].itertuples():
        p = ConvProblem.from_label(r.label)
        points.append(("", p.arithmetic_intensity, r.gflop * 1e6 / r.best_lib_us, "best library"))
        points.append(("", p.arithmetic_intensity, r.gflop * 1e6 / r.best_us, "our best"))
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
