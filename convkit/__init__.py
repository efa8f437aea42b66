"""convkit: a reproducible study of fast GPU convolution.

The CPU paths (problem description, float64 reference, results store, plots, compile reports)
import without CuPy or a GPU; the GPU paths (kernels, cuDNN, timing, ceilings) import CuPy at
first use and say plainly when it or a device is missing.
"""

from convkit.gpu import GPUUnavailableError, has_gpu
from convkit.problem import ConvProblem

__version__ = "0.1.0"

__all__ = ["ConvProblem", "GPUUnavailableError", "__version__", "conv2d_direct", "has_gpu"]


def __getattr__(name: str):  # lazy: the launcher module imports CuPy only when used
    if name == "conv2d_direct":
        from convkit.direct import conv2d_direct

        return conv2d_direct
    raise AttributeError(f"module 'convkit' has no attribute {name!r}")
