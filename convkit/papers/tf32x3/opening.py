"""The 3xTF32 chapter's opening and the book's findings row: the numbers both state (:func:`headline`), the result
box's lines, with the kernels on Hopper's wgmma where the run recorded them and a verdict that follows the numbers
(:func:`result_lines`), and the findings row (:func:`findings`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from convkit.core.reference import DIRECT_TOLERANCE
from convkit.families.tf32x3 import WGMMA
from convkit.papers.tf32x3.accuracy import ERROR_K, accuracy_medians, direct_medians
from convkit.papers.tf32x3.results import (
    IGEMM,
    LARGE_GFLOP,
    TF32X3,
    chapter_tables,
    direct_bound,
    direct_errors,
    large_median,
    on_wgmma,
)
from convkit.study import tables


def headline(t: dict[str, Any]) -> dict[str, Any]:
    """The numbers the chapter's result box and the book's findings row both state (:func:`chapter_tables`' ``t``):
    our direct 3xTF32 kernels' (the faster per layer: ``direct``), the mma.sync one's (``mma``), the Hopper
    family's (``hopper``, NaN where the run has none), the FP32 implicit GEMM's, CUTLASS's 3xTF32 and the best
    library's median TFLOP/s on cuConv's large layers, the share faster and geometric-mean speed-up on cuConv's
    layers (with 3xTF32 and the FP32 kernels alone), and the median errors for K >= :data:`ERROR_K` (``error``: the
    larger of our two direct kernels' where the accuracy run has both, ``error_of_both``)."""
    cuconv = t["cuconv"]
    mine, simt_err = accuracy_medians(t["accuracy"])
    hopper = large_median(cuconv, "hopper_us") if on_wgmma(cuconv) else math.nan
    return {"direct": large_median(cuconv, "direct_us"), "mma": large_median(cuconv, f"{TF32X3}_us"),
            "hopper": hopper, "simt": large_median(cuconv, f"{IGEMM}_us"),
            "cutlass": large_median(cuconv, "cutlass_tf32x3_us"), "library": large_median(cuconv, "best_lib_us"),
            "share": tables.share_faster(cuconv["speedup"]), "geomean": tables.geomean(cuconv["speedup"]),
            "fp32_share": tables.share_faster(cuconv["fp32_speedup"]), "layers": len(cuconv),
            "error": mine, "fp32_error": simt_err,
            "error_of_both": WGMMA in direct_medians(t["accuracy"])}  # fmt: skip


def _direct_words(h: dict[str, Any]) -> str:
    """What :func:`headline`'s ``direct`` measures: the mma.sync kernel, or with the wgmma one the faster per layer."""
    return "3xTF32 implicit GEMM" if math.isnan(h["hopper"]) else "direct 3xTF32 kernels (the faster per layer)"


def result_lines(t: dict[str, Any]) -> list[str]:
    """The chapter's opening: what was attempted, what it reached, the bound that limits it, every number from the
    results (those of the findings row from :func:`headline`); the kernels on Hopper's wgmma where the run recorded
    them, and a verdict that follows the numbers."""
    ceilings, h = t["ceilings"], headline(t)
    direct, mma, simt, cutlass, hopper = h["direct"], h["mma"], h["simt"], h["cutlass"], h["hopper"]
    bound, bound_is = direct_bound(t)
    errors = direct_errors(t)
    worst = float(errors["rel_err"].astype(float).max()) if len(errors) else math.nan
    has_hopper = not math.isnan(hopper)
    wgmma = ""
    if has_hopper:  # the Hopper family's median, and the direct kernels' (mma.sync or wgmma, the faster per layer)
        wgmma = (f" On Hopper's own tensor-core instruction, wgmma, our kernels reach {hopper:.1f} TFLOP/s (Winograd's "
                 f"rate effective), and the faster of our two direct kernels per layer {direct:.1f}.")  # fmt: skip
    accuracy = (f"FP32 accuracy on tensor cores {'holds' if worst <= DIRECT_TOLERANCE else 'does not hold'} (the "
                f"largest error of {len(errors):,} checked runs {worst:.1e})")  # fmt: skip
    if h["geomean"] >= 1 and direct >= cutlass:
        speed = (f", and so does its speed: our direct kernels run the large layers at {direct:.1f} TFLOP/s, "
                 f"{100 * direct / bound:.0f}% of the 3xTF32 bound ({bound:.0f} TFLOP/s, {bound_is}) and "
                 f"{direct / cutlass:.2f}x CUTLASS's 3xTF32 rate, and our kernels beat the best FP32 library by "
                 f"{h['geomean']:.2f}x on cuConv's problems (geometric mean).")  # fmt: skip
    else:
        speed = (f"; its speed does not: {direct:.1f} TFLOP/s is {100 * direct / bound:.0f}% of the 3xTF32 bound "
                 f"({bound:.0f} TFLOP/s, {bound_is})")  # fmt: skip
        speed += ", short of the library's transforms on the large layers" if direct < h["library"] else ""
        same = "on the same instruction " if not has_hopper else "(on mma.sync) "
        speed += f", and CUTLASS's kernel {same}is {cutlass / direct:.2f}x faster." if cutlass > direct else "."
    errors_words = ""  # where the run has the accuracy experiment (a quick run has not)
    if not math.isnan(h["error"]):
        whose = "The larger of our two direct kernels' median errors" if h["error_of_both"] else "Its median error"
        errors_words = (f" {whose} for K >= {ERROR_K} is {h['error']:.2e} against the FP32 kernel's "
                        f"{h['fp32_error']:.2e}.")  # fmt: skip
    return [
        f"**Question**: can FP32 accuracy run at tensor-core speed? Every product split into TF32 halves, three "
        "tensor-core products in place of one FP32 product, measured against the FP32 CUDA-core ceiling "
        f"({ceilings['sgemm_tflops']:.1f} TFLOP/s, cuBLAS SGEMM) that held the FP32 kernels at {simt:.1f} TFLOP/s "
        "(the FP32 implicit GEMM measured again in this chapter's run, beside the 3xTF32 kernel; the FP32 "
        "chapter's figures come from that chapter's own run).",
        f"**Measured ({t['gpu']})**: the 3xTF32 implicit GEMM runs cuConv's large layers (>= "
        f"{LARGE_GFLOP:.0f} GFLOP, direct method) at a median {mma:.1f} TFLOP/s "
        f"({mma / simt:.2f}x the FP32 implicit GEMM's rate; CUTLASS's 3xTF32 {cutlass:.1f}; the best FP32 library "
        f"{h['library']:.1f} TFLOP/s effective, with its FFT and Winograd).{wgmma} With {'them' if wgmma else 'it'}, "
        f"our kernels beat the best FP32 library on {h['share']:.1f}% of cuConv's {h['layers']} problems "
        f"(geometric-mean speed-up {h['geomean']:.2f}x; the FP32 kernels alone, in this run: "
        f"{h['fp32_share']:.1f}%).{errors_words}",
        f"**Verdict**: {accuracy}{speed}",
    ]  # fmt: skip


#: The MyST label of the chapter's section that the findings row refers to.
SECTION = "tf32x3-cuconv"


def findings(directory: Path) -> list[dict[str, str]]:
    """The book's findings row of this chapter (:data:`convkit.papers.paper.FINDING_COLUMNS`, and ``section``: the
    label of the section that shows it), its numbers from :func:`headline` as the result box's."""
    from convkit.study.roofline import recorded_ceilings

    h = headline(chapter_tables(directory, recorded_ceilings(directory)))
    return [{
        "paper": "FP32 accuracy on tensor cores", "claim": "3xTF32 keeps FP32 accuracy at tensor-core speed",
        "paper's number": "(CUTLASS's fast accurate FP32; Ootomo & Yokota 2022)",
        "paper's design on the H100": f"CUTLASS 3xTF32 (NHWC): {h['cutlass']:.1f} TFLOP/s on layers >= "
                                      f"{LARGE_GFLOP:.0f} GFLOP",
        "our best on the H100": f"faster on {h['share']:.1f}% of cuConv's problems, {h['geomean']:.2f}x",
        "best library on the H100": "cuDNN (FFT, Winograd, implicit GEMM) in FMA math, PyTorch's autotuned cuDNN, "
                                    "and cuBLAS SGEMM on 1x1",
        "efficiency": f"{_direct_words(h)} {h['direct']:.1f} TFLOP/s on layers >= {LARGE_GFLOP:.0f} GFLOP, "
                      f"error {h['error']:.2e} (median, K >= {ERROR_K})",
        "what changed": "the products on TF32 tensor cores, each operand split in two, sums kept per 16-deep slice",
        "section": SECTION, "claims": ("tf32x3.error", "tf32x3.speed", "tf32x3.cutlass"),
    }]  # fmt: skip
