"""The Chang 2022 chapter's numbers, computed from the recorded sweep and the ceilings (CPU only).

:func:`speedup_table` gives one row per configuration: each kernel's time, the best library time
(every cuDNN algorithm alone, and PyTorch's autotuned cuDNN), the roofline floor from the measured
ceilings, each kernel's efficiency (floor / time) and cuDNN's room (its time over the floor).
:func:`summary` and :func:`paper_vs_ours` set the paper's claims beside ours, :func:`result_lines` is the
chapter's result box and :func:`findings` the book's findings rows (the same numbers, from :func:`headline`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.families.chang2022.model import GpuFigures, LatencyModel, figures_from_ceilings, latency_model
from convkit.families.chang2022.single import (
    ChangSingleLaunch,
    DirectSingleLaunch,
    SingleBounds,
    StagedSingleLaunch,
    single_bounds,
    single_launch,
    single_plan_stats,
)
from convkit.papers.chang2022.problems import multi_problems
from convkit.study import tables
from convkit.study.claims import per_folder
from convkit.study.roofline import recorded_ceilings

#: The sweep's experiment (``results/<gpu>/chang2022.csv``).
EXPERIMENT = "chang2022"
#: The paper's claims (section 4, Figure 5): speedups over cuDNN 7.1 on the GTX 1080 Ti.
PAPER_SPEEDUPS = {"single": {"min": 1.5, "mean": 2.6, "max": 5.6}, "multi": {"min": 1.05, "mean": 1.39, "max": 2.0}}
#: The chapter's names for the variants.
VARIANT_NAMES: dict[str, str] = {
    "chang_single": "paper plan", "chang_single_fill": "H100 plan",
    "chang_multi": "paper launch", "chang_multi_async": "H100 launch",
}  # fmt: skip
#: The MyST targets of the chapter's sections the findings rows point at.
SECTIONS = {"single": "chang2022-single", "multi": "chang2022-multi"}


def speedup_table(frame: Any, ceilings: dict[str, float]) -> Any:
    """One row per configuration (pandas; single channel first, then by K, map, C, M): the shared columns of
    :func:`convkit.study.tables.problem_row` (floor_us, each variant's ``<variant>_us``, best_lib / best_lib_us:
    the fastest correct cuDNN algorithm or PyTorch, best_cudnn_us, ``speedup_<variant>``: best library over
    ours, ``cudnn_speedup_<variant>``: the best cuDNN algorithm alone over ours, the paper's comparison,
    ``efficiency_<variant>``: floor over ours), then kind, map, C, M, K and room (best cuDNN over the floor)."""
    import pandas as pd

    rows = tables.problem_rows(frame, list(VARIANT_NAMES), ceilings)
    for row in rows:
        problem: ConvProblem = row["problem"]
        row.update({"kind": "single" if problem.c == 1 else "multi", "map": problem.h, "C": problem.c,
                    "M": problem.m, "K": problem.r, "room": row["best_cudnn_us"] / row["floor_us"]})  # fmt: skip
    return pd.DataFrame(rows).sort_values(["kind", "K", "map", "C", "M"], ascending=[False, True, True, True, True])


def summary(table: Any) -> Any:
    """Min / mean / max speedup over the best library per kernel and variant, beside the paper's, and the mean
    efficiency (floor over time, in %)."""
    import pandas as pd

    rows = []
    for kind, variants in (("single", ("chang_single", "chang_single_fill")),
                           ("multi", ("chang_multi", "chang_multi_async"))):  # fmt: skip
        part = table[table["kind"] == kind]
        paper = PAPER_SPEEDUPS[kind]
        rows.append({"kernel": kind, "variant": "paper (GTX 1080 Ti, cuDNN 7.1)", "configurations": None,
                     "min": paper["min"], "mean": paper["mean"], "max": paper["max"], "slower in": None,
                     "mean efficiency": None})  # fmt: skip
        for variant in variants:
            s = part[f"speedup_{variant}"].dropna()
            rows.append({"kernel": kind, "variant": f"{VARIANT_NAMES[variant]} (H100)", "configurations": len(s),
                         "min": s.min(), "mean": s.mean(), "max": s.max(), "slower in": int((s < 1).sum()),
                         "mean efficiency": 100 * part[f"efficiency_{variant}"].mean()})  # fmt: skip
        room = part["room"]
        rows.append({"kernel": kind, "variant": "cuDNN's room: best cuDNN / floor", "configurations": len(room),
                     "min": room.min(), "mean": room.mean(), "max": room.max(), "slower in": None,
                     "mean efficiency": 100 * (1 / room).mean()})  # fmt: skip
    return pd.DataFrame(rows, dtype=object)  # counts stay integers beside the paper's empty cells


def best_variant(table: Any, kind: str) -> str:
    """The variant of ``kind`` with the higher geometric-mean speedup."""
    variants = [
        v for v in VARIANT_NAMES if f"speedup_{v}" in table and (v.startswith("chang_single")) == (kind == "single")
    ]
    part = table[table["kind"] == kind]
    return max(variants, key=lambda v: tables.geomean(part[f"speedup_{v}"].dropna()))


#: The paper's results on Maxwell (GTX Titan X, section 4): speed-ups over cuDNN (min, max).
PAPER_MAXWELL = {"single": (1.3, 3.7), "multi": (1.08, 1.8)}
#: The paper's comparison with Chen et al. (DAC 2017, Kepler): 4x faster, on a GPU of 2.4x the peak.
PAPER_CHEN = (4.0, 2.4)


def _range_text(s: Any) -> str:
    return f"{s.min():.2f}x-{s.max():.2f}x, mean {s.mean():.2f}x (slower in {int((s < 1).sum())} of {len(s)})"


def paper_vs_ours(table: Any, h100: LatencyModel) -> Any:
    """Every table, figure and number of the paper beside the H100's (pandas), in the paper's order."""
    import pandas as pd

    from convkit.families.chang2022.model import GTX_1080TI

    ti = latency_model(GTX_1080TI)
    rows = [{"item": "the paper's Table 1: bytes in flight to hide the latency; threads per SM",
             "paper (GTX 1080 Ti)": "84,366 B; 768 threads/SM",
             "paper's design on the H100": f"1080 Ti: {ti.data_requirement_bytes:,} B, {ti.threads_per_sm} "
                                           f"(computed); H100: {h100.data_requirement_bytes:,} B, "
                                           f"{h100.threads_per_sm:,}",
             "our best on the H100": "a model: nothing to run"}]  # fmt: skip
    figures = (("single", "the paper's Figure 5, left: single channel over cuDNN", "all tested cases"),
               ("multi", "the paper's Figure 5, right: multi channel over cuDNN", "all tested cases"))  # fmt: skip
    for kind, figure, count in figures:
        part = table[table["kind"] == kind]
        paper = PAPER_SPEEDUPS[kind]
        design, best = (("chang_single", "chang_single_fill") if kind == "single"
                        else ("chang_multi", "chang_multi_async"))  # fmt: skip
        rows.append({"item": figure,
                     "paper (GTX 1080 Ti)": f"{paper['min']}x-{paper['max']}x, mean {paper['mean']}x, "
                                            f"faster in {count}",
                     "paper's design on the H100": _range_text(part[f"speedup_{design}"].dropna()),
                     "our best on the H100": _range_text(part[f"speedup_{best}"].dropna())})  # fmt: skip
    for kind in ("single", "multi"):
        low, high = PAPER_MAXWELL[kind]
        rows.append({"item": f"{kind} channel on Maxwell (GTX Titan X) over cuDNN",
                     "paper (GTX 1080 Ti)": f"{low}x-{high}x (GTX Titan X)",
                     "paper's design on the H100": "not measured: no Maxwell GPU here",
                     "our best on the H100": "not measured: no Maxwell GPU here"})  # fmt: skip
    rows.append({"item": "against Chen et al. (DAC 2017, Kepler)",
                 "paper (GTX 1080 Ti)": f"{PAPER_CHEN[0]:.0f}x faster, on a GPU of {PAPER_CHEN[1]}x the peak",
                 "paper's design on the H100": "not measured: Chen et al.'s kernels are not available",
                 "our best on the H100": "not measured: Chen et al.'s kernels are not available"})  # fmt: skip
    return pd.DataFrame(rows)


def headline(table: Any, kind: str) -> dict[str, str]:
    """One kernel's headline numbers as the book prints them (``kind``: single or multi), for the result box and
    the findings rows alike: the best form's range, means and losses over the best library, the paper's own form's
    mean, the mean at the roofline floor and the mean efficiency (floor / time). ``mean`` is the arithmetic mean,
    the paper's measure, compared with the paper's; ``geomean`` and ``median`` are the book's reading of a
    speed-up, shown beside it."""
    part = table[table["kind"] == kind]
    best = best_variant(table, kind)
    design = "chang_single" if kind == "single" else "chang_multi"
    s = part[f"speedup_{best}"]
    counts = part["best_lib"].map(tables.library_name)
    counts = counts.value_counts()
    return {
        "library": f"{counts.index[0]} ({counts.iloc[0]} of {len(part)})",
        "configurations": f"{len(part)}",
        "form": VARIANT_NAMES[best],
        "min": f"{s.min():.2f}x",
        "max": f"{s.max():.2f}x",
        "mean": f"{s.mean():.2f}x",
        "geomean": f"{tables.geomean(s.dropna()):.2f}x",
        "median": f"{s.median():.2f}x",
        "slower": f"{int((s < 1).sum())}",
        "design_mean": f"{part[f'speedup_{design}'].mean():.2f}x",
        "at_floor": f"{(part['best_lib_us'] / part['floor_us']).mean():.2f}x",
        "efficiency": f"{part[f'efficiency_{best}'].mean():.0%}",
    }


def result_lines(table: Any) -> list[str]:
    """The chapter's result box: the paper's claims, what the H100 measured, the bound, the verdict."""
    lines = [
        "**The paper** (GTX 1080 Ti, cuDNN 7.1): speed-ups over cuDNN of "
        f"{PAPER_SPEEDUPS['single']['min']}x to {PAPER_SPEEDUPS['single']['max']}x for the single-channel kernel "
        f"(mean {PAPER_SPEEDUPS['single']['mean']}x) and {PAPER_SPEEDUPS['multi']['min']}x to "
        f"{PAPER_SPEEDUPS['multi']['max']}x for the multi-channel one (mean {PAPER_SPEEDUPS['multi']['mean']}x)."
    ]
    for kind in ("single", "multi"):
        h = headline(table, kind)
        lines.append(f"**{kind.capitalize()} channel on the H100** ({h['configurations']} configurations): the "
                     f"{h['form']} runs {h['min']}-{h['max']} faster than the best library (arithmetic mean "
                     f"{h['mean']}, the paper's measure; geometric mean {h['geomean']}, median {h['median']}; "
                     f"slower in {h['slower']}), at {h['efficiency']} of the roofline floor on average; the "
                     f"paper's own form as-is averages {h['design_mean']}. A kernel at the floor would average "
                     f"{h['at_floor']}. The best library is most often {h['library']}.")  # fmt: skip
    return lines


@per_folder
def recorded_table(directory: Path) -> Any:
    """:func:`speedup_table` of the sweep recorded in ``directory``, against the ceilings recorded there."""
    from convkit.study.results import load_results

    ceilings = recorded_ceilings(Path(directory))
    if ceilings is None:
        raise FileNotFoundError(f"no ceilings recorded in {Path(directory).name}: the floors need them")
    return speedup_table(load_results(Path(directory), EXPERIMENT)[0], ceilings)


def findings(directory: Path) -> list[dict[str, str]]:
    """The book's findings rows of this paper (:data:`convkit.papers.paper.FINDING_COLUMNS`, and ``section``: the
    chapter's MyST target that shows the row), from the results recorded in ``directory``; every number from
    :func:`headline`, as the result box."""
    table = recorded_table(directory)
    rows = []
    for kind, changed in (
        ("single", "no staging at all wins most maps: the H100's L1 and launch floor"),
        ("multi", "16-byte copies, 2-D tiles, channel splits; 1x1 as a GEMM tile"),
    ):
        h = headline(table, kind)
        rows.append({"paper": "Chang 2022", "claim": f"{kind}-channel kernel beats cuDNN",
                     "paper's number": f"{PAPER_SPEEDUPS[kind]['mean']}x mean (GTX 1080 Ti)",
                     "paper's design on the H100": f"{h['design_mean']} mean",
                     "our best on the H100": f"{h['mean']} mean (geometric {h['geomean']}), slower in "
                                             f"{h['slower']} of {h['configurations']}",
                     "best library on the H100": h["library"],
                     "efficiency": h["efficiency"], "what changed": changed,
                     "section": SECTIONS[kind],
                     "claims": tuple(f"chang2022.{kind}_{c}" for c in ("design", "mean", "geomean"))})  # fmt: skip
    return rows


def recorded_figures(ceilings: dict[str, float], provenance: dict[str, Any]) -> GpuFigures:
    """The model's inputs for the GPU a results file was recorded on, from its measured ceilings."""
    name = next(iter(provenance["runs"].values()))["gpu"]
    return figures_from_ceilings(ceilings, name)


