"""The cuConv chapter's words with numbers in them: the result box, the findings rows, the paper's further
numbers beside ours and why the paper's design fell behind, all computed from a results folder.

Every function takes the folder the sweep (``cuconv.csv``) and the profile (``cuconv_kernels.csv``) were
recorded in, so that a test can copy it, change a recorded value and see the text change.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from convkit.core.memo import memoize
from convkit.core.problem import ConvProblem
from convkit.papers.cuconv import results as cr
from convkit.papers.cuconv.results import NAMED_CONFIGS
from convkit.study import networks
from convkit.study.tables import share_faster

#: The paper's further numbers (section 4): sum stage's share of Table 4's total, Winograd over
#: IMPLICIT_PRECOMP_GEMM, scalar_prods' occupancy and utilisation, the 3x3 runner-up, the 1x1 share.
PAPER_ITEMS: dict[str, float] = {
    "sum_share_A": 8.5, "sum_share_B": 1.14, "winograd_nonfused_A": 1.93, "winograd_B": 1.67,
    "occupancy": 86.0, "utilisation": 50.0, "runner_up_share": 40.0, "one_by_one_share": 52.3,
}  # fmt: skip
#: The largest batch-1 1x1 speedup the paper names (section 4.1).
PAPER_MAX_CONFIG = "7-32-832"
#: Thread slots per SM on the H100 (compute capability 9.0).
THREADS_PER_SM = 2048
#: 32-bit registers per SM on the H100.
REGISTERS_PER_SM = 65536


#: The sweep's experiment in a results folder (a quick run writes ``cuconv_quick``).
SWEEP = "cuconv"


@memoize()
def _load(directory: str, experiment: str, stamp: float) -> tuple[Any, Any]:
    from convkit.study.results import load_results

    frame, _ = load_results(Path(directory), experiment)
    kernels, _ = load_results(Path(directory), "cuconv_kernels")
    return cr.speedup_table(frame), kernels


def load(directory: Path, experiment: str = SWEEP) -> tuple[Any, Any]:
    """(speedup table, profile rows) of a results folder's ``experiment`` (cached while its files are unchanged)."""
    directory = Path(directory)
    stamp = sum(f.stat().st_mtime_ns for f in directory.glob("cuconv*.csv"))
    return _load(str(directory), experiment, stamp)


def _totals(kernels: Any, table: str, config: str) -> dict[str, float]:
    """Implementation -> total microseconds on one named configuration (only those that ran)."""
    detail = cr.kernel_table(kernels, table)
    column = next(c for c in detail.columns if c.startswith(f"{config}:"))
    totals = detail.xs("total", level="kernel")[column].dropna()
    return {str(k): float(v) for k, v in totals.items()}


def design_change(directory: Path) -> Any:
    """Why the paper's design lost ground: per named configuration, how much faster the paper's kernel and
    the best of the paper's cuDNN algorithms got from the V100 (paper) to the H100 (our profile)."""
    import pandas as pd

    _, kernels = load(directory)
    rows = []
    for table, configs in NAMED_CONFIGS.items():
        paper = cr.PAPER_KERNEL_TOTALS_US[table]
        for config, label in configs:
            ours = _totals(kernels, table, config)
            algos = [a for a in cr.PAPER_TABLE_ALGORITHMS[table] if f"cuDNN {a}" in ours]
            v100_lib = min(cr.PAPER_TABLE_ALGORITHMS[table], key=lambda a: paper[a][config])
            h100_lib = min(algos, key=lambda a: ours[f"cuDNN {a}"])
            rows.append({
                "configuration": f"{table.split(' (')[0].removeprefix('Table ')}{config}: {label}",
                "cuConv V100 (us)": paper["cuConv"][config], "cuConv H100 (us)": ours["convkit paper"],
                "cuConv gain (x)": paper["cuConv"][config] / ours["convkit paper"],
                "best cuDNN V100 (us)": paper[v100_lib][config], "best cuDNN H100 (us)": ours[f"cuDNN {h100_lib}"],
                "cuDNN gain (x)": paper[v100_lib][config] / ours[f"cuDNN {h100_lib}"],
                "cuDNN algorithm": v100_lib if v100_lib == h100_lib else f"{v100_lib} (V100), {h100_lib} (H100)",
            })  # fmt: skip
    return pd.DataFrame(rows).set_index("configuration")


