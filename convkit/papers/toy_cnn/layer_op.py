"""The fused layer's choices as the package ships them for ``convkit.conv2d_relu_pool``.

Per one-image layer the chapter recorded: the tiled kernel's fastest knobs, or None where a library's
conv + bias + ReLU + pool was faster than every fused row (the op then composes its own convolution with
ReLU and the pool). Written into the package by :mod:`convkit.study.shipping`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.papers.toy_cnn.results import TOY_EXPERIMENT
from convkit.study.results import load_results
from convkit.study.tables import fastest_per


def fused_choices(directory: Path) -> dict[str, dict[str, Any] | None]:
    """Per problem key of the layers recorded in ``directory``: the tiled kernel's knobs where its fastest row
    is the fastest whole layer, else None. Only whole-layer rows compete (the fused kernel's and the libraries'
    conv + bias + ReLU + pool), not the report's ladder nor convolutions alone."""
    if not (Path(directory) / f"{TOY_EXPERIMENT}.csv").is_file():
        return {}
    frame = load_results(Path(directory), TOY_EXPERIMENT)[0]
    fused = (frame["impl"] == "convkit") & (frame["variant"] == "toy_tiled")
    whole = frame["params"].astype(str).str.contains("conv+bias+relu+pool", regex=False)
    best = fastest_per(frame[fused | ((frame["impl"] != "convkit") & whole)], ["label", "pad", "stride"])
    return {ConvProblem.from_row(r).key: json.loads(r["params"]) if r["variant"] == "toy_tiled" else None
            for _, r in best.iterrows()}  # fmt: skip
