"""Kernel-level profile of named configurations (the cuConv paper's Tables 3-5) with Nsight Compute.

Each implementation (convkit's variants with their tuned knobs, and every cuDNN forward algorithm)
is checked against the float64 reference, warmed up, then launched once between two marker
kernels (``profile_begin`` with as many blocks as the case's index + 1, then ``profile_end``), so
that every kernel ``ncu`` records is attributed to its case by position alone. ``ncu`` runs with
``--clock-control none --cache-control none``: the GPU's own clocks and a warm L2, as in the timed
sweep. Rows (kernel name, blocks, threads per block, registers, duration) go to
``results/<gpu>/cuconv_kernels.csv`` with provenance, so the book shows them without a GPU.

Run on a GPU machine: ``python -m convkit.profile`` (needs ``ncu`` on the PATH).
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convkit.problem import ConvProblem

EXPERIMENT = "cuconv_kernels"
COLUMNS = ("experiment", "table", "config", "label", "impl", "variant", "params", "status", "rel_err",
           "kernel_index", "kernel", "blocks", "threads_per_block", "registers", "time_us", "note",
           "run_id")  # fmt: skip
KEY_COLUMNS = ("label", "impl", "variant", "params", "kernel_index")

#: The paper's named configurations: table -> (letter, label).
NAMED_CONFIGS: dict[str, tuple[tuple[str, str], ...]] = {
    "Table 3 (1x1)": (("A", "7-1-1-256-832"), ("B", "14-1-1-1024-256"), ("C", "27-1-1-256-64")),
    "Table 4 (3x3)": (("A", "7-1-3-384-192"), ("B", "13-1-3-384-384")),
    "Table 5 (5x5)": (("A", "7-1-5-128-48"), ("B", "7-8-5-128-48")),
}
NCU_METRICS = ("gpu__time_duration.sum", "launch__grid_size", "launch__block_size", "launch__registers_per_thread")


def named_problems() -> list[tuple[str, str, ConvProblem]]:
    """(table, letter, problem) for every named configuration, "same" padding, stride 1."""
    return [(t, letter, ConvProblem.from_label(label)) for t, rows in NAMED_CONFIGS.items() for letter, label in rows]


def attribute_kernels(kernels: Iterable[dict[str, Any]]) -> list[tuple[int, int, dict[str, Any]]]:
    """(case index, kernel index within the case, kernel) for the kernels between markers.

    ``kernels`` are ncu's rows in launch order, each with ``name`` and ``blocks``; a
    ``profile_begin`` of B blocks opens case B - 1 and ``profile_end`` closes it. Kernels outside
    markers (warm-up, checks, reference) are dropped.
    """
    out = []
    case, within = None, 0
    for k in kernels:
        if k["name"].startswith("profile_begin"):
            case, within = int(k["blocks"]) - 1, 0
        elif k["name"].startswith("profile_end"):
            case = None
        elif case is not None:
            out.append((case, within, k))
            within += 1
    return out


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def parse_ncu_raw_csv(text: str, extra: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Kernels from ``ncu --import R --csv --page raw``: name, blocks, threads, registers, time (us), in ID order.

    The raw page has a header row, a units row, then one row per kernel. The ``extra`` metrics'
    values (in the units ncu printed) come in each kernel's ``metrics``.
    """
    extra = set(extra)
    rows = list(csv.reader(io.StringIO(text)))
    start = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
    header, units = rows[start], rows[start + 1]
    col = {name: i for i, name in enumerate(header)}
    scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6, "ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
    time_unit = units[col["gpu__time_duration.sum"]]
    if time_unit not in scale:
        raise ValueError(f"unknown ncu time unit {time_unit!r}")
    kernels = []
    for r in rows[start + 2 :]:
        if len(r) < len(header):
            continue
        kernels.append({
            "id": int(r[col["ID"]]),
            "name": r[col["Kernel Name"]],
            "blocks": int(float(r[col["launch__grid_size"]].replace(",", ""))),
            "threads_per_block": int(float(r[col["launch__block_size"]].replace(",", ""))),
            "registers": int(float(r[col["launch__registers_per_thread"]].replace(",", ""))),
            "time_us": float(r[col["gpu__time_duration.sum"]].replace(",", "")) * scale[time_unit],
            "metrics": {m: _number(r[col[m]]) for m in header if m in extra},
        })  # fmt: skip
    return sorted(kernels, key=lambda k: k["id"])


