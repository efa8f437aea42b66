"""What a notebook calls: measure on the GPU or read recorded results, then summarize.

Notebooks stay thin: each chapter's cells call one function here per step. ``device`` is the
notebook parameter: ``"gpu"`` measures (resuming what this GPU already recorded), ``"recorded"``
reads ``results/<recorded_gpu>/``, ``"auto"`` measures when a GPU is present.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convkit.paths import results_dir
from convkit.problem import ConvProblem

#: Launch cost added to the roofline floor (microseconds) where the ceilings record no launch floor: the
#: issue's room estimate.
LAUNCH_US = 3.0

#: The GPU whose recorded results the book shows when built without one.
DEFAULT_RECORDED_GPU = "nvidia-h100-80gb-hbm3"
#: shared/papers/README.md: the H100's ceilings as measured through PyTorch (2026-11-22).
README_COPY_GBPS = 3006.0
README_SGEMM_TFLOPS = 51.7


@dataclass
class Results:
    """One experiment's rows and provenance, and whether they were measured just now."""

    frame: Any  # pandas.DataFrame
    provenance: dict[str, Any]
    directory: Path
    measured_now: bool


def resolve_device(device: str) -> str:
    """``"gpu"`` or ``"recorded"`` for a notebook's ``device`` parameter (auto|gpu|recorded)."""
    from convkit.gpu import gpu_status

    if device not in ("auto", "gpu", "recorded"):
        raise ValueError(f"device must be 'auto', 'gpu' or 'recorded', got {device!r}")
    ok, why = gpu_status()
    if device == "gpu" and not ok:
        raise RuntimeError(f"device='gpu' but no GPU is usable: {why}")
    if device == "auto":
        return "gpu" if ok else "recorded"
    return device


def _directory(mode: str, recorded_gpu: str) -> Path:
    if mode == "gpu":
        from convkit.gpu import device_name, gpu_slug

        return results_dir() / gpu_slug(device_name())
    directory = results_dir() / recorded_gpu
    if not directory.is_dir():
        available = sorted(p.name for p in results_dir().glob("*") if p.is_dir())
        raise FileNotFoundError(f"no recorded results for {recorded_gpu!r} in {results_dir()}; have {available}")
    return directory


def ceilings(device: str = "auto", *, quick: bool = False, recorded_gpu: str = DEFAULT_RECORDED_GPU) -> Results:
    """The ceilings experiment (notebook 00): measured now on the GPU, or recorded."""
    from convkit import ceilings as exp
    from convkit.results import load_results

    mode = resolve_device(device)
    directory = _directory(mode, recorded_gpu)
    name = exp.EXPERIMENT + ("_quick" if quick and mode == "gpu" else "")
    if mode == "gpu":
        from convkit import provenance

        store = exp.open_store(directory, provenance.collect(), experiment=name)
        exp.run(store, quick=quick, progress=lambda m: print("measuring", m, flush=True))
    frame, prov = load_results(directory, name)
    return Results(frame, prov, directory, mode == "gpu")


def baseline(device: str = "auto", *, quick: bool = False, recorded_gpu: str = DEFAULT_RECORDED_GPU) -> Results:
    """The baseline experiment (notebook 01): the direct kernel and every cuDNN algorithm on the anchors."""
    from convkit.bench import run_experiment
    from convkit.results import load_results
    from convkit.suites import anchors

    mode = resolve_device(device)
    directory = _directory(mode, recorded_gpu)
    name = "baseline" + ("_quick" if quick and mode == "gpu" else "")
    if mode == "gpu":
        run_experiment(name, [a.problem for a in anchors(quick)], directory=directory, variants=["direct"])
    frame, prov = load_results(directory, name)
    return Results(frame, prov, directory, mode == "gpu")


#: The cuConv sweep's experiment, and its timing: a short budget (the sweep holds 616 problems x
#: 13 cases), at least 5 timed runs after 2 warm-ups.
CUCONV_EXPERIMENT = "cuconv"
CUCONV_TIMING: dict[str, Any] = {"warmup": 2, "min_reps": 5, "max_reps": 200, "budget_ms": 20.0}
#: Configurations of a --quick cuConv run (batch 1): every eleventh of the 88.
CUCONV_QUICK_STEP = 11


