"""The baseline's kernel (``kernels/direct.cu``): one thread per output, the plain direct convolution."""

from __future__ import annotations

from typing import Any

from convkit.core.problem import ConvProblem
from convkit.families.baseline.launch import DEFAULT_THREADS, DirectLaunch, conv2d_direct
from convkit.families.registry import Family, Variant


def _direct(x: Any, w: Any, p: ConvProblem, out: Any, launch: DirectLaunch) -> None:
    conv2d_direct(x, w, pad=p.pad, stride=p.stride, out=out, launch=launch)


#: The direct kernel at its one launch (no tuning).
DIRECT = Variant("direct", _direct, default=lambda p: DirectLaunch(DEFAULT_THREADS),
                 launch_from=DirectLaunch.from_params)  # fmt: skip

#: Each variant's method in words: the book's one name for it.
WORDS = {
    "direct": "direct (baseline)",
}
FAMILY = Family("baseline", (DIRECT,), sources=("direct",), words=WORDS)
