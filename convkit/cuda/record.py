"""Recording what a launcher enqueued, to replay it without the launcher (``convkit.conv2d``'s fast path).

Every GPU operation of a launcher goes through :func:`enqueue`; inside :func:`recording` the calls and their
arguments are noted, and :mod:`convkit.cuda.plan` replays them through the driver with new operands and workspace.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from convkit.cuda.driver import EarlyLaunch, parameters


@dataclass(frozen=True)
class KernelCall:
    """One kernel at its grid, block and dynamic shared memory, enqueued by :func:`enqueue`; ``early``: launched to
    start before the kernel ahead of it in the stream ends (:class:`convkit.cuda.driver.EarlyLaunch`)."""

    function: Any  # cupy.cuda.Function
    grid: tuple[int, ...]
    block: tuple[int, ...]
    shared: int
    early: bool = False

    def __call__(self, args: tuple[Any, ...], stream: Any = None) -> None:
        """Launch with ``args`` (arrays, or device pointers as ints) on ``stream`` (default: the current one)."""
        if not self.early:
            self.function(self.grid, self.block, args, shared_mem=self.shared, stream=stream)
            return
        import cupy

        _kept, buffer = parameters(args)  # (the values alive until the driver has copied them, at the launch)
        EarlyLaunch(self)((stream or cupy.cuda.get_current_stream()).ptr, ctypes.addressof(buffer))


@dataclass
class Recording:
    """What ran inside :func:`recording`: each enqueued call with its arguments. Which arguments are operands is
    not guessed here: the launch declared them (:class:`convkit.cuda.operands.ConvArgs`), and
    :meth:`convkit.cuda.plan.Plan.record` reads them from there."""

    calls: list[tuple[Callable[..., None], tuple[Any, ...]]] = field(default_factory=list)


_RECORDER = threading.local()


@contextlib.contextmanager
def thread_scoped(local: threading.local, value: Any) -> Iterator[Any]:
    """``value`` as ``local.active`` inside the block (this thread only), the one before it restored after: what a
    launcher reads to know whether it runs inside :func:`recording` (or
    :func:`convkit.cuda.launch.collecting_builds`)."""
    previous = getattr(local, "active", None)
    local.active = value
    try:
        yield value
    finally:
        local.active = previous


def recording() -> contextlib.AbstractContextManager[Recording]:
    """Run launchers as usual and note what they enqueue (this thread only)."""
    return thread_scoped(_RECORDER, Recording())


def enqueue(call: Callable[..., None], args: tuple[Any, ...]) -> None:
    """Run ``call(args)`` on the current stream: every GPU operation of a launcher goes through here, so that
    :func:`recording` sees it. ``call(args, stream)`` must also accept device pointers (ints) for arrays."""
    call(args)
    active = getattr(_RECORDER, "active", None)
    if active is not None:
        active.calls.append((call, args))
