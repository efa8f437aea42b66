"""The chapters' shared numbers: fastest per problem, the best library, speed-ups, shares, means.

Every chapter turns its sweep's rows into one row per problem with :func:`problem_table`, under one
column-naming rule:

- ``<variant>_us``, ``params_<variant>``: a convkit variant's fastest correct time and its knobs;
- ``best_cudnn``, ``best_cudnn_us``: the fastest correct cuDNN forward algorithm;
- ``pytorch_us``: PyTorch's autotuned cuDNN;
- ``best_lib``, ``best_lib_us``: the fastest correct library case of any kind (cuDNN, PyTorch, peers), CUTLASS
  apart: it is a peer of its own (``best_cutlass``, ``best_cutlass_us``, where it ran), not "the best library";
- ``<reference>_us``: a reference line's time where the run recorded it (:data:`REFERENCES`: PyTorch in TF32), never
  in "the best library";
- ``floor_us``: the roofline floor (:func:`convkit.study.roofline.floor_us`), where ceilings are given;
- ``speedup_<variant>``: the best library's time over the variant's (above 1: convkit is faster);
  ``cudnn_speedup_<variant>``: the same against the best cuDNN algorithm alone;
  ``efficiency_<variant>``: the floor over the variant's time.

Only ``ok`` rows count: a case that failed its check or did not run never wins.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.families import FAMILIES
from convkit.libs.cudnn import ALGORITHM_WORDS
from convkit.libs.pytorch import TF32_IMPL, TF32_VARIANT
from convkit.study.roofline import floor_us

#: The libraries' implementations in words, by results variant: each cuDNN algorithm, PyTorch's autotuned cuDNN,
#: cuBLAS's SGEMM (the book's one name for each).
LIBRARY_NAMES: dict[str, str] = {"cudnn.benchmark": "PyTorch (cuDNN autotuned)", "sgemm": "cuBLAS SGEMM",
                                 TF32_VARIANT: "PyTorch in TF32 (not FP32)",
                                 "ndimage.correlate": "cupyx.ndimage", "nppi_filter": "NVIDIA NPP",
                                 "cvcuda_conv2d": "CV-CUDA",
                                 **{a: f"cuDNN {words}" for a, words in ALGORITHM_WORDS.items()}}  # fmt: skip


def listed(items: Any) -> str:
    """Items in words, as prose lists them: "a", "a and b", "a, b and c" (in the order given)."""
    items = [str(i) for i in items]
    return ", ".join(items[:-1]) + f" and {items[-1]}" if len(items) > 1 else "".join(items)


def library_name(variant: str) -> str:
    """A library case's one name in the book (:data:`LIBRARY_NAMES`, by the variant a results row records)."""
    return LIBRARY_NAMES.get(variant, f"cuDNN {ALGORITHM_WORDS[variant]}" if variant in ALGORITHM_WORDS else variant)


#: Each convkit kernel by its method, in words (the book gives kernel ids only in dropdowns): the book's one name
#: for each, as its family declares it.
KERNEL_WORDS: dict[str, str] = {name: words for family in FAMILIES for name, words in family.words.items()}

#: The ``impl`` of convkit's own kernels in the results; every other impl is a library (cuDNN, PyTorch, a peer).
CONVKIT = "convkit"
#: Libraries compared as peers of their own, never counted in "the best library" (CUTLASS runs NHWC, its layout
#: transforms untimed: not what a caller of an NCHW library gets).
OWN_PEERS = ("cutlass",)
#: Reference lines in a reduced precision (PyTorch's default TF32 convolution, impl ``pytorch_tf32``): recorded beside
#: the FP32 ones as the speed a caller gives up for FP32's accuracy, never "the best library" nor a case the op runs.
REFERENCES = (TF32_IMPL,)


def library_rows(rows: Any) -> Any:
    """The rows of a results frame that "the best library" is the fastest of: every impl but convkit's own
    (its kernels, and the host-timed ``convkit_host`` rows), the peers of their own (:data:`OWN_PEERS`) and the
    reference lines (:data:`REFERENCES`)."""
    impl = rows["impl"].astype(str)
    return rows[~impl.str.startswith(CONVKIT) & ~impl.isin((*OWN_PEERS, *REFERENCES))]


def timed(frame: Any) -> Any:
    """The ``ok`` rows of a results frame with their median time in microseconds (column ``us``)."""
    ok = frame[frame["status"] == "ok"].copy()
    ok["us"] = ok["time_ms_median"].astype(float) * 1e3
    return ok


