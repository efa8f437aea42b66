"""The accuracy experiment of the 3xTF32 chapter (``tf32x3_accuracy.csv``): error against float64 as K = C*R*S
grows, for every precision a convolution can be computed in, on inputs chosen to be hard.

On each problem (:func:`problems`: 3x3 layers with K from 9 to 9216, 1x1 layers with K up to 4096, and a sample of
the study's layers) and each kind of input (:data:`INPUTS`), one run checks against the float64 convolution of
the same inputs: our FP32 implicit GEMM and our 3xTF32 kernel at their heuristic launches, every cuDNN forward
algorithm in FMA math, CUTLASS's kernels where they run, and PyTorch's cuDNN in FP32 (TF32 off), in TF32 and in
FP16. FP32 and 3xTF32 rows are held to their bars (a row over its bar is recorded ``wrong``); TF32 and FP16 rows
record their error only, as reference lines. No time is taken: :mod:`convkit.papers.tf32x3` times.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from convkit.bench.measure import CHECK_ONLY, check_and_time
from convkit.core.problem import ConvProblem
from convkit.families import fp32, tf32x3
from convkit.families.fp32 import IGEMM
from convkit.families.registry import Kernels
from convkit.families.tf32x3 import IGEMM as TF32X3
from convkit.families.tf32x3 import WGMMA
from convkit.libs import cutlass
from convkit.op.cases import Case, float64_reference, params_text, prepare_case
from convkit.study import tables
from convkit.study.layer_sets import three_chapter_problems
from convkit.study.sweep import run_sweep

EXPERIMENT = "tf32x3_accuracy"
#: The inputs each problem is checked on: standard normal; every value's 13 bits below TF32's on the rounding tie
#: (each split rounds away from zero); magnitudes spread over 2^-16 .. 2^16; all positive (no cancellation, so
#: a biased rounding shows); the inputs near the bottom of FP32's range (about 1e-35, the weights about 1), where each
#: input's small part is subnormal (a tensor core that flushed it would lose it). The GPU tests check every 3xTF32
#: kernel on all but the first (``tests/test_tf32x3_gpu.py``).
INPUTS = ("normal", "rounding ties", "wide range", "all positive", "near underflow")
#: PyTorch's precisions beside the kernels: FP32 (TF32 off), then the two reference lines.
TORCH_PRECISIONS = ("fp32", "tf32", "fp16")
#: Our direct kernels (the wgmma one where the GPU is Hopper) and CUTLASS's.
KERNELS = Kernels((fp32.IGEMM_VARIANT, tf32x3.IGEMM_VARIANT, tf32x3.WGMMA_VARIANT), cutlass.PEERS)
#: K = C*R*S from which the error of the 3xTF32 kernel is held to the FP32 kernel's.
ERROR_K = 256
#: cuDNN's direct forward algorithms (the others transform: FFT and Winograd).
CUDNN_DIRECT = ("IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT")
#: Implementations whose errors match cuDNN's direct algorithms to the digit on the K sweep (the same kernels, or
#: the same order of sums): left out of the figure, listed in the tables.
SAME_AS_CUDNN = ("PyTorch FP32", "CUTLASS FP32")
#: The accuracy experiment's implementations as the book names them (impl, variant) -> name; CUTLASS by precision.
ERROR_NAMES = {("convkit", IGEMM): "FP32 implicit GEMM (ours)", ("convkit", TF32X3): "3xTF32 implicit GEMM (ours)",
               ("convkit", WGMMA): "3xTF32 implicit GEMM on wgmma (ours)", ("pytorch", "fp32"): "PyTorch FP32",
               ("pytorch", "tf32"): "PyTorch TF32", ("pytorch", "fp16"): "PyTorch FP16"}  # fmt: skip
#: Every STUDY_STEP-th of the three chapters' problems joins the K sweep.
STUDY_STEP = 20


def problems() -> list[ConvProblem]:
    """3x3 "same" layers with C from 1 to 1024 (K = 9 .. 9216), 1x1 layers with C of 256, 1024 and 4096, then a
    sample of the three chapters' problems."""
    sweep = [ConvProblem.same(2, c, 24, 24, 64, 3) for c in (1, 4, 16, 32, 64, 128, 256, 512, 1024)]
    sweep += [ConvProblem.same(2, c, 24, 24, 64, 1) for c in (256, 1024, 4096)]
    return sweep + three_chapter_problems()[::STUDY_STEP]