def _cases(problem: ConvProblem, chapter: str = "cuconv") -> list[Any]:
    from convkit import bench

    if chapter == "lu2020":  # the ladder at its tuned launches, and the image-processing peer
        return bench.cases(problem, bench.LU_SINGLE_VARIANTS, cudnn=False, peers=("ndimage.correlate",))
    return bench.cases(problem, bench.CUCONV_VARIANTS, cudnn=True, pytorch=False)


def _runner(case: Any, problem: ConvProblem, conv: Any, x: Any, w: Any, y: Any) -> Any:
    """A callable that runs ``case`` once into ``y``."""
    from convkit import bench

    if case.impl == "convkit":
        variant, knobs = bench.VARIANTS[case.variant], json.loads(case.params)
        return lambda: variant.run(x, w, problem, y, **knobs)
    if case.impl == "cupyx":
        return lambda: bench.PEERS[case.variant].run(x, w, problem, y)
    return lambda: conv.forward(case.variant, x, w, y)


def _launch_between_markers(run: Any, begin: Any, end: Any, case_index: int) -> None:
    """Warm ``run`` up, then launch it once between ``profile_begin`` (``case_index + 1`` blocks: how
    :func:`attribute_kernels` finds the case) and ``profile_end``."""
    import cupy

    run()
    cupy.cuda.get_current_stream().synchronize()
    begin((case_index + 1,), (1,), ())
    run()
    end((1,), (1,), ())
    cupy.cuda.get_current_stream().synchronize()


def drive(manifest_path: Path, chapter: str = "cuconv") -> None:
    """The profiled process: check each case, warm it up, launch it once between markers.

    Writes the manifest (case index -> table, config, problem, case, status, error) as JSON.
    """
    import cupy

    from convkit import bench, reference
    from convkit.compile import load_kernel
    from convkit.cudnn import CudnnConvolution, CudnnError

    begin, end = load_kernel("timing", "profile_begin"), load_kernel("timing", "profile_end")
    if chapter == "toy_cnn":
        manifest_path.write_text(json.dumps(_drive_toy(begin, end), indent=1))
        return
    manifest = []
    named = lu_profile_problems() if chapter == "lu2020" else named_problems()
    for table, letter, problem in named:
        rng = cupy.random.default_rng()
        x = rng.standard_normal(problem.input_shape, dtype=cupy.float32)
        w = rng.standard_normal(problem.filter_shape, dtype=cupy.float32)
        y = cupy.empty(problem.output_shape, dtype=cupy.float32)
        ref = reference.conv2d(x.get(), w.get(), pad=problem.pad, stride=problem.stride)
        conv = CudnnConvolution(problem)
        for case in _cases(problem, chapter):
            entry = {"table": table, "config": letter, "label": problem.label, "impl": case.impl,
                     "variant": case.variant, "params": case.params, "status": "ok", "rel_err": "",
                     "note": ""}  # fmt: skip
            try:
                if case.impl == "cudnn" and (need := conv.workspace(case.variant)).status != "ok":
                    entry.update(status=need.status, note=need.note)
                    manifest.append(entry)
                    continue
                run = _runner(case, problem, conv, x, w, y)
                y.fill(cupy.nan)
                run()
                err = reference.relative_error(y.get(), ref)
                entry["rel_err"] = f"{err:.3e}"
                if not err <= bench.tolerance_for(case):
                    entry.update(status="wrong", note="failed the float64 check; not profiled")
                    manifest.append(entry)
                    continue
                _launch_between_markers(run, begin, end, len(manifest))
            except CudnnError as exc:
                entry.update(status="not_supported" if exc.not_supported else "error", note=str(exc)[:200])
            manifest.append(entry)
    manifest_path.write_text(json.dumps(manifest, indent=1))