def problem_keys(frame: Any) -> Any:
    """Each row's problem key (:attr:`convkit.core.problem.ConvProblem.key`) from its label, pad and stride."""
    return frame["label"] + "-p" + frame["pad"].astype(str) + "-s" + frame["stride"].astype(str)


def fastest_per(frame: Any, keys: Sequence[str]) -> Any:
    """The fastest ``ok`` row of each group of ``keys`` in a results frame (with :func:`timed`'s ``us``), in
    the groups' first order: rows that failed their check or did not run never win (a frame that already has
    ``us`` holds timed rows only)."""
    ok = frame if "us" in frame.columns else timed(frame)
    if ok.empty:
        return ok
    return ok.loc[ok.groupby(list(keys), sort=False)["us"].idxmin()].reset_index(drop=True)


def fastest(rows: Any) -> tuple[str, float]:
    """(variant, microseconds) of the fastest of ``rows`` (from :func:`timed`), or ("", NaN) if none."""
    if rows.empty:
        return "", math.nan
    best = rows.sort_values("us", kind="stable").iloc[0]
    return str(best["variant"]), float(best["us"])


def geomean(values: Iterable[float]) -> float:
    """Geometric mean of the positive finite values (NaN when there are none)."""
    kept = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in kept) / len(kept)) if kept else math.nan


def share_faster(speedups: Any) -> float:
    """Percentage of the measured speed-ups (a pandas Series; NaN left out) above 1."""
    s = speedups.dropna()
    return 100.0 * float((s > 1).sum()) / len(s) if len(s) else math.nan


def problem_row(group: Any, variants: Sequence[str], ceilings: dict[str, float] | None = None) -> dict[str, Any]:
    """One problem's numbers (see the module doc) from its :func:`timed` rows."""
    problem = ConvProblem.from_row(group.iloc[0])
    mine = group[group["impl"] == CONVKIT]
    library = library_rows(group)
    row: dict[str, Any] = {"label": group["label"].iloc[0], "problem": problem}
    for peer in OWN_PEERS:
        if (group["impl"] == peer).any():
            row[f"best_{peer}"], row[f"best_{peer}_us"] = fastest(group[group["impl"] == peer])
    row["best_cudnn"], row["best_cudnn_us"] = fastest(library[library["impl"] == "cudnn"])
    row["pytorch_us"] = fastest(library[library["impl"] == "pytorch"])[1]
    for reference in REFERENCES:
        if (group["impl"] == reference).any():
            row[f"{reference}_us"] = fastest(group[group["impl"] == reference])[1]
    row["best_lib"], row["best_lib_us"] = fastest(library)
    floor = floor_us(problem, ceilings) if ceilings is not None else math.nan
    if ceilings is not None:
        row["floor_us"] = floor
    for variant in variants:
        rows = mine[mine["variant"] == variant]
        if rows.empty:
            continue
        us = float(rows["us"].min())
        row[f"{variant}_us"] = us
        row[f"params_{variant}"] = str(rows["params"].iloc[0])
        row[f"speedup_{variant}"] = row["best_lib_us"] / us
        row[f"cudnn_speedup_{variant}"] = row["best_cudnn_us"] / us
        if ceilings is not None:
            row[f"efficiency_{variant}"] = floor / us
    return row


def problem_rows(
    frame: Any, variants: Sequence[str], ceilings: dict[str, float] | None = None, *, where: Any = None
) -> list[dict[str, Any]]:
    """:func:`problem_row` for every problem of a results frame, in the order first recorded; ``where``
    (a function of a :func:`timed` frame giving a boolean Series) keeps some rows first."""
    ok = timed(frame)
    if where is not None:
        ok = ok[where(ok)]
    return [problem_row(group, variants, ceilings) for _, group in ok.groupby(["label", "pad", "stride"], sort=False)]


def status_counts(frame: Any) -> Any:
    """Per implementation (impl and variant), how many problems ended in each status (``ok`` or why not)."""
    table = frame.assign(implementation=frame["impl"] + " " + frame["variant"])
    counts = table.pivot_table(index="implementation", columns="status", values="label", aggfunc="count", sort=False)
    return counts.fillna(0).astype(int)


def spread(sweep: Any, repeat: Any, keys: tuple[str, ...] | None = None) -> dict[str, float]:
    """Run-to-run spread of median times: every case of a sample measured again in a fresh process (``repeat``)
    against the sweep's, as |repeat / sweep - 1| (``median`` and ``p95``, fractions) over ``cases`` matched
    by ``keys`` (default: a sweep row's key)."""
    from convkit.bench.rows import KEY_COLUMNS

    if repeat.empty or sweep.empty:
        return {"cases": 0, "median": math.nan, "p95": math.nan}
    keys = list(keys or KEY_COLUMNS)
    a = timed(sweep).set_index(keys)["us"]
    b = timed(repeat).set_index(keys)["us"]
    both = a.index.intersection(b.index)
    ratio = (b.loc[both] / a.loc[both] - 1).abs()
    return {"cases": len(both), "median": float(ratio.median()), "p95": float(ratio.quantile(0.95))}


