"""Recording what a launcher enqueued, to replay it without the launcher (``convkit.conv2d``'s fast path).

Every GPU operation of a launcher goes through :func:`enqueue`; inside :func:`recording` the calls, their
arguments, the scratch arrays (:func:`scratch`) and the zeroed kernel state (:func:`note_zeroed`) are noted, and
:mod:`convkit.cuda.plan` replays them through the driver with new operands, scratch and state.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class KernelCall:
    """One kernel at its grid, block and dynamic shared memory, enqueued by :func:`enqueue`."""

    function: Any  # cupy.cuda.Function
    grid: tuple[int, ...]
    block: tuple[int, ...]
    shared: int

    def __call__(self, args: tuple[Any, ...], stream: Any = None) -> None:
        """Launch with ``args`` (arrays, or device pointers as ints) on ``stream`` (default: the current one)."""
        self.function(self.grid, self.block, args, shared_mem=self.shared, stream=stream)


@dataclass
class Recording:
    """What ran inside :func:`recording`: each enqueued call with its arguments, the scratch arrays the
    launchers allocated (:func:`scratch`), which a replay may allocate afresh, and the zeroed state they took
    (:func:`note_zeroed`), which a replay resolves on its own stream. ``bias`` and ``output`` are
    what the op asks of the launchers: the launch that writes the output may add the bias as it does
    (:func:`epilogue_bias`), saving the op a launch."""

    calls: list[tuple[Callable[..., None], tuple[Any, ...]]] = field(default_factory=list)
    scratch: list[Any] = field(default_factory=list)
    zeroed: list[Any] = field(default_factory=list)
    bias: Any = None
    output: Any = None
    bias_added: bool = False


_RECORDER = threading.local()


@contextlib.contextmanager
def recording(*, bias: Any = None, output: Any = None) -> Iterator[Recording]:
    """Run launchers as usual and note what they enqueue (this thread only); with ``bias`` (M,) and
    ``output`` (N, M, P, Q), the launch writing ``output`` may add the bias (:func:`epilogue_bias`)."""
    previous = getattr(_RECORDER, "active", None)
    _RECORDER.active = found = Recording(bias=bias, output=output)
    try:
        yield found
    finally:
        _RECORDER.active = previous


def enqueue(call: Callable[..., None], args: tuple[Any, ...]) -> None:
    """Run ``call(args)`` on the current stream: every GPU operation of a launcher goes through here, so that
    :func:`recording` sees it. ``call(args, stream)`` must also accept device pointers (ints) for arrays."""
    call(args)
    active = getattr(_RECORDER, "active", None)
    if active is not None:
        active.calls.append((call, args))


def epilogue_bias(destination: Any) -> Any:
    """The kernel argument for a launch's optional bias: the op's bias where ``destination`` (whole images of
    NCHW planes) lies in the output of the op recording this launcher, else a null pointer. A launcher passes
    it to the launch that writes the final output (a split sum, a transform back), which then adds
    ``bias[m]`` to every element of filter ``m``'s planes; the op adds the bias itself where none did."""
    import cupy

    active = getattr(_RECORDER, "active", None)
    if active is None or active.bias is None or active.output is None:
        return cupy.uint64(0)
    start, end = active.output.data.ptr, active.output.data.ptr + active.output.nbytes
    if not start <= destination.data.ptr < end:
        return cupy.uint64(0)
    active.bias_added = True
    return active.bias


def scratch(elements: int) -> Any:
    """A float32 work array a launcher needs during its launches only (partial planes, transforms)."""
    import cupy

    array = cupy.empty(elements, dtype=cupy.float32)
    active = getattr(_RECORDER, "active", None)
    if active is not None:
        active.scratch.append(array)
    return array


def note_zeroed(array: Any) -> None:
    """Note ``array`` as zeroed kernel state of the launch about to be enqueued (memory that is zero when it starts
    and that it leaves zero, :mod:`convkit.cuda.zeroed`): a replay takes its own, never this one."""
    active = getattr(_RECORDER, "active", None)
    if active is not None:
        active.zeroed.append(array)
