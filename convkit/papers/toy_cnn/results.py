"""The toy-CNN chapter's tables, computed from the recorded sweep (``toy_cnn.csv``) and profile.

Every table the notebook shows comes from one function here, so the prose never holds a number
typed by hand: the report's T4 figures are quoted data (:mod:`.launch`), ours are read from
the results files. The chapter's words with numbers in them (result box, findings, verdict) are :mod:`.claims`.
"""

from __future__ import annotations

import json
from typing import Any

from convkit.families.toy_cnn import launch
from convkit.op.cases import params_text
from convkit.papers.toy_cnn.measure import CONV_ONLY, HOST_TIMED, LAYER_STEPS
from convkit.study import tables

#: The sweep's experiment (as :data:`convkit.papers.toy_cnn.TOY_EXPERIMENT`).
TOY_EXPERIMENT = "toy_cnn"

#: The MyST targets of the chapter's sections the findings rows point at.
SECTIONS = {"libraries": "toy-cnn-libraries", "ladder": "toy-cnn-ladder"}
#: The T4's FP32 peak (NVIDIA's T4 datasheet: 8.1 TFLOP/s), against which the report's GFLOP/s are a share.
T4_FP32_PEAK_TFLOPS = 8.1
#: Table 2's labels, in the report's words.
LADDER_NAMES = {
    "v0": "GPU kernel fusion (baseline)", "v1": "Shared-memory tiling (V1)", "v2": "V1 + MaxPool unrolling (V2)",
    "v3": "V2 + const helpers (V3)", "v4": "V3 + #pragma unroll (V4)",
    "tiled": "V5: register tiles, cp.async double buffer (convkit)",
    "unfused": "V5's convolution, then bias+ReLU+pool kernel (convkit)",
}  # fmt: skip
#: Table 2's steps as the chapter's tables and figure name them.
SHORT_NAMES = {"v0": "V0 fused baseline", "v1": "V1 shared-memory tiles", "v2": "V2 pool unrolled",
               "v3": "V3 const helpers", "v4": "V4 #pragma unroll", "tiled": "V5 register tiles",
               "unfused": "V5 unfused"}  # fmt: skip
#: ncu metric columns -> what the chapter calls them.
KERNEL_METRICS = {
    "registers": "registers",
    "sm__warps_active_avg_pct_of_peak_sustained_active": "achieved occupancy %",
    "sm__pipe_fma_cycles_active_avg_pct_of_peak_sustained_active": "FMA pipe busy %",
    "smsp__inst_executed_sum": "instructions",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld_sum": "shared-load wavefronts",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld_sum": "shared-load bank conflicts",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld_sum": "global-load sectors",
    "dram__bytes_read_sum": "DRAM read MB",
    "dram__bytes_write_sum": "DRAM write MB",
    "lts__t_bytes_sum": "L2 traffic MB",
}


#: The report's layer, by its layer label.
LAYER = launch.LAB_LAYER.name


def _ok(frame: Any, label: str | None = None) -> Any:
    ok = frame[frame["status"] == "ok"].copy()
    ok["time_ms"] = ok["time_ms_median"].astype(float)
    ok["tflops"] = ok["gflops"].astype(float) / 1e3
    if label is not None:
        ok = ok[ok["label"] == label]
    return ok


def _launch(params: str) -> str:
    knobs = json.loads(params)
    if "block" in knobs:
        return f"block {tuple(knobs['block'])}, grid {tuple(knobs['grid'])}"
    if {"bm", "ck", "tile_h", "tile_w"} <= knobs.keys():  # the tiled kernel's tile, in words
        return (f"{knobs['tile_h']} x {knobs['tile_w']} pixels, {knobs['bm']} filters a block, "
                f"{knobs['ck']} channels a stage")  # fmt: skip
    return ", ".join(f"{k} {v}" for k, v in knobs.items()) if knobs else "default"


def _fastest(rows: Any) -> Any:
    return rows.sort_values("time_ms").iloc[0] if len(rows) else None


