"""The toy-CNN chapter's words with numbers in them: the result box, the findings rows, the verdict, what limits
the layer and why the GPUs differ, all computed from a results folder (the tables are :mod:`.results`).

The report's T4 figures are quoted data (:mod:`convkit.families.toy_cnn.launch`); ours are read from the results
files, so the result box (:func:`result_lines`) and the book's findings rows (:func:`findings`) give the same
numbers (:func:`numbers`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.families.toy_cnn import launch
from convkit.papers.toy_cnn.results import (
    LAYER,
    SECTIONS,
    T4_FP32_PEAK_TFLOPS,
    TOY_EXPERIMENT,
    _fastest,
    _launch,
    _ok,
    best_rows,
)
from convkit.study import tables
from convkit.study.claims import TIME, Claim, Spread, per_folder

#: The report's numbers its claims are held to: tiling's gain (V1 over V0, its Table 2) and its final rate as a
#: share of the T4's FP32 FMA peak (its Table 1), the one measure both GPUs have.
REPORT_GAIN = launch.REPORT_TABLE2["v1"][1] / launch.REPORT_TABLE2["v0"][1]
REPORT_SHARE = 100 * launch.REPORT_TABLE1[1] / 1e3 / T4_FP32_PEAK_TFLOPS


def best_library(best: dict[str, Any]) -> dict[str, Any]:
    """The faster library layer of :func:`best_rows`' ``best``: cuDNN's with its bias, ReLU and pool, or PyTorch's."""
    return min((r for r in (best["cudnn_layer"], best["pytorch_layer"]) if r is not None), key=lambda r: r["time_ms"])


def library_name(row: Any) -> str:
    """A library row's name for a reader: PyTorch's autotuned cuDNN, or the cuDNN algorithm with its tail."""
    name = tables.library_name("cudnn.benchmark" if row["impl"] == "pytorch" else row["variant"])
    return name if row["impl"] == "pytorch" else f"{name} + bias, ReLU, pool"


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
    parts = [
        f"**Ladder.** Shared-memory tiling is the one step that matters on the H100 as on the T4: "
        f"{v0['time_ms'] / v1['time_ms']:.2f}x here (report: {REPORT_GAIN:.2f}x). Unrolling the pool, `const` "
        f"helpers and `#pragma unroll` take {100 * (1 - v4['time_ms'] / v1['time_ms']):.1f}% off V1's time "
        "together: nvcc 13 already unrolls the fixed-trip pool and 5x5 loops of V1 (ptxas shows no local memory).",
        f"**Past the report.** Register tiling with a cp.async double buffer (V5) runs the layer in "
        f"{n['v5_ms']}, {n['v5_tflops']}, {n['v5_floor']} of its roofline floor and "
        f"{v4['time_ms'] / tiled['time_ms']:.1f}x the report's best kernel on the "
        "same GPU.",
    ]  # fmt: skip
    if cudnn is not None:
        parts.append(f"**Against the libraries.** cuDNN's fastest legacy algorithm with its bias, ReLU and pool "
                     f"calls takes {cudnn['time_ms']:.3g} ms ({tables.library_name(cudnn['variant'])})"
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


def numbers_from(frame: Any, ceilings: dict[str, float]) -> dict[str, str]:
    """The chapter's headline numbers as the book prints them (from a sweep's rows and the ceilings)."""
    from convkit.study.roofline import floor_us

    best = best_rows(frame)
    v0, v1, v4, tiled = best["v0"], best["v1"], best["v4"], best["tiled"]
    library = best_library(best)
    floor_ms = floor_us(launch.LAB_LAYER, ceilings) / 1e3
    return {
        "report_rate": f"{launch.REPORT_TABLE1[1] / 1e3:.2f} TFLOP/s",
        "report_share": f"{REPORT_SHARE:.0f}%",
        "report_gain": f"{REPORT_GAIN:.2f}x",
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
        f"{n['report_rate']}, {n['report_share']} of the T4's FP32 peak; tiling is the big step "
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
        base | {"claim": "fused conv+bias+ReLU+pool layer throughput", "paper's number": f"{n['report_rate']} (T4)",
                "paper's design on the H100": n["v4_tflops"], "our best on the H100": n["v5_tflops"],
                "best library on the H100": n["lib"], "efficiency": n["v5_floor"],
                "what changed": "register tiles and a cp.async double buffer (V5)", "section": SECTIONS["libraries"],
                "claims": ("toy_cnn.throughput", "toy_cnn.v5")},
        base | {"claim": "shared-memory tiling over the fused baseline", "paper's number": f"{n['report_gain']} (T4)",
                "paper's design on the H100": n["tiling_gain"], "our best on the H100": f"{n['v5_over_v0']} (V5)",
                "best library on the H100": n["lib"], "efficiency": "",
                "what changed": "the later steps gain under 1%: nvcc already unrolls them",
                "section": SECTIONS["ladder"], "claims": ("toy_cnn.tiling",)},
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
            name = ConvProblem.from_row(t).name
            parts.append(f"On {name} the {gpu} timed V5 at {_launch(t['params'])} only: {t['time_ms']:.3f} ms, "
                         f"against {b:.3f} ms for the same tile on the {first_gpu} ({t['time_ms'] / b:.2f}x), "
                         f"whose run found {best['time_ms']:.3f} ms at {_launch(best['params'])}.")  # fmt: skip
    if not parts:
        return ""
    return (
        " ".join(parts) + " The gap between the GPUs in the table is the tile the quick run tried, not the "
        "GPU: at the same tile the times agree, as a compute-bound layer on the same 132 SMs and clock should."
    )


# ---------------------------------------------------------------------------------------------
# The findings as checked claims (:mod:`convkit.study.claims`)

SPREAD = Spread(TOY_EXPERIMENT, f"{TOY_EXPERIMENT}_repeat")


@per_folder
def _best(directory: Path) -> dict[str, Any]:
    from convkit.study.results import load_results

    best = best_rows(load_results(directory, TOY_EXPERIMENT)[0])
    best["library"] = best_library(best)
    return best


def _v4_share_of_peak(directory: Path) -> float:
    """V4's rate as a share of the GPU's FP32 FMA peak (its datasheet arithmetic from the measured ceilings)."""
    return 100 * _best(directory)["v4"]["tflops"] / _ceilings(directory)["fp32_theoretical_tflops"]


def claims() -> list[Claim]:
    """The report's two findings, held to its numbers (its rate as a share of its GPU's FMA peak, the one measure
    both GPUs have), and our V5 against the best library layer."""
    return [
        Claim("toy_cnn.throughput", "the report's fused kernel (V4) reaches the report's share of its GPU's FP32 "
              "FMA peak", _v4_share_of_peak, REPORT_SHARE, unit="%", kind=TIME, spread=SPREAD,
              paper=f"{REPORT_SHARE:.0f}% of the T4's", short="share of peak"),
        Claim("toy_cnn.tiling", "shared-memory tiling speeds the fused layer up by the report's factor (V1 over V0)",
              lambda d: _best(d)["v0"]["time_ms"] / _best(d)["v1"]["time_ms"], REPORT_GAIN, spread=SPREAD,
              paper=f"{REPORT_GAIN:.2f}x (T4)"),
        Claim("toy_cnn.v5", "our fused layer (V5) is faster than the best library layer",
              lambda d: _best(d)["library"]["time_ms"] / _best(d)["tiled"]["time_ms"], 1.0, spread=SPREAD,
              short="ours against the library"),
    ]  # fmt: skip
