"""Lu, Zhang, Wang 2020 (column reuse): the warp-shuffle exchange and the memory traffic, on the CPU.

Section "Column Reuse" (Figure 3, Algorithms 1-2): the 32 lanes of a warp compute 32 adjacent output
columns; for one filter row lane ``t`` needs the window ``x[c0 + t + s]``, ``s = 0..K-1``. Each lane
loads only the window slots in a *load set* and gets the others from its neighbours with
``__shfl_xor_sync``. A step ``(j, m)`` fills slot ``j`` in every lane: a lane whose bit ``m`` is clear
receives partner ``t + m``'s slot ``j - m``, a lane whose bit ``m`` is set receives partner ``t - m``'s
slot ``j + m``. So lanes with the bit set send slot ``j - m`` (:attr:`Step.low`), lanes with the bit
clear send slot ``j + m`` (:attr:`Step.high`); the step is legal once every lane holds both.

- :func:`exchange_schedule` finds the smallest load set and the steps, :func:`schedule_macros` hands
  them to ``kernels/lu2020.cu`` as NVRTC macros, so the simulator and the kernel run one exchange.
- :func:`simulate_exchange` executes a schedule with ``__shfl_xor`` semantics and checks every window.
- :func:`warp_loads`, :func:`problem_loads` and :func:`transactions_table` count the load instructions
  (requests) and 32-byte sectors the kernels issue, one interior warp or a whole grid.

Schedules (loads; steps as (slot, xor mask)), found by the search below:

====  ============  ====================================================
K     loads         steps
====  ============  ====================================================
1     0             none
3     0, 2          (1, 1)
5     0, 4          (2, 2) (1, 1) (3, 1)               (the paper's Figure 3)
7     0, 2, 6       (1, 1) (4, 2) (3, 1) (5, 1)
9     0, 8          (4, 4) (2, 2) (6, 2) (1, 1) (3, 1) (5, 1) (7, 1)
====  ============  ====================================================

K = 7 needs a third load: 6 is not twice a power of two, so no step fills a slot from (0, 6) alone.
Everything here is numpy arithmetic, tested on the CPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from convkit.families.lu2020.exchange import WARP, Schedule, Step, check_k, exchange_schedule

#: The kernels of ``kernels/lu2020.cu`` whose memory traffic is counted here.
METHODS = ("direct", "column_naive", "column", "row", "combined")
#: Methods whose warp computes one output row (the others compute ``rows`` rows down each column).
SINGLE_ROW_METHODS = ("direct", "column_naive", "column")
#: Methods that load only the schedule's slots of each input row (the others load all K).
COLUMN_REUSE_METHODS = ("column_naive", "column", "combined")
_FLOAT = 4
_SECTOR = 32
#: The paper's stated loads (section "Column Reuse", last paragraph), K = 5: (per row, per window).
PAPER_LOADS = {(5, "direct"): (5, 25), (5, "column"): (2, 10)}


# --- Executing it ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepTrace:
    """One executed step: ``sent[t]`` the slot lane t sent, ``partner[t] = t ^ mask`` the lane it
    received from, ``received[t]`` the value it got (into slot ``step.slot``), ``held`` all windows after."""

    step: Step
    sent: np.ndarray
    partner: np.ndarray
    received: np.ndarray
    held: np.ndarray


@dataclass(frozen=True)
class ExchangeTrace:
    """A simulated exchange: ``loaded[t, s]`` after the loads (NaN = not loaded), the steps, the final
    ``held[t, s]`` (== t + s everywhere), and the per-lane counts of loads and shuffles per window row."""

    schedule: Schedule
    loaded: np.ndarray
    steps: tuple[StepTrace, ...]
    held: np.ndarray
    loads: int
    shuffles: int


def simulate_exchange(k: int, lanes: int = WARP, schedule: Schedule | None = None) -> ExchangeTrace:
    """Run a schedule on ``lanes`` lanes with ``__shfl_xor_sync`` semantics and check every window.

    Why: the proof that a schedule is right, and the data Figure 3 is drawn from. Lane t "loads" the
    global column index t + s into slot s; a step has each lane send :attr:`Step.high` (bit clear)
    or :attr:`Step.low` (bit set) and receive its partner ``t ^ mask``'s value.

    Args:
        k: the filter width (odd).
        lanes: lanes simulated, a power of two larger than every mask used (32: a warp).
        schedule: the schedule to run; :func:`exchange_schedule` ``(k)`` by default.

    Raises:
        ValueError: a lane sends a slot it does not hold, or a window ends wrong (a schedule bug), or
            the arguments do not fit (naming them).
    """
    check_k(k)
    schedule = schedule or exchange_schedule(k)
    if schedule.k != k:
        raise ValueError(f"schedule is for k={schedule.k}, not k={k}")
    if lanes < 1 or lanes & (lanes - 1):
        raise ValueError(f"lanes must be a power of two, got {lanes}")
    if any(step.mask >= lanes for step in schedule.steps):
        raise ValueError(f"lanes={lanes} is too few for the schedule's masks {[s.mask for s in schedule.steps]}")
    lane = np.arange(lanes)
    expected = (lane[:, None] + np.arange(k)[None, :]).astype(float)
    held = np.full((lanes, k), np.nan)
    held[:, list(schedule.loads)] = expected[:, list(schedule.loads)]
    loaded = held.copy()
    traces = []
    for step in schedule.steps:
        bit_set = (lane & step.mask) != 0
        sent = np.where(bit_set, step.low, step.high)
        if np.any((sent < 0) | (sent >= k)):
            raise ValueError(f"step {step} sends a slot outside the window 0..{k - 1}")
        value = held[lane, sent]
        if np.isnan(value).any():
            bad = int(np.flatnonzero(np.isnan(value))[0])
            raise ValueError(f"step {step}: lane {bad} sends slot {sent[bad]}, which it does not hold")
        partner = lane ^ step.mask
        received = value[partner]
        held = held.copy()
        held[:, step.slot] = received
        traces.append(StepTrace(step, sent, partner, received, held))
    if not np.array_equal(held, expected):  # NaN != NaN, so a missing slot fails too
        t, s = np.argwhere(~(held == expected))[0]
        raise ValueError(f"lane {t} slot {s} holds {held[t, s]}, not column {expected[t, s]:.0f}")
    return ExchangeTrace(schedule, loaded, tuple(traces), held, len(schedule.loads), len(schedule.steps))


# --- Memory traffic ------------------------------------------------------------------------------------


def _check_method(method: str) -> None:
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")


def _rows_per_warp(method: str, rows: int) -> int:
    if rows < 1:
        raise ValueError(f"rows must be >= 1, got {rows}")
    return 1 if method in SINGLE_ROW_METHODS else rows


def _offsets(k: int, method: str) -> tuple[int, ...]:
    """Window offsets a warp issues one load instruction for, per input row."""
    return exchange_schedule(k).loads if method in COLUMN_REUSE_METHODS else tuple(range(k))


@dataclass(frozen=True)
class WarpLoads:
    """Input loads of one interior warp (no padding hit; the K * K filter loads are not counted).

    Args:
        method: one of :data:`METHODS`.
        k: filter width.
        rows: output rows per warp (1 for the single-row methods).
        requests: load instructions (a request each: all lanes active).
        sectors: 32-byte sectors those instructions touch.
        outputs: outputs the warp computes, 32 * rows.
        shuffles: shuffle instructions.
    """

    method: str
    k: int
    rows: int
    requests: int
    sectors: int
    outputs: int
    shuffles: int

    @property
    def requests_per_output(self) -> float:
        return self.requests / self.outputs

    @property
    def sectors_per_output(self) -> float:
        return self.sectors / self.outputs


def warp_loads(k: int, method: str, *, rows: int = 1, width_offset: int = 0) -> WarpLoads:
    """Load instructions and sectors of one interior warp of ``method`` (``kernels/lu2020.cu``).

    Why: the per-output traffic the paper's argument is about, free of image edges. A load at window
    offset s covers 32 contiguous floats starting ``width_offset + s`` elements past a 128-byte
    boundary: 4 sectors when that start is a multiple of 8 floats, else 5.

    Args:
        k: filter width (odd).
        method: one of :data:`METHODS`.
        rows: output rows per warp of ``row`` and ``combined`` (T); the single-row methods use 1.
        width_offset: element offset of the warp's first column ``q0 - pad`` from a 128-byte boundary
            (e.g. ``-pad`` for an aligned row start); every input row is taken to start aligned.

    Example:
        >>> warp_loads(5, "direct").requests, warp_loads(5, "column").requests
        (25, 10)
    """
    check_k(k)
    _check_method(method)
    t = _rows_per_warp(method, rows)
    lane = np.arange(WARP)
    per_row = [len(np.unique((width_offset + s + lane) * _FLOAT // _SECTOR)) for s in _offsets(k, method)]
    input_rows = k if method in SINGLE_ROW_METHODS else t + k - 1
    shuffles = len(exchange_schedule(k).steps) if method in COLUMN_REUSE_METHODS else 0
    return WarpLoads(
        method, k, t, input_rows * len(per_row), input_rows * sum(per_row), WARP * t, input_rows * shuffles
    )


@dataclass(frozen=True)
class ProblemLoads:
    """Whole-grid load traffic of one single-channel convolution; ``requests`` and ``sectors`` include
    the ``filter_requests`` (one sector each)."""

    requests: int
    sectors: int
    filter_requests: int
    warps: int
    outputs: int

    @property
    def input_requests(self) -> int:
        return self.requests - self.filter_requests

    @property
    def input_sectors(self) -> int:
        return self.sectors - self.filter_requests


def problem_loads(h: int, w: int, k: int, pad: int, method: str, *, rows: int = 1) -> ProblemLoads:
    """Requests and 32-byte sectors the whole grid of ``method`` issues for an H x W image, K x K filter.

    Why: edges matter on small maps (skipped rows, partly active loads, warps past Q), and this is
    the count to compare with the profiler's. The model, which the kernels follow exactly: warps
    at q0 = 32 * bx (bx < ceil(Q / 32)) and p0 = T * wy (wy < ceil(P / T)); each loads the K * K filter
    (uniform, one sector each); then each input row h in [0, H) it needs (K rows, or T + K - 1 for
    row reuse) gets one load per window offset; lane t is active where column q0 - pad + t + s is
    in [0, W). A load is a request if any lane is active; its sectors are the distinct
    ``(h * W + c) * 4 // 32``, with the image 256-byte aligned.

    Args:
        h: image height.
        w: image width.
        k: filter width (odd).
        pad: zero padding on every side.
        method: one of :data:`METHODS`.
        rows: output rows per warp of ``row`` and ``combined`` (T); the single-row methods use 1.
    """
    check_k(k)
    _check_method(method)
    t = _rows_per_warp(method, rows)
    p, q = h + 2 * pad - k + 1, w + 2 * pad - k + 1
    if pad < 0 or p < 1 or q < 1:
        raise ValueError(f"no output for h={h}, w={w}, k={k}, pad={pad}")
    warps_x, warps_y = math.ceil(q / WARP), math.ceil(p / t)
    # How many warps of one column of warps load input row r (skipped rows are outside [0, H)).
    span = k if method in SINGLE_ROW_METHODS else t + k - 1
    first = np.arange(warps_y) * t - pad
    starts = (first[:, None] + np.arange(span)[None, :]).ravel()
    uses = np.bincount(starts[(starts >= 0) & (starts < h)], minlength=h)
    row_base = np.arange(h) * w  # element index of each row's column 0
    requests = sectors = 0
    for bx in range(warps_x):
        for s in _offsets(k, method):
            lo, hi = max(0, WARP * bx - pad + s), min(w, WARP * bx - pad + s + WARP)  # active columns
            if hi <= lo:
                continue
            # Active lanes read a contiguous run, so its sectors are last - first + 1.
            per_row = (row_base + hi - 1) * _FLOAT // _SECTOR - (row_base + lo) * _FLOAT // _SECTOR + 1
            requests += int(uses.sum())
            sectors += int(uses @ per_row)
    filters = warps_x * warps_y * k * k
    return ProblemLoads(requests + filters, sectors + filters, filters, warps_x * warps_y, p * q)


def transactions_table(ks: tuple[int, ...] = (3, 5, 7), rows: int = 8, *, width_offset: int = 0) -> Any:
    """Loads and sectors per output of every method for interior warps, beside the paper's numbers.

    Why: the section's claim (K = 5: 5 -> 2 loads per window row, 25 -> 10 per window) and what row
    reuse adds on top. One row per (k, method), columns:

    - ``rows``: output rows per warp (T; ``rows`` for row/combined, else 1).
    - ``loads_per_row``: load instructions per input row (K, or the schedule's loads).
    - ``loads_per_window``: loads one lane issues per output (K * K for direct, (T + K - 1) * K / T
      for row reuse, ...), i.e. the paper's "25 -> 10".
    - ``loads_per_output``: warp requests / warp outputs (filter loads excluded).
    - ``sectors_per_output``: warp sectors / warp outputs, ``width_offset`` as in :func:`warp_loads`.
    - ``shuffles_per_row``: shuffle steps per input row.
    - ``paper_per_row``, ``paper``: the paper's loads per row and per window where it states them
      (K = 5, direct and column reuse), else NaN.
    """
    import pandas as pd

    records = []
    for k in ks:
        for method in METHODS:
            warp = warp_loads(k, method, rows=rows, width_offset=width_offset)
            paper = PAPER_LOADS.get((k, "column" if method == "column_naive" else method), (math.nan, math.nan))
            records.append(
                {
                    "k": k,
                    "method": method,
                    "rows": warp.rows,
                    "loads_per_row": len(_offsets(k, method)),
                    "loads_per_window": warp.requests / warp.rows,
                    "loads_per_output": warp.requests_per_output,
                    "sectors_per_output": warp.sectors_per_output,
                    "shuffles_per_row": len(exchange_schedule(k).steps) if method in COLUMN_REUSE_METHODS else 0,
                    "paper_per_row": float(paper[0]),
                    "paper": float(paper[1]),
                }
            )
    return pd.DataFrame.from_records(records)
