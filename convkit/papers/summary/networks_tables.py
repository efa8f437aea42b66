"""The summary chapter's networks: each torchvision network patched by ``convkit.patch`` against PyTorch's own, by
batch and by mode (eager, torch.compile, a captured CUDA graph), its correctness and its first forward, and across
GPUs; with the words and the tie the chapter's result box states them in.

Reads ``networks.csv`` and ``networks_cold.csv`` (:mod:`convkit.papers.summary.inference`);
:mod:`convkit.papers.summary.chapter` holds the rest of the chapter (every chapter's problems, the host cost, the
precisions, the result box).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convkit.papers.summary import first_forward, inference
from convkit.study import tables
from convkit.study.results import load_results, notes


def recorded(directory: Path, experiment: str) -> Any:
    """The rows of ``<experiment>.csv`` in ``directory`` (pandas; empty where it is not recorded)."""
    import pandas as pd

    if not (Path(directory) / f"{experiment}.csv").is_file():
        return pd.DataFrame()
    return load_results(Path(directory), experiment)[0]


def speedup_span(speedups: Any, than: str = "PyTorch") -> str:
    """A range of speed-ups (``than``'s time over ours) in words that cannot be read backwards: "1.11x to 2.12x
    faster than PyTorch", "1.05x to 1.69x slower than PyTorch", or "from 1.69x slower to 1.41x faster than
    PyTorch" (each end at two decimals; an end that rounds to 1.00x counts as neither)."""
    low, high = float(min(speedups)), float(max(speedups))
    if round(low, 2) >= 1:
        return f"{low:.2f}x to {high:.2f}x faster than {than}"
    if round(high, 2) <= 1:
        return f"{1 / high:.2f}x to {1 / low:.2f}x slower than {than}"
    return f"from {1 / low:.2f}x slower to {high:.2f}x faster than {than}"


def tie_p95(spread: dict[str, dict[str, float]] | None, name: str) -> float:
    """The 95th percentile of one of :func:`convkit.papers.summary.chapter.spreads`' entries (0 where not measured)."""
    found = (spread or {}).get(name, {})
    return float(found.get("p95", 0.0) or 0.0) if found.get("cases") else 0.0


def networks_table(directory: Path, experiment: str = inference.EXPERIMENT) -> Any:
    """Per network and batch (pandas): forward time in PyTorch and patched, on the GPU and on the wall clock,
    the speed-ups, the layers in convkit's kernels and their share of the convolution time, and the errors."""
    import pandas as pd

    frame = recorded(directory, experiment)
    if frame.empty:
        return pd.DataFrame()
    ok = frame[frame["status"] == "ok"]
    rows = []
    for _, group in ok.groupby("label", sort=False):
        t = {(r.impl, r.variant): r for r in group.itertuples()}
        if len(t) < 4:
            continue
        ck, pt = t["convkit", "gpu"], t["pytorch", "gpu"]
        ms = {k: float(v.time_ms_median) for k, v in t.items()}
        rows.append({"network": ck.network, "batch": int(ck.batch),
                     "PyTorch GPU (ms)": ms["pytorch", "gpu"], "patched GPU (ms)": ms["convkit", "gpu"],
                     "GPU speed-up": ms["pytorch", "gpu"] / ms["convkit", "gpu"],
                     "PyTorch wall (ms)": ms["pytorch", "wall"], "patched wall (ms)": ms["convkit", "wall"],
                     "wall speed-up": ms["pytorch", "wall"] / ms["convkit", "wall"],
                     "layers in convkit": f"{int(ck.convkit_layers)} of {int(ck.conv_layers)}",
                     "share of conv time": float(ck.convkit_share),
                     "worst layer error": float(ck.worst_layer_err), "layers over the bar": int(ck.layers_over_bar),
                     "features error (patched)": float(ck.rel_err),
                     "features error (PyTorch)": float(pt.rel_err)})  # fmt: skip
    return pd.DataFrame(rows)


def _network_order(frame: Any) -> Any:
    """``frame``'s rows by network (:data:`inference.NETWORKS`' order), then batch."""
    order = {name: i for i, name in enumerate(inference.NETWORKS)}
    return frame.sort_values(["network", "batch"], key=lambda c: c.map(order) if c.name == "network" else c)


#: :func:`networks_table`'s timing columns, as :func:`timing_table` shows them.
TIMING_COLUMNS = ("network", "batch", "PyTorch GPU (ms)", "patched GPU (ms)", "GPU speed-up", "PyTorch wall (ms)",
                  "patched wall (ms)", "wall speed-up")  # fmt: skip


def timing_table(networks: Any) -> Any:
    """:func:`networks_table`'s times and speed-ups, by network then batch (pandas)."""
    if networks.empty:
        return networks
    return _network_order(networks)[list(TIMING_COLUMNS)].reset_index(drop=True)


def correctness_table(networks: Any) -> Any:
    """Per network over its batches (pandas): the layers convkit runs, the worst patched layer's error against
    float64, the layers over their bar, and the largest error of the features the classifier reads, patched and
    in PyTorch."""
    import pandas as pd

    if networks.empty:
        return networks
    rows = []
    for network, group in _network_order(networks).groupby("network", sort=False):
        counts = [tuple(int(v) for v in text.split(" of ")) for text in group["layers in convkit"]]
        low, high, total = min(c[0] for c in counts), max(c[0] for c in counts), counts[0][1]
        rows.append({"network": network, "batches": ", ".join(str(b) for b in group["batch"]),
                     "layers in convkit": f"{low} of {total}" if low == high else f"{low}-{high} of {total}",
                     "worst layer error": group["worst layer error"].max(),
                     "layers over the bar": int(group["layers over the bar"].sum()),
                     "features error, patched": group["features error (patched)"].max(),
                     "features error, PyTorch": group["features error (PyTorch)"].max()})  # fmt: skip
    return pd.DataFrame(rows).set_index("network")


#: The modes a network runs in, each by its wall-clock variant: eager, torch.compile, a captured CUDA graph.
MODE_WALLS = {"eager": "wall", "torch.compile": "compile_wall", "CUDA graph": "graph_wall"}


def modes_table(directory: Path, experiment: str = inference.EXPERIMENT) -> Any:
    """Per network and batch measured in every mode (pandas): the patched network's wall-clock speed-up over
    PyTorch's in each mode (:data:`MODE_WALLS`) and on the GPU in graph mode, the graph breaks under
    torch.compile (patched, and PyTorch's own), and the first forward with an empty cache per convolution layer
    (ms); empty where no network was measured in every mode."""
    import pandas as pd

    frame = recorded(directory, experiment)
    if frame.empty or "graph_wall" not in set(frame["variant"]):
        return pd.DataFrame()
    ok = frame[frame["status"] == "ok"]
    rows = []
    for _, group in ok.groupby("label", sort=False):
        t = {(r.impl, r.variant): r for r in group.itertuples()}
        wanted = [(impl, v) for impl in inference.IMPLS for v in (*MODE_WALLS.values(), "graph_gpu")]
        if not all(k in t for k in wanted):
            continue
        ms = {k: float(t[k].time_ms_median) for k in wanted}
        row: dict[str, Any] = {"network": t["convkit", "wall"].network, "batch": int(t["convkit", "wall"].batch)}
        for mode, variant in MODE_WALLS.items():
            row[f"{mode} speed-up"] = ms["pytorch", variant] / ms["convkit", variant]
        row["CUDA graph, GPU speed-up"] = ms["pytorch", "graph_gpu"] / ms["convkit", "graph_gpu"]
        breaks = [int(float(t[impl, "compile_wall"].graph_breaks)) for impl in ("convkit", "pytorch")]
        row["graph breaks (patched / PyTorch)"] = f"{breaks[0]} / {breaks[1]}"
        first, layers = float(t["convkit", "wall"].first_forward_s), int(float(t["convkit", "wall"].conv_layers))
        row["first forward (ms a layer)"] = 1e3 * first / max(layers, 1)
        rows.append(row)
    return pd.DataFrame(rows)


def modes_by_batch(modes: Any) -> Any:
    """:func:`modes_table`'s wall-clock speed-ups with one row per network and a column per mode and batch
    (pandas, columns ``(batch, mode)``)."""
    if modes.empty:
        return modes
    columns = [f"{mode} speed-up" for mode in MODE_WALLS]
    wide = modes.pivot(index="network", columns="batch", values=columns)
    wide = wide.reindex(list(dict.fromkeys(modes["network"])))
    wide.columns = [(batch, column.removesuffix(" speed-up")) for column, batch in wide.columns]
    return wide[sorted(wide.columns, key=lambda c: (c[0], list(MODE_WALLS).index(c[1])))]


def coverage_table(networks: Any) -> Any:
    """Per network and batch (pandas): the layers convkit runs and their share of the convolution time (%)."""
    if networks.empty:
        return networks
    out = _network_order(networks)[["network", "batch", "layers in convkit"]].copy()
    out["share of conv time (%)"] = 100 * _network_order(networks)["share of conv time"]
    return out.reset_index(drop=True)


def modes_compact(modes: Any) -> Any:
    """:func:`modes_table` with one row per network (pandas): per mode, the wall-clock speed-ups at each batch
    in one cell ("0.96x / 0.95x / 0.99x", batches ascending), and the first forward in ms a convolution layer."""
    import pandas as pd

    if modes.empty:
        return modes
    rows = []
    for network, group in modes.sort_values("batch").groupby("network", sort=False):
        row: dict[str, Any] = {"network": network}
        for mode in MODE_WALLS:
            row[mode] = " / ".join(f"{v:.2f}x" for v in group[f"{mode} speed-up"])
        row["first forward (ms a layer)"] = " / ".join(f"{v:.0f}" for v in group["first forward (ms a layer)"])
        rows.append(row)
    out = pd.DataFrame(rows).set_index("network")
    return out.reindex([n for n in dict.fromkeys(modes["network"]) if n in out.index])


#: The first forwards recorded in a fresh process, by variant: what was built before it, in words.
FIRST_FORWARDS = {first_forward.COLD_VARIANT: "nothing built", first_forward.PREBUILT: "built ahead",
                  first_forward.PREBUILT + first_forward.NO_TABLE: "no table",
                  first_forward.PYTORCH_FIRST: "PyTorch alone"}  # fmt: skip


def cold_first_forward(directory: Path, experiment: str = inference.EXPERIMENT + inference.COLD) -> Any:
    """The first forwards recorded in a fresh process (pandas: network, batch, seconds, layers, ms a layer, and
    ``kind``: :data:`FIRST_FORWARDS`' words: nothing built yet, the kernels built ahead by the package's prebuild
    step, built ahead on a GPU with no shipped table, or the network unpatched), with each prebuild step's seconds
    and note in ``attrs["prebuild"]`` by kind; empty where none was recorded."""
    import pandas as pd

    frame = recorded(directory, experiment)
    if frame.empty:
        return pd.DataFrame()
    ok = frame[frame["status"] == "ok"]
    built = ok[ok["variant"].str.startswith(first_forward.PREBUILD)]
    imported = ok[ok["variant"] == first_forward.IMPORT]["first_forward_s"].astype(float)
    patched = notes(ok).str.extract(r"patch ([0-9.]+) s", expand=False).dropna().astype(float)
    ok = ok[ok["variant"].isin(list(FIRST_FORWARDS))]
    seconds, layers = ok["first_forward_s"].astype(float), ok["conv_layers"].astype(int)
    out = pd.DataFrame({"network": ok["network"], "batch": ok["batch"].astype(int), "seconds": seconds,
                        "layers": layers, "ms a layer": 1e3 * seconds / layers,
                        "kind": ok["variant"].map(FIRST_FORWARDS)}).reset_index(drop=True)  # fmt: skip
    out.attrs["import seconds"] = float(imported.iloc[-1]) if len(imported) else None
    out.attrs["patch seconds"] = float(patched.max()) if len(patched) else None
    out.attrs["prebuild"] = {
        ("no table" if v.endswith(first_forward.NO_TABLE) else "built ahead"): {"seconds": float(t), "note": n}
        for v, t, n in zip(built["variant"], built["first_forward_s"], built["note"], strict=True)
    }
    return out


def mode_lines(modes: Any, cold: Any, spread: dict[str, dict[str, float]] | None = None) -> list[str]:
    """The result box's lines on the three modes (:func:`modes_table`, :func:`cold_first_forward`); ``spread``
    (:func:`spreads`) makes a graph-mode difference within it a tie."""
    if modes.empty:
        return []
    tie = tie_p95(spread, "networks graph wall speed-up")
    graph, eager, compiled = modes["CUDA graph speed-up"], modes["eager speed-up"], modes["torch.compile speed-up"]
    by_batch = ", ".join(f"{tables.geomean(graph[modes['batch'] == b]):.2f}x at batch {b}"
                         for b in sorted(set(modes["batch"])))  # fmt: skip
    slower = modes[graph < 1 - max(tie, 0.02)]
    out = [f"**Three modes** ({modes['network'].nunique()} networks at batch "
           f"{', '.join(str(b) for b in sorted(set(modes['batch'])))}, each against PyTorch in the same mode): "
           f"captured in a CUDA graph, the patched network's wall clock is {speedup_span(graph)} (geometric-mean "
           f"speed-up {by_batch}), slower beyond the spread on {len(slower) or 'none'} of {len(modes)}. Eagerly it "
           f"is {speedup_span(eager)}, under torch.compile {speedup_span(compiled)}: slower where many small "
           "layers leave the host setting the pace, as it does at batch 1."]  # fmt: skip
    breaks = [tuple(int(v) for v in b.split(" / ")) for b in modes["graph breaks (patched / PyTorch)"]]
    more = sum(patched > plain for patched, plain in breaks)
    if not any(patched for patched, _ in breaks):
        out.append("**torch.compile** traces every patched network without a graph break, as it does the plain "
                   "ones: each convolution in convkit is one node of the graph.")  # fmt: skip
    else:
        out.append(f"**torch.compile** breaks a patched network's graph up to {max(b[0] for b in breaks)} times, "
                   f"more often than the plain network's in {more} of {len(breaks)}.")  # fmt: skip
    first = modes["first forward (ms a layer)"]
    worst = modes.loc[first.idxmax()]
    line = (f"**First forward** with no choice cached: median {first.median():.0f} ms a convolution layer, "
            f"{(first <= 40).sum()} of {len(first)} within 40 ms; the most {first.max():.0f} ms "
            f"({worst['network']} at batch {worst['batch']}: few layers, each timed on a large input).")  # fmt: skip
    of_kind = (lambda kind: cold[cold["kind"] == kind]) if not cold.empty else (lambda kind: cold)
    nothing = of_kind("nothing built")
    if not nothing.empty:
        slowest = nothing.loc[nothing["seconds"].idxmax()]
        line += (f" On a machine that has built no kernel yet it took up to {slowest['seconds']:.1f} s "
                 f"({slowest['network']} at batch {slowest['batch']}, {slowest['ms a layer']:.0f} ms a layer), "
                 "most of it compiling kernels.")  # fmt: skip
    out.append(line)
    for kind, title, after in (("built ahead", "Kernels built ahead", "A layer no shipped choice holds is still "
                                "tuned at its first call."),
                               ("no table", "On a GPU with no shipped table", "Every layer is tuned at its first "
                                "call, on kernels built ahead.")):  # fmt: skip
        ahead = of_kind(kind)
        if ahead.empty:
            continue
        built = cold.attrs.get("prebuild", {}).get(kind)
        once = f" ({built['note']}, {built['seconds']:.0f} s once)" if built else ""
        imported, patched = cold.attrs.get("import seconds"), cold.attrs.get("patch seconds")
        if kind == "built ahead" and imported is not None and patched is not None:
            after = (f"Before it, importing convkit (after PyTorch) took {imported:.2f} s and patching the network "
                     f"at most {1e3 * patched:.0f} ms. {after}")  # fmt: skip
        pairs = ahead.merge(of_kind("PyTorch alone"), on=["network", "batch"], suffixes=("", " alone"))
        if not pairs.empty:  # convkit's part: the patched first forward less the unpatched one, pair by pair
            extra = (pairs["ms a layer"] - pairs["ms a layer alone"]).median()
            after = (f"The same networks unpatched, each in a fresh process, took a median "
                     f"{pairs['ms a layer alone'].median():.0f} ms a layer (PyTorch's own setup and cuDNN's "
                     f"autotuning), so the patched ones took a median {abs(extra):.0f} ms a layer "
                     f"{'more' if extra >= 0 else 'less'}. {after}")  # fmt: skip
        slowest = ahead.loc[ahead["ms a layer"].idxmax()]
        out.append(
            f"**{title}**{once}: a fresh process's first forward took a median "
            f"{ahead['ms a layer'].median():.0f} ms a convolution layer over {len(ahead)} network-batch pairs, "
            f"{(ahead['ms a layer'] <= 40).sum()} of them within 40 ms; the most "
            f"{slowest['ms a layer']:.0f} ms ({slowest['network']} at batch {slowest['batch']}). {after}"
        )
    return out


def networks_across_gpus() -> Any:
    """The networks on every GPU that recorded them, one column group per GPU (pandas): the patched copy's
    speed-up over PyTorch on the GPU and on the wall clock; empty where fewer than two GPUs recorded them."""
    import pandas as pd

    from convkit.study.results import recorded_folders

    columns = []
    for gpu, folder, experiment in recorded_folders(inference.EXPERIMENT):
        table = networks_table(folder, experiment)
        if table.empty:
            continue
        table = table.set_index(["network", "batch"])
        columns.append(table[["GPU speed-up", "wall speed-up"]].add_prefix(f"{gpu}: "))
    if len(columns) < 2:
        return pd.DataFrame()
    return pd.concat(columns, axis=1, join="inner").reset_index()
