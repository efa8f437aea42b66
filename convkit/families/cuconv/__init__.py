"""cuConv's kernels (``kernels/cuconv.cu``): convolution as scalar products read in place, and past it.

The paper's two-stage design and three steps past it (``cuconv_paper``, ``_fused``, ``_split``, ``_tiled``),
each with the launches a tuning run chooses among (:mod:`.launch`).
"""

from __future__ import annotations

from convkit.core.gpu import sm_count
from convkit.core.problem import ConvProblem
from convkit.cuda.operands import ConvArgs
from convkit.families.cuconv import launch
from convkit.families.registry import Family, Variant, called_when_run


def _variant(variant: str) -> Variant:
    """``cuconv_<variant>``: the heuristic's launch by default, the candidates a tuning run measures."""
    name = f"cuconv_{variant}"

    def run(a: ConvArgs, p: ConvProblem, spec: launch.CuconvLaunch) -> None:
        launch.conv2d_cuconv(a.x, a.w, pad=p.pad, stride=p.stride, launch=spec, out=a.out, bias=a.bias,
                             workspace=a.workspace)  # fmt: skip

    return Variant(
        name,
        run,
        default=lambda p: launch.default_knobs(p, variant, sm_count()),
        candidates=lambda p: launch.candidates(p, variant, sm_count()),
        launch_from=lambda params: launch.CuconvLaunch.from_params(params, variant=variant),
    )


#: The chapter's ladder: the paper's design, then each step past it.
CUCONV_VARIANTS: tuple[Variant, ...] = tuple(_variant(v) for v in launch.VARIANTS)

#: Each variant's method in words: the book's one name for it.
WORDS = {
    "cuconv_paper": "cuConv's two stages",
    "cuconv_fused": "cuConv, filters fused",
    "cuconv_split": "cuConv, split reduction",
    "cuconv_tiled": "register-tiled GEMM",
}

#: Small problems the generic GPU test checks every variant on: 1x1, 3x3 and 5x5 layers of the networks' kind, an
#: odd batch and sizes, an input smaller than the filter, stride 2 (not in the paper, supported).
SAMPLE_PROBLEMS = (
    ConvProblem.from_label("7-1-1-32-832"), ConvProblem.from_label("13-2-3-48-17"),
    ConvProblem.from_label("9-3-5-20-33"), ConvProblem(3, 19, 13, 11, 5, 3, 3, pad=1),
    ConvProblem(1, 7, 3, 2, 6, 5, 5, pad=2), ConvProblem(2, 9, 15, 12, 10, 3, 3, pad=1, stride=2),
)  # fmt: skip


FAMILY = Family(
    "cuconv",
    CUCONV_VARIANTS,
    sources=("cuconv",),
    words=WORDS,
    sample_problems=SAMPLE_PROBLEMS,
    edge_check=called_when_run(f"{__name__}.edges", "edge_check"),
)