def measure_cuconv(
    directory: Path,
    *,
    batches: tuple[int, ...] | None = None,
    quick: bool = False,
    experiment: str = CUCONV_EXPERIMENT,
    progress: Any = print,
) -> None:
    """Tune every cuConv variant's knobs, then sweep variants and cuDNN, one batch size at a time.

    Batch 1 first (the paper's focus), so an interrupted session leaves whole batch sizes behind;
    both experiments resume where they stopped, and a problem whose tuned knobs changed is swept again
    whole. Writes ``cuconv_tuning.csv`` and ``<experiment>.csv`` under ``directory``.
    """
    from convkit import networks, tuner
    from convkit.bench import CUCONV_VARIANTS, run_experiment

    configs = networks.configurations()
    if quick:
        configs, batches = configs[::CUCONV_QUICK_STEP], (1,)
    for batch in batches or networks.BATCH_SIZES:
        problems = [c.problem(batch) for c in configs]
        run_experiment(tuner.EXPERIMENT, problems, directory=directory, variants=CUCONV_VARIANTS, cudnn=False,
                       tune=True, timing=tuner.TIMING, progress=progress)  # fmt: skip
        run_experiment(experiment, problems, directory=directory, variants=CUCONV_VARIANTS,
                       timing=CUCONV_TIMING, progress=progress, remeasure_changed=True)  # fmt: skip


def cuconv(device: str = "auto", *, quick: bool = False, recorded_gpu: str = DEFAULT_RECORDED_GPU) -> Results:
    """The cuConv sweep (notebook 02): tuned convkit variants and every cuDNN algorithm, 616 problems."""
    return _sweep_results(CUCONV_EXPERIMENT, measure_cuconv, device, quick, recorded_gpu)


def _sweep_results(experiment: str, measure: Any, device: str, quick: bool, recorded_gpu: str) -> Results:
    """A chapter's sweep: ``measure(directory, quick=, experiment=)`` on the GPU (``*_quick`` files for
    quick runs), then the rows, or the recorded rows without a GPU."""
    from convkit.results import load_results

    mode = resolve_device(device)
    directory = _directory(mode, recorded_gpu)
    name = experiment + ("_quick" if quick and mode == "gpu" else "")
    if mode == "gpu":
        measure(directory, quick=quick, experiment=name)
    frame, prov = load_results(directory, name)
    return Results(frame, prov, directory, mode == "gpu")


def cuconv_kernels(device: str = "auto", *, recorded_gpu: str = DEFAULT_RECORDED_GPU) -> Results:
    """The kernel-level profile of the paper's named configurations (Tables 3-5).

    Measured with ``ncu`` where a GPU and ``ncu`` are present and nothing is recorded for this GPU
    yet; otherwise read from ``results/``.
    """
    return _kernel_profile("cuconv", device, recorded_gpu)


def toy_cnn_kernels(device: str = "auto", *, recorded_gpu: str = DEFAULT_RECORDED_GPU) -> Results:
    """The ncu profile of the lab layer (occupancy, FMA pipe, shared-memory wavefronts and bank
    conflicts, bytes moved), measured or recorded as :func:`cuconv_kernels`."""
    return _kernel_profile("toy_cnn", device, recorded_gpu)


def _kernel_profile(chapter_name: str, device: str, recorded_gpu: str) -> Results:
    import shutil

    from convkit import profile
    from convkit.results import load_results

    experiment = profile.CHAPTERS[chapter_name].experiment
    mode = resolve_device(device)
    directory = _directory(mode, recorded_gpu)
    if mode == "gpu" and not (directory / f"{experiment}.csv").exists():
        if shutil.which("ncu"):
            profile.profile(directory, chapter=chapter_name)
        else:
            print("ncu is not on the PATH: showing the recorded profile of", recorded_gpu)
            directory = _directory("recorded", recorded_gpu)
    frame, prov = load_results(directory, experiment)
    return Results(frame, prov, directory, mode == "gpu")


def compiler_report(source: str, archs: tuple[str, ...] = ("sm_75", "sm_90")) -> Any:
    """``ptxas -v`` of every kernel of ``kernels/<source>.cu`` per architecture (registers, stack,
    spills, shared memory), or None where ``nvcc`` is not installed."""
    import pandas as pd

    from convkit.compile import find_nvcc, ptxas_report

    if find_nvcc() is None:
        return None
    rows = [vars(k) for arch in archs for k in ptxas_report(source, arch)]
    return pd.DataFrame(rows).set_index(["kernel", "arch"]).sort_index()


