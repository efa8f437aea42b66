"""``convkit.torch.patch``: a PyTorch model's supported convolutions run through :func:`convkit.conv2d`.

:func:`patch` swaps every ``nn.Conv2d`` that convkit can run (:func:`unsupported` says why not, for the
others) for a :class:`ConvkitConv2d` holding the same parameters, and leaves the rest of the model to
PyTorch. A patched layer falls back to the original ``nn.Conv2d`` whenever a gradient is wanted (convkit has
no backward) or its input is not a contiguous float32 CUDA tensor, so patching never changes what a model
computes, only which kernels compute it in inference.
"""

from __future__ import annotations

from typing import Any

#: Why a convolution layer stays with PyTorch, by the attribute that rules it out.
REASONS = {
    "groups": "grouped convolution",
    "dilation": "dilated convolution",
    "padding_mode": "padding other than zeros",
    "stride": "a stride that differs between height and width",
    "padding": "padding that differs between height and width, or given as a string",
}


def unsupported(conv: Any) -> str | None:
    """Why ``conv`` (an ``nn.Conv2d``, or anything with its attributes) cannot run in convkit, or None if it can."""
    if conv.groups != 1:
        return REASONS["groups"]
    if tuple(conv.dilation) != (1, 1):
        return REASONS["dilation"]
    if conv.padding_mode != "zeros":
        return REASONS["padding_mode"]
    if len(set(conv.stride)) != 1:
        return REASONS["stride"]
    if isinstance(conv.padding, str) or len(set(conv.padding)) != 1:
        return REASONS["padding"]
    return None


def _module_class() -> type:
    import torch

    from convkit.op import conv2d

    class ConvkitConv2d(torch.nn.Module):
        """An ``nn.Conv2d`` whose inference runs in :func:`convkit.conv2d` (the original kept for autograd)."""

        def __init__(self, conv: torch.nn.Conv2d):
            super().__init__()
            self.original = conv
            self.stride, self.padding = int(conv.stride[0]), int(conv.padding[0])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            conv = self.original
            wants_grad = torch.is_grad_enabled() and (x.requires_grad or conv.weight.requires_grad)
            plain = x.is_cuda and x.dtype == torch.float32 and x.is_contiguous() and conv.weight.dtype == torch.float32
            if wants_grad or not plain:
                return conv(x)
            return conv2d(x, conv.weight.detach(), None if conv.bias is None else conv.bias.detach(),
                          stride=self.stride, padding=self.padding)  # fmt: skip

    return ConvkitConv2d


def patch(model: Any) -> dict[str, str]:
    """Swap each supported ``nn.Conv2d`` of ``model`` (in place) for one that runs in convkit.

    Returns:
        every convolution layer's name and what became of it: ``"convkit"``, or why it stays with PyTorch.
    """
    import torch

    module_class = _module_class()
    outcome: dict[str, str] = {}
    for name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            if type(child) is not torch.nn.Conv2d:
                continue
            full = f"{name}.{child_name}" if name else child_name
            why = unsupported(child)
            outcome[full] = why or "convkit"
            if why is None:
                setattr(parent, child_name, module_class(child))
    return outcome
