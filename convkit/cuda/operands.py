"""What a launch runs on: its operands, declared (CUTLASS's ``Arguments`` beside ``get_workspace_size``).

A launch reads ``x`` and ``w``, writes ``out``, adds ``bias`` where it says it does
(:meth:`convkit.cuda.launch.Launch.adds_bias`) and keeps its temporaries in ``workspace``, one block of the bytes it
declares (:meth:`~convkit.cuda.launch.Launch.workspace_bytes`). Nothing else it touches may outlive the launch, so
the op can replay a launch with new operands (:mod:`convkit.cuda.plan`), and two launches in flight together share
no memory as long as their callers give them different workspaces.

A launch whose workspace is kernel state (:attr:`~convkit.cuda.launch.KernelLaunch.zeroed_workspace`: split
counters, zero when it starts and left zero) takes it from :mod:`convkit.cuda.zeroed`, per stream.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

#: Alignment of each region of a workspace (bytes; CuPy's and PyTorch's allocators give at least this).
WORKSPACE_ALIGN = 256


@dataclass(frozen=True)
class ConvArgs:
    """The operands of one launch: CuPy arrays, ``bias`` (M,) and ``workspace`` (uint8) None where absent.

    ``bias`` given means: add it as the output is written, which only a launch that says so
    (:meth:`~convkit.cuda.launch.Launch.adds_bias`) accepts. ``workspace`` None means: the launcher allocates its
    own (a call outside the op)."""

    x: Any
    w: Any
    out: Any
    bias: Any = None
    workspace: Any = None

    def operands(self) -> tuple[Any, ...]:
        """(x, w, out, bias): the order :data:`convkit.cuda.plan.OPERANDS` names them."""
        return self.x, self.w, self.out, self.bias


def aligned(nbytes: int) -> int:
    """``nbytes`` rounded up to :data:`WORKSPACE_ALIGN`."""
    return -(-nbytes // WORKSPACE_ALIGN) * WORKSPACE_ALIGN


def most_images_within(problem: Any, workspace_bytes: Callable[[Any], int], limit: int) -> int:
    """The most of ``problem``'s images (at most N; 0 where not even one's fits) whose workspace, ``workspace_bytes`` of
    the problem with that many images, is within ``limit``: a launch whose workspace grows with the batch runs a
    larger one that many images a pass (bisected, the whole batch tried first)."""
    if workspace_bytes(problem) <= limit:
        return problem.n
    low, high = 0, problem.n - 1
    while low < high:
        mid = (low + high + 1) // 2
        if workspace_bytes(dataclasses.replace(problem, n=mid)) <= limit:
            low = mid
        else:
            high = mid - 1
    return low


def regions_bytes(elements: Sequence[int], itemsize: int = 4) -> int:
    """The workspace bytes of regions of ``elements`` items each, every region aligned: what
    :func:`float32_regions` carves, and so what a launch declares as its workspace."""
    return sum(aligned(n * itemsize) for n in elements)


def float32_regions(workspace: Any, elements: Sequence[int]) -> list[Any]:
    """float32 arrays of ``elements`` items each, carved in order from ``workspace`` (uint8, at least
    :func:`regions_bytes` long), or from a block allocated now on the current stream where ``workspace`` is None."""
    import cupy

    need = regions_bytes(elements)
    if workspace is None:
        workspace = cupy.empty(need, dtype=cupy.uint8)
    elif workspace.nbytes < need:
        raise ValueError(f"workspace holds {workspace.nbytes} bytes; this launch needs {need}")
    regions, offset = [], 0
    for n in elements:
        regions.append(workspace[offset : offset + 4 * n].view(cupy.float32))
        offset += aligned(4 * n)
    return regions


def new_workspace(launch: Any, problem: Any) -> Any:
    """The workspace ``launch`` declares for ``problem``, for launches in order on CuPy's current stream: scratch
    allocated now, or for a :attr:`~convkit.cuda.launch.KernelLaunch.zeroed_workspace` launch the stream's zeroed
    block (:func:`convkit.cuda.zeroed.cupy_zeroed`); None where it needs none."""
    import cupy

    from convkit.cuda.zeroed import cupy_zeroed

    nbytes = launch.workspace_bytes(problem) if launch is not None else 0
    if not nbytes:
        return None
    if launch.zeroed_workspace:
        return cupy_zeroed(cupy.cuda.get_current_stream().ptr, nbytes)[:nbytes]
    return cupy.empty(nbytes, dtype=cupy.uint8)


def epilogue_bias(bias: Any, adds_bias: bool, what: str) -> Any:
    """The kernel argument for an epilogue's optional bias: ``bias``, or a null pointer where there is none; raises
    ValueError naming ``what`` (the launch) where a bias is given to a launch that does not add one."""
    import cupy

    if bias is None:
        return cupy.uint64(0)
    if not adds_bias:
        raise ValueError(f"bias: {what} does not add a bias on this problem (its adds_bias is False)")
    return bias
