"""A launcher's launches, recorded once and replayed without the launcher: the host-side fast path of
``convkit.conv2d``.

A launcher checks its arguments, builds launch objects, looks its kernels up and carves its workspace: tens of
microseconds of Python per call, as much as a small layer's GPU time. The first call of a problem runs the
launcher under :func:`convkit.cuda.record.recording` on the operands its launch declares
(:class:`convkit.cuda.operands.ConvArgs`); :meth:`Plan.record` turns what it enqueued into steps whose array
arguments are *slots*: a declared operand (x, w, out, bias, or the workspace, scratch or zeroed kernel state such
as split counters) at a byte offset. Everything else is kept as it was (integers); an array argument that is no
declared operand is refused, since a replay would share it between launches in flight. A replay is then one
Python call per launch.

A kernel step is bound once to a driver launch (:class:`DriverLaunch`): its parameter buffer built with
ctypes, the slots rewritten in place and ``cuLaunchKernel`` called directly, about 2 us where CuPy's launch
converts every argument anew (about 10 us). A call with a ``bind`` method binds itself (cuBLAS, on a handle
set up once); other steps are called as recorded.

A plan is valid for the problem, device and operand alignment it was recorded on (a launcher may pick a kernel
by alignment), on any stream: it keeps no memory a kernel reads or writes. Its scratch and its zeroed state are
given per replay (the caller resolves them for the stream it enqueues on, :mod:`convkit.cuda.zeroed`), so two
replays in flight on two streams, or in two captured graphs, share nothing. Replays of one plan must not run
from two threads at once (the bound parameter buffers are rewritten per call): its callers hold a lock.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from convkit.cuda.driver import EarlyLaunch, ctypes_launch, cython_launch, parameters
from convkit.cuda.operands import ConvArgs
from convkit.cuda.record import KernelCall, Recording

#: The operands a plan's slots refer to, in the order :meth:`Plan.replay` takes their pointers; the workspace comes
#: after them, as scratch or as zeroed kernel state.
OPERANDS = ("x", "w", "out", "bias")
SCRATCH = len(OPERANDS)
ZEROED = SCRATCH + 1


@dataclass(frozen=True)
class PlanStep:
    """One recorded call: its arguments with the array ones left as ``slots`` (index, base, byte offset)."""

    call: Callable[..., None]
    template: tuple[Any, ...]
    slots: tuple[tuple[int, int, int], ...]
    bound: Any = field(default=None, compare=False)

    def run(self, bases: tuple[int, ...], stream: Any) -> None:
        """Enqueue the call with its slots filled from ``bases`` on ``stream`` (an object with ``ptr``)."""
        if self.bound is not None:
            self.bound(bases, stream.ptr)
            return
        args = list(self.template)
        for index, base, offset in self.slots:
            args[index] = bases[base] + offset
        self.call(tuple(args), stream)


class DriverLaunch:
    """A recorded kernel launch bound to ``cuLaunchKernel``: the parameter buffer is built once and only the
    slots' pointers are rewritten per call (the driver copies parameters at launch); an early one through
    ``cuLaunchKernelEx`` (:class:`~convkit.cuda.driver.EarlyLaunch`). Launched through CuPy's
    Cython binding of the driver call (about 1 us less a launch than ctypes on the H100,
    ``scripts/host_probe.py``), or through ctypes where a CuPy lacks it."""

    def __init__(self, call: KernelCall, template: tuple[Any, ...], slots: tuple[tuple[int, int, int], ...]):
        self._values, self._params = parameters(template)  # values kept alive: the buffer points into them
        self._kept = [arg for arg in template if arg is not None]
        self._slots = [(self._values[index], base, offset) for index, base, offset in slots]
        grid, block = (*call.grid, 1, 1)[:3], (*call.block, 1, 1)[:3]
        self._head = (call.function.ptr, *grid, *block, call.shared)
        self._kargs = ctypes.addressof(self._params)
        self._launch = cython_launch() or ctypes_launch
        self._early = EarlyLaunch(call) if call.early else None

    def __call__(self, bases: tuple[int, ...], stream: int) -> None:
        for value, base, offset in self._slots:
            value.value = bases[base] + offset
        if self._early is not None:
            self._early(stream, self._kargs)
            return
        self._launch(*self._head, stream, self._kargs, 0)


def _bind(call: Any, template: tuple[Any, ...], slots: tuple[tuple[int, int, int], ...], blas_handle: Any) -> Any:
    """A replay of one step taking (bases, stream pointer): a :class:`DriverLaunch` for a kernel whose
    arguments it can pass, the call's own ``bind`` where it has one (cuBLAS, on ``blas_handle``'s handles where
    given), else None."""
    if hasattr(call, "bind"):
        return call.bind(template, slots, blas_handle)
    if not isinstance(call, KernelCall):
        return None
    try:
        return DriverLaunch(call, template, slots)
    except (TypeError, OSError, AttributeError):
        return None


@dataclass(frozen=True)
class Plan:
    """The steps of one launcher call, the bytes of scratch they need and the bytes of zeroed state (memory that
    is zero when they start and that they leave zero)."""

    steps: tuple[PlanStep, ...]
    scratch_bytes: int
    zeroed_bytes: int = 0

    @classmethod
    def record(
        cls, recording: Recording, args: ConvArgs, *, zeroed_workspace: bool = False, blas_handle: Any = None
    ) -> Plan:
        """The plan of ``recording``, run on ``args``: each array argument becomes a slot of the declared operand
        holding it, the workspace as scratch or, with ``zeroed_workspace``, as zeroed state (the launch's
        :attr:`~convkit.cuda.launch.KernelLaunch.zeroed_workspace`). Its cuBLAS calls replay on
        ``blas_handle(device, stream)``'s handle (default: convkit's own per stream). Raises ValueError for an
        array argument that is no declared operand."""
        import cupy

        declared = [*enumerate(args.operands()), (ZEROED if zeroed_workspace else SCRATCH, args.workspace)]
        ranges = [(a.data.ptr, a.data.ptr + a.nbytes, i) for i, a in declared if a is not None]
        steps = []
        for call, arguments in recording.calls:
            template, slots = list(arguments), []
            for index, arg in enumerate(arguments):
                if not isinstance(arg, cupy.ndarray):
                    continue
                where = _locate(arg.data.ptr, ranges)
                if where is None:
                    raise ValueError(f"argument {index} of {call!r} is no declared operand (x, w, out, bias, "
                                     "workspace): a replay would share it between launches in flight")  # fmt: skip
                template[index] = None
                slots.append((index, *where))
            steps.append(
                PlanStep(call, tuple(template), tuple(slots), _bind(call, tuple(template), tuple(slots), blas_handle))
            )
        workspace = 0 if args.workspace is None else args.workspace.nbytes
        return cls(tuple(steps), 0 if zeroed_workspace else workspace, workspace if zeroed_workspace else 0)

    def replay(self, bases: tuple[int, ...], stream: Any) -> None:
        """Enqueue every step on ``stream`` (an object with ``ptr``: a CuPy stream) with the slots filled from
        ``bases``: the operands' device pointers in :data:`OPERANDS` order (0 where absent), then the scratch
        block's, then the zeroed block's (zero now, on ``stream``: :mod:`convkit.cuda.zeroed`)."""
        for step in self.steps:
            step.run(bases, stream)


def _locate(pointer: int, ranges: list[tuple[int, int, int]]) -> tuple[int, int] | None:
    """(base, byte offset) of ``pointer`` in the first range holding it, or None."""
    for start, end, base in ranges:
        if start <= pointer < end or pointer == start:
            return base, pointer - start
    return None