#: Warps an SM holds at once (Pascal to Hopper: 2,048 threads).
MAX_WARPS_PER_SM = 64


def second_gpu_text(first: GpuFigures, second: GpuFigures) -> str:
    """What a second GPU's measured figures change in the latency-hiding model, beside the first's."""
    a, b = latency_model(first), latency_model(second)
    return (f"On the {second.name}, measured: copy bandwidth {second.bandwidth_gbps:,.0f} GB/s against "
            f"{first.bandwidth_gbps:,.0f}, a DRAM latency of {second.latency_cycles} cycles against "
            f"{first.latency_cycles}, the same {second.sm_count} SMs and clock. Hiding that latency takes "
            f"{b.data_requirement_bytes:,} bytes in flight, {b.data_requirement_bytes / a.data_requirement_bytes:.2f}x "
            f"the {first.name}'s: {b.warps_per_sm} warps per SM with one 4-byte load each, against {a.warps_per_sm}. "
            "The faster memory asks for more work in flight, not less: a plan sized for the first GPU leaves more of "
            "the second's bandwidth idle, and the single-channel planner's pieces must grow with it."
            + (f" {b.warps_per_sm} warps is more than the {MAX_WARPS_PER_SM} an SM holds: only several loads in "
               "flight per thread, or wider ones, can cover the latency there." if b.warps_per_sm > MAX_WARPS_PER_SM
               else ""))  # fmt: skip