TOY_EXPERIMENT = "toy_cnn"
#: Full-layer runs take 4-40 ms: a few repeats each, after one warm-up.
TOY_TIMING: dict[str, Any] = {"warmup": 1, "min_reps": 5, "max_reps": 50, "budget_ms": 100.0}


def toy_cnn_plan(quick: bool = False) -> list[tuple[ConvProblem, list[Any]]]:
    """What the toy-CNN chapter measures: (layer, cases) in order, the lab's layer first.

    The lab layer: the ladder V0..V4 at the report's best launch (Table 1), V4 at the nine launches
    of its Table 3 and over the wider block sweep (the heatmap), every tiled candidate fused and
    unfused, the ladder and ``tiled`` timed the report's way too, then cuDNN (each algorithm alone
    and with bias, ReLU and pool) and PyTorch. Then smaller layers, at the report's best block.
    ``quick``: the lab layer's ladder, one tile and cuDNN.
    """
    from convkit import toy_cnn
    from convkit.bench import layer_cases

    lab = toy_cnn.LAB_LAYER
    best = {"block": list(toy_cnn.REPORT_BEST_BLOCK), "grid": list(toy_cnn.REPORT_BEST_GRID)}
    ladder = [(v, best) for v in toy_cnn.LADDER]
    tiles = [("tiled", t.as_params()) for t in toy_cnn.TILED_CANDIDATES]
    if quick:
        return [(lab, layer_cases(lab, [*ladder, tiles[0]]))]
    table3 = [("v4", {"block": list(b), "grid": list(g)}) for g, b, _, _ in toy_cnn.REPORT_TABLE3]
    heatmap = [("v4", {"block": list(b), "grid": list(toy_cnn.report_grid(lab, b))}) for b in toy_cnn.block_shapes(lab)]
    unfused = [("unfused", k) for _, k in tiles]
    launches = list(dict.fromkeys((v, json.dumps(k)) for v, k in [*ladder, *table3, *heatmap, *tiles, *unfused]))
    plan = [(lab, layer_cases(lab, [(v, json.loads(k)) for v, k in launches], host_timed=[*ladder, ("tiled", {})]))]
    for layer in toy_cnn.SMALL_LAYERS:
        block = toy_cnn.REPORT_BEST_BLOCK
        small = [(v, {"block": list(block), "grid": list(toy_cnn.report_grid(layer, block))}) for v in toy_cnn.LADDER]
        plan.append((layer, layer_cases(layer, [*small, *tiles, ("unfused", tiles[0][1])])))
    return plan


def measure_toy_cnn(directory: Path, *, quick: bool = False, experiment: str = TOY_EXPERIMENT,
                    progress: Any = print) -> None:  # fmt: skip
    """Run :func:`toy_cnn_plan` into ``<directory>/<experiment>.csv`` (resumable)."""
    from convkit.bench import run_layer_experiment

    run_layer_experiment(experiment, toy_cnn_plan(quick), directory=directory, timing=TOY_TIMING, progress=progress)


def toy_cnn(device: str = "auto", *, quick: bool = False, recorded_gpu: str = DEFAULT_RECORDED_GPU) -> Results:
    """The fused-layer sweep (notebook 03): the report's ladder and launches, tiles, cuDNN, PyTorch."""
    return _sweep_results(TOY_EXPERIMENT, measure_toy_cnn, device, quick, recorded_gpu)


#: The Chang 2022 sweep's experiment and timing (117 problems x 2 variants + every cuDNN algorithm).
CHANG_EXPERIMENT = "chang2022"
CHANG_TIMING: dict[str, Any] = {"warmup": 3, "min_reps": 10, "max_reps": 300, "budget_ms": 40.0}
#: Configurations of a --quick run: every seventh of each grid.
CHANG_QUICK_STEP = 7


