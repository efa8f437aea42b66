"""The summary chapter's tables of what a call costs the host: per layer beside PyTorch's (``conv2d_overhead.csv``),
where convkit's part goes, and what each path a call can take costs (``conv2d_host_paths.csv``), which the shipped
choices are weighed by (:mod:`convkit.papers.summary.overhead`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.papers import shipping_sources
from convkit.papers.summary import overhead
from convkit.papers.summary.networks_tables import recorded
from convkit.papers.summary.words import implementation_words
from convkit.study import shipping, tables


def host_cost_table(directory: Path, experiment: str = overhead.EXPERIMENT) -> Any:
    """Per layer (pandas): the GPU time and the host cost per call of convkit.conv2d and of PyTorch's conv2d
    (PyTorch tensors in and out, each call with a bias), in microseconds, the host cost's ratio, and what the op
    runs there (``op runs``: the fastest implementation any chapter recorded for the layer, in words; "tuned at its
    first call" where none did)."""
    import pandas as pd

    frame = recorded(directory, experiment)
    if frame.empty:
        return pd.DataFrame()
    ok = tables.timed(frame)
    fastest = _recorded_fastest(directory)
    rows = []
    for label, group in ok.groupby("label", sort=False):
        us = {(r.impl, r.variant): float(r.us) for r in group.itertuples()}
        if len(us) < 4:
            continue
        key = ConvProblem.from_row(group.iloc[0]).key
        rows.append({"layer": label, "convkit GPU (us)": us["convkit", "gpu"],
                     "PyTorch GPU (us)": us["pytorch", "gpu"], "convkit host (us)": us["convkit", "host_per_call"],
                     "PyTorch host (us)": us["pytorch", "host_per_call"],
                     "host ratio": us["convkit", "host_per_call"] / us["pytorch", "host_per_call"],
                     "op runs": fastest.get(key, "tuned at its first call")})  # fmt: skip
    return pd.DataFrame(rows)


#: The parts of convkit's host cost per call (:data:`convkit.papers.summary.overhead.CASES`), by column.
HOST_PARTS = {"finding its plan (us)": "host_lookup", "running the plan (us)": "host_replay",
              "through torch.ops (us)": "host_operator"}  # fmt: skip


def host_parts_table(directory: Path, experiment: str = overhead.EXPERIMENT) -> Any:
    """Per layer (pandas), where convkit's host cost per call goes (:data:`HOST_PARTS`), beside the whole call and
    PyTorch's, in microseconds; empty where the parts were not recorded."""
    import pandas as pd

    frame = recorded(directory, experiment)
    if frame.empty:
        return pd.DataFrame()
    fastest = _recorded_fastest(directory)
    rows = []
    for label, group in tables.timed(frame).groupby("label", sort=False):
        us = {(r.impl, r.variant): float(r.us) for r in group.itertuples()}
        if not all(("convkit", part) in us for part in HOST_PARTS.values()):
            continue
        parts = {column: us["convkit", part] for column, part in HOST_PARTS.items()}
        rows.append({"layer": label, "op runs": fastest.get(ConvProblem.from_row(group.iloc[0]).key, "tuned"),
                     **parts, "whole call (us)": us["convkit", "host_per_call"],
                     "PyTorch (us)": us["pytorch", "host_per_call"]})  # fmt: skip
    return pd.DataFrame(rows)


def _recorded_fastest(directory: Path) -> dict[str, str]:
    """Per recorded problem key, what the choices shipped from ``directory`` run there, in words: the fastest
    implementation any sweep recorded, weighed by its path's host cost where recorded (:func:`host_paths_text`)."""
    table = shipping.table_from_results(directory, shipping_sources())
    return {key: implementation_words(c.impl, c.variant) for key, c in table.items() if "@" not in key}


def host_paths_text(directory: Path) -> str:
    """A paragraph: each path's host cost per call recorded in ``directory`` and the choices it moved off the
    fastest on the GPU (:func:`convkit.study.shipping.host_floors`); "" where none is recorded."""
    import dataclasses
    import statistics

    sources = shipping_sources()
    floors = shipping.host_floors(directory, sources)
    if set(floors) != set(overhead.PATHS):
        return ""
    weighed = shipping.table_from_results(directory, sources)
    fastest = shipping.table_from_results(directory, dataclasses.replace(sources, host_paths=""))
    held = [key for key in weighed if "@" not in key]
    moved = [k for k in held if (weighed[k].impl, weighed[k].variant, weighed[k].params)
             != (fastest[k].impl, fastest[k].variant, fastest[k].params)]  # fmt: skip
    text = (f"Replaying a call's plan costs the host {floors['convkit']:.0f} us on convkit's own kernels (the kernel "
            f"and the bias: two launches), {floors['cublas']:.0f} us through cuBLAS and {floors['pytorch']:.0f} us "
            "through PyTorch's convolution (medians over three small 1x1 layers at batch 1, each path forced). The "
            "choices the package ships count each implementation as no faster than the host cost of its path: "
            "where the GPU finishes before the host has issued the next call, the path that costs the host less "
            "is the faster one. ")  # fmt: skip
    if not moved:
        return text + f"None of the {len(held):,} problems the choices hold changed for it."
    lost = [weighed[k].time_us - fastest[k].time_us for k in moved]
    return text + (f"On {len(moved)} of the {len(held):,} problems a kernel slower on the GPU won (by a median "
                   f"{statistics.median(lost):.1f} us, at most {max(lost):.1f} us): that much each is lost where the "
                   "host issues nothing, in a CUDA graph's replay.")  # fmt: skip


def host_kind(runs: str) -> str:
    """What makes a call cost the host more, by what the op runs (``op runs`` of :func:`host_cost_table`)."""
    if "Winograd" in runs and not runs.startswith("cuDNN"):
        return "running Winograd's three launches"
    if runs.startswith(("cuBLAS", "cuDNN", "PyTorch")):
        return f"calling {runs.split(' ')[0]} through convkit"
    if runs.startswith("tuned"):
        return "tuned at the first call"
    return "running another of convkit's kernels"
