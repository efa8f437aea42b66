"""The summary chapter: the study's kernels as one op, across every chapter's problems and in whole networks.

Reads what the chapters and the op's own measurements recorded for one GPU:

- every chapter's sweep (through :func:`convkit.study.shipping.recorded_candidates`): per problem, convkit's best
  kernel against the best library of the same run, on one roofline and as a map of where each wins;
- ``networks.csv`` (:mod:`convkit.papers.summary.inference`): torchvision networks patched by ``convkit.patch``,
  whose tables and mode lines are :mod:`convkit.papers.summary.networks_tables`';
- ``conv2d_overhead.csv`` (:mod:`convkit.papers.summary.overhead`): the host cost of a call beside PyTorch's, and
  ``conv2d_host_paths.csv``, that of each path a call can take, which the shipped choices are weighed by;
- ``precisions.csv`` (:mod:`convkit.papers.summary.precisions`): cuDNN in TF32 and FP16, where inference usually runs;
- ``concurrency.csv`` (:mod:`convkit.papers.summary.concurrency`): the op from several threads, streams and graphs
  at once, every output against float64.

:func:`measure` takes all but the sweeps on a GPU (the sweeps are the chapters' own).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.papers import shipping_sources
from convkit.papers.summary import host_tables, inference, overhead, precisions
from convkit.papers.summary.concurrency import driver as concurrency_driver
from convkit.papers.summary.networks_tables import recorded, speedup_span, tie_p95
from convkit.papers.summary.words import KERNEL_WORDS, kernel_words
from convkit.study import shipping, tables

#: Buckets of the win map: batch sizes and input channels.
BATCH_BUCKETS = ((1, 1, "1"), (2, 8, "2-8"), (9, 32, "16-32"), (33, 10**9, "64-256"))
CHANNEL_BUCKETS = ((1, 1, "C = 1"), (2, 64, "C 2-64"), (65, 256, "C 65-256"), (257, 10**9, "C 257+"))
QUICK_NETWORKS = ("AlexNet-1", "SqueezeNet-1")


def kernel_ids() -> Any:
    """Each method of :data:`KERNEL_WORDS` beside the kernel id the results record it by (pandas)."""
    import pandas as pd

    return pd.DataFrame({"method": list(KERNEL_WORDS.values()), "kernel id": list(KERNEL_WORDS)}).set_index("method")


#: The run-to-run spread: these networks and every REPEAT_STEP-th host-cost layer measured again in a process
#: of their own after the runs (those at batch 1 and 16 in every mode), and a quarter of the layers.
REPEAT_NETWORKS = ("AlexNet-1", "SqueezeNet-1", "GoogLeNet-8", "SqueezeNet-256", "ResNet-50-16", "DenseNet-121-1")
REPEAT_STEP, REPEAT = 4, "_repeat"

#: What :func:`measure` records (each with its quick run and repeated sample beside it): the networks, the host cost,
#: the reduced precisions, the concurrency soak.
EXPERIMENTS = (inference.EXPERIMENT, overhead.EXPERIMENT, precisions.EXPERIMENT, concurrency_driver.EXPERIMENT)


def measure(directory: Path, *, quick: bool = False) -> None:
    """Measure the networks, the host cost, the reduced precisions and the concurrency soak into ``directory``
    (resuming); ``quick``: two networks at batch 1, a few layers of each, the soak's short form, into ``*_quick``
    experiments. A full run then measures its repeated sample in a fresh process (:func:`measure_repeat`)."""
    import subprocess
    import sys

    suffix = "_quick" if quick else ""
    only = list(QUICK_NETWORKS) if quick else None
    inference.measure(directory, only=only, experiment=inference.EXPERIMENT + suffix)
    if not quick:  # what each path costs the host, which the shipped choices are weighed by
        overhead.measure_paths(directory)
    overhead.measure(directory, problems=overhead.layers()[::6] if quick else None,
                     experiment=overhead.EXPERIMENT + suffix)  # fmt: skip
    precisions.measure(directory, problems=precisions.layers()[::16] if quick else None,
                       experiment=precisions.EXPERIMENT + suffix)  # fmt: skip
    concurrency_driver.run(directory, short=quick)
    if not quick:
        subprocess.run([sys.executable, "-m", "convkit.papers.summary.chapter", "repeat", str(directory)], check=True)


def measure_repeat(directory: Path) -> None:
    """Measure :data:`REPEAT_NETWORKS` and every :data:`REPEAT_STEP`-th host-cost layer again, into
    ``networks_repeat.csv`` and ``conv2d_overhead_repeat.csv``: the spread within which two times are a tie."""
    inference.measure(directory, only=list(REPEAT_NETWORKS), experiment=inference.EXPERIMENT + REPEAT)
    overhead.measure(directory, problems=overhead.layers()[::REPEAT_STEP], experiment=overhead.EXPERIMENT + REPEAT)


def spreads(directory: Path) -> dict[str, dict[str, float]]:
    """The run-to-run spread (:func:`convkit.study.tables.spread`) of the networks' forward times on the GPU and on the
    wall clock, eagerly, compiled and replayed (``networks gpu``, ``networks wall``, ``networks compile wall``,
    ``networks graph wall``) and of the per-call host cost (``host``); and of the ratios the chapter compares,
    PyTorch's time over convkit's in the same process (``... speed-up`` for each of the networks' keys, ``host
    ratio``): a host that runs slower in one process slows both sides of a ratio alike."""
    out = {}
    networks = inference.EXPERIMENT, inference.KEY_COLUMNS
    for name, experiment, keys, variant in (("networks gpu", *networks, "gpu"), ("networks wall", *networks, "wall"),
                                            ("networks compile wall", *networks, "compile_wall"),
                                            ("networks graph wall", *networks, "graph_wall"),
                                            ("host", overhead.EXPERIMENT, None, "host_per_call")):  # fmt: skip
        sweep, repeat = recorded(directory, experiment), recorded(directory, experiment + REPEAT)
        if not sweep.empty and not repeat.empty:
            sweep, repeat = sweep[sweep["variant"] == variant], repeat[repeat["variant"] == variant]
        out[name] = tables.spread(sweep, repeat, keys)
        out["host ratio" if name == "host" else f"{name} speed-up"] = _ratio_spread(sweep, repeat)
    return out


def _ratios(frame: Any) -> Any:
    """Per label (with its padding and stride where recorded): PyTorch's median time over convkit's."""
    ok = tables.timed(frame)
    keys = [k for k in ("label", "pad", "stride") if k in ok]
    times = ok.pivot_table(index=keys, columns="impl", values="us", aggfunc="first")
    return (times["pytorch"] / times["convkit"]).dropna() if {"pytorch", "convkit"} <= set(times) else times


def _ratio_spread(sweep: Any, repeat: Any) -> dict[str, float]:
    """The spread of a ratio (:func:`_ratios`) measured again in a fresh process, as |repeat / sweep - 1|
    (``median``, ``p95``, over ``cases``), as :func:`convkit.study.tables.spread` gives it for times."""
    import math

    if sweep.empty or repeat.empty:
        return {"cases": 0, "median": math.nan, "p95": math.nan}
    a, b = _ratios(sweep), _ratios(repeat)
    both = a.index.intersection(b.index)
    moved = (b.loc[both] / a.loc[both] - 1).abs()
    return {"cases": len(both), "median": float(moved.median()), "p95": float(moved.quantile(0.95))}


def best_per_problem(directory: Path) -> Any:
    """Per recorded problem (pandas): its key, filter size, batch, channels, GFLOP, intensity, convkit's best
    time and kernel, the best library's time and name, and the speed-up (library over convkit)."""
    import pandas as pd

    rows = shipping.recorded_candidates(directory, shipping_sources())
    out = []
    for key, group in rows.groupby("key"):
        mine, theirs = group[group["impl"] == tables.CONVKIT], tables.library_rows(group)
        if mine.empty or theirs.empty:
            continue
        best_mine, best_theirs = mine.loc[mine["us"].idxmin()], theirs.loc[theirs["us"].idxmin()]
        p = ConvProblem.from_key(key)
        out.append({"key": key, "R": p.r, "N": p.n, "C": p.c, "gflop": p.flops / 1e9,
                    "intensity": p.arithmetic_intensity, "convkit_us": float(best_mine["us"]),
                    "kernel": str(best_mine["variant"]), "library_us": float(best_theirs["us"]),
                    "library": f"{best_theirs['impl']} {best_theirs['variant']}",
                    "speedup": float(best_theirs["us"]) / float(best_mine["us"])})  # fmt: skip
    return pd.DataFrame(out)


