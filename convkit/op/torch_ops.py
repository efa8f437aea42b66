"""convkit's ops as PyTorch operators: ``torch.ops.convkit.conv2d`` and ``torch.ops.convkit.conv2d_relu_pool``.

Registered with ``torch.library`` the first time a PyTorch caller needs them (importing convkit imports
no PyTorch), each with a fake implementation that checks the arguments as the op does and gives the output's
shape, so that ``torch.compile`` traces a call as one node of its graph (no graph break) and its CUDA-graph modes
capture it. In eager mode :func:`convkit.conv2d` and the patched modules skip the dispatcher (a few microseconds
a call) and call the op's own fast path; while ``torch.compile`` traces, they call these operators (PyTorch 2.4
and later: ``torch.library.register_fake``).
"""

import sys
from typing import Any

from convkit.core.arguments import checked_dims, describe
from convkit.core.memo import memoize
from convkit.core.precision import check_input_precision

NAMESPACE = "convkit"


#: The ops' eager implementations, which the operators run: each op's module puts its own here on import
#: (:mod:`convkit.op.conv`, :mod:`convkit.op.fused`), so that this module imports neither.
EAGER: dict[str, Any] = {}


def _never() -> bool:
    return False


#: Whether ``torch.compile`` is tracing this call: ``torch.compiler.is_compiling`` once the operators are
#: registered (:func:`ops`), before that always False. A plain global, so that Dynamo sees PyTorch's own function.
compiling = _never


def register_if_torch_is_imported() -> None:
    """Register the operators now if PyTorch is imported already, else as soon as it is (convkit's import does this;
    it imports no PyTorch itself): torch.compile must find them registered before it traces a call, and cannot
    register one while it traces, which a first call inside a compiled function would ask of it."""
    if "torch" in sys.modules:
        ops()
    elif not any(isinstance(finder, _RegisterAfterTorch) for finder in sys.meta_path):
        sys.meta_path.insert(0, _RegisterAfterTorch())


class _RegisterAfterTorch:
    """An import hook (first in ``sys.meta_path`` until PyTorch is imported): it finds ``torch`` as the other
    finders do and registers the operators once its module has run, then leaves ``sys.meta_path``."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "torch":
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module
        finder = self

        def exec_module(module: Any) -> None:
            run(module)
            if finder in sys.meta_path:
                sys.meta_path.remove(finder)
            try:
                ops()
            except Exception:  # never fail PyTorch's import: the op's first eager call registers them again
                pass

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


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


#: The operators' schemas (``torch.library``'s syntax); each is implemented by its op's eager function.
SCHEMAS = {
    "conv2d": "conv2d(Tensor x, Tensor w, Tensor? bias, int stride, int padding, str input_precision) -> Tensor",
    "conv2d_relu_pool": "conv2d_relu_pool(Tensor x, Tensor w, Tensor bias, int padding) -> Tensor",
}

#: The library the operators are defined in, kept alive with the process (its operators go with it).
_LIBRARY: list[Any] = []


def _conv2d_fake(x: Any, w: Any, bias: Any, stride: int, padding: int, input_precision: str) -> Any:
    check_input_precision(input_precision)
    return x.new_empty(_output_shape(x, w, bias, stride, padding, pooled=False))


def _conv2d_relu_pool_fake(x: Any, w: Any, bias: Any, padding: int) -> Any:
    return x.new_empty(_output_shape(x, w, bias, 1, padding, pooled=True))


@memoize()
def ops() -> Any:
    """``torch.ops.convkit``, its operators registered on first use; None with a PyTorch older than 2.4 (no
    ``torch.library.register_fake``), where the op runs eagerly only (torch.compile breaks its graph at a call).

    Registered with ``torch.library.Library``'s ``define`` and ``impl`` (one kernel for every device, the eager
    function, which names a wrong device itself) rather than ``torch.library.custom_op``: a call of the operator
    costs about 8 us of dispatch on the H100 against 21 us through ``custom_op``'s Python layers
    (``scripts/host_probe.py``), and a compiled graph pays it at every convolution."""
    import torch

    if not hasattr(torch.library, "register_fake"):
        return None
    library = torch.library.Library(NAMESPACE, "DEF")
    fakes = {"conv2d": _conv2d_fake, "conv2d_relu_pool": _conv2d_relu_pool_fake}
    for name, schema in SCHEMAS.items():
        library.define(schema)
        library.impl(name, EAGER[name], "CompositeExplicitAutograd")
        torch.library.register_fake(f"{NAMESPACE}::{name}", fakes[name], lib=library)
    _LIBRARY.append(library)

    global compiling
    compiling = torch.compiler.is_compiling
    return torch.ops.convkit