def measure_chang2022(directory: Path, *, quick: bool = False, experiment: str = CHANG_EXPERIMENT,
                      progress: Any = print) -> None:  # fmt: skip
    """Tune the H100 plan and launch of both kernels (``chang2022_tuning.csv``), then sweep the
    single-channel grid (both plans) and the multi-channel grid (both launches) against every cuDNN
    algorithm and PyTorch into ``<experiment>.csv``; both resume where they stopped, and a configuration
    whose tuned launch changed is swept again whole."""
    from convkit import chang2022 as chang
    from convkit import tuner
    from convkit.bench import CHANG_MULTI_VARIANTS, CHANG_SINGLE_VARIANTS, CHANG_TUNING, run_experiment

    step = CHANG_QUICK_STEP if quick else 1
    # The H100 plan and launch: every candidate plan and every ranked tile, measured once
    for problems, variant in ((chang.single_problems(), "chang_single_fill"),
                              (chang.multi_problems(), "chang_multi_async")):  # fmt: skip
        run_experiment(CHANG_TUNING, problems[::step], directory=directory, variants=[variant], cudnn=False,
                       tune=True, timing=tuner.TIMING, progress=progress)  # fmt: skip
    for problems, variants in ((chang.single_problems(), CHANG_SINGLE_VARIANTS),
                               (chang.multi_problems(), CHANG_MULTI_VARIANTS)):  # fmt: skip
        run_experiment(experiment, problems[::step], directory=directory, variants=variants, timing=CHANG_TIMING,
                       progress=progress, remeasure_changed=True)  # fmt: skip


def chang2022(device: str = "auto", *, quick: bool = False, recorded_gpu: str = DEFAULT_RECORDED_GPU) -> Results:
    """The Chang 2022 sweep (notebook 04): both kernels, both plans, every cuDNN algorithm, 117 problems."""
    return _sweep_results(CHANG_EXPERIMENT, measure_chang2022, device, quick, recorded_gpu)


#: The Lu 2020 sweep's experiment and timing (18 images and 26 layers; every cuDNN algorithm, PyTorch
#: and, on single images, cupyx.scipy.ndimage).
LU_EXPERIMENT = "lu2020"
LU_TIMING: dict[str, Any] = {"warmup": 3, "min_reps": 10, "max_reps": 300, "budget_ms": 40.0}
#: Problems of a --quick run: every fifth of each grid.
LU_QUICK_STEP = 5


def measure_lu2020(directory: Path, *, quick: bool = False, experiment: str = LU_EXPERIMENT,
                   progress: Any = print) -> None:  # fmt: skip
    """Tune the launches of every Lu 2020 kernel (``lu2020_tuning.csv``), then sweep the single-channel
    images (the paper's ladder, cuDNN, PyTorch, ``cupyx.scipy.ndimage.correlate``) and the multi-channel
    layers (``lu_multi``, cuDNN, PyTorch) into ``<experiment>.csv``; both resume where they stopped, and a
    problem whose tuned launch changed is swept again whole."""
    from convkit import lu2020, tuner
    from convkit.bench import LU_MULTI_VARIANTS, LU_SINGLE_VARIANTS, LU_TUNING, run_experiment

    step = LU_QUICK_STEP if quick else 1
    grids = ((lu2020.single_problems()[::step], LU_SINGLE_VARIANTS, ("ndimage.correlate",)),
             (lu2020.multi_problems()[::step], LU_MULTI_VARIANTS, ()))  # fmt: skip
    for problems, variants, peers in grids:
        run_experiment(LU_TUNING, problems, directory=directory, variants=variants, cudnn=False, tune=True,
                       timing=tuner.TIMING, progress=progress)  # fmt: skip
        run_experiment(experiment, problems, directory=directory, variants=variants, peers=peers, timing=LU_TIMING,
                       progress=progress, remeasure_changed=True)  # fmt: skip


def lu2020(device: str = "auto", *, quick: bool = False, recorded_gpu: str = DEFAULT_RECORDED_GPU) -> Results:
    """The Lu 2020 sweep (notebook 05): the single-channel ladder and the multi-channel kernel against
    every cuDNN algorithm, PyTorch and cupyx.scipy.ndimage."""
    return _sweep_results(LU_EXPERIMENT, measure_lu2020, device, quick, recorded_gpu)


def lu2020_kernels(device: str = "auto", *, recorded_gpu: str = DEFAULT_RECORDED_GPU) -> Results:
    """The ncu load counters of the single-channel ladder (requests, sectors, local memory), measured or
    recorded as :func:`cuconv_kernels`."""
    return _kernel_profile("lu2020", device, recorded_gpu)