def case_speedups(frame: Any) -> Any:
    """Each checked convkit case's speed-up over the best library of its problem in the same run (best library time
    over its time), indexed by the case's key: what a claim's speed-up spread is taken over (the best library as
    :func:`library_rows` has it: neither CUTLASS nor a reference line); host-timed rows are left out."""
    import pandas as pd

    from convkit.bench.rows import KEY_COLUMNS

    ok = timed(frame)
    if ok.empty:
        return pd.Series(dtype=float)
    problem = ["label", "pad", "stride"]
    library = library_rows(ok).groupby(problem)["us"].min()
    mine = ok[ok["impl"] == "convkit"].set_index(list(KEY_COLUMNS))
    best = library.reindex(pd.MultiIndex.from_arrays([mine.index.get_level_values(k) for k in problem]))
    return pd.Series(best.to_numpy() / mine["us"].to_numpy(), index=mine.index).dropna()


def ties(speedups: Any, tolerance: float) -> int:
    """Speed-ups (a pandas Series) within ``tolerance`` (the spread) of 1: neither side is faster."""
    return int(((speedups - 1).abs() <= tolerance).sum())


def ties_words(speedups: Any, spread: dict[str, float], what: str = "layers") -> str:
    """The run-to-run spread (:func:`spread`) in a sentence, with how many of ``speedups`` lie within its 95th
    percentile of 1.0x (ties); where the run measured no sample again, that no difference counts as a tie."""
    if not spread.get("cases"):
        return "No sample of this run was measured again in a fresh process, so no difference is counted as a tie."
    return (f"Run to run, a median time moves by {spread['median']:.1%} (95th percentile {spread['p95']:.1%}, "
            f"{spread['cases']} cases measured again in a fresh process); {ties(speedups, spread['p95'])} {what} "
            "lie within that of 1.0x and are ties.")  # fmt: skip


def best_rows(
    frame: Any, variants: Sequence[str], ceilings: dict[str, float] | None = None, *, where: Any = None
) -> Any:
    """:func:`problem_rows` as a frame, with the fastest of ``variants`` (``best``, ``best_us``) and its speed-up
    over the best library of the same run (``speedup``), and each problem's padding, stride, batch (``n``),
    filter size (``r``) and GFLOP."""
    import pandas as pd

    out = pd.DataFrame(problem_rows(frame, variants, ceilings, where=where))
    mine = [f"{v}_us" for v in variants if f"{v}_us" in out]
    out["best_us"] = out[mine].min(axis=1)
    out["best"] = out[mine].idxmin(axis=1).str.removesuffix("_us")
    out["speedup"] = out["best_lib_us"] / out["best_us"]
    for column, attribute in (("pad", "pad"), ("stride", "stride"), ("n", "n"), ("r", "r")):
        out[column] = [getattr(p, attribute) for p in out["problem"]]
    out["gflop"] = [p.flops / 1e9 for p in out["problem"]]
    return out


def suite_rows(table: Any, problems: Sequence[ConvProblem]) -> Any:
    """The rows of a per-problem ``table`` for ``problems`` (one chapter's suite), in their order."""
    keyed = table.set_index(["label", "pad", "stride"], drop=False)
    return keyed.loc[[(p.label, p.pad, p.stride) for p in problems]].reset_index(drop=True)


def layer_table(rows: Any, columns: dict[str, str], names: dict[str, str]) -> Any:
    """Per-problem rows (:func:`best_rows`) as a reader sees them, one per layer: ``columns`` (a row's column ->
    its heading, ``label`` first) picked and renamed, the fastest kernel and library (``best``, ``best_lib``) by
    the book's ``names`` for them."""
    shown = rows[list(columns)].rename(columns=columns)
    for named in ("best", "best_lib"):
        if named in columns:
            shown[columns[named]] = shown[columns[named]].map(lambda v: names.get(v, v))
    return shown.set_index(columns["label"])


