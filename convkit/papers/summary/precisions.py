"""Where FP32 stands: cuDNN (through PyTorch) in TF32 and FP16 on the large layers, ``results/<gpu>/precisions.csv``.

The study is FP32 throughout; inference usually runs in TF32 or FP16 on tensor cores. This measures PyTorch's
autotuned cuDNN on cuConv's layers of at least :data:`MIN_GFLOP` GFLOP in three precisions in one run
(``fp32`` with TF32 off, ``tf32``, ``fp16`` with FP16 inputs and filters), so the summary chapter can draw
the two reduced precisions as reference lines beside the FP32 kernels. Each row's error against a float64
convolution is recorded, not held to the FP32 bars: it is what the precision costs.
"""

from __future__ import annotations

from typing import Any

from convkit.core.problem import ConvProblem
from convkit.op.cases import Case
from convkit.op.interop import cupy_stream
from convkit.study.sweep import fixed_sweep

EXPERIMENT = "precisions"
#: The layers measured: cuConv's of at least this many GFLOP (direct-method count), the FP32 chapter's large set.
MIN_GFLOP = 20.0
PRECISIONS = ("fp32", "tf32", "fp16")
CASES = [Case("pytorch", precision) for precision in PRECISIONS]
TIMING: dict[str, Any] = {"warmup": 2, "min_reps": 5, "max_reps": 100, "budget_ms": 50.0}


def layers() -> list[ConvProblem]:
    """cuConv's layers of at least :data:`MIN_GFLOP` GFLOP."""
    from convkit.papers import paper

    return [p for p in paper("cuconv").problems(False) if p.flops >= MIN_GFLOP * 1e9]


def measure_rows(problem: ConvProblem, todo: list[Case]) -> list[dict[str, Any]]:
    """``todo``'s precisions on ``problem``: PyTorch's autotuned cuDNN, timed as every study row is."""
    import torch

    from convkit.bench.rows import make_row
    from convkit.cuda.timing import CudaEventClock, benchmark

    torch.backends.cudnn.benchmark = True
    x = torch.randn(problem.input_shape, device="cuda")
    w = torch.randn(problem.filter_shape, device="cuda")
    s, p = problem.stride, problem.pad
    with torch.no_grad():
        ref = torch.nn.functional.conv2d(x.double(), w.double(), stride=s, padding=p)
        rows = []
        for case in todo:
            half = case.variant == "fp16"
            xs, ws = (x.half(), w.half()) if half else (x, w)
            torch.backends.cudnn.allow_tf32 = case.variant == "tf32"

            def call(xs: Any = xs, ws: Any = ws) -> Any:
                return torch.nn.functional.conv2d(xs, ws, stride=s, padding=p)

            err = float((call().double() - ref).norm() / ref.norm())
            with cupy_stream():
                timing = benchmark(call, clock=CudaEventClock(), **TIMING)
            rows.append(make_row(problem, case, status="ok", timing=timing, rel_err=err,
                                 note="reduced precision: error reported, not held to the FP32 bars"))  # fmt: skip
        torch.backends.cudnn.allow_tf32 = False
    return rows


#: Measure ``problems`` (default :func:`layers`) into ``<directory>/<experiment>.csv``, resuming.
measure = fixed_sweep(EXPERIMENT, layers, CASES, measure_rows)


if __name__ == "__main__":  # python -m convkit.papers.summary.precisions
    measure()