def model_table(figures: list[GpuFigures]) -> Any:
    """The paper's Table 1 for each GPU, side by side."""
    import pandas as pd

    def text(value: Any) -> str:
        return f"{round(value):,}" if abs(value) >= 100 or float(value).is_integer() else f"{value:.3g}"

    return pd.DataFrame({f.name: {k: text(v) for k, v in latency_model(f).table().items()} for f in figures})


def planner_table(table: Any, model: LatencyModel) -> Any:
    """Per single-channel configuration: the S/T bounds of both methods, the paper plan that ran with the
    model's verdict on hiding the latency, and the tuned H100 plan (from the recorded knobs)."""
    import pandas as pd

    rows = []
    for r in table[table["kind"] == "single"].itertuples():
        problem = ConvProblem.same(1, 1, r.map, r.map, r.M, r.K)
        one, two = single_bounds(problem, model)
        plan = StagedSingleLaunch(**json.loads(r.params_chang_single))
        stats = single_plan_stats(problem, plan, model)
        h100 = single_launch(json.loads(r.params_chang_single_fill))
        rows.append({"config": r.label, "S range": _range(one), "T range": _range(two),
                     "method": plan.method, "S": plan.s, "T": plan.t, "blocks": stats["blocks"],
                     "piece rows x filters": f"{plan.piece_rows} x {plan.piece_filters}",
                     "FMAs/piece": stats["fmas_per_piece"], "FMAs hide latency": stats["fma_hides_latency"],
                     "bytes in flight": stats["volume_in_flight"], "volume covers": stats["volume_covers"],
                     "H100 plan (tuned)": single_launch_text(h100), "H100 blocks": h100.blocks(problem)})  # fmt: skip
    return pd.DataFrame(rows)