def _drive_toy(begin: Any, end: Any) -> list[dict[str, Any]]:
    """The toy-CNN chapter's profiled cases on the lab layer (:func:`toy_profile_cases`): each one
    checked against float64, warmed up, then run once between markers."""
    import cupy

    from convkit import bench, reference, toy_cnn

    problem = toy_cnn.LAB_LAYER
    rng = cupy.random.default_rng()
    x = rng.standard_normal(problem.input_shape, dtype=cupy.float32)
    w = rng.standard_normal(problem.filter_shape, dtype=cupy.float32)
    bias = rng.standard_normal((problem.m,), dtype=cupy.float32)
    conv_out = cupy.empty(problem.output_shape, dtype=cupy.float32)
    pooled = cupy.empty(toy_cnn.layer_output_shape(problem), dtype=cupy.float32)
    ref = toy_cnn.reference_layer(x, w, bias)
    manifest = []
    for case in toy_profile_cases():
        entry = {"table": "lab layer", "config": "", "label": problem.label, "impl": case.impl,
                 "variant": case.variant, "params": case.params, "status": "ok", "rel_err": "", "note": ""}  # fmt: skip
        prepared = bench.layer_prepare(problem, case, x, w, bias, conv_out, pooled)()
        if isinstance(prepared, dict):  # cannot run here (workspace, support)
            entry.update(status=prepared["status"], note=prepared["note"])
            manifest.append(entry)
            continue
        run, check_run = prepared
        pooled.fill(cupy.nan)
        (check_run or run)()
        err = reference.relative_error(pooled, ref)
        entry["rel_err"] = f"{err:.3e}"
        if err <= bench.tolerance_for(case):
            _launch_between_markers(run, begin, end, len(manifest))
        else:
            entry.update(status="wrong", note="failed the float64 check; not profiled")
        manifest.append(entry)
    return manifest


def toy_profile_cases() -> list[Any]:
    """The lab layer's profiled cases: the ladder at the report's best launch, ``tiled`` and
    ``unfused`` at the fastest recorded tile, and cuDNN's fastest recorded algorithm with its tail."""
    from convkit import toy_cnn
    from convkit.bench import LAYER_STEPS
    from convkit.results import Case, params_text

    best = {"block": list(toy_cnn.REPORT_BEST_BLOCK), "grid": list(toy_cnn.REPORT_BEST_GRID)}
    tile, algorithm = _fastest_recorded()
    cases = [Case("convkit", f"toy_{v}", params_text(best)) for v in toy_cnn.LADDER]
    cases += [Case("convkit", f"toy_{v}", params_text(tile)) for v in ("tiled", "unfused")]
    return [*cases, Case("cudnn", algorithm, LAYER_STEPS)]


def _fastest_recorded() -> tuple[dict[str, Any], str]:
    """(tiled knobs, cuDNN algorithm) fastest on the lab layer in this GPU's recorded toy_cnn sweep,
    else the defaults (64x16x16, 4 channels a stage; IMPLICIT_PRECOMP_GEMM)."""
    from convkit import toy_cnn
    from convkit.gpu import device_name, gpu_slug
    from convkit.paths import results_dir

    tile, algorithm = toy_cnn.TiledConfig().as_params(), "IMPLICIT_PRECOMP_GEMM"
    path = results_dir() / gpu_slug(device_name()) / "toy_cnn.csv"
    if path.exists():
        import pandas as pd

        frame = pd.read_csv(path, keep_default_na=False)
        ok = frame[(frame.status == "ok") & (frame.label == toy_cnn.LAB_LAYER.label)]
        ok = ok.assign(t=ok.time_ms_median.astype(float))
        tiled = ok[(ok.impl == "convkit") & (ok.variant == "toy_tiled")]
        cudnn = ok[(ok.impl == "cudnn") & (ok.params.str.contains("pool"))]
        if len(tiled):
            tile = json.loads(tiled.sort_values("t").iloc[0].params)
        if len(cudnn):
            algorithm = cudnn.sort_values("t").iloc[0].variant
    return tile, algorithm


