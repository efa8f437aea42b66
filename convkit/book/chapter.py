"""What a notebook calls: measure on the GPU or read recorded results, for any registered paper.

Notebooks stay thin: each chapter's cells call :func:`results` for its sweep and its own paper's
modules for the numbers. ``device`` is the notebook parameter: ``"gpu"`` measures (resuming what
this GPU already recorded), ``"recorded"`` reads ``results/<recorded_gpu>/``, ``"auto"`` measures
when a GPU is present.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convkit.study.checkout import results_dir
from convkit.study.results import DEFAULT_RECORDED_GPU, QUICK_SUFFIX, gpu_results_dir, recorded_folders
from convkit.study.roofline import ceilings_summary

if "ipykernel" in sys.modules:  # a chapter's notebook: every figure in the book's style, as 2x PNG
    from convkit.book.plots import book_style

    book_style()


@dataclass
class Results:
    """One experiment's rows and provenance, and whether they were measured just now."""

    frame: Any  # pandas.DataFrame
    provenance: dict[str, Any]
    directory: Path
    measured_now: bool
    experiment: str = ""  # the file's stem under ``directory`` (``cuconv``, or ``cuconv_quick`` for a quick run)


def resolve_device(device: str) -> str:
    """``"gpu"`` or ``"recorded"`` for a notebook's ``device`` parameter (auto|gpu|recorded)."""
    from convkit.core.gpu import gpu_status

    if device not in ("auto", "gpu", "recorded"):
        raise ValueError(f"device must be 'auto', 'gpu' or 'recorded', got {device!r}")
    ok, why = gpu_status()
    if device == "gpu" and not ok:
        raise RuntimeError(f"device='gpu' but no GPU is usable: {why}")
    if device == "auto":
        return "gpu" if ok else "recorded"
    return device


def results_directory(mode: str, recorded_gpu: str = DEFAULT_RECORDED_GPU) -> Path:
    """``results/<this GPU>`` when measuring (``mode == "gpu"``), else ``results/<recorded_gpu>``."""
    if mode == "gpu":
        return gpu_results_dir()
    directory = results_dir() / recorded_gpu
    if not directory.is_dir():
        available = sorted(p.name for p in results_dir().glob("*") if p.is_dir())
        raise FileNotFoundError(f"no recorded results for {recorded_gpu!r} in {results_dir()}; have {available}")
    return directory


def load(directory: Path, experiment: str, measured_now: bool = False) -> Results:
    """One experiment of ``directory`` as :class:`Results`."""
    from convkit.study.results import load_results

    frame, provenance = load_results(directory, experiment)
    return Results(frame, provenance, directory, measured_now, experiment)


def results(
    name: str, device: str = "auto", *, quick: bool = False, recorded_gpu: str = DEFAULT_RECORDED_GPU
) -> Results:
    """A paper's sweep (``name`` as registered): measured now on the GPU, resuming what this GPU recorded
    (quick runs into ``<experiment>_quick``), or the recorded rows without one: the full run's, or where
    ``recorded_gpu`` recorded only the quick run (a second GPU's folder), that."""
    from convkit.papers import paper

    entry = paper(name)
    mode = resolve_device(device)
    directory = results_directory(mode, recorded_gpu)
    experiment = entry.experiment + (QUICK_SUFFIX if quick and mode == "gpu" else "")
    if mode == "gpu":
        entry.measure(directory, quick=quick, experiment=experiment)
    elif not (directory / f"{experiment}.csv").is_file() and (directory / f"{experiment}{QUICK_SUFFIX}.csv").is_file():
        experiment += QUICK_SUFFIX
    return load(directory, experiment, mode == "gpu")


def ceilings(
    device: str = "auto", *, quick: bool = False, recorded_gpu: str = DEFAULT_RECORDED_GPU
) -> dict[str, float]:
    """The ceilings' headline numbers (:func:`convkit.study.roofline.ceilings_summary`) of the GPU in use, or
    recorded: what the chapters' floors and efficiencies are measured against."""
    return ceilings_summary(results("ceilings", device, quick=quick, recorded_gpu=recorded_gpu).frame)


def claim_lines(name: str, directory: Path, experiment: str) -> list[str]:
    """Paper ``name``'s claims on the run its chapter shows (``experiment`` of ``directory``: its quick run's where
    that is one), as the result box ends: each verdict, the claim, our value against its bar
    (:func:`convkit.book.verify.verdict_lines`)."""
    from convkit.book.verify import verdict_lines

    return verdict_lines(Path(directory), name, quick=experiment.endswith(QUICK_SUFFIX))