def best_rows(frame: Any, label: str = launch.LAB_LAYER.label) -> dict[str, Any]:
    """The fastest correct row per implementation of one layer: ladder variants at the report's best
    launch, ``v4`` over every launch, ``tiled``, ``unfused``, cuDNN alone and as the layer, PyTorch."""
    ok = _ok(frame, label)
    convkit = ok[ok["impl"] == "convkit"]
    report_launch = convkit["params"].map(lambda p: json.loads(p).get("block") == list(launch.REPORT_BEST_BLOCK))
    out: dict[str, Any] = {v: _fastest(convkit[(convkit["variant"] == f"toy_{v}") & report_launch])
                           for v in launch.LADDER}  # fmt: skip
    out["v4_any_launch"] = _fastest(convkit[convkit["variant"] == "toy_v4"])
    for v in ("tiled", "unfused"):
        out[v] = _fastest(convkit[convkit["variant"] == f"toy_{v}"])
    out["cudnn_conv"] = _fastest(ok[(ok["impl"] == "cudnn") & (ok["params"] == CONV_ONLY)])
    out["cudnn_layer"] = _fastest(ok[(ok["impl"] == "cudnn") & (ok["params"] == LAYER_STEPS)])
    out["pytorch_layer"] = _fastest(ok[ok["impl"] == "pytorch"])
    return out


def ladder_table(frame: Any, fp32_peak_tflops: float, label: str = launch.LAB_LAYER.label) -> Any:
    """Table 2: each step's time (median, min, max), TFLOP/s, share of the measured FP32 peak and
    gain over the step before, beside the report's T4 time, GFLOP/s and gain."""
    import pandas as pd

    best = best_rows(frame, label)
    rows, previous, previous_report = [], None, None
    for v in (*launch.LADDER, "tiled", "unfused"):
        row = best[v]
        if row is None:
            continue
        report = launch.REPORT_TABLE2.get(v)
        gain = previous / row["time_ms"] if previous and v != "unfused" else float("nan")
        rows.append({
            "version": LADDER_NAMES[v], "launch": _launch(row["params"]),
            "time ms (median)": row["time_ms"], "min": float(row["time_ms_min"]), "max": float(row["time_ms_max"]),
            "TFLOP/s": row["tflops"], "% of FP32 peak": 100 * row["tflops"] / fp32_peak_tflops,
            "gain": gain,
            "report T4 s": report[0] if report else float("nan"),
            "report GFLOP/s": report[1] if report else float("nan"),
            "report gain": report[1] / previous_report if report and previous_report else float("nan"),
            "report % of T4 peak": 100 * report[1] / 1e3 / T4_FP32_PEAK_TFLOPS if report else float("nan"),
        })  # fmt: skip
        if v != "unfused":
            previous = row["time_ms"]
        previous_report = report[1] if report else previous_report
    return pd.DataFrame(rows).set_index("version")


def table3(frame: Any) -> Any:
    """The report's nine grid/block launches of its final kernel (our V4) on the H100, beside its T4 times."""
    import pandas as pd

    ok = _ok(frame, launch.LAB_LAYER.label)
    v4 = ok[(ok["impl"] == "convkit") & (ok["variant"] == "toy_v4")]
    rows = []
    for grid, block, seconds, gflops in launch.REPORT_TABLE3:
        params = params_text(launch.ToyLadderLaunch("v4", block, grid).to_params())
        mine = v4[v4["params"] == params]
        rows.append({"grid": str(grid), "block": str(block),
                     "H100 ms": float(mine["time_ms"].iloc[0]) if len(mine) else float("nan"),
                     "H100 TFLOP/s": float(mine["tflops"].iloc[0]) if len(mine) else float("nan"),
                     "report T4 s": seconds, "report GFLOP/s": gflops})  # fmt: skip
    return pd.DataFrame(rows)


