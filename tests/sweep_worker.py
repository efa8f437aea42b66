"""A sweep with a fake measurement, run as a separate process by test_results.py's kill test, and by
test_shards.py's, sharded on a Dask cluster (imported by its workers: they run with this folder on PYTHONPATH).

Usage: python sweep_worker.py DIRECTORY DELAY_SECONDS [SCHEDULER_ADDRESS]
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from convkit.bench.rows import make_row
from convkit.core.problem import ConvProblem
from convkit.op.cases import Case
from convkit.study.results import ResultStore
from convkit.study.sweep import sweep

PROBLEMS = [ConvProblem.same(1, c, 7, 7, 32, 3) for c in range(1, 11)]
CASES = [Case("convkit", "direct", "{}"), Case("cudnn", "GEMM"), Case("cudnn", "FFT")]


def fake_measure(delay: float):
    def measure(problem, todo):
        for case in todo:
            time.sleep(delay)
            yield make_row(problem, case, status="ok", rel_err=1e-7, note=f"c={problem.c}")

    return measure


def fake_provenance() -> dict:
    """A worker's run without a GPU: which process measured (each worker a run of its own)."""
    return {"gpu": "fake", "gpu_index": str(os.getpid() % 8), "gpu_uuid": f"fake-{os.getpid()}", "pid": os.getpid()}


def run(directory: Path, delay: float, scheduler: str | None = None) -> int:
    """The fake sweep into ``directory``: in this process, or sharded on the cluster at ``scheduler``."""
    store = ResultStore.open(directory, "killtest", {"worker": True})
    if scheduler is None:
        return sweep(store, PROBLEMS, lambda p: CASES, fake_measure(delay))
    from distributed import Client

    from convkit.study.shards import DaskSharder
    from convkit.study.sweep import measuring_on

    with Client(scheduler) as client, measuring_on(DaskSharder(client, provenance=fake_provenance)):
        return sweep(store, PROBLEMS, lambda p: CASES, fake_measure(delay), progress=print)


if __name__ == "__main__":
    run(Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