def best_or_recorded(directory: Path, recorded_gpu: str) -> tuple[Any, str]:
    """(:func:`best_per_problem` of ``directory``, "") where the other chapters have recorded sweeps there; else
    those of ``results/<recorded_gpu>`` and a sentence that says so (a notebook run alone, as Colab runs it,
    measures no other chapter)."""
    from convkit.study.results import recorded_elsewhere

    best = best_per_problem(directory)
    elsewhere = None if not best.empty else recorded_elsewhere(directory, recorded_gpu)
    if elsewhere is None:
        return best, ""
    recorded, name = elsewhere
    note = (
        f"No other chapter has recorded its sweep on this GPU yet (run their notebooks first): the problems "
        f"below are the {name}'s, as recorded."
    )
    return best_per_problem(recorded), note


def roofline_points(best: Any) -> list[tuple[str, float, float, str]]:
    """(label, FLOP/byte, GFLOP/s, kind) of every problem twice, unlabelled: convkit's best kernel and the best
    library."""
    points = []
    for r in best.itertuples():
        flops = r.gflop * 1e9
        points.append(("", r.intensity, flops / (r.convkit_us * 1e3), "convkit's best kernel"))
        points.append(("", r.intensity, flops / (r.library_us * 1e3), "best library"))
    return points