def block_sweep(frame: Any) -> Any:
    """V4 over every block shape of the wider sweep (grid from the block, one pass over the channels):
    block x, y, z, threads, TFLOP/s, fastest first."""
    ok = _ok(frame, launch.LAB_LAYER.label)
    v4 = ok[(ok["impl"] == "convkit") & (ok["variant"] == "toy_v4")]
    one_pass = v4["params"].map(lambda p: tuple(json.loads(p)["grid"]) == launch.report_grid(
        launch.LAB_LAYER, json.loads(p)["block"]))  # fmt: skip
    v4 = v4[one_pass].copy()  # the sweep's launches: one pass over the channels
    blocks = v4["params"].map(lambda p: json.loads(p)["block"])
    v4["bx"], v4["by"], v4["bz"] = (blocks.map(lambda b, i=i: b[i]) for i in range(3))
    v4["threads"] = v4["bx"] * v4["by"] * v4["bz"]
    return v4[["bx", "by", "bz", "threads", "params", "time_ms", "tflops"]].sort_values("time_ms")


def best_configuration(frame: Any) -> Any:
    """Table 1: the report's best launch and the best V4 launch of the sweep, and the best tile."""
    import pandas as pd

    best = best_rows(frame)
    rows = [{"kernel": "report (T4), V3/V4", "configuration": "block (16, 8, 4), grid (7, 14, 96)",
             "time ms": launch.REPORT_TABLE1[0] * 1e3, "TFLOP/s": launch.REPORT_TABLE1[1] / 1e3}]  # fmt: skip
    for name, key in (("V4 at the report's best launch", "v4"), ("V4, best launch of the sweep", "v4_any_launch"),
                      ("V5 (tiled), best tile", "tiled")):  # fmt: skip
        row = best[key]
        if row is not None:
            rows.append({"kernel": name, "configuration": _launch(row["params"]), "time ms": row["time_ms"],
                         "TFLOP/s": row["tflops"]})  # fmt: skip
    return pd.DataFrame(rows).set_index("kernel")


def cudnn_table(frame: Any, label: str = launch.LAB_LAYER.label) -> Any:
    """Every cuDNN algorithm, alone and followed by bias, ReLU and pool (separate cuDNN calls):
    status, time, TFLOP/s; then PyTorch's autotuned layer and convkit's fused and unfused V5."""
    import pandas as pd

    rows = frame[frame["label"] == label]
    out = []
    for impl, params, what in (("cudnn", CONV_ONLY, "conv"), ("cudnn", LAYER_STEPS, "layer")):
        for _, r in rows[(rows["impl"] == impl) & (rows["params"] == params)].iterrows():
            ok = r["status"] == "ok"
            t, tflops = (float(r["time_ms_median"]), float(r["gflops"]) / 1e3) if ok else (float("nan"),) * 2
            out.append({"implementation": tables.library_name(r["variant"]), "steps": what, "status": r["status"],
                        "time ms": t, "TFLOP/s": tflops})  # fmt: skip
    best = best_rows(frame, label)
    for name, key in ((tables.library_name("cudnn.benchmark"), "pytorch_layer"), ("convkit V5 fused", "tiled"),
                      ("convkit V5 unfused", "unfused")):  # fmt: skip
        r = best[key]
        if r is not None:
            out.append({"implementation": name, "steps": "layer", "status": "ok", "time ms": r["time_ms"],
                        "TFLOP/s": r["tflops"]})  # fmt: skip
    return pd.DataFrame(out)


def timing_methods(frame: Any) -> Any:
    """The two ways of timing side by side: our warm CUDA-event median, the report's one host-timed run
    (NumPy in, NumPy out: allocation, copies both ways, launch, synchronize)."""
    import pandas as pd

    ok = _ok(frame, launch.LAB_LAYER.label)
    host = ok[ok["impl"] == HOST_TIMED]
    events = ok[ok["impl"] == "convkit"]
    rows = []
    for _, h in host.iterrows():
        same = events[(events["variant"] == h["variant"]) & (events["params"] == h["params"])]
        if h["params"] == "{}":  # tiled at its default tile
            default = params_text(launch.ToyTiledLaunch().to_params())
            same = events[(events["variant"] == h["variant"]) & (events["params"] == default)]
        ev = float(same["time_ms"].iloc[0]) if len(same) else float("nan")
        launch_text = (
            "default tile " + _launch(same["params"].iloc[0])
            if h["params"] == "{}" and len(same)
            else (_launch(h["params"]))
        )
        rows.append({"variant": h["variant"].removeprefix("toy_"), "launch": launch_text,
                     "CUDA events, warm median ms": ev,
                     "host clock, one run ms": h["time_ms"], "ratio": h["time_ms"] / ev,
                     "host-timed GFLOP/s": h["tflops"] * 1e3})  # fmt: skip
    return pd.DataFrame(rows).set_index("variant")