def cases(problem: ConvProblem) -> list[Case]:
    """Per kind of input: our kernels at their heuristic launches (:data:`KERNELS`, each where it runs), every cuDNN
    algorithm, every CUTLASS kernel that runs ``problem``, and PyTorch in each of :data:`TORCH_PRECISIONS`."""
    from convkit.libs.cudnn import FORWARD_ALGORITHMS

    out = []
    for inputs in INPUTS:
        kind = {"inputs": inputs}
        out += [Case("convkit", v.name, params_text(kind | v.knobs(problem))) for v in KERNELS.variants
                if v.supports(problem)]  # fmt: skip
        out += [Case("cudnn", algo, params_text(kind)) for algo in FORWARD_ALGORITHMS]
        out += [Case(cutlass.IMPL, peer.name, params_text(kind)) for peer in KERNELS.peers if peer.supports(problem)]
        out += [Case("pytorch", precision, params_text(kind)) for precision in TORCH_PRECISIONS]
    return out


def make_inputs(problem: ConvProblem, inputs: str, seed: int, xp: Any = None) -> tuple[Any, Any]:
    """``x`` and ``w`` (float32) of one kind of :data:`INPUTS`, as arrays of ``xp`` (CuPy unless given: NumPy
    for the CPU models)."""
    if xp is None:
        import cupy as xp

    rng = xp.random.default_rng(seed)
    x = rng.standard_normal(problem.input_shape, dtype=xp.float32)
    w = rng.standard_normal(problem.filter_shape, dtype=xp.float32)
    if inputs == "rounding ties":
        x, w = (((a.view(xp.uint32) & ~xp.uint32(0x1FFF)) | xp.uint32(0x1000)).view(xp.float32) for a in (x, w))
    elif inputs == "wide range":
        x, w = (a * xp.exp2(rng.integers(-16, 17, a.shape)).astype(xp.float32) for a in (x, w))
    elif inputs == "all positive":
        x, w = xp.abs(x), xp.abs(w)
    elif inputs == "near underflow":
        x = x * xp.float32(1e-35)
    return x, w


def _torch_prepare(problem: ConvProblem, precision: str, x: Any, w: Any, y: Any) -> Callable[[], Any]:
    """(run, check_run) of PyTorch's cuDNN in ``precision`` writing ``y`` (FP16 computes from FP16 copies)."""

    def prepare() -> Any:
        import cupy
        import torch

        xt, wt = torch.from_dlpack(x), torch.from_dlpack(w)
        if precision == "fp16":
            xt, wt = xt.half(), wt.half()

        def call() -> Any:
            torch.backends.cudnn.allow_tf32 = precision == "tf32"
            try:
                with torch.no_grad():
                    return torch.nn.functional.conv2d(xt, wt, stride=problem.stride, padding=problem.pad)
            finally:
                torch.backends.cudnn.allow_tf32 = False

        return call, lambda: cupy.copyto(y, cupy.from_dlpack(call().float()))

    return prepare


def measure_rows(problem: ConvProblem, todo: list[Case], *, seed: int = 0) -> Iterator[dict[str, Any]]:
    """Check ``todo`` on ``problem``: per kind of input, fresh inputs and their float64 reference, then each case's
    poisoned output against it (TF32 and FP16 recorded, not held to a bar)."""
    import cupy

    by_inputs: dict[str, list[Case]] = {}
    for case in todo:
        by_inputs.setdefault(json.loads(case.params)["inputs"], []).append(case)
    for index, (inputs, group) in enumerate(by_inputs.items()):
        x, w = make_inputs(problem, inputs, seed + index)
        ref = float64_reference(problem, x, w)
        y = cupy.empty(problem.output_shape, dtype=cupy.float32)
        for case in group:
            knobs = {k: v for k, v in json.loads(case.params).items() if k != "inputs"}
            bare = Case(case.impl, case.variant, params_text(knobs))
            reduced = case.impl == "pytorch" and case.variant != "fp32"
            if case.impl == "pytorch":
                prepare, tolerance = _torch_prepare(problem, case.variant, x, w, y), float("inf") if reduced else None
            else:
                prepare, tolerance = prepare_case(problem, bare, KERNELS, x, w, y), None
            row = check_and_time(problem, bare, prepare, y, ref, CHECK_ONLY, tolerance=tolerance)
            note = "reduced precision: error reported, not held to the FP32 bars" if reduced else row["note"]
            yield row | {"params": case.params, "note": note}
        cupy.get_default_memory_pool().free_all_blocks()