def provenance_table(results: Results) -> Any:
    """One row per run that wrote the results: GPU, driver, CUDA, NVRTC, CuPy, cuDNN, commit, date."""
    import pandas as pd

    keys = ["gpu", "compute_capability", "driver", "cuda_runtime", "nvrtc", "cupy", "cudnn",
            "convkit_commit", "date"]  # fmt: skip
    runs = results.provenance.get("runs", {})
    used = set(results.frame["run_id"].astype(str)) if "run_id" in results.frame else set(runs)
    table = pd.DataFrame([{"run_id": rid, **{k: info.get(k, "") for k in keys}}
                          for rid, info in runs.items() if rid in used])  # fmt: skip
    return table.set_index("run_id") if not table.empty else table


def ceilings_summary(frame: Any) -> dict[str, float]:
    """The headline ceilings as numbers: copy GB/s, FMA and SGEMM TFLOP/s, SMs, clocks, latencies, and
    ``launch_us`` (an empty kernel's time) where the results record it."""
    ok = frame[frame["status"] == "ok"]

    def value(metric: str) -> float:
        rows = ok[ok["metric"] == metric]
        return float(rows["value"].iloc[0]) if len(rows) else float("nan")

    latency = latency_curve(frame)
    l2 = value("l2_cache")
    dram = latency[latency["footprint_bytes"] >= 4 * l2]
    in_l2 = latency[(latency["footprint_bytes"] <= l2 / 4) & (latency["footprint_bytes"] > 2**20)]
    out = {
        "sm_count": value("sm_count"),
        "sm_clock_mhz": value("sm_clock_measured"),
        "l2_bytes": l2,
        "shared_memory_per_sm": value("shared_memory_per_sm"),
        "copy_gbps": value("copy_bandwidth"),
        "fma_tflops": value("fp32_fma_peak"),
        "sgemm_tflops": value("sgemm"),
        "fp32_lanes_per_sm": value("fp32_lanes_per_sm"),
        "dram_latency_cycles": float(dram["cycles"].iloc[0]) if len(dram) else float("nan"),
        "l2_latency_cycles": float(in_l2["cycles"].iloc[-1]) if len(in_l2) else float("nan"),
    }
    if not math.isnan(launch := value("launch_floor")):  # recorded from 2026-11-23 on
        out["launch_us"] = launch
    out["fp32_theoretical_tflops"] = out["sm_count"] * out["fp32_lanes_per_sm"] * 2 * out["sm_clock_mhz"] / 1e6
    out["ridge_flops_per_byte"] = out["sgemm_tflops"] * 1e3 / out["copy_gbps"]
    return out


def launch_us(ceilings: dict[str, float]) -> float:
    """The floors' launch term: the measured launch floor (``ceilings["launch_us"]``) where recorded, else
    :data:`LAUNCH_US`."""
    return ceilings.get("launch_us", LAUNCH_US)


def launch_text(ceilings: dict[str, float]) -> str:
    """The floors' launch term in words, for the chapters: measured, or the assumed :data:`LAUNCH_US`."""
    if "launch_us" in ceilings:
        return f"The floors' launch: {ceilings['launch_us']:.1f} us, an empty kernel measured in notebook 00."
    return (f"The floors' launch: {LAUNCH_US:.0f} us, assumed: these ceilings record no launch floor "
            "(notebook 00 measures one where it runs on a GPU).")  # fmt: skip


def floor_us(problem: ConvProblem, ceilings: dict[str, float]) -> float:
    """Roofline floor: the minimal traffic at the copy bandwidth or the FLOPs at the FMA peak, whichever
    is longer, plus the launch (:func:`launch_us`)."""
    memory = problem.min_bytes / (ceilings["copy_gbps"] * 1e3)
    compute = problem.flops / (ceilings["fma_tflops"] * 1e6)
    return max(memory, compute) + launch_us(ceilings)


def latency_curve(frame: Any) -> Any:
    """The pointer-chase rows as (footprint_bytes, cycles), sorted by footprint."""
    import json

    import pandas as pd

    rows = frame[(frame["metric"] == "load_latency") & (frame["status"] == "ok")]
    curve = pd.DataFrame({"footprint_bytes": [json.loads(p)["footprint_bytes"] for p in rows["params"]],
                          "cycles": rows["value"].astype(float).to_numpy()})  # fmt: skip
    return curve.sort_values("footprint_bytes").reset_index(drop=True)


