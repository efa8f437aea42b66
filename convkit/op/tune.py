"""Tuning on first use: a problem no dispatch table records gets its implementation measured here, once.

Every family's kernel that runs the problem (at its shipped tuned launch, else its heuristic one), every
cuDNN algorithm and the library peers are checked against float64 on fresh random inputs and timed with
the tuning budget, by the same rule as the study's sweeps (:mod:`convkit.bench.measure`); the fastest that
passed is kept in the user's cache (:func:`convkit.op.dispatch.cache_path`).
"""

from __future__ import annotations

from convkit.bench.measure import TUNING_TIMING, cases, measure_problem
from convkit.bench.variant import Kernels
from convkit.core import shipped
from convkit.core.precision import ALLOWED, DEFAULT_INPUT_PRECISION
from convkit.core.problem import ConvProblem
from convkit.families import FAMILIES, owner, precision_of
from convkit.op.dispatch import Choice, cache_path, read_table, table_key, write_table


def tune(problem: ConvProblem, gpu: str, input_precision: str = DEFAULT_INPUT_PRECISION) -> Choice:
    """Check and time every family's kernel of a precision ``input_precision`` allows that runs ``problem``,
    every cuDNN algorithm and the library peers (FP32 FMA), once; keep the fastest that passed in the user's
    cache and return it. Needs the GPU."""
    allowed = ALLOWED[input_precision]
    variants = tuple(v for f in FAMILIES for v in f.variants if v.precision in allowed)
    kernels = Kernels(variants, tuple(v for f in FAMILIES for v in f.peers))
    todo = cases(problem, kernels.variants, cudnn=True, pytorch=False, peers=kernels.peers,
                 tuned=shipped.knob_table(gpu))  # fmt: skip
    rows = [r for r in measure_problem(problem, todo, kernels, timing=TUNING_TIMING) if r["status"] == "ok"]
    if not rows:
        raise RuntimeError(f"no implementation passed its check on {problem.key}")
    best = min(rows, key=lambda r: float(r["time_ms_median"]))
    mine = best["impl"] == "convkit"
    precision = precision_of(best["impl"], best["variant"])
    choice = Choice(best["impl"], best["variant"], best["params"] if mine else "",
                    owner(best["variant"]) if mine else "", 1e3 * float(best["time_ms_median"]), "tuned",
                    precision)  # fmt: skip
    path = cache_path(gpu)
    write_table(path, gpu, read_table(path, gpu=gpu) | {table_key(problem.key, input_precision): choice})
    return choice