def design_change_text(directory: Path, experiment: str = SWEEP) -> str:
    """One paragraph: config A of Table 3, cuDNN's gain against the paper kernel's, and the median of all."""
    change = design_change(directory)
    a = change.iloc[0]
    table, _ = load(directory, experiment)
    won = change[change.index.str.contains("A: ")]
    return (f"From the V100 to the H100, cuDNN's best algorithm on Table 3's configuration A went from "
            f"{a['best cuDNN V100 (us)']:.1f} to {a['best cuDNN H100 (us)']:.1f} us ({a['cuDNN gain (x)']:.1f}x), "
            f"the paper's kernel from {a['cuConv V100 (us)']:.1f} to {a['cuConv H100 (us)']:.1f} us "
            f"({a['cuConv gain (x)']:.1f}x). On the {len(won)} configurations where the paper's kernel won on the "
            f"V100 (each table's A), cuDNN gained {won['cuDNN gain (x)'].median():.1f}x (median) and the paper's "
            f"kernel {won['cuConv gain (x)'].median():.1f}x; over all seven the gains are closer "
            f"({change['cuDNN gain (x)'].median():.1f}x and {change['cuConv gain (x)'].median():.1f}x). cuDNN 9's "
            f"implicit GEMMs for sm_80 and later (the `sm80_xmma` kernels) now fill the GPU on exactly the small "
            f"layers where the paper's block-level parallelism made its case, so the paper's design is faster on "
            f"{share_faster(table['speedup_paper']):.2f}% of the configurations here against 8.31% on the V100."
    )  # fmt: skip


def _sum_share(kernels: Any, config: str) -> float:
    rows = kernels[(kernels["table"] == "Table 4 (3x3)") & (kernels["config"] == config)
                   & (kernels["variant"] == "cuconv_paper") & (kernels["status"] == "ok")]  # fmt: skip
    times = rows.set_index("kernel")["time_us"].astype(float)
    return 100 * float(times.get("sum_planes", math.nan)) / float(times.sum())


def _runner_up_share(frame_table: Any, frame: Any) -> float:
    """Of the 3x3 problems where a Winograd algorithm ran, the share whose best other cuDNN algorithm is at
    least 50% slower than the best Winograd one."""
    ok = frame[(frame["status"] == "ok") & (frame["impl"] == "cudnn") & (frame["R"].astype(int) == 3)]
    ok = ok.assign(us=ok["time_ms_median"].astype(float))
    hits, counted = 0, 0
    for _, group in ok.groupby("label"):
        wino = group[group["variant"].str.startswith("WINOGRAD")]["us"]
        other = group[~group["variant"].str.startswith("WINOGRAD")]["us"]
        if len(wino) and len(other):
            counted += 1
            hits += float(other.min()) >= 1.5 * float(wino.min())
    return 100 * hits / counted if counted else math.nan


