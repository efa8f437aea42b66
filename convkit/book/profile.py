"""Kernel-level profiles with Nsight Compute, for any paper that declares one (:class:`convkit.papers.paper.Profile`).

Each of the paper's profiled cases is checked against its float64 reference (output poisoned with
NaN), warmed up, then launched once between two marker kernels (``profile_begin`` with as many
blocks as the case's index + 1, then ``profile_end``), so that every kernel ``ncu`` records is
attributed to its case by position alone. ``ncu`` runs with ``--clock-control none
--cache-control none``: the GPU's own clocks and a warm L2, as in the timed sweep. Rows (kernel
name, blocks, threads per block, registers, duration, the paper's extra metrics) go to
``results/<gpu>/<experiment>.csv`` with provenance, so the book shows them without a GPU.

Run on a GPU machine: ``convkit profile <paper>`` (needs ``ncu`` on the PATH).
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
from pathlib import Path
from typing import Any

from convkit.papers import paper
from convkit.papers.paper import Profile

COLUMNS = ("experiment", "table", "config", "label", "impl", "variant", "params", "status", "rel_err",
           "kernel_index", "kernel", "blocks", "threads_per_block", "registers", "time_us", "note",
           "run_id")  # fmt: skip
KEY_COLUMNS = ("label", "impl", "variant", "params", "kernel_index")
NCU_METRICS = ("gpu__time_duration.sum", "launch__grid_size", "launch__block_size", "launch__registers_per_thread")
#: Metrics Nsight Compute has on Hopper alone (compute capability 9.0: wgmma's instructions and its wait), asked for
#: only there: elsewhere ncu refuses a metric it does not know, and the profile would not run.
HOPPER_ONLY_METRICS = ("smsp__inst_executed_pipe_tensor_op_gmma.sum",
                       "smsp__average_warps_issue_stalled_gmma_per_issue_active.ratio")  # fmt: skip


def asked_metrics(spec: Profile, capability: tuple[int, int]) -> tuple[str, ...]:
    """The metrics ncu is asked for on a GPU of compute ``capability``: :data:`NCU_METRICS` and ``spec``'s, but
    :data:`HOPPER_ONLY_METRICS` elsewhere than on Hopper (their columns then stay empty)."""
    hopper = capability == (9, 0)
    return (*NCU_METRICS, *(m for m in spec.metrics if hopper or m not in HOPPER_ONLY_METRICS))


def columns(spec: Profile) -> tuple[str, ...]:
    """A profile's results columns: the common ones, one per extra metric, the note and run id."""
    if not spec.metrics:
        return COLUMNS
    return (*COLUMNS[:-2], *(m.replace(".", "_") for m in spec.metrics), "note", "run_id")


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


def drive(manifest_path: Path, name: str, directory: Path) -> None:
    """The profiled process: check each of the paper's profiled cases (at the knobs tuned in ``directory``), warm
    it up, launch it once between markers. Writes the manifest (case index -> entry with status, error and note)
    as JSON."""
    from convkit.cuda.nvrtc import load_kernel
    from convkit.libs.cudnn import CudnnError
    from convkit.op.cases import poisoned_run_error

    spec = paper(name).profile
    if spec is None:
        raise ValueError(f"paper {name!r} declares no profile")
    begin, end = load_kernel("timing", "profile_begin"), load_kernel("timing", "profile_end")
    manifest: list[dict[str, Any]] = []
    for case in spec.cases(directory):
        entry = {"status": "ok", "rel_err": "", "note": ""} | dict(case.entry)
        try:
            prepared = case.prepare()
            if isinstance(prepared, dict):  # cannot run here (workspace, support)
                entry.update(status=prepared["status"], note=prepared["note"])
            else:
                run, check_run = prepared
                err = poisoned_run_error(case.out, case.ref, check_run or run)
                entry["rel_err"] = f"{err:.3e}"
                if err <= case.tolerance:
                    _launch_between_markers(run, begin, end, len(manifest))
                else:
                    entry.update(status="wrong", note="failed the float64 check; not profiled")
        except CudnnError as exc:
            entry.update(status="not_supported" if exc.not_supported else "error", note=str(exc)[:200])
        manifest.append(entry)
    manifest_path.write_text(json.dumps(manifest, indent=1))


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


def profile(name: str, directory: Path | None = None, *, ncu: str | None = None) -> Path:
    """Run the driver for paper ``name`` under ``ncu``, parse its report and record the rows; returns the CSV.

    Rows already recorded (by key) are kept, so a profile interrupted part-way resumes.
    """
    from convkit.bench.rows import row_key
    from convkit.core.gpu import compute_capability
    from convkit.study import provenance
    from convkit.study.results import ResultStore, gpu_results_dir

    spec = paper(name).profile
    if spec is None:
        raise ValueError(f"paper {name!r} declares no profile")
    ncu = ncu or shutil.which("ncu")
    if ncu is None:
        raise RuntimeError("ncu (Nsight Compute) is not on the PATH")
    directory = gpu_results_dir(directory)
    with tempfile.TemporaryDirectory() as tmp:
        manifest, report = Path(tmp) / "manifest.json", Path(tmp) / "profile"
        env = os.environ | {"PYTHONUNBUFFERED": "1"}
        metrics = ",".join(asked_metrics(spec, compute_capability()))
        subprocess.run([ncu, "--clock-control", "none", "--cache-control", "none", "--metrics", metrics,
                        "--export", str(report), "--force-overwrite", sys.executable, "-m", "convkit.book.profile",
                        "--drive", str(manifest), name, str(directory)], check=True, env=env)  # fmt: skip
        raw = subprocess.run([ncu, "--import", f"{report}.ncu-rep", "--csv", "--page", "raw", "--print-units", "base"],
                             check=True, capture_output=True, text=True).stdout  # fmt: skip
        rows = rows_from(json.loads(manifest.read_text()), parse_ncu_raw_csv(raw, spec.metrics))
    store = ResultStore.open(directory, spec.experiment, provenance.collect(ncu), columns=columns(spec),
                             key_columns=KEY_COLUMNS)  # fmt: skip
    done = store.done_keys()
    for row in rows:
        if row_key(row, KEY_COLUMNS) not in done:
            store.append(row)
    return store.csv_path


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--drive":
        drive(Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4]))
    else:
        print(profile(sys.argv[1] if len(sys.argv) > 1 else "cuconv"))
