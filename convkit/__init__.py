"""convkit: a reproducible study of fast GPU convolution.

The CPU paths (problem description, float64 reference, results store, plots, compile reports)
import without CuPy or a GPU; the GPU paths (kernels, cuDNN, timing, ceilings) import CuPy at
first use and say plainly when it or a device is missing. Each paper's kernels and chapter live in
``convkit.papers.<name>``; ``convkit.papers.PAPERS`` lists them. ``convkit.conv2d`` runs, per GPU and problem,
the fastest implementation the study recorded; ``convkit.conv2d_relu_pool`` the fused CNN layer.
"""

from convkit._version import __version__
from convkit.core.gpu import GPUUnavailableError, has_gpu
from convkit.core.problem import ConvProblem
from convkit.op.conv import conv2d, conv2d_relu_pool

__all__ = ["ConvProblem", "GPUUnavailableError", "__version__", "conv2d", "conv2d_relu_pool", "has_gpu"]