def baseline_summary(frame: Any) -> Any:
    """Per anchor configuration, times in microseconds: the direct kernel, the best single cuDNN
    algorithm, PyTorch's autotuned cuDNN measured in the same run (where PyTorch was present), and
    PyTorch's time quoted from the specification."""
    import pandas as pd

    from convkit.suites import ANCHORS

    quoted = {(a.problem.label, a.problem.pad): a for a in ANCHORS}

    def median_us(rows: Any) -> float:
        return float(rows["time_ms_median"].iloc[0]) * 1e3 if len(rows) else float("nan")

    records = []
    for (label, pad), group in frame.groupby(["label", "pad"], sort=False):
        ok = group[group["status"] == "ok"]
        cudnn = ok[ok["impl"] == "cudnn"]
        best = cudnn.loc[cudnn["time_ms_median"].idxmin()] if len(cudnn) else None
        anchor = quoted.get((label, int(pad)))
        records.append(
            {
                "configuration": anchor.name if anchor else label,
                "label": label,
                "GFLOP": ConvProblem.from_row(group.iloc[0]).flops / 1e9,
                "direct_us": median_us(ok[(ok["impl"] == "convkit") & (ok["variant"] == "direct")]),
                "best_cudnn": best["variant"] if best is not None else "none",
                "best_cudnn_us": float(best["time_ms_median"]) * 1e3 if best is not None else float("nan"),
                "pytorch_us": median_us(ok[ok["impl"] == "pytorch"]),
                "pytorch_rel_err": float(ok[ok["impl"] == "pytorch"]["rel_err"].max()),
                "pytorch_quoted_us": anchor.cudnn_fp32_us if anchor else float("nan"),
            }
        )
    table = pd.DataFrame(records).set_index("configuration")
    table["best_vs_pytorch"] = table["best_cudnn_us"] / table["pytorch_us"]
    table["best_vs_quoted"] = table["best_cudnn_us"] / table["pytorch_quoted_us"]
    table["direct_vs_best"] = table["direct_us"] / table["best_cudnn_us"]
    return table


def baseline_table(summary: Any) -> Any:
    """The columns of :func:`baseline_summary` a reader compares, rounded for display."""
    columns = ["best_cudnn", "best_cudnn_us", "pytorch_us", "pytorch_quoted_us", "direct_us",
               "best_vs_pytorch", "direct_vs_best"]  # fmt: skip
    return summary[columns].round({c: 1 for c in columns[1:5]} | {"best_vs_pytorch": 2, "direct_vs_best": 1})


def ceilings_table(frame: Any) -> Any:
    """The ceilings rows a reader needs: metric, value, unit, timing and check (pointer chase apart)."""
    rows = frame[frame["metric"] != "load_latency"].copy()
    cols = ["metric", "value", "unit", "status", "time_ms_median", "time_ms_min", "time_ms_max", "reps", "rel_err",
            "params", "note"]  # fmt: skip
    table = rows[[c for c in cols if c in rows]].set_index("metric").fillna("")
    table["value"] = [f"{v:,.6g}" if isinstance(v, float) else v for v in table["value"]]
    return table


