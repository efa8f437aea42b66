"""What the Lu 2020 chapter says about loads: the warp simulator's counts, the ncu load counters and ptxas's
verdict on the window array (CPU only)."""

from __future__ import annotations

import json
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.cuda.ptxas import find_nvcc, ptxas_report
from convkit.families.lu2020.launch import FILTER_SIZES, SINGLE_VARIANTS, build_options
from convkit.papers.lu2020 import warp_sim

#: The chapter's names for the kernels (results variant -> name).
VARIANT_NAMES: dict[str, str] = {
    "lu_direct": "direct", "lu_column_naive": "column reuse, naive", "lu_column": "column reuse, packed",
    "lu_row": "row reuse", "lu_combined": "column + row reuse", "lu_wide": "four columns a lane",
    "lu_multi": "multi-channel",
}  # fmt: skip

#: Algorithm 3's example: a 3x3 filter and 3 outputs down a column, 9 input rows loaded -> 5.
ROW_EXAMPLE = {"k": 3, "outputs": 3, "paper": (9, 5)}


def figure1_table() -> Any:
    """Figure 1's example counted by the simulator: a warp's input load instructions (each a row of the lanes'
    window) per method, for the whole 2 x 7 output (pandas)."""
    import pandas as pd

    h, w, k = FIGURE1["h"], FIGURE1["w"], FIGURE1["k"]
    rows = []
    for method, what in (("direct", "every window whole: 2 windows of 25 per thread"),
                         ("column", "2 of each 5-wide row, 3 by shuffles"),
                         ("row", "each of the 6 input rows once, all 5 columns"),
                         ("combined", "each input row once, 2 of its 5 columns")):  # fmt: skip
        loads = warp_sim.problem_loads(h, w, k, 0, method, rows=h - k + 1)
        rows.append({"kernel": VARIANT_NAMES[f"lu_{method}"], "what a thread loads": what,
                     "input loads": loads.input_requests,
                     "loads per output": loads.input_requests / loads.outputs})  # fmt: skip
    return pd.DataFrame(rows)


def row_reuse_table(rows: int = 8) -> Any:
    """Algorithm 3's example (3x3 filter, 3 outputs down a column: input rows loaded 9 -> 5) and the kernels'
    launch (``rows`` outputs per thread, K = 3, 5, 7), counted by the simulator (pandas)."""
    import pandas as pd

    out = []
    cases = [(ROW_EXAMPLE["k"], ROW_EXAMPLE["outputs"], ROW_EXAMPLE["paper"])] + [(k, rows, None) for k in FILTER_SIZES]
    for k, t, paper in cases:
        direct = warp_sim.warp_loads(k, "direct").requests // k * t
        reuse = warp_sim.warp_loads(k, "row", rows=t).requests // k
        out.append({"filter": f"{k}x{k}", "outputs down a column": t,
                    "input rows, direct": direct, "input rows, row reuse": reuse,
                    "paper": f"{paper[0]} -> {paper[1]}" if paper else None,
                    "saved": 1 - reuse / direct})  # fmt: skip
    return pd.DataFrame(out)


def schedule_table(ks: tuple[int, ...] = (3, 5, 7, 9)) -> Any:
    """The exchange per filter width: loaded slots, the steps (slot, xor mask), loads and shuffles per row."""
    import pandas as pd

    rows = []
    for k in ks:
        s = warp_sim.exchange_schedule(k)
        rows.append({"K": k, "loaded slots": ", ".join(map(str, s.loads)),
                     "steps (slot, xor)": " ".join(f"({t.slot}, {t.mask})" for t in s.steps),
                     "loads per row": f"{k} -> {len(s.loads)}", "shuffles per row": len(s.steps)})  # fmt: skip
    return pd.DataFrame(rows)


#: ncu's counters in the profile (results columns).
REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_ld_sum"


SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld_sum"


def transactions(kernels: Any) -> Any:
    """ncu's global load requests and sectors per output beside the simulator's count of the same launch,
    and local-memory sectors (pandas), per filter width and kernel."""
    import pandas as pd

    rows = []
    ok = kernels[(kernels["status"] == "ok") & (kernels["impl"] == "convkit")]
    for r in ok.itertuples():
        problem = ConvProblem.from_label(r.label)
        method = r.variant.removeprefix("lu_")
        launch = json.loads(r.params)
        predicted = warp_sim.problem_loads(problem.h, problem.w, problem.r, problem.pad, method,
                                           rows=launch.get("rows", 1))  # fmt: skip
        outputs = problem.out_h * problem.out_w
        requests, sectors = float(getattr(r, REQUESTS)), float(getattr(r, SECTORS))
        simulated = predicted.requests / outputs
        rows.append({
            "K": problem.r, "kernel": VARIANT_NAMES[r.variant], "rows": launch.get("rows", 1),
            "requests / output (ncu)": requests / outputs, "requests / output (simulator)": simulated,
            "sectors / output (ncu)": sectors / outputs, "sectors / output (simulator)": predicted.sectors / outputs,
            "local sectors (ld + st)": float(getattr(r, LOCAL_LD)) + float(getattr(r, LOCAL_ST)),
            "time_us": float(r.time_us),
        })  # fmt: skip
    return pd.DataFrame(rows).sort_values(["K", "time_us"], ascending=[True, False]).reset_index(drop=True)


def compiler_table(archs: tuple[str, ...] = ("sm_75", "sm_90")) -> Any:
    """ptxas's resources for the naive and packed column-reuse kernels and the rest of the paper's
    single-channel ladder per filter width and architecture (pandas), or None where ``nvcc`` is not installed.
    A stack frame means the window array lives in local memory."""
    import pandas as pd

    if find_nvcc() is None:
        return None
    ladder = {f"lu_{v}" for v in SINGLE_VARIANTS}
    rows = []
    for k in FILTER_SIZES:
        for arch in archs:
            for res in ptxas_report("lu2020", arch, options=build_options(k, rows=8)):
                if res.kernel not in ladder:
                    continue
                rows.append({"K": k, "arch": arch, "kernel": VARIANT_NAMES[res.kernel], "registers": res.registers,
                             "stack frame (B)": res.stack_frame_bytes, "spill stores (B)": res.spill_store_bytes,
                             "spill loads (B)": res.spill_load_bytes})  # fmt: skip
    return pd.DataFrame(rows)


#: Figure 1's example: a 5x5 filter over a 6 x 11 image, a 2 x 7 output ("valid"), a thread per output column.
FIGURE1 = {"h": 6, "w": 11, "k": 5}


LOCAL_LD, LOCAL_ST = "l1tex__t_sectors_pipe_lsu_mem_local_op_ld_sum", "l1tex__t_sectors_pipe_lsu_mem_local_op_st_sum"