def paper_items(directory: Path, sm_count: int = 132, experiment: str = SWEEP) -> Any:
    """The paper's further numbers, one row each: the paper's value, ours, and how ours was computed."""
    import pandas as pd

    from convkit.study.results import load_results

    table, kernels = load(directory, experiment)
    frame, _ = load_results(Path(directory), experiment)
    b = {name: _totals(kernels, "Table 4 (3x3)", c) for name, c in (("A", "A"), ("B", "B"))}
    prec = {c: b[c]["cuDNN IMPLICIT_PRECOMP_GEMM"] for c in b}
    sp = kernels[(kernels["table"] == "Table 4 (3x3)") & (kernels["config"] == "B")
                 & (kernels["kernel"] == "scalar_prods")].iloc[0]  # fmt: skip
    blocks, threads, registers = (int(float(sp[k])) for k in ("blocks", "threads_per_block", "registers"))
    per_sm = min(32, THREADS_PER_SM // threads, REGISTERS_PER_SM // (registers * threads))
    occupancy = 100 * per_sm * threads / THREADS_PER_SM
    one = [c for c in networks.configurations() if c.filter == 1]
    top = table[(table["batch"] == 1) & (table["fig_label"] == PAPER_MAX_CONFIG)].iloc[0]
    items = PAPER_ITEMS
    first_a = b["A"]["convkit paper"] * (1 - _sum_share(kernels, "A") / 100)
    first_gain = cr.PAPER_KERNEL_TOTALS_US["Table 4 (3x3)"]["cuConv"]["A"] * (1 - items["sum_share_A"] / 100) / first_a
    rows = [
        ("Table 4 A: sum stage's share of cuConv's time", f"{items['sum_share_A']}%",
         f"{_sum_share(kernels, 'A'):.1f}%", f"sum_planes over the total: it stays near the launch floor while "
         f"the first stage got {first_gain:.1f}x faster than the paper's"),
        ("Table 4 B: sum stage's share of cuConv's time", f"{items['sum_share_B']}%",
         f"{_sum_share(kernels, 'B'):.1f}%", "the same on configuration B"),
        ("Table 4 A: WINOGRAD_NONFUSED over IMPLICIT_PRECOMP_GEMM", f"{items['winograd_nonfused_A']}x",
         f"{prec['A'] / b['A']['cuDNN WINOGRAD_NONFUSED']:.2f}x", "totals of the profile"),
        ("Table 4 B: WINOGRAD over IMPLICIT_PRECOMP_GEMM", f"{items['winograd_B']}x",
         f"{prec['B'] / b['B']['cuDNN WINOGRAD_NONFUSED']:.2f}x (NONFUSED)",
         "fused WINOGRAD is not supported on sm_90: WINOGRAD_NONFUSED instead"),
        ("Table 4 B: scalar_prods occupancy", f"{items['occupancy']:.0f}%",
         f"{occupancy:.0f}% theoretical",
         f"not profiled; {per_sm} blocks of {threads} threads ({registers} registers) fit an SM: "
         f"{blocks / (per_sm * sm_count):.1f} waves of {blocks} blocks"),
        ("Table 4 B: scalar_prods compute and memory utilisation", f"about {items['utilisation']:.0f}%",
         "not measured", "the profile records launch shape and time only, no throughput metrics"),
        ("3x3: runner-up at least 50% slower than Winograd", f"about {items['runner_up_share']:.0f}% of cases",
         f"{_runner_up_share(table, frame):.0f}% of cases",
         "3x3 problems where a Winograd algorithm ran (all batches); fused WINOGRAD is gone on sm_90"),
        ("1x1 filters: share of the configurations", f"{items['one_by_one_share']}%",
         f"{100 * len(one) / len(networks.configurations()):.1f}%",
         f"{len(one)} of the {len(networks.configurations())} distinct configurations of Table 1"),
        (f"{PAPER_MAX_CONFIG}, batch 1: speedup over best cuDNN", f"{cr.PAPER_CLAIMS['1x1_batch1_max']}x (its max)",
         f"{top['speedup_paper']:.2f}x paper design, {top['speedup_best']:.2f}x {top['best_variant']}",
         f"against {top['best_cudnn']} at {top['best_cudnn_us']:.1f} us"),
    ]  # fmt: skip
    columns = ["paper's number", "paper (V100)", "ours (H100)", "how ours is computed, or why it differs"]
    return pd.DataFrame(rows, columns=columns).set_index("paper's number")


def result_lines(directory: Path, experiment: str = SWEEP) -> list[str]:
    """The result box: the paper's claim, what we measured (paper design, best variant), the verdict."""
    table, _ = load(directory, experiment)
    h = cr.headlines(table)
    design, best = h["paper design (H100)"], h["best variant (H100)"]
    change = design_change(directory).iloc[0]
    top = table.loc[table["speedup_best"].idxmax()]
    b1 = table[table["batch"] == 1]
    return [
        "**Paper (V100, cuDNN 7.1):** the two-stage design beats cuDNN's best algorithm on 8.31% of about 600 "
        "configurations (1.46x there), 1.23x on average on 1x1 filters at batch 1.",
        f"**The paper's design on the H100 (cuDNN 9):** faster on {design['share faster than best cuDNN (%)']:.2f}% "
        f"of {len(table)} configurations ({design['mean speedup where faster (x)']:.2f}x there), "
        f"{design['1x1 batch 1: mean speedup (x)']:.2f}x on 1x1 at batch 1.",
        f"**Our best variant:** faster on {best['share faster than best cuDNN (%)']:.1f}% of configurations "
        f"({100 * float((b1['speedup_best'] > 1).mean()):.0f}% at batch 1), up to {top['speedup_best']:.2f}x "
        f"({top['label']}).",
        f"**Verdict:** the claim holds in kind (small batch-1 layers win) but shrinks: cuDNN's kernel on Table 3's "
        f"A got {change['cuDNN gain (x)']:.1f}x faster from the V100 to the H100, the paper's "
        f"{change['cuConv gain (x)']:.1f}x; block-level tiling wins the ground back.",
    ]  # fmt: skip


def findings(directory: Path) -> list[dict[str, str]]:
    """The book's findings rows for cuConv (:data:`convkit.papers.paper.FINDING_COLUMNS`)."""
    from convkit.study.roofline import floor_us, recorded_ceilings

    table, _ = load(directory)
    h = cr.headlines(table)
    design, best = h["paper design (H100)"], h["best variant (H100)"]
    ceilings = recorded_ceilings(Path(directory))
    top = table[(table["batch"] == 1) & (table["fig_label"] == PAPER_MAX_CONFIG)].iloc[0]
    efficiency = (f"{100 * floor_us(ConvProblem.from_label(top['label']), ceilings) / top['best_us']:.0f}%"
                  if ceilings else "")  # fmt: skip
    b1_1x1 = table[(table["batch"] == 1) & (table["filter"] == 1)]
    change = design_change(directory).iloc[0]
    base = {"paper": "cuConv (Jorda et al.)"}
    return [
        base | {"claim": "faster than cuDNN's best on a share of all configurations", "paper's number": "8.31% (V100)",
                "paper's design on the H100": f"{design['share faster than best cuDNN (%)']:.2f}%",
                "our best on the H100": f"{best['share faster than best cuDNN (%)']:.1f}%",
                "best library on the H100": f"cuDNN best of {int(table['best_cudnn'].nunique())} algorithms",
                "efficiency": "",
                "what changed": f"cuDNN {change['cuDNN gain (x)']:.1f}x faster than on the V100 (Table 3 A), "
                                f"the paper's kernel {change['cuConv gain (x)']:.1f}x"},
        base | {"claim": "1x1 filters, batch 1: mean speedup", "paper's number": "1.23x (V100)",
                "paper's design on the H100": f"{design['1x1 batch 1: mean speedup (x)']:.2f}x",
                "our best on the H100": f"{best['1x1 batch 1: mean speedup (x)']:.2f}x",
                "best library on the H100": f"{b1_1x1['best_cudnn'].mode().iloc[0]} (most often)",
                "efficiency": "", "what changed": "one launch of scalar dot products cannot fill 132 SMs"},
        base | {"claim": f"largest speedup: {PAPER_MAX_CONFIG}, batch 1", "paper's number": "2.29x (V100)",
                "paper's design on the H100": f"{top['speedup_paper']:.2f}x",
                "our best on the H100": f"{top['speedup_best']:.2f}x ({top['best_us']:.1f} us)",
                "best library on the H100": f"{top['best_cudnn']} {top['best_cudnn_us']:.1f} us",
                "efficiency": efficiency, "what changed": "latency-bound: launches and dependent loads"},
        base | {"claim": "5x5 filters, batch 1: mean speedup", "paper's number": "1.36x (V100)",
                "paper's design on the H100": f"{design['5x5 batch 1: mean speedup (x)']:.2f}x",
                "our best on the H100": f"{best['5x5 batch 1: mean speedup (x)']:.2f}x",
                "best library on the H100": "cuDNN WINOGRAD_NONFUSED or implicit GEMM",
                "efficiency": "", "what changed": "the paper's design holds best here"},
    ]  # fmt: skip
