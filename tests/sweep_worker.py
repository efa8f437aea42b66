"""A sweep with a fake measurement, run as a separate process by test_results.py's kill test.

Usage: python sweep_worker.py DIRECTORY DELAY_SECONDS
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from convkit.bench.rows import Case, make_row
from convkit.core.problem import ConvProblem
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


def run(directory: Path, delay: float) -> int:
    store = ResultStore.open(directory, "killtest", {"worker": True})
    return sweep(store, PROBLEMS, lambda p: CASES, fake_measure(delay))


if __name__ == "__main__":
    run(Path(sys.argv[1]), float(sys.argv[2]))
