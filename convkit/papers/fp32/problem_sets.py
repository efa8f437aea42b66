"""The chapter's problems: the compute-bound layers of three chapters, each suite by the chapter it comes from."""

from __future__ import annotations

from convkit.core.problem import ConvProblem
from convkit.study import layer_sets, networks

#: A quick run: every QUICK_STEP-th of the networks' configurations, at batch 1 and 32, and of the others.
QUICK_STEP, QUICK_BATCHES = 11, (1, 32)


def suites(quick: bool = False) -> dict[str, list[ConvProblem]]:
    """The problems by the chapter they come from (``quick``: a subset of each)."""
    if quick:
        configs = networks.configurations()[::QUICK_STEP]
        return {
            "cuconv": [c.problem(b) for b in QUICK_BATCHES for c in configs],
            "lu2020": layer_sets.network_3x3_layers()[::QUICK_STEP],
            "chang2022": layer_sets.square_map_grid()[::QUICK_STEP],
        }
    return {
        "cuconv": networks.problems(),
        "lu2020": layer_sets.network_3x3_layers(),
        "chang2022": layer_sets.square_map_grid(),
    }


def problems(quick: bool = False) -> list[ConvProblem]:
    """Every problem of :func:`suites`, once, in order (cuConv's by batch size first)."""
    return list(dict.fromkeys(p for group in suites(quick).values() for p in group))
