"""A launcher's launches, recorded once and replayed without the launcher: the host-side fast path of
``convkit.conv2d``.

A launcher checks its arguments, builds launch objects, looks its kernels up and allocates work arrays:
tens of microseconds of Python per call, as much as a small layer's GPU time. The first call of a problem
runs the launcher under :func:`convkit.compile.recording`; :meth:`Plan.record` turns what it enqueued into
steps whose array arguments are *slots* (an operand, x, w, out or bias, at a byte offset, or a place in one
scratch block), everything else kept as it was (integers, and buffers a launcher keeps between calls, such
as split counters). A replay is then one Python call per launch.

A plan is valid for the problem, device, stream and operand alignment it was recorded on: the caller keys
it by all four (a launcher may pick a kernel by alignment, and kept buffers are per stream).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from convkit.compile import Recording

#: The operands a plan's slots refer to, in the order :meth:`Plan.replay` takes their pointers; the scratch
#: block comes after them.
OPERANDS = ("x", "w", "out", "bias")
SCRATCH = len(OPERANDS)
#: Alignment of each scratch array inside the block (CuPy's and PyTorch's allocators give at least this).
SCRATCH_ALIGN = 256


@dataclass(frozen=True)
class PlanStep:
    """One recorded call: its arguments with the array ones left as ``slots`` (index, base, byte offset)."""

    call: Callable[..., None]
    template: tuple[Any, ...]
    slots: tuple[tuple[int, int, int], ...]


@dataclass(frozen=True)
class Plan:
    """The steps of one launcher call, and the bytes of scratch they need."""

    steps: tuple[PlanStep, ...]
    scratch_bytes: int

    @classmethod
    def record(cls, recording: Recording, operands: Sequence[Any]) -> Plan:
        """The plan of ``recording``, whose array arguments are found in ``operands`` (CuPy arrays in
        :data:`OPERANDS` order, None where absent) or among its scratch arrays; other arrays are kept."""
        import cupy

        ranges = [(a.data.ptr, a.data.ptr + a.nbytes, i) for i, a in enumerate(operands) if a is not None]
        offset = 0
        for array in recording.scratch:
            ranges.append((array.data.ptr, array.data.ptr + array.nbytes, (SCRATCH, offset)))
            offset += -(-array.nbytes // SCRATCH_ALIGN) * SCRATCH_ALIGN
        steps = []
        for call, args in recording.calls:
            template, slots = list(args), []
            for index, arg in enumerate(args):
                if not isinstance(arg, cupy.ndarray):
                    continue
                where = _locate(arg.data.ptr, ranges)
                if where is not None:
                    template[index] = None
                    slots.append((index, *where))
            steps.append(PlanStep(call, tuple(template), tuple(slots)))
        return cls(tuple(steps), offset)

    def replay(self, bases: tuple[int, ...], stream: Any = None) -> None:
        """Enqueue every step on ``stream`` (default: the current one) with the slots filled from ``bases``:
        the operands' device pointers in :data:`OPERANDS` order (0 where absent), then the scratch block's."""
        for step in self.steps:
            args = list(step.template)
            for index, base, offset in step.slots:
                args[index] = bases[base] + offset
            step.call(tuple(args), stream)


def _locate(pointer: int, ranges: list[tuple[int, int, Any]]) -> tuple[int, int] | None:
    """(base, byte offset) of ``pointer`` in the first range holding it, or None."""
    for start, end, which in ranges:
        if start <= pointer < end or pointer == start:
            base, first = which if isinstance(which, tuple) else (which, 0)
            return base, first + pointer - start
    return None
