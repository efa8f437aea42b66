"""Tuning on first use: a problem no dispatch table records gets its implementation measured here, once.

At about the cost of ``torch.backends.cudnn.benchmark``: the families that run any filter, stride and padding
(each declares ``tuned_on_first_use``; at the package's shipped launch for the problem, else its heuristic one), cuBLAS
on 1x1 layers and every cuDNN algorithm are each timed briefly (:data:`FIRST_USE_TIMING`) without a check, as
cuDNN's own autotuner does; then the fastest is checked once against float64 on the GPU (the next fastest where
it fails), and kept in the user's cache (:func:`convkit.op.dispatch.cache_path`). The papers' specialised
kernels run where the package's tables record them; a sweep of the study measures every kernel with its
check (:mod:`convkit.bench.measure`).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from convkit.core import reference, shipped
from convkit.core.precision import ALLOWED, DEFAULT_INPUT_PRECISION
from convkit.core.problem import ConvProblem
from convkit.families import FAMILIES, owner, precision_of
from convkit.families.registry import Kernels
from convkit.op.cases import cases, poisoned_run_error, prepare_case, random_inputs, tolerance_for
from convkit.op.dispatch import Choice, cache_path, read_table, table_key, write_table

#: A candidate's timing on first use: one warm-up, then up to 5 runs within about 1 ms.
FIRST_USE_TIMING: dict[str, Any] = {"warmup": 1, "min_reps": 2, "max_reps": 5, "budget_ms": 1.0}
#: Tuning that takes longer than this (seconds) says so on stderr.
SLOW_SECONDS = 1.0


def tune(problem: ConvProblem, gpu: str, input_precision: str = DEFAULT_INPUT_PRECISION) -> Choice:
    """Time every candidate of a precision ``input_precision`` allows on ``problem`` (see the module doc), keep
    the fastest that passes its float64 check in the user's cache and return it. Needs the GPU."""
    from convkit.cuda.timing import benchmark

    start = time.perf_counter()
    allowed = ALLOWED[input_precision]
    families = [f for f in FAMILIES if f.tuned_on_first_use]
    kernels = Kernels(tuple(v for f in families for v in f.variants if v.precision in allowed),
                      tuple(v for f in families for v in f.peers if v.precision in allowed))  # fmt: skip
    x, w, y = random_inputs(problem)
    timed = []
    for case in cases(problem, kernels.variants, cudnn=True, pytorch=False, peers=kernels.peers,
                      tuned=shipped.knob_table(gpu)):  # fmt: skip
        try:
            prepared = prepare_case(problem, case, kernels, x, w, y)()
            if isinstance(prepared, dict):  # cannot run here (a cuDNN algorithm over its workspace limit)
                continue
            timed.append((benchmark(prepared[0], **FIRST_USE_TIMING).median_ms, case, prepared))
        except Exception:  # a candidate that fails to run is not a choice; the others are
            continue
    ref = reference.conv2d(x, w, pad=problem.pad, stride=problem.stride)  # float64, on the GPU

    def passes(case: Any, run: Any, check_run: Any) -> bool:
        return poisoned_run_error(y, ref, check_run or run) <= tolerance_for(case, kernels)

    passed = next((item for item in sorted(timed, key=lambda item: item[0]) if passes(item[1], *item[2])), None)
    if passed is None:
        raise RuntimeError(f"no implementation passed its check on {problem.key}")
    ms, case, _ = passed
    mine = case.impl == "convkit"
    choice = Choice(case.impl, case.variant, case.params if mine else "", owner(case.variant) if mine else "",
                    1e3 * ms, "tuned", precision_of(case.impl, case.variant))  # fmt: skip
    path = cache_path(gpu)
    write_table(path, gpu, read_table(path, gpu=gpu) | {table_key(problem.key, input_precision): choice})
    seconds = time.perf_counter() - start
    if seconds > SLOW_SECONDS:
        print(f"convkit: tuned {problem.key} in {seconds:.1f} s ({len(timed)} candidates; kept in {path})",
              file=sys.stderr)  # fmt: skip
    return choice
