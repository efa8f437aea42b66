"""The input precisions ``convkit.conv2d`` can be asked for, in the vocabulary of Triton's
``tl.dot(input_precision=...)``.

- ``"ieee"``: FP32 operands multiplied in FP32 FMA (the CUDA cores), as cuDNN's ``CUDNN_FMA_MATH`` and
  PyTorch with TF32 off.
- ``"tf32x3"``: ``"ieee"`` kernels, and kernels that keep FP32 accuracy on TF32 tensor cores (each operand
  split into two TF32 parts, three products). Both are held to the same bar against float64 (1e-5, norm-wise)
  when an implementation is chosen; the default, as PyTorch's own default for convolutions is plain TF32
  (less accurate than either).
"""

from __future__ import annotations

#: Every input precision a caller may ask for, the default first.
INPUT_PRECISIONS: tuple[str, ...] = ("tf32x3", "ieee")
DEFAULT_INPUT_PRECISION = INPUT_PRECISIONS[0]
#: The kernels' precisions each request allows.
ALLOWED: dict[str, frozenset[str]] = {"tf32x3": frozenset({"ieee", "tf32x3"}), "ieee": frozenset({"ieee"})}


def check_input_precision(value: object) -> str:
    """``value`` if it names an input precision; raises ValueError naming ``input_precision`` otherwise."""
    if value not in ALLOWED:
        raise ValueError(f"input_precision must be one of {INPUT_PRECISIONS}, got {value!r}")
    return value  # type: ignore[return-value]