def single_launch_text(launch: ChangSingleLaunch) -> str:
    """A single-channel launch in a few words: a plan's block share and piece, or the unstaged launch."""
    if isinstance(launch, DirectSingleLaunch):
        filters = f"{launch.filters} filter{'s' if launch.filters > 1 else ''}"
        weights = ", weights in shared memory" if launch.shared_weights else ""
        return (f"direct (no staging): {filters} x {launch.rows}x4 pixels per thread, {launch.threads} threads"
                f"{weights}")  # fmt: skip
    return (f"{launch.band_rows} rows x {launch.group_filters} filters per block, "
            f"pieces {launch.piece_rows} x {launch.piece_filters}, {launch.threads} threads")  # fmt: skip


def _range(bounds: SingleBounds) -> str:
    """A divisor's range, or why it is empty (fits shared memory from ``lower``; keeps C_FMA up to ``upper``)."""
    if bounds.in_range:
        return f"{bounds.lower}-{bounds.upper}"
    if bounds.upper < 1:
        return "none: no piece reaches C_FMA"
    return f"none: fits from {bounds.lower}, C_FMA only to {bounds.upper}"


def multi_launch_table(table: Any) -> Any:
    """Per multi-channel configuration: the paper's launch and the tuned H100 launch (recorded knobs)."""
    import pandas as pd

    def text(params: str) -> str:
        k = json.loads(params)
        split = f", split {k['split']}" if k["split"] > 1 else ""
        if k.get("kernel") == "pointwise":
            return f"GEMM tile: N_f {k['bm']} x {k['bp']} px, {k['tm']}x{k['tp']}/thread, {k['ck']} ch/segment{split}"
        if k.get("kernel") == "broadcast":
            tiles = f" x {k['tiles']} tiles" if k["tiles"] > 1 else ""
            return (f"filter per thread: {k['filters']} filters{tiles}, {k['tile_h']}x{k['tile_w']}/thread, "
                    f"{k['ck']} ch/segment{split}")  # fmt: skip
        return f"N_f {k['bm']}, {k['tile_h']}x{k['tile_w']} px, {k['rpt']}x{k['px']}/thread{split}"

    part = table[table["kind"] == "multi"]
    return pd.DataFrame({"config": part["label"], "paper launch": part["params_chang_multi"].map(text),
                         "H100 launch (tuned)": part["params_chang_multi_async"].map(text)})  # fmt: skip


