"""The timing harness, the ceilings and the out-of-memory path on a real GPU."""

from __future__ import annotations

import pytest

from convkit.bench import measure
from convkit.core.problem import ConvProblem
from convkit.cuda.timing import benchmark
from convkit.op.cases import cases
from convkit.papers.ceilings import measure as ceilings
from convkit.study.results import ResultStore

pytestmark = pytest.mark.gpu


def test_host_launch_cost_stays_out_of_the_events():
    import cupy

    a = cupy.zeros(1, dtype=cupy.float32)
    timing = benchmark(lambda: a.fill(1.0), min_reps=50, max_reps=50)
    assert timing.reps == 50
    # a one-element fill runs for a few microseconds; host launch cost inside the events would add more
    assert 0 < timing.median_ms < 0.02, timing.median_ms


def test_longer_work_times_longer():
    import cupy

    small, large = cupy.ones(1 << 16, dtype=cupy.float32), cupy.ones(1 << 26, dtype=cupy.float32)
    t_small = benchmark(lambda: small.fill(2.0), min_reps=20)
    t_large = benchmark(lambda: large.fill(2.0), min_reps=20, flush_l2=True)
    assert t_large.median_ms > 10 * t_small.median_ms
    assert t_large.flush_l2


def test_quick_ceilings_all_pass_their_checks(tmp_path):
    store = ceilings.open_store(tmp_path, {"test": True})
    assert ceilings.run(store, quick=True) > 0
    rows = store.rows()
    assert rows and all(r["status"] == "ok" for r in rows), [r for r in rows if r["status"] != "ok"]
    assert ceilings.run(store, quick=True) == 0  # resumed: nothing left to measure
    reopened = ResultStore(tmp_path, ceilings.EXPERIMENT, columns=ceilings.COLUMNS, key_columns=ceilings.KEY_COLUMNS)
    assert len(reopened.rows()) == len(rows)


def test_a_problem_too_large_for_the_gpu_is_recorded_as_oom():
    problem = ConvProblem(4096, 1024, 128, 128, 64, 3, 3, pad=1)  # a 275 GB input
    todo = cases(problem, ())
    rows = list(measure.measure_problem(problem, todo, measure.Kernels()))
    assert [r["status"] for r in rows] == ["oom"] * len(todo)
