"""The 3xTF32 chapter's ncu profile: which layers and kernels it takes (CUTLASS at its 128 x 128 tiles and at its
fastest 3xTF32 tile of each profiled layer in the recorded sweep), its table, and the note that says which CUTLASS
tiles its rows are."""

from __future__ import annotations

from typing import Any

from convkit.core.problem import ConvProblem
from convkit.libs import cutlass
from convkit.papers.tf32x3.results import CUTLASS_NAMES, NAMES
from convkit.study import tables

#: The ncu profile: three of the FP32 chapter's compute-bound network layers and (from the recorded sweep) the best
#: and the worst of cuConv's layers of at least 1 GFLOP for the 3xTF32 kernel against the best library; our
#: kernels at their tuned launches, cuBLAS and CUTLASS's 128x128 kernels and fastest 3xTF32 tiles (cuDNN's
#: algorithms are the FP32 chapter's profile).
PROFILE_PROBLEMS: tuple[tuple[str, ConvProblem], ...] = (
    ("1x1, batch 64 (ResNet-50 res4)", ConvProblem.same(64, 1024, 14, 14, 256, 1)),
    ("3x3, batch 32 (VGG19 conv3)", ConvProblem.same(32, 256, 56, 56, 256, 3)),
    ("5x5, batch 64 (AlexNet conv2)", ConvProblem.same(64, 96, 27, 27, 256, 5)),
)
#: CUTLASS's kernels the profile always takes (one tile of each precision); it takes too the fastest 3xTF32 tile of
#: each profiled layer in the recorded sweep (:func:`fastest_cutlass_tiles`).
PROFILED_PEERS = ("cutlass_tf32x3_128x128", "cutlass_simt_128x128")


def fastest_cutlass_tiles(sweep: Any) -> dict[str, str]:
    """Per profiled layer's label (:data:`PROFILE_PROBLEMS`), CUTLASS's fastest 3xTF32 tile in the recorded
    ``sweep`` (pandas; none where the sweep did not run CUTLASS there)."""
    if sweep.empty:
        return {}
    ok = tables.timed(sweep)
    rows = ok[(ok["impl"] == cutlass.IMPL) & ok["variant"].str.contains("tf32x3")]
    out = {}
    for _, problem in PROFILE_PROBLEMS:
        mine = rows[
            (rows["label"] == problem.label) & (rows["pad"] == problem.pad) & (rows["stride"] == problem.stride)
        ]
        if len(mine):
            out[problem.label] = str(mine.loc[mine["us"].idxmin(), "variant"])
    return out


#: A kernel's tensor instructions: wgmma's where it issued any (Hopper), else mma.sync's (HMMA).
TENSOR_INSTRUCTIONS = "tensor_instructions"


def profile_table(kernels: Any) -> Any:
    """Per profiled layer and implementation, its longest kernel: time, tensor-pipe use, issue-slot use, the
    tensor instructions' share (:data:`TENSOR_INSTRUCTIONS`), achieved occupancy, shared-memory bank conflicts and
    the two leading stalls."""
    import pandas as pd

    # (a count the profile lacks, recorded before it was asked for or not on Hopper, reads NaN)
    counts = kernels.reindex(columns=[f"smsp__inst_executed_pipe_tensor_op_{op}_sum" for op in ("hmma", "gmma")])
    hmma, gmma = (pd.to_numeric(counts[column], errors="coerce") for column in counts)
    tensor = gmma.where(gmma > 0, hmma)
    pipe = "sm__pipe_tensor_op_hmma_cycles_active_avg_pct_of_peak_sustained_active"
    return tables.profile_table(kernels.assign(**{TENSOR_INSTRUCTIONS: tensor}), NAMES, pipe, TENSOR_INSTRUCTIONS,
                                "tensor")  # fmt: skip


def profile_tables(kernels: Any) -> tuple[Any, Any]:
    """:func:`profile_table` in two, each narrow enough for a page: where the time goes (time, tensor pipe, issue
    slots, the tensor instructions' share, the leading stalls) and what each kernel holds
    (:func:`convkit.study.tables.profile_resources`: registers, threads, warps active, bank conflicts)."""
    compute = profile_table(kernels).drop(columns=["warps active %", "bank conflicts (loads)"])
    return compute, tables.profile_resources(kernels, NAMES)


def on_tensor_cores(table: Any) -> Any:
    """The rows of ``table`` (indexed by layer and implementation) of the 3xTF32 kernels, ours and CUTLASS's."""
    names = {NAMES[v] for v in NAMES if "tf32x3" in v}
    return table[table.index.get_level_values("implementation").isin(names)]


def profiled_cutlass_note(t: dict[str, Any]) -> str:
    """A sentence on the CUTLASS tiles the profile took on the profiled network layers: the 128 x 128 tile
    (:data:`PROFILED_PEERS`), how much slower the sweep found it than CUTLASS's fastest tile there, and whether the
    profile took that fastest tile too (:func:`fastest_cutlass_tiles`); empty where the sweep or the profile is
    missing."""
    if t["sweep"].empty or t["kernels"].empty:
        return ""
    ok = tables.timed(t["sweep"])
    always = next(name for name in PROFILED_PEERS if "tf32x3" in name)
    fastest = fastest_cutlass_tiles(t["sweep"])
    took = set(t["kernels"]["variant"])
    ratios = []
    for _, problem in PROFILE_PROBLEMS:
        rows = ok[(ok["label"] == problem.label) & (ok["impl"] == "cutlass") & ok["variant"].str.contains("tf32x3")]
        if len(rows) and (rows["variant"] == always).any():
            ratios.append(float(rows.loc[rows["variant"] == always, "us"].iloc[0] / rows["us"].min()))
    if not ratios:
        return ""
    tile = CUTLASS_NAMES[always].split(", ")[1]
    text = (f"CUTLASS's 3xTF32 kernel was profiled at its {tile} tile, which the sweep found {min(ratios):.1f}x to "
            f"{max(ratios):.1f}x slower than CUTLASS's fastest tile on these layers")  # fmt: skip
    profiled = sorted({v for v in fastest.values() if v in took and v != always})
    if not profiled:
        return text + ": its rows show how that tile spends its time, not how CUTLASS's fastest does."
    named = " and ".join(CUTLASS_NAMES[v].split(", ")[1] for v in profiled)
    return text + f"; CUTLASS's fastest tiles on these layers ({named}) were profiled beside it."