def measure(directory: Path | None = None, *, progress: Callable[[str], None] | None = print) -> Path:
    """:func:`problems` x :func:`cases` into ``<directory>/tf32x3_accuracy.csv`` (default ``results/<this GPU>``),
    resuming."""
    return run_sweep(EXPERIMENT, problems(), cases, measure_rows, directory=directory, progress=progress)


# The experiment's tables (the chapter's notebook shows them)


def accuracy_frame(accuracy: Any) -> Any:
    """The accuracy experiment's checked rows with K = C*R*S, the kind of input and the implementation's name
    (CUTLASS's kernels by precision, cuDNN's algorithms each)."""
    import pandas as pd

    if accuracy.empty:
        return pd.DataFrame(columns=["label", "K", "inputs", "method", "impl", "variant", "rel_err", "status"])
    ok = accuracy[accuracy["status"].isin(("ok", "wrong"))].copy()
    ok["K"] = ok["C"].astype(int) * ok["R"].astype(int) * ok["S"].astype(int)
    ok["inputs"] = [json.loads(p)["inputs"] for p in ok["params"]]
    ok["rel_err"] = ok["rel_err"].astype(float)

    def name(impl: str, variant: str) -> str:
        if impl == "cutlass":
            return "CUTLASS 3xTF32" if "tf32x3" in variant else "CUTLASS FP32"
        if impl == "cudnn":
            return tables.library_name(variant)
        return ERROR_NAMES.get((impl, variant), f"{impl} {variant}")

    ok["method"] = [name(i, v) for i, v in zip(ok["impl"], ok["variant"], strict=True)]
    return ok


def direct_medians(accuracy: Any, inputs: str = "normal") -> dict[str, float]:
    """Median error for K >= :data:`ERROR_K` on ``inputs`` of each of our direct kernels the run checked there (the
    FP32 implicit GEMM, the mma.sync and the wgmma 3xTF32 ones), by variant."""
    if accuracy.empty:
        return {}
    a = accuracy_frame(accuracy)
    a = a[(a["K"] >= ERROR_K) & (a["inputs"] == inputs)]
    medians = {v: float(a.loc[a["method"] == ERROR_NAMES[("convkit", v)], "rel_err"].median()) for v in
               (IGEMM, TF32X3, WGMMA)}  # fmt: skip
    return {v: m for v, m in medians.items() if not math.isnan(m)}


def accuracy_medians(accuracy: Any, inputs: str = "normal") -> tuple[float, float]:
    """Median error for K >= :data:`ERROR_K` on ``inputs`` of our direct 3xTF32 kernels (the larger of the two
    medians where the run has the wgmma one: :func:`direct_medians`) and of the FP32 implicit GEMM."""
    medians = direct_medians(accuracy, inputs)
    ours = [medians[v] for v in (TF32X3, WGMMA) if v in medians]
    return max(ours, default=math.nan), medians.get(IGEMM, math.nan)


def error_by_k(accuracy: Any, k_sweep: list[Any]) -> dict[str, Any]:
    """Per kind of input, error against float64 by K (columns) and implementation (rows) on the K sweep's 3x3
    problems ``k_sweep`` (CUTLASS's kernels and cuDNN's direct algorithms: the median over them; its transforms
    are held to another bar)."""
    a = accuracy_frame(accuracy)
    labels = {p.label for p in k_sweep}
    a = a[a["label"].isin(labels)]
    direct = a["method"].isin([tables.library_name(algo) for algo in CUDNN_DIRECT])
    a = a[(direct | ~a["method"].str.startswith("cuDNN")) & ~a["method"].isin(SAME_AS_CUDNN)]
    a.loc[direct, "method"] = "cuDNN FP32, direct algorithms (median)"
    return {inputs: g.pivot_table(index="method", columns="K", values="rel_err", aggfunc="median")
            for inputs, g in a.groupby("inputs", sort=False)}  # fmt: skip


def error_summary(accuracy: Any, statistic: str = "median") -> Any:
    """Per implementation (rows) and kind of input (columns), over every problem with K >= :data:`ERROR_K`: the
    ``statistic`` ("median" or "max") of the error against float64 (the study's layers included), as text of three
    significant digits; "overflows" where the output was not finite (FP16 past 65,504)."""
    a = accuracy_frame(accuracy)
    a = a[a["K"] >= ERROR_K]
    out = a.groupby(["method", "inputs"], sort=False)["rel_err"].agg(statistic).unstack("inputs")
    return out.map(lambda v: "overflows" if v != v else f"{v:.2e}")[[i for i in INPUTS if i in out.columns]]