def kernel_profile(name: str, device: str = "auto", *, recorded_gpu: str = DEFAULT_RECORDED_GPU) -> Results:
    """A paper's ncu profile: measured with ``ncu`` where a GPU and ``ncu`` are present and nothing is
    recorded for this GPU yet; otherwise, and wherever ncu fails (counters blocked, as on Colab; a report it
    could not write or that does not parse), the profile recorded on ``recorded_gpu``, and the run says so:
    ``ncu`` is optional, and its failure never stops a chapter."""
    import shutil

    from convkit.book import profile
    from convkit.papers import paper

    spec = paper(name).profile
    if spec is None:
        raise ValueError(f"paper {name!r} has no kernel profile")
    mode = resolve_device(device)
    directory = results_directory(mode, recorded_gpu)
    if mode == "gpu" and not (directory / f"{spec.experiment}.csv").exists():
        why = "ncu is not on the PATH"
        if shutil.which("ncu"):
            try:
                profile.profile(name, directory)
                return load(directory, spec.experiment, True)
            except Exception as exc:  # any failure of the optional profiler falls back to the recorded profile
                why = f"ncu could not profile here ({type(exc).__name__})"
        print(f"{why}: the kernel profile shown is the one recorded on {recorded_gpu}, not measured now")
        return load(results_directory("recorded", recorded_gpu), spec.experiment, False)
    return load(directory, spec.experiment, mode == "gpu")


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


def compiler_report(source: str, archs: tuple[str, ...] = ("sm_75", "sm_90")) -> Any:
    """``ptxas -v`` of every kernel of ``kernels/<source>.cu`` per architecture (registers, stack,
    spills, shared memory; whether ptxas serialised a kernel's wgmma, only where one was), or None where ``nvcc`` is
    not installed."""
    import pandas as pd

    from convkit.cuda.ptxas import find_nvcc, ptxas_report

    if find_nvcc() is None:
        return None
    rows = [vars(k) for arch in archs for k in ptxas_report(source, arch)]
    table = pd.DataFrame(rows).set_index(["kernel", "arch"]).sort_index()
    return table if table["wgmma_serialized"].any() else table.drop(columns="wgmma_serialized")


#: The provenance a reader sees, in order: (key in the provenance JSON, label).
PROVENANCE_FIELDS: tuple[tuple[str, str], ...] = (
    ("gpu", "GPU"), ("driver", "driver"), ("cuda_runtime", "CUDA"), ("nvrtc", "NVRTC"), ("cudnn", "cuDNN"),
    ("cupy", "CuPy"), ("pytorch", "PyTorch"), ("profiler", "Nsight Compute"), ("python", "Python"),
)  # fmt: skip


def _runs(*results: Results) -> list[dict[str, Any]]:
    """The provenance of every run that wrote a row of ``results``, in order of date."""
    runs = []
    for r in results:
        used = set(r.frame["run_id"].astype(str)) if "run_id" in r.frame else None
        runs += [info | {"run_id": rid} for rid, info in r.provenance.get("runs", {}).items()
                 if used is None or rid in used]  # fmt: skip
    return sorted(runs, key=lambda info: info.get("date", ""))


def _version(key: str, value: Any) -> str:
    """A provenance value as a reader needs it: Nsight Compute's ``Version 2025.3.1.0 (build ...)`` as
    ``2025.3.1.0``; a dash where none is recorded."""
    import re

    text = str(value or "").strip()
    if key == "profiler" and (found := re.search(r"\d+(?:\.\d+)+", text)):
        return found.group()
    return text or "–"


def provenance_line(*results: Results) -> str:
    """One line for a chapter: the GPU, each library's version(s), the commits and dates of the runs behind
    ``results`` (no machine paths)."""
    runs = _runs(*results)
    if not runs:
        return "No provenance recorded."
    parts = []
    for key, label in PROVENANCE_FIELDS:
        values = list(dict.fromkeys(_version(key, info[key]) for info in runs if info.get(key)))
        if values:
            parts.append(f"{label} {' / '.join(values)}" if key != "gpu" else " / ".join(values))
    commits = list(dict.fromkeys(str(info["convkit_commit"])[:7] for info in runs if info.get("convkit_commit")))
    commit_text = commits[0] if len(commits) == 1 else f"{len(commits)} commits, {commits[0]}..{commits[-1]}"
    dates = sorted({str(info.get("date", ""))[:10] for info in runs if info.get("date")})
    span = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
    return (f"Measured on {', '.join(parts)}; convkit {commit_text}; {len(runs)} run{'s' if len(runs) > 1 else ''}, "
            f"{span}.")  # fmt: skip


#: The columns of :func:`provenance_runs`: (header, the provenance keys it joins with " / ").
PROVENANCE_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("GPU", ("gpu",)), ("driver / CUDA / NVRTC", ("driver", "cuda_runtime", "nvrtc")),
    ("cuDNN / CuPy / PyTorch", ("cudnn", "cupy", "pytorch")), ("Nsight Compute / Python", ("profiler", "python")),
)  # fmt: skip