def _bucket(value: int, buckets: tuple[tuple[int, int, str], ...]) -> str:
    return next(name for low, high, name in buckets if low <= value <= high)


def win_map(best: Any) -> Any:
    """Where convkit's kernels win (pandas): per filter size and channel bucket (rows) and batch bucket
    (columns), "x of y" problems faster, and the method of the kernel that wins most there
    (:func:`kernel_words`)."""
    import pandas as pd

    def bucketed(values: Any, buckets: tuple[tuple[int, int, str], ...]) -> Any:
        names = [name for _, _, name in buckets]
        return pd.Categorical([_bucket(v, buckets) for v in values], categories=names, ordered=True)

    def cell(group: Any) -> str:
        wins = group[group["speedup"] > 1]
        top = f": {kernel_words(wins['kernel'].mode().iloc[0])}" if len(wins) else ""
        return f"{len(wins)} of {len(group)}{top}"

    frame = best.assign(batch=bucketed(best["N"], BATCH_BUCKETS), channels=bucketed(best["C"], CHANNEL_BUCKETS))
    cells = frame.groupby(["R", "channels", "batch"], observed=True)[["speedup", "kernel"]].apply(cell)
    table = cells.unstack("batch").reindex(columns=frame["batch"].cat.categories).fillna("")
    table.columns = [f"batch {name}" for name in table.columns]
    table = table.rename(index=lambda r: f"{r}x{r}", level="R")
    return table.rename_axis(index=["filter", "channels"], columns=None)


def precision_lines(directory: Path, experiment: str = precisions.EXPERIMENT) -> dict[str, float]:
    """The median TFLOP/s (direct-method FLOPs) of cuDNN in each precision on the large layers, by label."""
    frame = recorded(directory, experiment)
    if frame.empty:
        return {}
    ok = tables.timed(frame)
    names = {"fp32": "cuDNN FP32", "tf32": "cuDNN TF32", "fp16": "cuDNN FP16"}
    return {f"{names[v]} (median, large layers)": float(g["gflops"].astype(float).median()) / 1e3
            for v, g in ok.groupby("variant")}  # fmt: skip