def small_layers(frame: Any) -> Any:
    """The smaller layers: V4 (report's best block), V5 fused and unfused, best cuDNN layer, PyTorch."""
    import pandas as pd

    rows = []
    for layer in launch.SMALL_LAYERS:
        best = best_rows(frame, layer.label)
        entry: dict[str, Any] = {"layer": layer.name, "GFLOP": layer.flops / 1e9}
        for name, key in (("V4 ms", "v4"), ("V5 fused ms", "tiled"), ("V5 unfused ms", "unfused"),
                          ("cuDNN layer ms", "cudnn_layer"), ("PyTorch ms", "pytorch_layer")):  # fmt: skip
            entry[name] = best[key]["time_ms"] if best[key] is not None else float("nan")
        entry["V5 tile"] = _launch(best["tiled"]["params"]) if best["tiled"] is not None else ""
        entry["speedup over best library"] = min(entry["cuDNN layer ms"], entry["PyTorch ms"]) / entry["V5 fused ms"]
        rows.append(entry)
    return pd.DataFrame(rows).set_index("layer")


def kernel_table(kernels: Any) -> Any:
    """The ncu profile of the lab layer: one row per kernel, the metrics that say where the time goes."""
    frame = kernels[kernels["kernel_index"] >= 0].copy()
    frame["implementation"] = frame["impl"] + " " + frame["variant"].str.removeprefix("toy_")
    frame["kernel"] = frame["kernel"].str.replace(r"^void ", "", regex=True).str.slice(0, 48)
    frame["time ms"] = frame["time_us"].astype(float) / 1e3
    for column in ("dram__bytes_read_sum", "dram__bytes_write_sum", "lts__t_bytes_sum"):
        frame[column] = frame[column].astype(float) / 1e6
    frame["clock MHz"] = frame["sm__cycles_elapsed_avg_per_second"].astype(float) / 1e6
    columns = ["implementation", "kernel", "blocks", "threads_per_block", "time ms", *KERNEL_METRICS, "clock MHz"]
    return frame[columns].rename(columns=KERNEL_METRICS).set_index(["implementation", "kernel"])


#: What each kernel of a profiled implementation does, in order (the cuDNN layer: its convolution, then the
#: three calls that finish the layer).
KERNEL_ROLES = {"tiled": ("the fused layer",), "unfused": ("convolution", "bias + ReLU + pool"),
                "cudnn": ("convolution", "bias", "ReLU", "max-pool")}  # fmt: skip


def _steps_and_roles(full: Any) -> tuple[list[str], list[str]]:
    """For each row of :func:`kernel_table` (index reset): the step of the ladder (or the library) and what the
    kernel does, in words."""
    steps, roles = [], []
    for implementation, group in full.groupby("implementation", sort=False):
        impl, variant = implementation.split(" ", 1)
        library = tables.library_name(variant)
        step = SHORT_NAMES.get(variant, library) if impl == "convkit" else library
        names = KERNEL_ROLES.get("cudnn" if impl == "cudnn" else variant, ("the fused layer",))
        for i in range(len(group)):
            steps.append(step)
            roles.append(names[i] if i < len(names) else f"kernel {i + 1}")
    return steps, roles


