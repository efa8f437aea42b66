"""The library users call: ``conv2d`` and ``conv2d_relu_pool`` on CuPy arrays and PyTorch CUDA tensors.

It imports the kernel families (:mod:`convkit.families`) and what the package ships for each GPU
(:mod:`convkit.core.shipped`); no chapter, no study module, no pandas or matplotlib, nothing under
``results/``.
"""

from convkit.op.conv import conv2d, implementation
from convkit.op.fused import conv2d_relu_pool
from convkit.op.torch_ops import register_if_torch_is_imported

register_if_torch_is_imported()

__all__ = ["conv2d", "conv2d_relu_pool", "implementation"]
