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
#: The same with TF32 on, PyTorch's default for convolutions (impl ``pytorch_tf32``): a reference line beside the
#: FP32 ones (the speed a caller gives up for FP32's accuracy), never "the best FP32 library".
TF32_IMPL, TF32_VARIANT = "pytorch_tf32", "cudnn.benchmark.tf32"


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


def autotuned_conv2d(problem: ConvProblem, x: Any, w: Any, *, tf32: bool = False) -> Callable[[], Any]:
    """A callable returning ``conv2d(x, w)`` as a CuPy array, computed by PyTorch in true FP32 (with ``tf32``, on
    TF32 tensor cores as PyTorch's default lets it: :data:`TF32_VARIANT`).

    ``x`` and ``w`` are CuPy arrays shared with PyTorch through DLPack (no copy). The first call
    autotunes; time it after warm-up.
    """
    import cupy
    import torch

    torch.backends.cudnn.enabled = True
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    xt, wt = torch.from_dlpack(x), torch.from_dlpack(w)
    conv = torch.nn.functional.conv2d
    cudnn = torch.backends.cudnn

    def run() -> Any:
        cudnn.allow_tf32 = tf32  # set at each call: another case in the process may have set it otherwise
        return cupy.from_dlpack(conv(xt, wt, padding=problem.pad, stride=problem.stride))

    return run