#: The multi-channel launch's kernel families, as the chapter names them (:func:`kernel_family`).
TILES, TILES_TWO_ROWS, FILTER_7X7, FILTER_SMALL = ("2-D tiles", "2-D tiles, 2 rows", "filter per thread, 7x7",
                                                  "filter per thread, small")  # fmt: skip
FAMILIES: tuple[str, ...] = (TILES, TILES_TWO_ROWS, FILTER_7X7, FILTER_SMALL)
#: The 1x1 launch's family (not in :data:`FAMILIES`: the family table covers 3x3 and 5x5).
GEMM_TILE = "GEMM tile"


def kernel_family(params: str) -> str:
    """The family of a tuned multi-channel launch (its recorded knobs): the GEMM tile (1x1), the 2-D tiles
    with one or two rows of 4-pixel strips per thread, or a filter per thread on a 7x7 or smaller tile."""
    k = json.loads(params)
    if k.get("kernel") == "pointwise":
        return GEMM_TILE
    if k.get("kernel") == "broadcast":
        return FILTER_7X7 if k["tile_h"] == 7 else FILTER_SMALL
    return TILES_TWO_ROWS if k["rpt"] == 2 else TILES


def family_table(tuning: Any) -> Any:
    """Per 3x3 and 5x5 configuration of the tuning run: each family's best checked time (us), the
    winner, and its margin over the runner-up family (runner-up time / winner time)."""
    rows = tuning[(tuning["variant"] == "chang_multi_async") & (tuning["status"] == "ok") & (tuning["R"] > 1)]
    rows = rows.assign(family=rows["params"].map(kernel_family), us=rows["time_ms_median"] * 1e3)
    best = rows.pivot_table(index="label", columns="family", values="us", aggfunc="min")
    best = best.reindex(columns=[f for f in FAMILIES if f in best.columns])
    order = {p.label: i for i, p in enumerate(multi_problems())}
    best = best.loc[sorted(best.index, key=order.__getitem__)]
    times = [best.loc[label].dropna().sort_values() for label in best.index]
    best["winner"] = [t.index[0] for t in times]
    best["margin"] = [t.iloc[1] / t.iloc[0] if len(t) > 1 else float("nan") for t in times]
    return best.reset_index().rename_axis(columns=None)


def verdict(table: Any) -> str:
    """Markdown: the mean speed-ups, the room cuDNN leaves, and where the kernels lose."""
    lines = []
    for kind in ("single", "multi"):
        variant = best_variant(table, kind)
        part = table[table["kind"] == kind]
        s = part[f"speedup_{variant}"]
        losers = part[s < 1]
        room = part["room"]
        at_floor = (part["best_lib_us"] / part["floor_us"]).mean()
        alone = part[f"cudnn_speedup_{variant}"].mean()
        lines.append(
            f"- **{kind}-channel** ({VARIANT_NAMES[variant]}): mean {s.mean():.2f}x over the best library "
            f"(min {s.min():.2f}x, max {s.max():.2f}x; the paper {PAPER_SPEEDUPS[kind]['mean']}x over cuDNN "
            f"alone). cuDNN's room over the floor here averages {room.mean():.2f}x, "
            f"so a kernel at the floor everywhere would average about {at_floor:.2f}x over the best library and "
            f"{room.mean():.2f}x over the best cuDNN algorithm alone, against which this one averages {alone:.2f}x "
            f"({alone / room.mean():.0%} of it). "
            f"Mean efficiency (floor / time) {part[f'efficiency_{variant}'].mean():.0%}; slower than the best library "
            f"in {len(losers)} of {len(part)}"
            + (f" (maps {tables.listed(sorted(set(losers['map'])))})." if len(losers) else ".")
        )
    return "\n".join(lines)
