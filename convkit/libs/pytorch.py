"""A second opinion on "best cuDNN": PyTorch's autotuner, FP32 with TF32 off, where PyTorch is present.

PyTorch reaches cuDNN through its graph API and picks an engine by timing
(``torch.backends.cudnn.benchmark``); convkit's baseline calls the legacy forward algorithms one
by one. Measuring both in the same run shows whether the legacy API leaves speed on the table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from convkit.core.memo import memoize
from convkit.core.problem import ConvProblem

#: The variant name of PyTorch's autotuned convolution in results files (impl ``pytorch``).
VARIANT = "cudnn.benchmark"


@memoize()
def available() -> bool:
    """True when PyTorch imports and sees a CUDA device."""
    try:
        import torch
    except Exception:
        return False
    return bool(torch.cuda.is_available())


def version() -> str | None:
    """PyTorch's version, or None when it is not importable."""
    try:
        import torch
    except Exception:
        return None
    return str(torch.__version__)


def autotuned_conv2d(problem: ConvProblem, x: Any, w: Any) -> Callable[[], Any]:
    """A callable returning ``conv2d(x, w)`` as a CuPy array, computed by PyTorch in true FP32.

    ``x`` and ``w`` are CuPy arrays shared with PyTorch through DLPack (no copy). The first call
    autotunes; time it after warm-up.
    """
    import cupy
    import torch

    torch.backends.cudnn.enabled = True
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False  # else FP32 convolutions may run on TF32 tensor cores
    torch.backends.cuda.matmul.allow_tf32 = False
    xt, wt = torch.from_dlpack(x), torch.from_dlpack(w)
    conv = torch.nn.functional.conv2d

    def run() -> Any:
        return cupy.from_dlpack(conv(xt, wt, padding=problem.pad, stride=problem.stride))

    return run
