"""The study's one timing entry point: CUDA events, warm-up, batched repeats, median/min/max.

Method (recorded in every provenance file as :data:`TIMING_METHOD`):

1. Warm-up runs (module load, cuDNN plan creation, caches) are not timed.
2. One extra run, synchronized, estimates the time per run; the number of repeats is the
   time budget over that estimate, clamped to ``[min_reps, max_reps]``.
3. Repeats are enqueued in batches behind a kernel that holds the stream while the host
   enqueues the batch, so host launch cost (CuPy's, cuDNN's through ctypes) is not inside
   any run's event pair; each run sits between its own pair of CUDA events.
4. With ``flush_l2=True`` a write of twice the L2 size precedes every run, outside its events:
   cold-cache times, as a layer in a network would see them.

The clock is injectable, so the logic is tested on the CPU with fake event times.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

TIMING_METHOD = (
    "CUDA events around each run; warm-up runs untimed; repeats enqueued in batches behind a "
    "stream-holding kernel so host launch cost is excluded; median, min and max of the runs"
)


@dataclass(frozen=True)
class Timing:
    """Per-run times of one measured callable, in milliseconds."""

    times_ms: tuple[float, ...]
    flush_l2: bool = False

    @property
    def reps(self) -> int:
        return len(self.times_ms)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def min_ms(self) -> float:
        return min(self.times_ms)

    @property
    def max_ms(self) -> float:
        return max(self.times_ms)


class Clock(Protocol):
    """What :func:`benchmark` needs from the device; :class:`CudaEventClock` is the real one."""

    def mark(self) -> Any: ...
    def elapsed_ms(self, start: Any, stop: Any) -> float: ...
    def synchronize(self) -> None: ...
    def hold(self, duration_ms: float) -> None: ...
    def flush_l2(self) -> None: ...


@dataclass
class CudaEventClock:
    """CUDA events on CuPy's current stream."""

    _scratch: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        from convkit.core.gpu import require_cupy

        self._cupy = require_cupy()

    def mark(self) -> Any:
        event = self._cupy.cuda.Event()
        event.record()
        return event

    def elapsed_ms(self, start: Any, stop: Any) -> float:
        return float(self._cupy.cuda.get_elapsed_time(start, stop))

    def synchronize(self) -> None:
        self._cupy.cuda.get_current_stream().synchronize()

    def hold(self, duration_ms: float) -> None:
        from convkit.cuda.nvrtc import load_kernel

        kernel = load_kernel("timing", "hold_stream")
        kernel((1,), (1,), (self._cupy.int64(int(duration_ms * 1e6)),))

    def flush_l2(self) -> None:
        if self._scratch is None:
            dev = self._cupy.cuda.Device()
            l2_bytes = int(dev.attributes["L2CacheSize"])
            self._scratch = self._cupy.empty(2 * l2_bytes // 4, dtype=self._cupy.int32)
        self._scratch.fill(0)


#: Upper bound on runs enqueued behind one stream hold (the driver's launch queue is finite).
BATCH_RUNS = 64
#: Longest stream hold, in milliseconds; a batch that would need more is made smaller.
MAX_HOLD_MS = 100.0


def benchmark(
    fn: Callable[[], object],
    *,
    warmup: int = 3,
    min_reps: int = 10,
    max_reps: int = 200,
    budget_ms: float = 200.0,
    flush_l2: bool = False,
    clock: Clock | None = None,
) -> Timing:
    """Time ``fn`` (which enqueues GPU work on the current stream) with CUDA events.

    Args:
        fn: the work to time; called ``warmup + 1 + reps`` times.
        warmup: untimed calls first.
        min_reps: fewest timed runs, whatever the budget.
        max_reps: most timed runs.
        budget_ms: device time to aim for across the timed runs.
        flush_l2: write twice the L2 size before every run (outside its events).
        clock: the event source; CUDA events on CuPy's current stream when None.

    Returns:
        a :class:`Timing` with one time per run.

    Example:
        >>> t = benchmark(lambda: conv2d_direct(x, w))  # doctest: +SKIP
        >>> t.median_ms, t.reps                           # doctest: +SKIP
    """
    if min_reps < 1 or max_reps < min_reps:
        raise ValueError(f"need 1 <= min_reps <= max_reps, got {min_reps}, {max_reps}")
    clock = clock if clock is not None else CudaEventClock()
    for _ in range(warmup):
        fn()
    clock.synchronize()

    # Estimate one run's device time and the host's cost of enqueuing one.
    host_start = time.perf_counter()
    start = clock.mark()
    fn()
    stop = clock.mark()
    host_enqueue_ms = (time.perf_counter() - host_start) * 1e3
    clock.synchronize()
    estimate_ms = max(clock.elapsed_ms(start, stop), 1e-3)
    reps = int(min(max(budget_ms / estimate_ms, min_reps), max_reps))

    # Hold long enough for the host to enqueue the batch; flushes cost host time too.
    per_run_host_ms = 2.0 * host_enqueue_ms + (0.05 if flush_l2 else 0.0)
    batch = max(1, min(BATCH_RUNS, int(MAX_HOLD_MS / per_run_host_ms)))
    times: list[float] = []
    while len(times) < reps:
        count = min(batch, reps - len(times))
        hold_ms = count * per_run_host_ms + 0.05
        started = time.perf_counter()
        clock.hold(hold_ms)
        pairs = []
        for _ in range(count):
            if flush_l2:
                clock.flush_l2()
            begin = clock.mark()
            fn()
            pairs.append((begin, clock.mark()))
        enqueued_ms = (time.perf_counter() - started) * 1e3
        clock.synchronize()
        if enqueued_ms > hold_ms and per_run_host_ms < MAX_HOLD_MS:  # the GPU may have waited on the host:
            per_run_host_ms *= 2  # a longer hold, and this batch again
            batch = max(1, min(BATCH_RUNS, int(MAX_HOLD_MS / per_run_host_ms)))
            continue
        times.extend(clock.elapsed_ms(a, b) for a, b in pairs)
    return Timing(times_ms=tuple(times), flush_l2=flush_l2)


def in_turns(calls: dict[str, Callable[[], Any]], time_one: Callable[[Callable[[], Any]], float], rounds: int, *,
             untimed_rounds: int = 0) -> dict[str, list[float]]:  # fmt: skip
    """``time_one(call)`` of each of ``calls``, ``rounds`` times, the calls taking turns round by round so that
    a busy moment of the host falls on all of them (host-cost and wall-clock comparisons); the first
    ``untimed_rounds`` rounds are run and discarded."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for round_ in range(untimed_rounds + rounds):
        for name, call in calls.items():
            taken = time_one(call)
            if round_ >= untimed_rounds:
                times[name].append(taken)
    return times
