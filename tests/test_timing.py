"""The timing logic with a fake clock: call counts, repeat clamping, L2 flushes, statistics."""

from __future__ import annotations

import pytest

from convkit.cuda.timing import BATCH_RUNS, Timing, benchmark


class FakeClock:
    """Marks are integers; each (start, stop) pair around one fn call lasts the next programmed time."""

    def __init__(self, durations_ms):
        self.durations = list(durations_ms)
        self.marks = 0
        self.flushes = 0
        self.holds = []
        self.syncs = 0
        self.elapsed_calls = 0

    def mark(self):
        self.marks += 1
        return self.marks

    def elapsed_ms(self, start, stop):
        assert stop == start + 1, "each run sits between its own pair of events"
        self.elapsed_calls += 1
        return self.durations[(self.elapsed_calls - 1) % len(self.durations)]

    def synchronize(self):
        self.syncs += 1

    def hold(self, duration_ms):
        self.holds.append(duration_ms)

    def flush_l2(self):
        self.flushes += 1


def counter():
    calls = []
    return calls, lambda: calls.append(1)


def test_calls_are_warmup_plus_estimate_plus_reps():
    calls, fn = counter()
    clock = FakeClock([1.0])
    t = benchmark(fn, warmup=4, min_reps=10, max_reps=1000, budget_ms=50.0, clock=clock)
    assert t.reps == 50  # budget 50 ms / 1 ms per run
    assert len(calls) == 4 + 1 + 50
    assert clock.flushes == 0
    assert len(clock.holds) >= 1  # the runs were queued behind a stream hold


@pytest.mark.parametrize(("estimate", "expected"), [(100.0, 7), (0.001, 300), (2.0, 100)])
def test_reps_are_clamped_to_the_bounds(estimate, expected):
    _, fn = counter()
    t = benchmark(fn, warmup=0, min_reps=7, max_reps=300, budget_ms=200.0, clock=FakeClock([estimate]))
    assert t.reps == expected


def test_flush_before_every_timed_run_only_when_asked():
    _, fn = counter()
    clock = FakeClock([1.0])
    t = benchmark(fn, warmup=2, min_reps=12, max_reps=12, flush_l2=True, clock=clock)
    assert clock.flushes == t.reps == 12 and t.flush_l2


def test_runs_are_batched_behind_a_stream_hold():
    _, fn = counter()
    clock = FakeClock([0.01])
    t = benchmark(fn, warmup=0, min_reps=200, max_reps=200, clock=clock)
    assert t.reps == 200
    assert len(clock.holds) >= -(-200 // BATCH_RUNS)
    assert all(h > 0 for h in clock.holds)


def test_statistics_come_from_the_timed_runs():
    # the first elapsed value is the estimate run; the rest are the timed runs
    clock = FakeClock([1.0, 3.0, 1.0, 2.0, 5.0, 4.0])
    _, fn = counter()
    t = benchmark(fn, warmup=0, min_reps=5, max_reps=5, clock=clock)
    assert t.times_ms == (3.0, 1.0, 2.0, 5.0, 4.0)
    assert (t.median_ms, t.min_ms, t.max_ms, t.reps) == (3.0, 1.0, 5.0, 5)


def test_timing_object_and_bad_bounds():
    assert Timing((2.0, 4.0)).median_ms == 3.0
    with pytest.raises(ValueError, match="min_reps"):
        benchmark(lambda: None, min_reps=0, clock=FakeClock([1.0]))
    with pytest.raises(ValueError, match="min_reps"):
        benchmark(lambda: None, min_reps=5, max_reps=4, clock=FakeClock([1.0]))


def test_in_turns_alternates_the_calls_and_drops_the_untimed_rounds():
    from convkit.cuda.timing import in_turns

    order: list[str] = []
    calls = {"a": lambda: order.append("a"), "b": lambda: order.append("b")}
    clock = iter(range(100))
    times = in_turns(calls, lambda call: (call(), float(next(clock)))[1], 2, untimed_rounds=1)
    assert order == ["a", "b"] * 3
    assert times == {"a": [2.0, 4.0], "b": [3.0, 5.0]}
