"""``convkit.patch``: a PyTorch model's supported convolutions run through :func:`convkit.conv2d`.

:func:`patch` swaps every ``nn.Conv2d`` that convkit can run (:func:`unsupported` says why not, for the
others) for a :class:`ConvkitConv2d` holding the same parameters, and leaves the rest of the model to
PyTorch (a convolution followed by ReLU and a 2x2 max-pool becomes one :func:`convkit.conv2d_relu_pool`).
A patched layer falls back to the original ``nn.Conv2d`` whenever a gradient is wanted (convkit has
no backward) or its input is not a contiguous float32 CUDA tensor, so patching never changes what a model
computes, only which kernels compute it in inference.
"""

from __future__ import annotations

from typing import Any

from convkit.core.arguments import NotCovered, conv_geometry
from convkit.core.precision import DEFAULT_INPUT_PRECISION, check_input_precision

#: Why a convolution layer stays with PyTorch, by the attribute that rules it out.
REASONS = {
    "groups": "grouped convolution",
    "dilation": "dilated convolution",
    "padding_mode": "padding other than zeros",
    "stride": "a stride that differs between height and width",
    "padding": "padding that differs between height and width or between sides",
}


def unsupported(conv: Any) -> str | None:
    """Why ``conv`` (an ``nn.Conv2d``, or anything with its attributes) cannot run in convkit, or None if it can."""
    if conv.padding_mode != "zeros":
        return REASONS["padding_mode"]
    try:
        conv_geometry(tuple(conv.weight.shape), conv.stride, conv.padding, conv.dilation, conv.groups)
    except NotCovered as exc:
        return REASONS[exc.argument]
    except (TypeError, ValueError) as exc:  # a geometry PyTorch's own Conv2d would refuse too
        return str(exc)
    return None


def _pooled_after(relu: Any, pool: Any) -> bool:
    """Whether ``relu`` then ``pool`` are a ReLU and a plain 2x2, stride-2 max-pool (the fused layer's)."""
    import torch

    if type(relu) is not torch.nn.ReLU or type(pool) is not torch.nn.MaxPool2d:
        return False
    pair = lambda v: (v, v) if isinstance(v, int) else tuple(v)  # noqa: E731
    return (pair(pool.kernel_size) == (2, 2) and pair(pool.stride) == (2, 2) and pair(pool.padding) == (0, 0)
            and pair(pool.dilation) == (1, 1) and not pool.ceil_mode and not pool.return_indices)  # fmt: skip


def _module_classes() -> tuple[type, type]:
    import torch

    from convkit.op import torch_ops
    from convkit.op.conv import conv2d, replay_if_known
    from convkit.op.fused import conv2d_relu_pool

    registered = torch_ops.ops()  # before any tracing: torch.compile cannot register an operator while it traces
    # without operators (PyTorch before 2.4) a patched layer stays eager, under torch.compile too
    is_compiling = torch.compiler.is_compiling if registered is not None else torch_ops.compiling

    class ConvkitConv2d(torch.nn.Module):
        """An ``nn.Conv2d`` whose inference runs in :func:`convkit.conv2d` (the original kept for autograd)."""

        def __init__(self, conv: torch.nn.Conv2d, input_precision: str = DEFAULT_INPUT_PRECISION):
            super().__init__()
            self.original = conv
            geometry = conv.weight.shape, conv.stride, conv.padding, conv.dilation, conv.groups
            self.stride, self.padding = conv_geometry(*geometry)  # ints: "same" and "valid" resolved
            self.input_precision = input_precision

        def runs_in_convkit(self, x: torch.Tensor) -> bool:
            conv = self.original
            wants_grad = torch.is_grad_enabled() and (x.requires_grad or conv.weight.requires_grad)
            plain = x.is_cuda and x.dtype == torch.float32 and x.is_contiguous() and conv.weight.dtype == torch.float32
            return plain and not wants_grad

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            conv = self.original
            w, b = conv.weight, conv.bias
            if torch.is_grad_enabled() and (x.requires_grad or w.requires_grad):
                return conv(x)
            if is_compiling():  # torch.compile is tracing: one node of its graph
                if not self.runs_in_convkit(x):
                    return conv(x)
                return registered.conv2d(x, w, b, self.stride, self.padding, self.input_precision)
            if self.input_precision == DEFAULT_INPUT_PRECISION:
                y = replay_if_known(x, w, b, self.stride, self.padding)  # the usual case: a few attribute reads
                if y is not None:
                    return y
            if not self.runs_in_convkit(x):
                return conv(x)
            return conv2d(x, w.detach(), None if b is None else b.detach(), stride=self.stride, padding=self.padding,
                          input_precision=self.input_precision)  # fmt: skip

    class ConvkitConvReluPool(ConvkitConv2d):
        """Conv, ReLU and 2x2 max-pool as :func:`convkit.conv2d_relu_pool` (the ReLU and pool modules that
        followed become identities; the original three run where convkit does not)."""

        def __init__(self, conv: torch.nn.Conv2d, relu: torch.nn.Module, pool: torch.nn.Module):
            super().__init__(conv)
            self.relu, self.pool = relu, pool

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            conv = self.original
            if not self.runs_in_convkit(x) or self.stride != 1 or conv.bias is None:
                return self.pool(self.relu(conv(x)))
            if is_compiling():
                return registered.conv2d_relu_pool(x, conv.weight, conv.bias, self.padding)
            return conv2d_relu_pool(x, conv.weight.detach(), conv.bias.detach(), padding=self.padding)

    return ConvkitConv2d, ConvkitConvReluPool


def patch(model: Any, *, input_precision: str = DEFAULT_INPUT_PRECISION) -> dict[str, str]:
    """Swap each supported ``nn.Conv2d`` of ``model`` (in place) for one that runs in convkit (at
    ``input_precision``, as :func:`convkit.conv2d`'s); where such a convolution is followed, in an
    ``nn.Sequential``, by ``nn.ReLU`` and a 2x2 ``nn.MaxPool2d``, the three become one
    :func:`convkit.conv2d_relu_pool`. Under ``torch.compile`` the patched layers are the registered operators
    ``torch.ops.convkit.conv2d`` and ``conv2d_relu_pool`` (:mod:`convkit.op.torch_ops`): one graph node each.

    Returns:
        every convolution layer's name and what became of it: ``"convkit"``, ``"convkit+relu+pool"``, or why
        it stays with PyTorch.
    """
    import torch

    check_input_precision(input_precision)
    plain, fused = _module_classes()
    outcome: dict[str, str] = {}
    for name, parent in list(model.named_modules()):
        children = list(parent.named_children())
        for i, (child_name, child) in enumerate(children):
            if type(child) is not torch.nn.Conv2d:
                continue
            full = f"{name}.{child_name}" if name else child_name
            why = unsupported(child)
            outcome[full] = why or "convkit"
            if why is not None:
                continue
            after = [c for _, c in children[i + 1 : i + 3]]
            if isinstance(parent, torch.nn.Sequential) and len(after) == 2 and _pooled_after(*after):
                setattr(parent, child_name, fused(child, *after))
                for later, _ in children[i + 1 : i + 3]:
                    setattr(parent, later, torch.nn.Identity())
                outcome[full] = "convkit+relu+pool"
            else:
                setattr(parent, child_name, plain(child, input_precision))
    return outcome