def ceilings_verdict(summary: dict[str, float], gpu: str) -> str:
    """Markdown: the measured ceilings against the README's H100 anchors and the datasheet arithmetic."""
    lines = [
        f"- **Copy bandwidth** {summary['copy_gbps']:.0f} GB/s (bytes read + written); "
        f"the specification's H100 measurement: {README_COPY_GBPS:.0f} GB/s "
        f"({summary['copy_gbps'] / README_COPY_GBPS:.0%}).",
        f"- **SGEMM, TF32 off** {summary['sgemm_tflops']:.1f} TFLOP/s; the specification's H100: "
        f"{README_SGEMM_TFLOPS} TFLOP/s ({summary['sgemm_tflops'] / README_SGEMM_TFLOPS:.0%}).",
        f"- **Own FMA kernel** {summary['fma_tflops']:.1f} TFLOP/s = "
        f"{summary['fma_tflops'] / summary['fp32_theoretical_tflops']:.0%} of "
        f"{summary['sm_count']:.0f} SMs x {summary['fp32_lanes_per_sm']:.0f} lanes x 2 x "
        f"{summary['sm_clock_mhz']:.0f} MHz = {summary['fp32_theoretical_tflops']:.1f} TFLOP/s.",
        f"- **Ridge point** {summary['ridge_flops_per_byte']:.1f} FLOP/byte: a layer below it is bound "
        "by memory on this GPU, above it by FP32 arithmetic.",
        f"- **Load latency** {summary['dram_latency_cycles']:.0f} cycles from DRAM "
        f"({summary['dram_latency_cycles'] / summary['sm_clock_mhz'] * 1e3:.0f} ns at the measured clock), "
        f"{summary['l2_latency_cycles']:.0f} cycles from L2.",
    ]
    if "launch_us" in summary:
        lines.append(f"- **Launch floor** {summary['launch_us']:.1f} us: an empty kernel timed as every kernel "
                     "here is timed, the least any of them can take.")  # fmt: skip
    if "H100" not in gpu:
        lines.append(f"- These results come from {gpu}; the specification's anchors are for the H100.")
    return "\n".join(lines)


def baseline_status(frame: Any) -> Any:
    """Per implementation, how many configurations ended in each status (``ok`` or why not)."""
    table = frame.assign(implementation=frame["impl"] + " " + frame["variant"])
    counts = table.pivot_table(index="implementation", columns="status", values="label", aggfunc="count", sort=False)
    return counts.fillna(0).astype(int)


def baseline_verdict(summary: Any) -> str:
    """Markdown: the legacy algorithms' best against PyTorch's autotuned cuDNN, and the direct kernel."""
    lines = []
    for column, whose in (
        ("best_vs_pytorch", "measured in the same run"),
        ("best_vs_quoted", "quoted from the specification"),
    ):
        ratio = summary[column].dropna()
        if not len(ratio):
            continue
        lines.append(
            f"- Best single legacy cuDNN algorithm (FMA math) over PyTorch's autotuned FP32 time {whose}: "
            f"median {ratio.median():.2f}x, range {ratio.min():.2f}x..{ratio.max():.2f}x, within 1.25x in "
            f"{int((ratio <= 1.25).sum())} of {len(ratio)} configurations (below 1: the legacy call is faster)."
        )
    measured = summary["best_vs_pytorch"].dropna()
    for name in measured[measured > 1.25].index:
        row = summary.loc[name]
        lines.append(
            f"- {name}: PyTorch {row['pytorch_us']:.1f} us against {row['best_cudnn']} {row['best_cudnn_us']:.1f} us, "
            f"in true FP32 (relative error {row['pytorch_rel_err']:.1e}; TF32 lands near 1e-4). The same cuDNN is "
            "faster through PyTorch, which uses the graph API: its engines include kernels that none of the "
            "eight legacy forward algorithms selects. The paper chapters compare with both."
        )
    slowest, fastest = summary["direct_vs_best"].idxmax(), summary["direct_vs_best"].idxmin()
    lines.append(
        f"- The plain direct kernel takes {summary['direct_vs_best'].median():.1f}x the best cuDNN time "
        f"(median), from {summary.loc[fastest, 'direct_vs_best']:.2f}x on {fastest} to "
        f"{summary.loc[slowest, 'direct_vs_best']:.1f}x on {slowest}: the gap a naive kernel leaves, "
        "which the papers' kernels set out to close."
    )
    return "\n".join(lines)


def roofline_points(frame: Any) -> list[tuple[str, float, float, str]]:
    """(label, FLOP/byte, GFLOP/s, kind) per configuration: the best cuDNN algorithm and the direct kernel."""
    ok = frame[frame["status"] == "ok"]
    points = []
    for label, group in ok.groupby("label", sort=False):
        intensity = ConvProblem.from_row(group.iloc[0]).arithmetic_intensity
        cudnn = group[group["impl"] == "cudnn"]
        if len(cudnn):
            points.append((label, intensity, float(cudnn["gflops"].astype(float).max()), "best cuDNN algorithm"))
        direct = group[(group["impl"] == "convkit") & (group["variant"] == "direct")]
        if len(direct):
            points.append(("", intensity, float(direct["gflops"].astype(float).iloc[0]), "convkit direct"))
    return points
