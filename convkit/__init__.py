"""convkit: fast GPU convolution, and the reproducible study that measures it.

The library: ``convkit.conv2d`` runs, per GPU and problem, the fastest implementation the study checked and
recorded (one of its kernel families, :mod:`convkit.families`, or a library), within the input precision asked
for (:mod:`convkit.core.precision`: FP32 FMA, or FP32-accurate 3xTF32 on tensor cores); ``convkit.conv2d_relu_pool``
the fused CNN layer; ``convkit.patch`` puts them under a PyTorch model's layers. Importing convkit imports
neither CuPy nor PyTorch; the GPU paths import CuPy at first use and say plainly when it or a device is
missing. The study (:mod:`convkit.study`, the chapters in :mod:`convkit.papers`, the book's helpers in
:mod:`convkit.book`) imports the library, never the other way.
"""

from convkit._version import __version__
from convkit.core.gpu import GPUUnavailableError, has_gpu
from convkit.core.problem import ConvProblem
from convkit.op import conv2d, conv2d_relu_pool
from convkit.op.patch import patch

__all__ = ["ConvProblem", "GPUUnavailableError", "__version__", "conv2d", "conv2d_relu_pool", "has_gpu", "patch"]