def provenance_runs(*results: Results) -> Any:
    """Every run behind ``results``, grouped by what it ran on (a reader's table, narrow enough for the page: no
    machine paths): per GPU and software stack, the number of runs, their dates and convkit commits, the GPU
    and each library's version."""
    import pandas as pd

    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for info in _runs(*results):
        stack = tuple(" / ".join(_version(k, info.get(k)) for k in keys) for _, keys in PROVENANCE_GROUPS)
        groups.setdefault(stack, []).append(info)
    rows = []
    for stack, runs in groups.items():
        dates = sorted({str(info.get("date", ""))[:10] for info in runs if info.get("date")})
        commits = list(dict.fromkeys(str(info["convkit_commit"])[:7] for info in runs if info.get("convkit_commit")))
        row = {"runs": len(runs), "dates": dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}" if dates
               else "–", "commits": commits[0] if len(commits) == 1 else f"{len(commits)}: {commits[0]}..{commits[-1]}"
               if commits else "–"}  # fmt: skip
        for (header, _), value in zip(PROVENANCE_GROUPS, stack, strict=True):
            row[header] = value.removeprefix("NVIDIA ") if header == "GPU" else value
        rows.append(row)
    return pd.DataFrame(rows)


#: The optional keys of a findings row: the MyST label of the chapter section that shows the claim, and the keys
#: of the claims (:mod:`convkit.study.claims`) that check it.
FINDING_SECTION, FINDING_CLAIMS = "section", "claims"


def findings(directory: Path) -> Any:
    """The book's findings table: every registered paper's claims, its number beside ours, computed from the
    results recorded in ``directory`` (one row per claim; :data:`convkit.papers.paper.FINDING_COLUMNS`, and
    :data:`FINDING_SECTION` where a paper gives the section that shows the claim: empty where it does not)."""
    import pandas as pd

    from convkit.papers import PAPERS
    from convkit.papers.paper import FINDING_COLUMNS

    rows = [row for p in PAPERS if p.findings is not None for row in p.findings(Path(directory))]
    columns = list(dict.fromkeys([*FINDING_COLUMNS, FINDING_SECTION, FINDING_CLAIMS]))
    rows = [{**row, FINDING_SECTION: row.get(FINDING_SECTION) or "", FINDING_CLAIMS: tuple(row.get(FINDING_CLAIMS, ()))}
            for row in rows]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


def verdict_text(keys: tuple[str, ...], evaluated: dict[str, Any]) -> str:
    """The verdicts of the claims ``keys`` (:class:`convkit.study.claims.Evaluated` by key), each after its short
    name where a finding has several: "the paper's kernel: does not hold; ours: holds"."""
    parts = [f"{e.claim.short}: {e.verdict}" if e.claim.short and len(keys) > 1 else e.verdict
             for e in (evaluated[k] for k in keys if k in evaluated)]  # fmt: skip
    return "; ".join(parts)


def _linked(text: str, section: str) -> str:
    """``text`` as a MyST link to the section labelled ``section`` (the text alone where there is none); where the
    text cannot be a role's title (it holds a backtick or angle brackets), the section's title follows it."""
    if not section:
        return text
    if any(c in text for c in "`<>"):
        return f"{text} ({{ref}}`{section}`)"
    return f"{{ref}}`{text} <{section}>`"


def findings_markdown(directory: Path) -> str:
    """:func:`findings` as the intro shows it: a Markdown table of the numbers (paper and claim, linked to the
    chapter section that shows it, the paper's number, the paper's design, our best with its share of the
    floor, the best library, on the GPU measured), then what changed since each paper, numbered to match, and
    the GPU the numbers come from."""
    from convkit.book.verify import evaluate_all
    from convkit.study.results import load_results

    table = findings(directory)
    evaluated = {e.claim.key: e for e in evaluate_all(Path(directory))}
    gpu = next(iter(load_results(Path(directory), "ceilings")[1].get("runs", {}).values()), {}).get("gpu", "")

    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ").strip() or "–"

    header = ["paper and claim", "paper's number", "paper's design", "our best (% of floor)", "best library",
              "verdict"]  # fmt: skip
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    notes = []
    for i, row in enumerate(table.to_dict("records"), 1):
        best = cell(row["our best on the H100"]) + (f" ({cell(row['efficiency'])})" if row["efficiency"] else "")
        verdicts = verdict_text(row[FINDING_CLAIMS], evaluated)
        numbers = [cell(row["paper's number"]), cell(row["paper's design on the H100"]), best,
                   cell(row["best library on the H100"]), cell(verdicts)]  # fmt: skip
        claim = _linked(cell(row["claim"]), str(row[FINDING_SECTION] or "").strip())
        lines.append(f"| {i}. **{cell(row['paper'])}**: {claim} | " + " | ".join(numbers) + " |")
        notes.append(f"{i}. {cell(row['what changed'])}")
    where = f"Our numbers: {gpu}; each paper's on its own GPU, as named. " if gpu else ""
    where += ("A verdict holds within the spread where the number misses the paper's by less than the run-to-run "
              "spread recorded for it. ")  # fmt: skip
    return "\n".join(lines) + f"\n\n{where}What changed since each paper:\n\n" + "\n".join(notes) + "\n"


