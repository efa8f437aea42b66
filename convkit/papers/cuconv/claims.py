"""The cuConv chapter's words with numbers in them: the result box, the findings rows, the paper's further
numbers beside ours and why the paper's design fell behind, all computed from a results folder.

Every function takes the folder the sweep (``cuconv.csv``) and the profile (``cuconv_kernels.csv``) were
recorded in, so that a test can copy it, change a recorded value and see the text change.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.papers.cuconv import results as cr
from convkit.papers.cuconv.results import NAMED_CONFIGS
from convkit.study import networks, tables
from convkit.study.claims import SHARE, Claim, Spread, per_folder
from convkit.study.tables import share_faster

#: The paper's further numbers (section 4): sum stage's share of Table 4's total, Winograd over
#: IMPLICIT_PRECOMP_GEMM, scalar_prods' occupancy and utilisation, the 3x3 runner-up, the 1x1 share.
PAPER_ITEMS: dict[str, float] = {
    "sum_share_A": 8.5, "sum_share_B": 1.14, "winograd_nonfused_A": 1.93, "winograd_B": 1.67,
    "occupancy": 86.0, "utilisation": 50.0, "runner_up_share": 40.0, "one_by_one_share": 52.3,
}  # fmt: skip
#: The largest batch-1 1x1 speed-up the paper names (section 4.1), by its layer label.
PAPER_MAX_CONFIG = "7-1-1-32-832"
#: :func:`design_change`'s columns for the paper's design.
DESIGN_V100, DESIGN_H100, DESIGN_GAIN = (
    "paper's design V100 (us)",
    "paper's design H100 (us)",
    "paper's design gain (x)",
)
#: The MyST targets of the chapter's sections the findings rows point at.
SECTIONS = {"speedups": "cuconv-speedups", "batch1": "cuconv-batch1", "profiled": "cuconv-profiled"}
#: Thread slots per SM on the H100 (compute capability 9.0).
THREADS_PER_SM = 2048
#: 32-bit registers per SM on the H100.
REGISTERS_PER_SM = 65536


#: The sweep's experiment in a results folder (a quick run writes ``cuconv_quick``).
SWEEP = "cuconv"


@per_folder
def _load(directory: Path, experiment: str) -> tuple[Any, Any]:
    import pandas as pd

    from convkit.study.results import load_results

    frame, _ = load_results(Path(directory), experiment)
    profiled = Path(directory) / "cuconv_kernels.csv"  # measured once per GPU: a quick run may lack it
    kernels = load_results(Path(directory), "cuconv_kernels")[0] if profiled.is_file() else pd.DataFrame()
    return cr.speedup_table(frame), kernels


def load(directory: Path, experiment: str | None = None) -> tuple[Any, Any]:
    """(speedup table, profile rows) of a results folder's ``experiment`` (default: its sweep, full or quick as
    recorded), cached while its files are unchanged."""
    from convkit.study.results import full_or_quick

    return _load(directory, experiment or full_or_quick(Path(directory), SWEEP))


def _largest_named(table: Any) -> Any:
    """The row of the paper's largest speed-up (:data:`PAPER_MAX_CONFIG`, batch 1) in :func:`load`'s table."""
    return table[(table["batch"] == 1) & (table["label"] == PAPER_MAX_CONFIG)].iloc[0]


def _totals(kernels: Any, table: str, config: str) -> dict[str, float]:
    """Implementation -> total microseconds on one named configuration (only those that ran)."""
    detail = cr.kernel_table(kernels, table)
    totals = detail.xs("total", level="kernel")[cr.named_label(table, config)].dropna()
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
            design = ours[cr.VARIANT_WORDS["paper"]]
            rows.append({
                "layer": label, "in the paper": cr.paper_name(table, config),
                "paper's design V100 (us)": paper["cuConv"][config], "paper's design H100 (us)": design,
                "paper's design gain (x)": paper["cuConv"][config] / design,
                "best cuDNN V100 (us)": paper[v100_lib][config], "best cuDNN H100 (us)": ours[f"cuDNN {h100_lib}"],
                "cuDNN gain (x)": paper[v100_lib][config] / ours[f"cuDNN {h100_lib}"],
                "cuDNN algorithm": v100_lib if v100_lib == h100_lib else f"{v100_lib} (V100), {h100_lib} (H100)",
            })  # fmt: skip
    return pd.DataFrame(rows).set_index("layer")


def design_change_text(directory: Path, experiment: str = SWEEP) -> str:
    """One paragraph: the paper's first named layer, cuDNN's gain against the paper kernel's, and the median of all."""
    change = design_change(directory)
    a = change.iloc[0]
    table, _ = load(directory, experiment)
    won = change[change["in the paper"].str.endswith("layer A")]
    return (f"From the V100 to the H100, cuDNN's best algorithm on {change.index[0]} went from "
            f"{a['best cuDNN V100 (us)']:.1f} to {a['best cuDNN H100 (us)']:.1f} us ({a['cuDNN gain (x)']:.1f}x), "
            f"the paper's kernel from {a[DESIGN_V100]:.1f} to {a[DESIGN_H100]:.1f} us "
            f"({a[DESIGN_GAIN]:.1f}x). On the {len(won)} layers where the paper's kernel won on the "
            f"V100 (each table's layer A), cuDNN gained {won['cuDNN gain (x)'].median():.1f}x (median) and the "
            f"paper's kernel {won[DESIGN_GAIN].median():.1f}x; over all seven the gains are closer "
            f"({change['cuDNN gain (x)'].median():.1f}x and {change[DESIGN_GAIN].median():.1f}x). cuDNN 9's "
            f"implicit GEMMs for sm_80 and later (the `sm80_xmma` kernels) now fill the GPU on exactly the small "
            f"layers where the paper's block-level parallelism made its case, so the paper's design is faster than "
            f"cuDNN's best algorithm on {share_faster(table['cudnn_speedup_paper']):.2f}% of the problems here "
            f"against 8.31% on the V100 (both {cr.AS_THE_PAPER})."
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
    top = _largest_named(table)
    items = PAPER_ITEMS
    a4, b4 = (cr.named_label("Table 4 (3x3)", c) for c in "AB")
    first_a = b["A"][cr.VARIANT_WORDS["paper"]] * (1 - _sum_share(kernels, "A") / 100)
    first_gain = cr.PAPER_KERNEL_TOTALS_US["Table 4 (3x3)"]["cuConv"]["A"] * (1 - items["sum_share_A"] / 100) / first_a
    rows = [
        (f"{a4}: sum stage's share of the paper's design", f"{items['sum_share_A']}%",
         f"{_sum_share(kernels, 'A'):.1f}%", f"sum_planes over the total: it stays near the launch floor while "
         f"the first stage got {first_gain:.1f}x faster than the paper's"),
        (f"{b4}: sum stage's share of the paper's design", f"{items['sum_share_B']}%",
         f"{_sum_share(kernels, 'B'):.1f}%", f"the same on {b4}"),
        (f"{a4}: WINOGRAD_NONFUSED over IMPLICIT_PRECOMP_GEMM", f"{items['winograd_nonfused_A']}x",
         f"{prec['A'] / b['A']['cuDNN WINOGRAD_NONFUSED']:.2f}x", "totals of the profile"),
        (f"{b4}: WINOGRAD over IMPLICIT_PRECOMP_GEMM", f"{items['winograd_B']}x",
         f"{prec['B'] / b['B']['cuDNN WINOGRAD_NONFUSED']:.2f}x (NONFUSED)",
         "fused WINOGRAD is not supported on sm_90: WINOGRAD_NONFUSED instead"),
        (f"{b4}: first stage's occupancy", f"{items['occupancy']:.0f}%",
         f"{occupancy:.0f}% theoretical",
         f"not profiled; {per_sm} blocks of {threads} threads ({registers} registers) fit an SM: "
         f"{blocks / (per_sm * sm_count):.1f} waves of {blocks:,} blocks"),
        (f"{b4}: first stage's compute and memory utilisation", f"about {items['utilisation']:.0f}%",
         "not measured", "the profile records launch shape and time only, no throughput metrics"),
        ("3x3: runner-up at least 50% slower than Winograd", f"about {items['runner_up_share']:.0f}% of cases",
         f"{_runner_up_share(table, frame):.0f}% of cases",
         "3x3 problems where a Winograd algorithm ran (all batches); fused WINOGRAD is gone on sm_90"),
        ("1x1 filters: share of the layer shapes", f"{items['one_by_one_share']}%",
         f"{100 * len(one) / len(networks.configurations()):.1f}%",
         f"{len(one)} of the {len(networks.configurations())} distinct layer shapes of the five networks"),
        (f"{PAPER_MAX_CONFIG}: speed-up ({cr.AS_THE_PAPER})", f"{cr.PAPER_CLAIMS['1x1_batch1_max']}x (its largest)",
         f"{top['cudnn_speedup_paper']:.2f}x the paper's design, {top['cudnn_speedup_best']:.2f}x our best",
         f"against {top['best_cudnn']} at {top['best_cudnn_us']:.1f} us; over the best library "
         f"{top['speedup_best']:.2f}x"),
    ]  # fmt: skip
    columns = ["paper's number", "paper (V100)", "ours (H100)", "how ours is computed, or why it differs"]
    return pd.DataFrame(rows, columns=columns).set_index("paper's number")


def numbers(directory: Path, experiment: str = SWEEP) -> dict[str, str]:
    """The chapter's headline numbers as the book prints them, computed once: the result box
    (:func:`result_lines`) and the findings rows (:func:`findings`) both read them from here."""
    from convkit.study.roofline import floor_us, recorded_ceilings

    table, _ = load(directory, experiment)
    design, best = cr.stats(table, "speedup_paper"), cr.stats(table, "speedup_best")
    design_alone, best_alone = cr.stats(table, "cudnn_speedup_paper"), cr.stats(table, "cudnn_speedup_best")
    change = design_change(directory)
    top = _largest_named(table)
    ceilings = recorded_ceilings(Path(directory))
    floor = floor_us(ConvProblem.from_label(top["label"]), ceilings) if ceilings else math.nan
    largest = table.loc[table["speedup_best"].idxmax()]
    return {
        "problems": f"{len(table)}",
        "design_share": f"{design['share faster (%)']:.1f}%",
        "design_share_alone": f"{design_alone['share faster (%)']:.1f}%",
        "best_share": f"{best['share faster (%)']:.1f}%",
        "best_share_alone": f"{best_alone['share faster (%)']:.1f}%",
        "best_share_b1": f"{best['batch 1: share faster (%)']:.0f}%",
        "design_1x1": f"{design['1x1, batch 1: mean speed-up (x)']:.2f}x",
        "best_1x1": f"{best['1x1, batch 1: mean speed-up (x)']:.2f}x",
        "design_5x5": f"{design['5x5, batch 1: mean speed-up (x)']:.2f}x",
        "best_5x5": f"{best['5x5, batch 1: mean speed-up (x)']:.2f}x",
        "top_label": PAPER_MAX_CONFIG,
        "top_design": f"{top['speedup_paper']:.2f}x",
        "top_best": f"{top['speedup_best']:.2f}x",
        "top_best_us": f"{top['best_us']:.1f} us",
        "top_lib": f"{tables.LIBRARY_NAMES.get(top['best_lib'], top['best_lib'])}, {top['best_lib_us']:.1f} us",
        "top_floor": f"{100 * floor / top['best_us']:.0f}%" if ceilings else "",
        "largest": f"{largest['speedup_best']:.2f}x",
        "largest_label": str(largest["label"]),
        "largest_batch": f"{int(largest['batch'])}",
        "first_named": str(change.index[0]),
        "cudnn_gain": f"{change.iloc[0]['cuDNN gain (x)']:.1f}x",
        "design_gain": f"{change.iloc[0][DESIGN_GAIN]:.1f}x",
    }


def result_lines(directory: Path, experiment: str = SWEEP) -> list[str]:
    """The result box: the paper's claim, what we measured (the paper's design, our best), the bound, the verdict."""
    n = numbers(directory, experiment)
    floor = f", {n['top_floor']} of its floor" if n["top_floor"] else ""
    c = cr.PAPER_CLAIMS
    return [
        f"**Paper (V100, cuDNN 7.1, over cuDNN's best algorithm):** the two-stage design is faster on "
        f"{c['share_faster']}% of about 600 layer and batch problems ({c['mean_speedup_where_faster']}x there); at "
        f"batch 1 it averages {c['1x1_batch1_mean']}x on 1x1 filters and {c['5x5_batch1_mean']}x on 5x5, up to "
        f"{c['1x1_batch1_max']}x ({PAPER_MAX_CONFIG}).",
        f"**The paper's design on the H100 (cuDNN 9):** faster than the best library on {n['design_share']} of "
        f"{n['problems']} problems ({n['design_share_alone']} {cr.AS_THE_PAPER}); at batch 1 it averages "
        f"{n['design_1x1']} on 1x1 filters and {n['design_5x5']} on 5x5; {n['top_design']} on {n['top_label']}.",
        f"**Our best (the fastest of four variants):** faster than the best library on {n['best_share']} of the "
        f"problems ({n['best_share_alone']} {cr.AS_THE_PAPER}), on {n['best_share_b1']} at batch 1; at batch 1 it "
        f"averages {n['best_1x1']} on 1x1 filters and {n['best_5x5']} on 5x5; {n['top_best']} on {n['top_label']} "
        f"({n['top_best_us']}{floor}; best library {n['top_lib']}); up to {n['largest']} ({n['largest_label']}).",
        f"**What limits it:** at batch 1 these layers are bound by latency (launches and dependent loads), far "
        f"below both roofs; larger batches give cuDNN's implicit GEMMs the work to fill the GPU, and they win most "
        f"of those problems. "
        f"From the V100 to the H100 cuDNN's best algorithm on {n['first_named']} got {n['cudnn_gain']} faster, "
        f"the paper's kernel {n['design_gain']}.",
        "**Verdict:** the claim holds in kind (small batch-1 layers win) but shrinks; register tiling wins the "
        "small layers back.",
    ]  # fmt: skip


def findings(directory: Path) -> list[dict[str, str]]:
    """The book's findings rows for cuConv (:data:`convkit.papers.paper.FINDING_COLUMNS`, and ``section``: the
    chapter's MyST target that shows the row), every number from :func:`numbers`, as the result box."""
    n, c = numbers(directory), cr.PAPER_CLAIMS
    base = {"paper": "cuConv (Jorda et al.)"}
    library = "the best of every cuDNN algorithm and PyTorch's autotuned cuDNN"
    return [
        base | {"claim": "faster than cuDNN's best on a share of all layer and batch problems",
                "paper's number": f"{c['share_faster']}% (V100)",
                "paper's design on the H100": f"{n['design_share']} ({n['design_share_alone']} {cr.AS_THE_PAPER})",
                "our best on the H100": f"{n['best_share']} ({n['best_share_alone']} {cr.AS_THE_PAPER})",
                "best library on the H100": library, "efficiency": "",
                "what changed": f"cuDNN got {n['cudnn_gain']} faster than on the V100 ({n['first_named']}), "
                                f"the paper's kernel {n['design_gain']}",
                "section": SECTIONS["speedups"], "claims": ("cuconv.share_design", "cuconv.share_best")},
        base | {"claim": "1x1 filters, batch 1: mean speed-up", "paper's number": f"{c['1x1_batch1_mean']}x (V100)",
                "paper's design on the H100": n["design_1x1"], "our best on the H100": n["best_1x1"],
                "best library on the H100": library, "efficiency": "",
                "what changed": "one launch of scalar dot products cannot fill 132 SMs",
                "section": SECTIONS["batch1"], "claims": ("cuconv.b1_1x1_design", "cuconv.b1_1x1_best")},
        base | {"claim": f"largest speed-up: {PAPER_MAX_CONFIG}", "paper's number": f"{c['1x1_batch1_max']}x (V100)",
                "paper's design on the H100": n["top_design"],
                "our best on the H100": f"{n['top_best']} ({n['top_best_us']})",
                "best library on the H100": n["top_lib"], "efficiency": n["top_floor"],
                "what changed": "latency-bound: launches and dependent loads", "section": SECTIONS["batch1"],
                "claims": ("cuconv.b1_max_design", "cuconv.b1_max_best")},
        base | {"claim": "5x5 filters, batch 1: mean speed-up", "paper's number": f"{c['5x5_batch1_mean']}x (V100)",
                "paper's design on the H100": n["design_5x5"], "our best on the H100": n["best_5x5"],
                "best library on the H100": library, "efficiency": "",
                "what changed": "the paper's design holds best here", "section": SECTIONS["batch1"],
                "claims": ("cuconv.b1_5x5_design", "cuconv.b1_5x5_best")},
    ]  # fmt: skip


# ---------------------------------------------------------------------------------------------
# The findings as checked claims (:mod:`convkit.study.claims`)

SPREAD = Spread(SWEEP, f"{SWEEP}_repeat")


def _table(directory: Path) -> Any:
    return load(directory, SWEEP)[0]


def _stat(column: str, key: str) -> Callable[[Path], float]:
    return lambda d: cr.stats(_table(d), column)[key]


def _top(column: str) -> Callable[[Path], float]:
    def value(directory: Path) -> float:
        return float(_largest_named(_table(directory))[column])

    return value


def claims() -> list[Claim]:
    """The paper's section 4.1 numbers, each held to the paper's value: for the paper's design (over cuDNN alone,
    as the paper compares, for the share; over the best library for the speed-ups) and for our best variant."""
    c = cr.PAPER_CLAIMS
    out = []
    for who, column, alone in (("the paper's kernel", "speedup_paper", "cudnn_speedup_paper"),
                               ("our best variant", "speedup_best", "cudnn_speedup_best")):  # fmt: skip
        name = "design" if column == "speedup_paper" else "best"
        short = "the paper's kernel" if name == "design" else "ours"
        out += [
            Claim(f"cuconv.share_{name}", f"{who} is faster than cuDNN's best algorithm on at least the paper's "
                  f"share of problems ({c['share_faster']}%)", _stat(alone, "share faster (%)"), c["share_faster"],
                  unit="%", kind=SHARE, spread=SPREAD, paper=f"{c['share_faster']}% (V100)",
                  speedups=lambda d, a=alone: _table(d)[a].dropna(), short=short),
            Claim(f"cuconv.b1_1x1_{name}", f"{who} averages the paper's speed-up on 1x1 filters at batch 1",
                  _stat(column, "1x1, batch 1: mean speed-up (x)"), c["1x1_batch1_mean"], spread=SPREAD, short=short,
                  paper=f"{c['1x1_batch1_mean']}x (V100)"),
            Claim(f"cuconv.b1_max_{name}", f"{who} reaches the paper's largest speed-up on {PAPER_MAX_CONFIG}",
                  _top(column), c["1x1_batch1_max"], spread=SPREAD,
                  short=short, paper=f"{c['1x1_batch1_max']}x (V100)"),
            Claim(f"cuconv.b1_5x5_{name}", f"{who} averages the paper's speed-up on 5x5 filters at batch 1",
                  _stat(column, "5x5, batch 1: mean speed-up (x)"), c["5x5_batch1_mean"], spread=SPREAD, short=short,
                  paper=f"{c['5x5_batch1_mean']}x (V100)"),
        ]  # fmt: skip
    return out
