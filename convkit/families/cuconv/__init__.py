"""cuConv's kernels (``kernels/cuconv.cu``): convolution as scalar products read in place, and past it.

The paper's two-stage design and three steps past it (``cuconv_paper``, ``_fused``, ``_split``, ``_tiled``),
each with the launches a tuning run chooses among (:mod:`.launch`).
"""

from __future__ import annotations

from typing import Any

from convkit.core.gpu import sm_count
from convkit.core.problem import ConvProblem
from convkit.families.cuconv import launch
from convkit.families.registry import Family, Variant


def _variant(variant: str) -> Variant:
    """``cuconv_<variant>``: the heuristic's launch by default, the candidates a tuning run measures."""
    name = f"cuconv_{variant}"

    def run(x: Any, w: Any, p: ConvProblem, out: Any, spec: launch.CuconvLaunch) -> None:
        launch.conv2d_cuconv(x, w, pad=p.pad, stride=p.stride, launch=spec, out=out)

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
FAMILY = Family("cuconv", CUCONV_VARIANTS, sources=("cuconv",), words=WORDS)