def rows_from(manifest: list[dict[str, Any]], kernels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Results rows: one per profiled kernel, and one per case that ran no kernel (with its status)."""
    per_case: dict[int, list[dict[str, Any]]] = {}
    for case, within, k in attribute_kernels(kernels):
        per_case.setdefault(case, []).append(
            {"kernel_index": within, "kernel": k["name"], "blocks": k["blocks"],
             "threads_per_block": k["threads_per_block"], "registers": k["registers"],
             "time_us": f"{k['time_us']:.3f}"}
            | {m.replace(".", "_"): "" if v is None else f"{v:.6g}" for m, v in k.get("metrics", {}).items()}
        )  # fmt: skip
    rows = []
    for i, entry in enumerate(manifest):
        kernels_of_case = per_case.get(i) or [{"kernel_index": -1}]
        rows += [entry | k for k in kernels_of_case]
    return rows


#: The toy-CNN chapter's profile: where the time goes (occupancy, FMA pipe, shared-memory wavefronts
#: and bank conflicts, bytes from DRAM and L2, the clock the run saw).
TOY_EXPERIMENT = "toy_cnn_kernels"
TOY_METRICS = (
    "sm__warps_active.avg.pct_of_peak_sustained_active", "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_fma.sum", "smsp__inst_executed.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum", "sm__cycles_elapsed.avg.per_second",
)  # fmt: skip


#: The Lu 2020 chapter's profile: the global load requests and sectors the paper's argument is about,
#: local-memory traffic (where a window array lands off registers), DRAM bytes.
LU_EXPERIMENT = "lu2020_kernels"
LU_METRICS = (
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum",
    "dram__bytes_read.sum", "dram__bytes_write.sum", "smsp__inst_executed.sum",
)  # fmt: skip
#: Images the ladder is profiled on: 2048 x 2048, each filter width, "same" padding.
LU_PROFILE_SIZE = 2048


def lu_profile_problems() -> list[tuple[str, str, ConvProblem]]:
    """(table, config, problem) of the Lu 2020 profile: one image per filter width."""
    from convkit.lu2020 import FILTER_SIZES

    size = LU_PROFILE_SIZE
    return [("single channel", f"{k}x{k}", ConvProblem.same(1, 1, size, size, 1, k)) for k in FILTER_SIZES]


@dataclass(frozen=True)
class ProfiledChapter:
    """A chapter's ncu profile: its results experiment and the metrics beyond the launch shape and time."""

    experiment: str
    metrics: tuple[str, ...] = ()

    @property
    def columns(self) -> tuple[str, ...]:
        """The results file's columns: the common ones, one per extra metric, the note and run id."""
        return (*COLUMNS[:-2], *(m.replace(".", "_") for m in self.metrics), "note", "run_id")


CHAPTERS: dict[str, ProfiledChapter] = {
    "cuconv": ProfiledChapter(EXPERIMENT),
    "toy_cnn": ProfiledChapter(TOY_EXPERIMENT, TOY_METRICS),
    "lu2020": ProfiledChapter(LU_EXPERIMENT, LU_METRICS),
}


def profile(directory: Path | None = None, *, ncu: str | None = None, chapter: str = "cuconv") -> Path:
    """Run the driver under ``ncu``, parse its report and record the rows; returns the CSV path.

    ``chapter``: ``"cuconv"`` (the paper's Tables 3-5, times and launch shapes), ``"toy_cnn"``
    (the lab layer, with :data:`TOY_METRICS`) or ``"lu2020"`` (the single-channel ladder, with
    :data:`LU_METRICS`).
    """
    if chapter not in CHAPTERS:
        raise ValueError(f"chapter must be one of {sorted(CHAPTERS)}, got {chapter!r}")
    extra = CHAPTERS[chapter].metrics
    from convkit import provenance
    from convkit.gpu import device_name, gpu_slug
    from convkit.paths import results_dir
    from convkit.results import ResultStore

    ncu = ncu or shutil.which("ncu")
    if ncu is None:
        raise RuntimeError("ncu (Nsight Compute) is not on the PATH")
    directory = Path(directory) if directory is not None else results_dir() / gpu_slug(device_name())
    with tempfile.TemporaryDirectory() as tmp:
        manifest, report = Path(tmp) / "manifest.json", Path(tmp) / "profile"
        env = os.environ | {"PYTHONUNBUFFERED": "1"}
        metrics = ",".join((*NCU_METRICS, *extra))
        subprocess.run([ncu, "--clock-control", "none", "--cache-control", "none", "--metrics", metrics,
                        "--export", str(report), "--force-overwrite", sys.executable, "-m", "convkit.profile",
                        "--drive", str(manifest), chapter], check=True, env=env)  # fmt: skip
        raw = subprocess.run([ncu, "--import", f"{report}.ncu-rep", "--csv", "--page", "raw", "--print-units", "base"],
                             check=True, capture_output=True, text=True).stdout  # fmt: skip
        rows = rows_from(json.loads(manifest.read_text()), parse_ncu_raw_csv(raw, extra))
    experiment = CHAPTERS[chapter].experiment
    columns = CHAPTERS[chapter].columns if CHAPTERS[chapter].metrics else COLUMNS
    store = ResultStore.open(directory, experiment, provenance.collect() | {"profiler": _ncu_version(ncu)},
                             columns=columns, key_columns=KEY_COLUMNS)  # fmt: skip
    done = store.done_keys()
    from convkit.results import row_key

    for row in rows:
        if row_key(row, KEY_COLUMNS) not in done:
            store.append(row)
    return store.csv_path


def _ncu_version(ncu: str) -> str:
    out = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    return out[-1] if out else "unknown"


if __name__ == "__main__":
    if len(sys.argv) in (3, 4) and sys.argv[1] == "--drive":
        drive(Path(sys.argv[2]), *sys.argv[3:])
    else:
        print(profile())
