"""Lu, Zhang, Wang 2020 (column reuse): the warp-shuffle exchange the kernels compile in.

Section "Column reuse" of the paper: a lane loads a few slots of its K-wide window and takes the rest from
its neighbours with ``__shfl_xor_sync``. :func:`exchange_schedule` finds the fewest loads and the steps
that fill the rest, :func:`schedule_macros` compiles them into ``kernels/lu2020.cu``; the chapter's warp
simulator (``convkit.papers.lu2020.warp_sim``) executes the same schedule on the CPU and counts the loads.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from convkit.core.memo import memoize

WARP = 32


#: Shuffle xor masks a step may use, largest first (the order the step builder tries them in).
MASKS = (16, 8, 4, 2, 1)


@dataclass(frozen=True)
class Step:
    """One shuffle: every lane fills window slot ``slot`` through ``__shfl_xor_sync(..., mask)``."""

    slot: int
    mask: int

    @property
    def low(self) -> int:
        """The slot lanes whose bit ``mask`` is set send (their partner ``t - mask`` needs it)."""
        return self.slot - self.mask

    @property
    def high(self) -> int:
        """The slot lanes whose bit ``mask`` is clear send (their partner ``t + mask`` needs it)."""
        return self.slot + self.mask


@dataclass(frozen=True)
class Schedule:
    """How a lane gathers its K-wide window: the slots it loads, then the shuffle steps in order."""

    k: int
    loads: tuple[int, ...]
    steps: tuple[Step, ...]


def check_k(k: int) -> None:
    """Raise ValueError unless ``k`` is an odd filter width >= 1."""
    if not isinstance(k, (int, np.integer)) or k < 1 or k % 2 == 0:
        raise ValueError(f"k must be an odd filter width >= 1, got {k!r}")


def _build_steps(k: int, loads: tuple[int, ...]) -> tuple[Step, ...] | None:
    """Greedy rounds: each round fills, in increasing order, every missing slot that a legal step with
    the largest mask can fill from the slots held before the round. None if the slots never fill."""
    held = set(loads)
    steps: list[Step] = []
    while len(held) < k:
        new = []
        for j in (j for j in range(k) if j not in held):
            m = next((m for m in MASKS if j - m in held and j + m in held), None)
            if m is not None:
                new.append(Step(j, m))
        if not new:
            return None
        steps += new
        held |= {step.slot for step in new}
    return tuple(steps)


@memoize()
def exchange_schedule(k: int) -> Schedule:
    """The smallest load set for a K-wide window and the shuffle steps that fill the rest.

    Why: fewer loads per window row is the whole point of column reuse (the paper: 5 -> 2 for K = 5).
    The load set must hold 0 and K-1 (a step fills the midpoint of two held slots, so the filled
    slots never leave [min, max]); sets are tried by size, the lexicographically smallest of the
    minimal ones wins, so the answer is deterministic. Steps come from :func:`_build_steps`.

    Args:
        k: the filter width, odd and >= 1.

    Returns:
        The :class:`Schedule`; e.g. ``exchange_schedule(5)`` loads (0, 4) and steps (2, 2), (1, 1), (3, 1).
    """
    check_k(k)
    if k == 1:
        return Schedule(1, (0,), ())
    for inner in range(k - 1):
        for middle in itertools.combinations(range(1, k - 1), inner):  # lexicographic order
            loads = (0, *middle, k - 1)
            steps = _build_steps(k, loads)
            if steps is not None:
                return Schedule(k, loads, steps)
    raise AssertionError("unreachable: loading every slot always works")


def schedule_macros(s: Schedule) -> tuple[str, ...]:
    """The NVRTC ``-D`` options that compile ``s`` into ``kernels/lu2020.cu`` (LU_K, LU_LOADS, LU_STEPS...).

    Why: the kernel and :func:`simulate_exchange` must run the same exchange. LU_STEPS is the
    (slot, mask) pairs flattened; with no steps (K = 1) it is a ``0,0`` placeholder so the C array
    is not empty, and LU_NSTEPS = 0 keeps the kernel from reading it.
    """
    steps = ",".join(f"{step.slot},{step.mask}" for step in s.steps) or "0,0"
    return (
        f"-DLU_K={s.k}",
        f"-DLU_NLOADS={len(s.loads)}",
        f"-DLU_LOADS={','.join(str(slot) for slot in s.loads)}",
        f"-DLU_NSTEPS={len(s.steps)}",
        f"-DLU_STEPS={steps}",
    )
