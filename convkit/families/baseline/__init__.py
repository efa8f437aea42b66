"""The baseline's kernel (``kernels/direct.cu``): one thread per output, the plain direct convolution."""

from __future__ import annotations

from convkit.core.problem import ConvProblem
from convkit.cuda.operands import ConvArgs
from convkit.families.baseline.launch import DEFAULT_THREADS, DirectLaunch, conv2d_direct
from convkit.families.registry import Family, Variant, called_when_run


def _direct(a: ConvArgs, p: ConvProblem, launch: DirectLaunch) -> None:
    conv2d_direct(a.x, a.w, pad=p.pad, stride=p.stride, out=a.out, launch=launch)


#: The direct kernel at its one launch (no tuning).
DIRECT = Variant("direct", _direct, default=lambda p: DirectLaunch(DEFAULT_THREADS),
                 launch_from=DirectLaunch.from_params)  # fmt: skip

#: Each variant's method in words: the book's one name for it.
WORDS = {
    "direct": "direct (baseline)",
}

#: Small problems the generic GPU test checks every variant on: odd sizes, C = 1, M = 1, an input smaller than the
#: filter with padding, stride 2, non-square filters, a 1x1 layer of many channels.
SAMPLE_PROBLEMS = (
    ConvProblem(1, 3, 17, 23, 5, 3, 3, pad=1), ConvProblem(2, 1, 31, 29, 7, 5, 5, pad=2),
    ConvProblem(1, 16, 9, 9, 1, 1, 1), ConvProblem(3, 5, 2, 3, 4, 5, 5, pad=2),
    ConvProblem(1, 7, 13, 11, 6, 3, 5, pad=1, stride=2), ConvProblem(2, 4, 1, 1, 3, 3, 3, pad=1),
    ConvProblem(1, 832, 7, 7, 32, 1, 1),
)  # fmt: skip


FAMILY = Family(
    "baseline",
    (DIRECT,),
    sources=("direct",),
    words=WORDS,
    sample_problems=SAMPLE_PROBLEMS,
    edge_check=called_when_run(f"{__name__}.edges", "edge_check"),
)