def profile_table(kernels: Any) -> Any:
    """The profile's main metrics per kernel, as a reader meets them: the step of the ladder (or the library) and
    what each kernel does in words, its time, achieved occupancy, FMA-pipe use, DRAM reads and L2 traffic."""
    import pandas as pd

    full = kernel_table(kernels).reset_index()
    steps, roles = _steps_and_roles(full)
    return pd.DataFrame({"step": steps, "kernel": roles, "time (ms)": full["time ms"].to_list(),
                     "occupancy (%)": full["achieved occupancy %"].to_list(),
                     "FMA pipe busy (%)": full["FMA pipe busy %"].to_list(),
                     "DRAM read (MB)": full["DRAM read MB"].to_list(),
                     "L2 traffic (MB)": full["L2 traffic MB"].to_list()})  # fmt: skip


#: Longest kernel name :func:`profile_detail` shows: a longer one is cut (a footnote's full name would not wrap).
KERNEL_NAME_WIDTH = 30
#: :func:`profile_detail`'s tables: (caption, columns of :func:`kernel_table` -> header), at most six columns
#: after the step and the kernel's role, so that each fits the book's column (the launch table's kernel name is
#: the widest cell: four columns beside it).
PROFILE_DETAIL = (
    ("Launch: the kernel's name, its blocks, threads and registers",
     {"kernel name": "kernel name", "blocks": "blocks", "threads_per_block": "threads per block",
      "registers": "registers"}),
    ("Issue: time, SM clock, occupancy, FMA pipe and instructions",
     {"time ms": "time (ms)", "clock MHz": "SM clock (MHz)", "achieved occupancy %": "occupancy (%)",
      "FMA pipe busy %": "FMA pipe busy (%)", "instructions": "instructions"}),
    ("Memory: shared-memory loads, global loads, DRAM and L2 traffic",
     {"shared-load wavefronts": "shared-load wavefronts", "shared-load bank conflicts": "bank conflicts",
      "global-load sectors": "global-load sectors", "DRAM read MB": "DRAM read (MB)",
      "DRAM write MB": "DRAM write (MB)", "L2 traffic MB": "L2 traffic (MB)"}),
)  # fmt: skip


def profile_detail(kernels: Any) -> list[tuple[str, Any]]:
    """Every profiled metric per kernel (:func:`kernel_table`), as three narrow tables (:data:`PROFILE_DETAIL`):
    (caption, frame indexed by step and the kernel's role in words), kernel names cut to :data:`KERNEL_NAME_WIDTH`."""
    full = kernel_table(kernels).reset_index()
    steps, roles = _steps_and_roles(full)
    names = [name if len(name) <= KERNEL_NAME_WIDTH else name[: KERNEL_NAME_WIDTH - 1] + "…" for name in full["kernel"]]
    full = full.assign(step=steps, kernel=roles, **{"kernel name": names})
    return [(caption, full.set_index(["step", "kernel"])[list(columns)].rename(columns=columns))
            for caption, columns in PROFILE_DETAIL]  # fmt: skip


def peak_shares(frame: Any, fp32_peak_tflops: float) -> Any:
    """The report's T4 numbers as a share of the T4's FP32 peak beside ours as a share of the H100's measured
    FMA peak: its best kernel (Table 1), our V4 at its launch and our V5."""
    import pandas as pd

    best = best_rows(frame)
    rows = [{"kernel": "report's best, V4 (T4)", "GPU": "T4", "TFLOP/s": launch.REPORT_TABLE1[1] / 1e3,
             "FP32 peak (TFLOP/s)": T4_FP32_PEAK_TFLOPS,
             "share of peak (%)": 100 * launch.REPORT_TABLE1[1] / 1e3 / T4_FP32_PEAK_TFLOPS}]  # fmt: skip
    for name, key in (("V4 at the report's launch (H100)", "v4"), ("V5, register tiles (H100)", "tiled")):
        row = best[key]
        rows.append({"kernel": name, "GPU": "H100", "TFLOP/s": row["tflops"], "FP32 peak (TFLOP/s)": fp32_peak_tflops,
                     "share of peak (%)": 100 * row["tflops"] / fp32_peak_tflops})  # fmt: skip
    return pd.DataFrame(rows).set_index("kernel")
