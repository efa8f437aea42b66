"""The arguments of ``convkit.conv2d``, whichever library holds them: what the checks need to know of each
(:class:`Operand`) and the checks themselves, each error naming the argument, before anything is allocated or
launched."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from convkit.core.problem import ConvProblem


@dataclass(frozen=True)
class Operand:
    """What the checks need to know of an argument, whichever library holds it."""

    library: str  # "cupy" or "torch"
    shape: tuple[int, ...]
    dtype: str
    device: int | None  # CUDA device ordinal; None: not on a GPU
    contiguous: bool
    channels_last: bool = False
    requires_grad: bool = False


def describe(name: str, a: Any) -> Operand:
    """The :class:`Operand` of a CuPy array or a PyTorch tensor; raises TypeError naming ``name`` otherwise."""
    module = type(a).__module__.split(".")[0]
    if module == "torch":
        cuda = bool(a.is_cuda)
        channels_last = a.dim() == 4 and not a.is_contiguous() and a.is_contiguous(memory_format=_channels_last())
        return Operand("torch", tuple(a.shape), str(a.dtype).removeprefix("torch."), a.device.index if cuda else None,
                       bool(a.is_contiguous()), channels_last, bool(a.requires_grad) and _grad_enabled())  # fmt: skip
    if module == "cupy":
        return Operand("cupy", tuple(a.shape), str(a.dtype), a.device.id, bool(a.flags.c_contiguous))
    raise TypeError(f"{name} must be a cupy.ndarray or a torch.Tensor on the GPU, got {type(a).__module__}."
                    f"{type(a).__name__}")  # fmt: skip


def _channels_last() -> Any:
    import torch

    return torch.channels_last


def _grad_enabled() -> bool:
    import torch

    return bool(torch.is_grad_enabled())


#: What to call for what convkit's kernels do not run (its error names the argument).
ELSEWHERE = "use torch.nn.functional.conv2d (convkit.patch leaves such layers to PyTorch)"


class NotCovered(NotImplementedError):
    """A call PyTorch runs but convkit has no kernel for; ``argument`` names the argument that rules it out."""

    def __init__(self, argument: str, value: Any, why: str):
        super().__init__(f"{argument}={value!r}: {why}; {ELSEWHERE}")
        self.argument = argument


def _pair(name: str, value: Any, least: int) -> tuple[int, int]:
    """``value`` (an int, or two ints as PyTorch takes them) as a pair; raises TypeError or ValueError naming ``name``
    for anything else, or a value below ``least``."""
    pair = tuple(value) if isinstance(value, tuple | list) else (value, value)
    if len(pair) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in pair):
        raise TypeError(f"{name} must be an int or a pair of ints, got {value!r}")
    if min(pair) < least:
        raise ValueError(f"{name} must be >= {least}, got {value!r}")
    return pair  # type: ignore[return-value]


def conv_geometry(
    filter_shape: tuple[Any, ...], stride: Any, padding: Any, dilation: Any = 1, groups: Any = 1
) -> tuple[int, int]:
    """(stride, padding), the ints convkit's kernels run (the same in both directions), of the geometry
    ``torch.nn.functional.conv2d`` takes: ints or pairs, ``padding='valid'`` or ``'same'``, ``dilation`` and
    ``groups``. Raises TypeError or ValueError for an argument PyTorch refuses too, and :class:`NotCovered` (a
    NotImplementedError) naming the argument for one PyTorch runs but convkit has no kernel for (dilation or groups
    above 1, a stride or padding that differs between height and width, ``'same'`` padding that would pad one side
    more than the other)."""
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        raise ValueError(f"groups must be a positive int, got {groups!r}")
    if groups != 1:
        raise NotCovered("groups", groups, "convkit's kernels run groups=1 only")
    if _pair("dilation", dilation, 1) != (1, 1):
        raise NotCovered("dilation", dilation, "convkit's kernels run dilation 1 only")
    sh, sw = _pair("stride", stride, 1)
    if sh != sw:
        raise NotCovered("stride", stride, "convkit's kernels step alike in both directions")
    if isinstance(padding, str):
        if padding == "valid":
            return sh, 0
        if padding != "same":
            raise ValueError(f"padding must be an int, a pair, 'valid' or 'same', got {padding!r}")
        if sh != 1:
            raise ValueError("padding='same' is not supported for strided convolutions (as in PyTorch)")
        r, s = filter_shape[2], filter_shape[3]
        if r != s or r % 2 == 0:
            raise NotCovered("padding", padding, f"a {r}x{s} filter is padded unevenly or differently per direction, "
                             "and convkit's kernels pad alike on every side")  # fmt: skip
        return 1, (r - 1) // 2
    ph, pw = _pair("padding", padding, 0)
    if ph != pw:
        raise NotCovered("padding", padding, "convkit's kernels pad alike on every side")
    return sh, ph


def check_arguments(x: Operand, w: Operand, bias: Operand | None, *, stride: Any, padding: Any) -> ConvProblem:
    """The problem ``x``, ``w`` (and ``bias``) describe; raises TypeError or ValueError naming the argument."""
    n, c, h, wd, m, r, s = checked_dims(x, w, bias, stride=stride, padding=padding)
    return ConvProblem(n, c, h, wd, m, r, s, pad=padding, stride=stride)


def checked_dims(x: Operand, w: Operand, bias: Operand | None, *, stride: Any, padding: Any) -> tuple[Any, ...]:
    """(N, C, H, W, M, R, S) after :func:`check_arguments`'s checks. The sizes may be symbolic (PyTorch's SymInt,
    as torch.compile traces with dynamic shapes): only comparisons and arithmetic are done on them."""
    named = [("x", x), ("w", w)] + ([("bias", bias)] if bias is not None else [])
    for name, a in named:
        if a.library != x.library:
            raise TypeError(f"{name} is a {a.library} array but x is a {x.library} one: pass one library's arrays")
        if a.device is None:
            raise ValueError(f"{name} must be on a CUDA device, it is on the CPU")
        if a.dtype != "float32":
            raise TypeError(f"{name} must be float32, got {a.dtype}")
        if a.requires_grad:
            raise ValueError(f"{name} requires a gradient: convkit.conv2d has no backward; call it under "
                             "torch.no_grad() or use torch.nn.functional.conv2d")  # fmt: skip
        if a.channels_last:
            raise ValueError(f"{name} is channels_last: convkit.conv2d takes NCHW (call .contiguous())")
        if not a.contiguous:
            raise ValueError(f"{name} must be contiguous (NCHW)")
        if a.device != x.device:
            raise ValueError(f"{name} is on device {a.device} but x is on device {x.device}")
    if len(x.shape) != 4:
        raise ValueError(f"x must be 4-D (N, C, H, W) or 3-D (C, H, W), got shape {x.shape}")
    if len(w.shape) != 4:
        raise ValueError(f"w must be 4-D (M, C, R, S), got shape {w.shape}")
    if w.shape[1] != x.shape[1]:
        raise ValueError(f"w has {w.shape[1]} channels but x has {x.shape[1]} (groups are not supported)")
    if bias is not None and bias.shape != (w.shape[0],):
        raise ValueError(f"bias must have shape ({w.shape[0]},), one value per filter, got {bias.shape}")
    for name, value, least in (("stride", stride, 1), ("padding", padding, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ValueError(f"{name} must be an int >= {least} (the same in both directions), got {value!r}")
    n, c, h, wd = x.shape
    m, _, r, s = w.shape
    if (h + 2 * padding - r) // stride + 1 < 1 or (wd + 2 * padding - s) // stride + 1 < 1:
        raise ValueError(f"padding={padding}, stride={stride} give no output for a {h}x{wd} input and a {r}x{s} "
                         "filter")  # fmt: skip
    return n, c, h, wd, m, r, s
