"""convkit's ops as PyTorch operators: ``torch.ops.convkit.conv2d`` and ``torch.ops.convkit.conv2d_relu_pool``.

Registered with ``torch.library.custom_op`` the first time a PyTorch caller needs them (importing convkit imports
no PyTorch), each with a fake implementation that checks the arguments as the op does and gives the output's
shape, so that ``torch.compile`` traces a call as one node of its graph (no graph break) and its CUDA-graph modes
capture it. In eager mode :func:`convkit.conv2d` and the patched modules skip the dispatcher (a few microseconds
a call) and call the op's own fast path; while ``torch.compile`` traces, they call these operators (PyTorch 2.4
and later: ``torch.library.custom_op``).
"""

import sys
from typing import Any

from convkit.core.arguments import checked_dims, describe
from convkit.core.memo import memoize
from convkit.core.precision import check_input_precision

NAMESPACE = "convkit"
# No `from __future__ import annotations` here: torch.library reads the operators' annotations as types.


#: The ops' eager implementations, which the operators run: each op's module puts its own here on import
#: (:mod:`convkit.op.conv`, :mod:`convkit.op.fused`), so that this module imports neither.
EAGER: dict[str, Any] = {}


def _never() -> bool:
    return False


#: Whether ``torch.compile`` is tracing this call: ``torch.compiler.is_compiling`` once the operators are
#: registered (:func:`ops`), before that always False. A plain global, so that Dynamo sees PyTorch's own function.
compiling = _never


def register_if_torch_is_imported() -> None:
    """Register the operators now if PyTorch is imported already (convkit's import does this; it imports no
    PyTorch itself): torch.compile must find them registered before it traces a call."""
    if "torch" in sys.modules:
        ops()


def traced_conv2d(x: Any, w: Any, bias: Any, stride: int, padding: int, input_precision: str) -> Any:
    """``torch.ops.convkit.conv2d``, as :func:`convkit.conv2d` calls it while ``torch.compile`` traces."""
    import torch

    return torch.ops.convkit.conv2d(x, w, bias, stride, padding, input_precision)


def traced_conv2d_relu_pool(x: Any, w: Any, bias: Any, padding: int) -> Any:
    """``torch.ops.convkit.conv2d_relu_pool``, as :func:`convkit.conv2d_relu_pool` calls it under tracing."""
    import torch

    return torch.ops.convkit.conv2d_relu_pool(x, w, bias, padding)


def _output_shape(x: Any, w: Any, bias: Any, stride: int, padding: int, pooled: bool) -> tuple[Any, ...]:
    """The output's shape (sizes may be symbolic), the arguments checked as the op checks them (TypeError or
    ValueError naming one)."""
    bd = None if bias is None else describe("bias", bias)
    n, _, h, wd, m, r, s = checked_dims(describe("x", x), describe("w", w), bd, stride=stride, padding=padding)
    p, q = (h + 2 * padding - r) // stride + 1, (wd + 2 * padding - s) // stride + 1
    return (n, m, p // 2, q // 2) if pooled else (n, m, p, q)


@memoize()
def ops() -> Any:
    """``torch.ops.convkit``, its operators registered on first use; None with a PyTorch older than 2.4 (no
    ``torch.library.custom_op``), where the op runs eagerly only (torch.compile breaks its graph at a call)."""
    import torch

    if not hasattr(torch.library, "custom_op"):
        return None

    conv2d_eager, conv2d_relu_pool_eager = EAGER["conv2d"], EAGER["conv2d_relu_pool"]

    @torch.library.custom_op(f"{NAMESPACE}::conv2d", mutates_args=())
    def conv2d(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, stride: int, padding: int,
               input_precision: str) -> torch.Tensor:  # fmt: skip
        return conv2d_eager(x, w, bias, stride, padding, input_precision)

    @conv2d.register_fake
    def _(x: Any, w: Any, bias: Any, stride: int, padding: int, input_precision: str) -> Any:
        check_input_precision(input_precision)
        return x.new_empty(_output_shape(x, w, bias, stride, padding, pooled=False))

    @torch.library.custom_op(f"{NAMESPACE}::conv2d_relu_pool", mutates_args=())
    def conv2d_relu_pool(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor, padding: int) -> torch.Tensor:
        return conv2d_relu_pool_eager(x, w, bias, padding)

    @conv2d_relu_pool.register_fake
    def _(x: Any, w: Any, bias: Any, padding: int) -> Any:
        return x.new_empty(_output_shape(x, w, bias, 1, padding, pooled=True))

    global compiling
    compiling = torch.compiler.is_compiling
    return torch.ops.convkit