def result_lines(best: Any, networks: Any, host: Any, lines: dict[str, float],
                 spread: dict[str, dict[str, float]] | None = None, best_note: str = "") -> list[str]:  # fmt: skip
    """The chapter's result box: what the op claims, what was measured, the verdict; ``spread`` (from
    :func:`spreads`) makes a speed-up within the run-to-run spread of that ratio (its 95th percentile) a tie;
    ``best_note`` (:func:`best_or_recorded`) says that ``best`` was recorded on another GPU."""
    out = ["**Claim**: the study's kernels, called as one op (convkit.conv2d, or a PyTorch model patched by "
           "convkit.patch), run a network's convolutions faster than PyTorch's cuDNN in FP32 wherever the "
           "study measured them faster, at a host cost per call no higher than PyTorch's."]  # fmt: skip
    if not best.empty:
        where = " (as recorded on another GPU)" if best_note else ""
        out.append(f"**Every chapter's problems**{where}: convkit's best kernel is faster than the best library on "
                   f"{int((best['speedup'] > 1).sum()):,} of {len(best):,} (geometric mean "
                   f"{tables.geomean(best['speedup']):.2f}x); the op runs the faster of the two.")  # fmt: skip
    verdict = []
    if not networks.empty:
        one = networks[networks["batch"] == 1]
        out.append(f"**Networks at batch 1**: on the GPU {speedup_span(one['GPU speed-up'])}; on the wall clock, "
                   f"eagerly, {speedup_span(one['wall speed-up'])}. At every batch, on the GPU "
                   f"{speedup_span(networks['GPU speed-up'])}.")  # fmt: skip
        out.append(f"**Correctness**: {int(networks['layers over the bar'].sum())} patched layers over their bar "
                   f"of float64; the worst layer {networks['worst layer error'].max():.1e}.")  # fmt: skip
        gpu_tie, wall_tie = tie_p95(spread, "networks gpu speed-up"), tie_p95(spread, "networks wall speed-up")
        if gpu_tie or wall_tie:
            out.append(f"**Run-to-run spread**: a sample measured again in a fresh process moved the speed-up over "
                       f"PyTorch by up to {100 * gpu_tie:.1f}% on the GPU and {100 * wall_tie:.1f}% on the wall "
                       f"clock (95th percentile; the times alone moved by up to "
                       f"{100 * tie_p95(spread, 'networks gpu'):.1f}% and "
                       f"{100 * tie_p95(spread, 'networks wall'):.1f}%, "
                       "PyTorch's and ours alike); speed-ups within it are ties.")  # fmt: skip
        slower = networks[networks["GPU speed-up"] < 1 - gpu_tie]
        tied = networks[(networks["GPU speed-up"] < 1) & (networks["GPU speed-up"] >= 1 - gpu_tie)]
        if len(tied):
            named = ", ".join(f"{r['network']} at batch {r['batch']} ({r['GPU speed-up']:.2f}x)"
                              for _, r in tied.iterrows())  # fmt: skip
            out.append(f"**Ties on the GPU**: {named}: within the spread, no slower and no faster than PyTorch.")
        if len(slower):
            named = ", ".join(f"{r['network']} at batch {r['batch']} ({r['GPU speed-up']:.2f}x)"
                              for _, r in slower.iterrows())  # fmt: skip
            verdict.append(f"slower on the GPU: {named}, where cuDNN's choices are kept for nearly every layer")
        late = one[one["wall speed-up"] < 1 - wall_tie]
        if len(late):
            many, shorter = len(late) > 1, bool((late["GPU speed-up"] > 1).all())
            verdict.append(f"eagerly at batch 1, {len(late)} of {len(one)} networks "
                           f"({tables.listed(late['network'])}) {'wait' if many else 'waits'} longer on the wall "
                           f"clock than with PyTorch, by more than the spread"
                           f"{', although the GPU time is shorter' if shorter else ''}: "
                           f"{'their' if many else 'its'} many small layers are host-bound, and a call from Python "
                           "costs more than PyTorch's own dispatch")  # fmt: skip
    if not host.empty:
        host_tie = tie_p95(spread, "host ratio")
        at_or_below = int((host["host ratio"] <= 1 + host_tie).sum())
        within = f" (or within the run-to-run spread of the ratio, {100 * host_tie:.0f}%)" if host_tie else ""
        out.append(f"**Host cost per call** (each call with a bias): median {host['convkit host (us)'].median():.0f} "
                   f"us against PyTorch's {host['PyTorch host (us)'].median():.0f} us; at or below PyTorch's{within} "
                   f"on {at_or_below} of {len(host)} layers.")  # fmt: skip
        if at_or_below < len(host):
            above = host[host["host ratio"] > 1 + host_tie]
            runs = above["op runs"].map(host_tables.host_kind).value_counts()
            why = ", ".join(f"{count} {kind}" for kind, count in runs.items())
            verdict.append(f"the host cost is above PyTorch's{' by more than the spread' if host_tie else ''} on "
                           f"{len(above)} of {len(host)} layers ({why})")  # fmt: skip
    if lines:
        text = ", ".join(f"{name.split(' (')[0]} {tflops:.0f}" for name, tflops in lines.items())
        out.append(f"**Where FP32 stands**: median TFLOP/s of PyTorch's cuDNN on the large layers: {text}.")
    if verdict:
        text = "; ".join(verdict)
        out.append(f"**Verdict**: partly held. {text[0].upper()}{text[1:]}.")
    elif not networks.empty:
        out.append("**Verdict**: held, within the run-to-run spread.")
    return out


if __name__ == "__main__":  # python -m convkit.papers.summary.chapter measure|repeat <results folder> [--quick]
    import sys

    command, rest = sys.argv[1:2], sys.argv[2:]
    quick = "--quick" in rest
    folders = [a for a in rest if a != "--quick"]
    if command not in (["measure"], ["repeat"]) or len(folders) != 1 or (quick and command == ["repeat"]):
        sys.exit("usage: python -m convkit.papers.summary.chapter measure <results folder> [--quick]\n"
                 "       python -m convkit.papers.summary.chapter repeat <results folder>")  # fmt: skip
    if command == ["measure"]:
        measure(Path(folders[0]), quick=quick)
    else:
        measure_repeat(Path(folders[0]))
