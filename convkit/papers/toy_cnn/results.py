"""The toy-CNN chapter's numbers, computed from the recorded sweep (``toy_cnn.csv``) and profile.

Every table the notebook shows comes from one function here, so the prose never holds a number
typed by hand: the report's T4 figures are quoted data (:mod:`.launch`), ours are read from
the results files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from convkit.bench.rows import params_text
from convkit.core.problem import ConvProblem
from convkit.families.toy_cnn import launch
from convkit.papers.toy_cnn.measure import CONV_ONLY, HOST_TIMED, LAYER_STEPS

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


def layer_label(problem: Any) -> str:
    """The book's layer label: ``H-N-R-M-C``, with the padding written where it is not "same" padding."""
    same = problem.pad == (problem.r - 1) // 2 and problem.r == problem.s
    stride = "" if problem.stride == 1 else f" s{problem.stride}"
    return problem.label + ("" if same else f" p{problem.pad}") + stride


#: The report's layer, by its layer label.
LAYER = layer_label(launch.LAB_LAYER)


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
        params = params_text(launch.ToyLadderLaunch("v4", block, grid).as_params())
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
            out.append({"implementation": f"cuDNN {r['variant']}", "steps": what, "status": r["status"],
                        "time ms": t, "TFLOP/s": tflops})  # fmt: skip
    best = best_rows(frame, label)
    for name, key in (("PyTorch (cuDNN autotuned)", "pytorch_layer"), ("convkit V5 fused", "tiled"),
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
            default = params_text(launch.ToyTiledLaunch().as_params())
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
        entry: dict[str, Any] = {"layer": layer_label(layer), "GFLOP": layer.flops / 1e9}
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
                "cudnn": ("convolution", "bias (cudnnAddTensor)", "ReLU (cudnnActivationForward)",
                          "max-pool (cudnnPoolingForward)")}  # fmt: skip


def profile_table(kernels: Any) -> Any:
    """The profile's main metrics per kernel, as a reader meets them: the step of the ladder (or the library) and
    what each kernel does in words, its time, achieved occupancy, FMA-pipe use, DRAM reads and L2 traffic."""
    import pandas as pd

    full = kernel_table(kernels).reset_index()
    steps, roles = [], []
    for implementation, group in full.groupby("implementation", sort=False):
        impl, variant = implementation.split(" ", 1)
        step = SHORT_NAMES.get(variant, f"cuDNN {variant}") if impl == "convkit" else f"cuDNN {variant}"
        names = KERNEL_ROLES.get("cudnn" if impl == "cudnn" else variant, ("the fused layer",))
        for i in range(len(group)):
            steps.append(step)
            roles.append(names[i] if i < len(names) else f"kernel {i + 1}")
    return pd.DataFrame({"step": steps, "kernel": roles, "time (ms)": full["time ms"].to_list(),
                     "occupancy (%)": full["achieved occupancy %"].to_list(),
                     "FMA pipe busy (%)": full["FMA pipe busy %"].to_list(),
                     "DRAM read (MB)": full["DRAM read MB"].to_list(),
                     "L2 traffic (MB)": full["L2 traffic MB"].to_list()})  # fmt: skip


def library_name(row: Any) -> str:
    """A library row's name for a reader: PyTorch's autotuned cuDNN, or the cuDNN algorithm with its tail."""
    return "PyTorch (cuDNN autotuned)" if row["impl"] == "pytorch" else f"cuDNN {row['variant']} + bias, ReLU, pool"


def limits_text(frame: Any, ceilings: dict[str, float]) -> str:
    """What limits V5 on the report's layer: its share of the roofline floor (:func:`convkit.study.roofline.floor_us`)
    and which roof sets that floor."""
    from convkit.study.roofline import roof

    n = numbers_from(frame, ceilings)
    gbps, tflops = roof(ceilings)
    p = launch.LAB_LAYER
    memory_us, compute_us = p.min_bytes / (gbps * 1e3), p.flops / (tflops * 1e6)
    return (f"**What limits it.** The layer's floor is {n['floor_ms']}: its FLOPs at the SGEMM rate "
            f"({tflops:.1f} TFLOP/s) take {compute_us / memory_us:.0f}x as long as its minimal bytes at the copy "
            f"bandwidth, so it is compute-bound. V5 runs at {n['v5_floor']} of that floor and the best library "
            f"layer at {n['lib_floor']}; what is left is the FMA pipe's idle time between a tile's shared-memory "
            "loads, which the profile below shows.")  # fmt: skip


