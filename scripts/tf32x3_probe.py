"""A look at the 3xTF32 kernel while it is developed (prints; records nothing): on a few network layers, every
launch candidate of igemm_tf32x3 and fp32_igemm beside every cuDNN algorithm, PyTorch (TF32 off), cuBLAS and
CUTLASS (its 3xTF32 and SIMT kernels, NHWC, the layout transforms untimed; with the nvidia-cutlass wheel),
checked against float64 and timed as the sweeps time them, the fastest of each with its launch's knobs; then the
error of both kernels as K = 9 C grows, on the accuracy experiment's kinds of input.
Run on a GPU from the repository root:
    PYTHONPATH=$PWD python3 scripts/tf32x3_probe.py
"""

from __future__ import annotations

from convkit.bench.measure import measure_problem
from convkit.core import reference
from convkit.core.problem import ConvProblem
from convkit.families import fp32, tf32x3
from convkit.families.fp32.launch import candidates, conv2d_implicit_gemm
from convkit.families.registry import Kernels
from convkit.families.tf32x3.launch import conv2d_tf32x3, launch_candidates
from convkit.libs import cutlass
from convkit.op.cases import Case, cases, params_text

LAYERS = (
    ConvProblem.same(16, 256, 56, 56, 256, 3), ConvProblem.same(32, 256, 56, 56, 256, 3),
    ConvProblem.same(16, 512, 28, 28, 512, 3), ConvProblem.same(16, 1024, 14, 14, 256, 1),
    ConvProblem.same(1, 832, 7, 7, 256, 1), ConvProblem.same(8, 48, 7, 7, 128, 5),
)  # fmt: skip
TIMING = {"warmup": 3, "min_reps": 10, "max_reps": 100, "budget_ms": 30.0}


def speeds() -> None:
    kernels = Kernels(tf32x3.VARIANTS + fp32.VARIANTS, fp32.PEERS + cutlass.PEERS)
    for p in LAYERS:
        todo = [Case("convkit", tf32x3.IGEMM, params_text(k.to_params())) for k in launch_candidates(p)]
        todo += [Case("convkit", fp32.IGEMM, params_text(k.to_params())) for k in candidates(p)]
        todo += cases(p, (), cudnn=True, pytorch=True, peers=fp32.PEERS + cutlass.PEERS)
        gflop = 2 * p.n * p.m * p.c * p.r * p.s * p.out_h * p.out_w / 1e9
        best: dict[str, tuple[float, float]] = {}
        for row in measure_problem(p, todo, kernels, timing=TIMING):
            if row["status"] == "ok":
                name = row["variant"] if row["impl"] == "convkit" else row["impl"]
                us = 1e3 * float(row["time_ms_median"])
                if name not in best or us < best[name][0]:
                    best[name] = (us, float(row["rel_err"]), row["params"] if row["impl"] == "convkit" else "")
        print(f"{p.label}: {gflop:.2f} GFLOP")
        for name, (us, err, params) in sorted(best.items(), key=lambda item: item[1][0]):
            print(f"    {name:14s} {us:9.1f} us {gflop / us * 1e3:7.1f} TFLOP/s  error {err:.1e}  {params}")


def errors() -> None:
    from convkit.papers.tf32x3.accuracy import INPUTS, make_inputs

    for c in (32, 128, 512, 1024):
        p = ConvProblem.same(2, c, 24, 24, 64, 3)
        for seed, inputs in enumerate(INPUTS):
            x, w = make_inputs(p, inputs, seed)
            ref = reference.conv2d(x.get(), w.get(), pad=1)
            mine = reference.relative_error(conv2d_tf32x3(x, w, pad=1).get(), ref)
            simt = reference.relative_error(conv2d_implicit_gemm(x, w, pad=1).get(), ref)
            print(f"K = {9 * c:5d}, {inputs:13s}: 3xTF32 {mine:.2e}, FP32 SIMT {simt:.2e}")


if __name__ == "__main__":
    speeds()
    errors()