def cell_table(rows: Any, column: str = "speedup", *, bound: str | None = None) -> Any:
    """cuConv's problems by filter size and batch (a filter per row, a batch per column): the geometric mean of
    ``column``, and in brackets that of ``bound`` where given."""
    import pandas as pd

    out: dict[str, dict[str, str]] = {}
    for (r, n), group in rows.groupby(["r", "n"]):
        text = f"{geomean(group[column]):.2f}"
        out.setdefault(f"{r}x{r}", {})[f"batch {n}"] = text + (f" ({geomean(group[bound]):.2f})" if bound else "")
    return pd.DataFrame(out).T.rename_axis("filter")


#: ncu's stall reasons (cycles per issued instruction) as the book names them.
STALL_COLUMNS = {
    "smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio": "not selected",
    "smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio": "dispatch",
    "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio": "math pipe",
    "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio": "barrier",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": "global memory",
    "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio": "shared memory",
    "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio": "fixed latency",
    "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio": "memory queue",
    "smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio": "sleeping",  # (its threads blocked or asleep)
    "smsp__average_warps_issue_stalled_gmma_per_issue_active.ratio": "wgmma wait",  # (Hopper alone)
}


def _longest_kernels(kernels: Any, names: dict[str, str]) -> list[tuple[str, str, Any]]:
    """(layer, the implementation's book name, its longest kernel's row) per profiled layer and implementation."""
    ok = kernels[kernels["status"] == "ok"]
    return [(config, names.get(variant, f"{impl} {variant}"),
             g.loc[g["time_us"].astype(float).idxmax()] if "time_us" in g else g.iloc[0])
            for (config, impl, variant), g in ok.groupby(["config", "impl", "variant"], sort=False)]  # fmt: skip


def profile_table(kernels: Any, names: dict[str, str], pipe: str, pipe_instructions: str, pipe_name: str) -> Any:
    """Per profiled layer and implementation (``names`` maps variants to the book's names), its longest kernel:
    time, the use of one pipe (metric ``pipe``, "<pipe_name> pipe %") and its share of the instructions (metric
    ``pipe_instructions``), issue-slot use, achieved occupancy, shared-memory bank conflicts and the two leading
    stall reasons (cycles per issued instruction)."""
    import pandas as pd

    col = {m: m.replace(".", "_") for m in STALL_COLUMNS}
    rows = []
    for config, implementation, k in _longest_kernels(kernels, names):
        stalls = sorted(((float(k[col[m]]), name) for m, name in STALL_COLUMNS.items() if col[m] in k and
                         not pd.isna(k[col[m]])), reverse=True)[:2]  # fmt: skip
        issued = float(k.get("smsp__inst_executed_sum", math.nan))
        rows.append({
            "layer": config, "implementation": implementation,
            "kernel us": float(k["time_us"]) if "time_us" in k else math.nan,
            f"{pipe_name} pipe %": k.get(pipe),
            "issue slots %": k.get("smsp__issue_active_avg_pct_of_peak_sustained_active"),
            f"{pipe_name} share of instructions %": 100 * float(k.get(pipe_instructions, math.nan)) / issued,
            "warps active %": k.get("sm__warps_active_avg_pct_of_peak_sustained_active"),
            "bank conflicts (loads)": k.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld_sum"),
            "top stalls": ", ".join(f"{name} {v:.2f}" for v, name in stalls),
        })  # fmt: skip
    return pd.DataFrame(rows).set_index(["layer", "implementation"])


#: Bytes a kernel moved to and from local memory, loads and stores (registers spilled, where ptxas ran out of them).
LOCAL_MEMORY = ("l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum", "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum")


def profile_resources(kernels: Any, names: dict[str, str]) -> Any:
    """:func:`profile_table`'s rows, what each longest kernel holds: registers a thread, threads a block, warps active
    (% of the SM's), shared-memory bank conflicts of loads and of stores, and where the profile counted them
    (:data:`LOCAL_MEMORY`) the megabytes of registers spilled to local memory and read back."""
    import pandas as pd

    local = [m.replace(".", "_") for m in LOCAL_MEMORY]
    rows = []
    for config, implementation, k in _longest_kernels(kernels, names):
        rows.append({
            "layer": config, "implementation": implementation,
            "registers a thread": k.get("registers"), "threads a block": k.get("threads_per_block"),
            "warps active %": k.get("sm__warps_active_avg_pct_of_peak_sustained_active"),
            "bank conflicts (loads)": k.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld_sum"),
            "bank conflicts (stores)": k.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st_sum"),
        })  # fmt: skip
        if all(c in k and not pd.isna(k[c]) for c in local):  # profiles recorded before the metric have none
            rows[-1]["spilled MB"] = sum(float(k[c]) for c in local) / 1e6
    return pd.DataFrame(rows).set_index(["layer", "implementation"])