def verdict(frame: Any, ceilings: dict[str, float]) -> str:
    """The chapter's conclusion, computed from the results and the ceilings (the floor: :func:`numbers_from`)."""
    n = numbers_from(frame, ceilings)
    best = best_rows(frame)
    v0, v1, v4, tiled = best["v0"], best["v1"], best["v4"], best["tiled"]
    cudnn, torch, unfused = best["cudnn_layer"], best["pytorch_layer"], best["unfused"]
    report_gain = launch.REPORT_TABLE2["v1"][1] / launch.REPORT_TABLE2["v0"][1]
    parts = [
        f"**Ladder.** Shared-memory tiling is the one step that matters on the H100 as on the T4: "
        f"{v0['time_ms'] / v1['time_ms']:.2f}x here (report: {report_gain:.2f}x). Unrolling the pool, `const` "
        f"helpers and `#pragma unroll` take {100 * (1 - v4['time_ms'] / v1['time_ms']):.1f}% off V1's time "
        "together: nvcc 13 already unrolls the fixed-trip pool and 5x5 loops of V1 (ptxas shows no local memory).",
        f"**Past the report.** Register tiling with a cp.async double buffer (V5) runs the layer in "
        f"{n['v5_ms']}, {n['v5_tflops']}, {n['v5_floor']} of its roofline floor and "
        f"{v4['time_ms'] / tiled['time_ms']:.1f}x the report's best kernel on the "
        "same GPU.",
    ]  # fmt: skip
    if cudnn is not None:
        parts.append(f"**Against the libraries.** cuDNN's fastest legacy algorithm with its bias, ReLU and pool "
                     f"calls takes {cudnn['time_ms']:.3f} ms ({cudnn['variant']})"
                     + (f", PyTorch's autotuned layer {torch['time_ms']:.3f} ms" if torch is not None else "")
                     + f": V5 is {cudnn['time_ms'] / tiled['time_ms']:.2f}x the first"
                     + (f" and {torch['time_ms'] / tiled['time_ms']:.2f}x the second." if torch is not None else ".")
                     )  # fmt: skip
    if unfused is not None:
        parts.append(f"**Fusion.** The same convolution unfused (full 224x224 output written, then a bias+ReLU+pool "
                     f"kernel) takes {unfused['time_ms']:.3f} ms: fusion saves "
                     f"{100 * (unfused['time_ms'] / tiled['time_ms'] - 1):.1f}%. The layer is compute-bound, and "
                     "the 51 MB intermediate costs tens of microseconds at 3 TB/s against milliseconds of FMAs."
                     )  # fmt: skip
    return "\n\n".join(parts)


def _ceilings(directory: Path) -> dict[str, float]:
    from convkit.study.roofline import recorded_ceilings

    ceilings = recorded_ceilings(Path(directory))
    if ceilings is None:
        raise FileNotFoundError(f"no ceilings recorded in {Path(directory).name}")
    return ceilings


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


def numbers_from(frame: Any, ceilings: dict[str, float]) -> dict[str, str]:
    """The chapter's headline numbers as the book prints them (from a sweep's rows and the ceilings)."""
    from convkit.study.roofline import floor_us

    best = best_rows(frame)
    v0, v1, v4, tiled = best["v0"], best["v1"], best["v4"], best["tiled"]
    library = min(
        (r for r in (best["cudnn_layer"], best["pytorch_layer"]) if r is not None), key=lambda r: r["time_ms"]
    )
    floor_ms = floor_us(launch.LAB_LAYER, ceilings) / 1e3
    return {
        "report_gflops": f"{launch.REPORT_TABLE1[1]:,.0f} GFLOP/s",
        "report_share": f"{100 * launch.REPORT_TABLE1[1] / 1e3 / T4_FP32_PEAK_TFLOPS:.0f}%",
        "report_gain": f"{launch.REPORT_TABLE2['v1'][1] / launch.REPORT_TABLE2['v0'][1]:.2f}x",
        "tiling_gain": f"{v0['time_ms'] / v1['time_ms']:.2f}x",
        "v4_ms": f"{v4['time_ms']:.2f} ms",
        "v4_tflops": f"{v4['tflops']:.1f} TFLOP/s",
        "v4_floor": f"{100 * floor_ms / v4['time_ms']:.0f}%",
        "v5_ms": f"{tiled['time_ms']:.2f} ms",
        "v5_tflops": f"{tiled['tflops']:.1f} TFLOP/s",
        "v5_floor": f"{100 * floor_ms / tiled['time_ms']:.0f}%",
        "v5_over_v4": f"{v4['time_ms'] / tiled['time_ms']:.2f}x",
        "v5_over_v0": f"{v0['time_ms'] / tiled['time_ms']:.2f}x",
        "v4_vs_lib": f"{v4['time_ms'] / library['time_ms']:.2f}x",
        "lib": f"{library_name(library)}, {library['time_ms']:.2f} ms",
        "lib_floor": f"{100 * floor_ms / library['time_ms']:.0f}%",
        "v5_over_lib": f"{library['time_ms'] / tiled['time_ms']:.2f}x",
        "floor_ms": f"{floor_ms:.2f} ms",
    }