# ---------------------------------------------------------------------------------------------
# Every recorded GPU side by side


def recorded_gpus(name: str) -> list[tuple[str, Results]]:
    """Every GPU with a recording of paper ``name``: (label, results), its full sweep where there is one, else
    its quick run; the label is the GPU's name, with "(quick)" for a quick run. The book's GPU comes first."""
    from convkit.papers import paper

    return recordings(paper(name).experiment)


def recordings(experiment: str) -> list[tuple[str, Results]]:
    """Every GPU with a recording of ``experiment``: (label, results), as :func:`recorded_gpus`."""
    return [(gpu, load(folder, stem)) for gpu, folder, stem in recorded_folders(experiment)]


def across_gpus(name: str) -> Any:
    """Paper ``name``'s problems recorded on more than one GPU, one column group per GPU (pandas): the best of
    its kernels, the best library of the same run (:func:`convkit.study.tables.library_rows`; whole layers only
    where a chapter measures layers) and the speed-up; empty where fewer than two GPUs recorded it."""
    import pandas as pd

    from convkit.core.problem import ConvProblem
    from convkit.study.tables import library_rows, timed

    columns = []
    for gpu, found in recorded_gpus(name):
        ok = timed(found.frame)
        ok = ok[~ok["params"].astype(str).str.contains('"steps":"conv"', regex=False)]  # a layer's conv alone
        ok = ok.assign(problem=[ConvProblem.from_row(row).name for _, row in ok.iterrows()])
        mine = ok[ok["impl"] == "convkit"].groupby("problem")["us"].min()
        theirs = library_rows(ok).groupby("problem")["us"].min()
        columns.append(pd.DataFrame({f"{gpu}: ours (us)": mine, f"{gpu}: best library (us)": theirs,
                                     f"{gpu}: speed-up": theirs / mine}))  # fmt: skip
    if len(columns) < 2:
        return pd.DataFrame()
    table = pd.concat(columns, axis=1, join="inner").dropna()
    return table.rename_axis("problem").reset_index()


def across_gpus_text(across: Any) -> str:
    """One sentence on :func:`across_gpus`' table: on how many of the problems both GPUs recorded our best
    kernel is faster than the best library, per GPU."""
    speedups = [c for c in across.columns if c.endswith(": speed-up")]
    counts = [f"on {int((across[c] > 1).sum())} of them on the {c.removesuffix(': speed-up')}" for c in speedups]
    return (f"Of the {len(across)} problems every GPU recorded, our best kernel beats the best library of the same "
            f"run {' and '.join(counts)}.")  # fmt: skip


#: The ceilings' headline numbers as a reader meets them: label, and the factor from the recorded unit.
CEILING_LABELS = {
    "sm_count": ("SMs", 1), "sm_clock_mhz": ("SM clock under load (MHz)", 1), "l2_bytes": ("L2 cache (MiB)", 2**-20),
    "shared_memory_per_sm": ("shared memory per SM (KiB)", 2**-10), "copy_gbps": ("copy bandwidth (GB/s)", 1),
    "fma_tflops": ("FMA rate, measured (TFLOP/s)", 1), "sgemm_tflops": ("SGEMM, TF32 off (TFLOP/s)", 1),
    "dram_latency_cycles": ("DRAM load latency (cycles)", 1), "l2_latency_cycles": ("L2 load latency (cycles)", 1),
    "launch_us": ("empty kernel launch (us)", 1), "ridge_flops_per_byte": ("roofline ridge (FLOP/byte)", 1),
}  # fmt: skip


def ceilings_by_gpu() -> list[tuple[str, dict[str, float]]]:
    """(label, ceilings' headline numbers) of every GPU that recorded them, the book's first."""
    return [(gpu, ceilings_summary(r.frame)) for gpu, r in recorded_gpus("ceilings")]


def ceilings_across_gpus() -> Any:
    """The ceilings' headline numbers of every GPU that recorded them, one column per GPU (pandas)."""
    import pandas as pd

    found = ceilings_by_gpu()
    if len(found) < 2:
        return pd.DataFrame()
    rows = []
    for key, (label, factor) in CEILING_LABELS.items():
        row: dict[str, Any] = {"ceiling": label}
        for gpu, summary in found:
            value = summary.get(key)
            row[gpu] = None if value is None else round(value * factor, 1)
        rows.append(row)
    return pd.DataFrame(rows)
