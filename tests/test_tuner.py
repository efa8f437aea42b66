"""The tuner's selection logic and its cached table (CPU)."""

from __future__ import annotations

import pandas as pd

from convkit import tuner
from convkit.problem import ConvProblem
from convkit.results import Case, ResultStore, make_row, params_text


class _Timing:
    def __init__(self, ms: float):
        self.median_ms = self.min_ms = self.max_ms = ms
        self.reps = 5


def _row(problem, variant, knobs, status="ok", ms=None):
    case = Case("convkit", variant, params_text(knobs))
    return make_row(problem, case, status=status, timing=_Timing(ms) if ms else None, rel_err=1e-7)


def test_fastest_correct_candidate_wins_and_wrong_ones_never(tmp_path):
    p = ConvProblem.from_label("7-1-1-32-832")
    store = ResultStore.open(tmp_path, tuner.EXPERIMENT, {})
    store.append(_row(p, "cuconv_tiled", {"tile": "32x32", "splits": 13}, ms=0.012))
    store.append(_row(p, "cuconv_tiled", {"tile": "64x64", "splits": 13}, ms=0.010))
    store.append(_row(p, "cuconv_tiled", {"tile": "16x64", "splits": 13}, status="wrong"))  # no time: never wins
    store.append(_row(p, "cuconv_paper", {"threads": 64}, ms=0.030))
    assert tuner.tuned_knobs(p, "cuconv_tiled", tmp_path) == {"tile": "64x64", "splits": 13}
    assert tuner.tuned_knobs(p, "cuconv_paper", tmp_path) == {"threads": 64}
    assert tuner.tuned_knobs(p, "cuconv_split", tmp_path) is None  # not tuned: the heuristic applies
    assert tuner.tuned_knobs(ConvProblem.from_label("7-8-1-32-832"), "cuconv_tiled", tmp_path) is None


def test_no_table_means_no_tuned_knobs(tmp_path):
    assert tuner.tuned_knobs(ConvProblem.from_label("7-1-1-32-832"), "cuconv_tiled", tmp_path) is None


def test_fastest_of_an_all_failed_frame_is_empty():
    frame = pd.DataFrame([{"label": "a", "pad": 0, "stride": 1, "variant": "v", "status": "wrong",
                           "time_ms_median": float("nan"), "params": "{}"}])  # fmt: skip
    assert tuner.fastest(frame).empty


def test_the_recorded_table_covers_every_problem_and_variant():
    from convkit import networks
    from convkit.bench import CUCONV_VARIANTS
    from convkit.chapter import DEFAULT_RECORDED_GPU
    from convkit.paths import results_dir

    directory = results_dir() / DEFAULT_RECORDED_GPU
    for problem in networks.problems()[::37]:
        for variant in CUCONV_VARIANTS:
            assert tuner.tuned_knobs(problem, variant, directory) is not None, (problem.label, variant)