def numbers(directory: Path, experiment: str = TOY_EXPERIMENT) -> dict[str, str]:
    """:func:`numbers_from` of a results folder: the result box and the findings rows both read these."""
    from convkit.study.results import load_results

    frame, _ = load_results(Path(directory), experiment)
    return numbers_from(frame, _ceilings(directory))


def result_lines(directory: Path, experiment: str = TOY_EXPERIMENT) -> list[str]:
    """The result box: the report's claim, what we measured, the bound, the verdict (from ``experiment``)."""
    n = numbers(directory, experiment)
    return [
        f"**Report (T4):** fusing conv 5x5 + bias + ReLU + 2x2 pool and tiling in shared memory reaches "
        f"{n['report_gflops']}, {n['report_share']} of the T4's FP32 peak; tiling is the big step "
        f"({n['report_gain']}).",
        f"**The report's kernel on the H100:** tiling gives {n['tiling_gain']} as on the T4; V4 runs the layer "
        f"({LAYER}) in {n['v4_ms']}, {n['v4_tflops']}, {n['v4_floor']} of its roofline floor ({n['floor_ms']}).",
        f"**Our V5 (register tiles, cp.async):** {n['v5_ms']}, {n['v5_tflops']}, {n['v5_floor']} of the floor, "
        f"{n['v5_over_v4']} faster than V4 ({n['v5_over_v0']} faster than V0).",
        f"**Verdict:** the report's ladder reproduces, but its final kernel takes {n['v4_vs_lib']} the time of the "
        f"best library layer ({n['lib']}, {n['lib_floor']} of the floor); V5 is {n['v5_over_lib']} faster than "
        "that layer. The layer is compute-bound: the floor is its FLOPs at the SGEMM rate.",
    ]  # fmt: skip


def findings(directory: Path) -> list[dict[str, str]]:
    """The book's findings rows for the fused layer (:data:`convkit.papers.paper.FINDING_COLUMNS`, and ``section``:
    the chapter's MyST target that shows the row), every number from :func:`numbers`, as the result box."""
    n = numbers(directory)
    base = {"paper": "Fused CNN layer (Grisett)"}
    return [
        base | {"claim": "fused conv+bias+ReLU+pool layer throughput", "paper's number": f"{n['report_gflops']} (T4)",
                "paper's design on the H100": n["v4_tflops"], "our best on the H100": n["v5_tflops"],
                "best library on the H100": n["lib"], "efficiency": n["v5_floor"],
                "what changed": "register tiles and a cp.async double buffer (V5)", "section": SECTIONS["libraries"]},
        base | {"claim": "shared-memory tiling over the fused baseline", "paper's number": f"{n['report_gain']} (T4)",
                "paper's design on the H100": n["tiling_gain"], "our best on the H100": f"{n['v5_over_v0']} (V5)",
                "best library on the H100": n["lib"], "efficiency": "",
                "what changed": "the later steps gain under 1%: nvcc already unrolls them",
                "section": SECTIONS["ladder"]},
    ]  # fmt: skip


def across_gpus_text(first_gpu: str, first: Any, others: list[tuple[str, Any]]) -> str:
    """Why our kernel's time differs between GPUs: for each other GPU's recording (name, sweep rows) and each
    layer, the tile its V5 ran at, its time there against the first GPU's time at the same tile, and the first
    GPU's fastest tile. A quick run times V5 at its default tile only."""
    parts = []
    for gpu, frame in others:
        ok, mine = _ok(frame), _ok(first)
        for label in sorted(set(ok["label"]) & set(mine["label"])):
            theirs = ok[(ok["label"] == label) & (ok["variant"] == "toy_tiled") & (ok["params"] != "{}")]
            ours = mine[(mine["label"] == label) & (mine["variant"] == "toy_tiled") & (mine["params"] != "{}")]
            if not len(theirs) or not len(ours):
                continue
            t = _fastest(theirs)
            same = ours[ours["params"] == t["params"]]
            if not len(same):
                continue
            b, best = float(same["time_ms"].iloc[0]), _fastest(ours)
            name = layer_label(ConvProblem.from_row(t))
            parts.append(f"On {name} the {gpu} timed V5 at {_launch(t['params'])} only: {t['time_ms']:.3f} ms, "
                         f"against {b:.3f} ms for the same tile on the {first_gpu} ({t['time_ms'] / b:.2f}x), "
                         f"whose run found {best['time_ms']:.3f} ms at {_launch(best['params'])}.")  # fmt: skip
    if not parts:
        return ""
    return (
        " ".join(parts) + " The gap between the GPUs in the table is the tile the quick run tried, not the "
        "GPU: at the same tile the times agree, as a compute-bound layer on the same 132 SMs and clock should."
    )
