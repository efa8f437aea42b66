"""The tuning table's selection logic and its cache (CPU)."""

from __future__ import annotations

import pandas as pd

from convkit.bench.rows import Case, make_row, params_text
from convkit.core.problem import ConvProblem
from convkit.study import tuning
from convkit.study.results import ResultStore

EXPERIMENT = "some_tuning"


class _Timing:
    def __init__(self, ms: float):
        self.median_ms = self.min_ms = self.max_ms = ms
        self.reps = 5


def _row(problem, variant, knobs, status="ok", ms=None):
    case = Case("convkit", variant, params_text(knobs))
    return make_row(problem, case, status=status, timing=_Timing(ms) if ms else None, rel_err=1e-7)


def test_fastest_correct_candidate_wins_and_wrong_ones_never(tmp_path):
    p = ConvProblem.from_label("7-1-1-32-832")
    store = ResultStore.open(tmp_path, EXPERIMENT, {})
    store.append(_row(p, "cuconv_tiled", {"tile": "32x32", "splits": 13}, ms=0.012))
    store.append(_row(p, "cuconv_tiled", {"tile": "64x64", "splits": 13}, ms=0.010))
    store.append(_row(p, "cuconv_tiled", {"tile": "16x64", "splits": 13}, status="wrong"))  # no time: never wins
    store.append(_row(p, "cuconv_paper", {"threads": 64}, ms=0.030))
    assert tuning.tuned_knobs(p, "cuconv_tiled", experiment=EXPERIMENT, directory=tmp_path) == {
        "tile": "64x64",
        "splits": 13,
    }
    assert tuning.tuned_knobs(p, "cuconv_paper", experiment=EXPERIMENT, directory=tmp_path) == {"threads": 64}
    assert (
        tuning.tuned_knobs(p, "cuconv_split", experiment=EXPERIMENT, directory=tmp_path) is None
    )  # not tuned: the heuristic applies
    assert (
        tuning.tuned_knobs(
            ConvProblem.from_label("7-8-1-32-832"), "cuconv_tiled", experiment=EXPERIMENT, directory=tmp_path
        )
        is None
    )


def test_no_table_means_no_tuned_knobs(tmp_path):
    assert (
        tuning.tuned_knobs(
            ConvProblem.from_label("7-1-1-32-832"), "cuconv_tiled", experiment=EXPERIMENT, directory=tmp_path
        )
        is None
    )


def test_fastest_of_an_all_failed_frame_is_empty():
    frame = pd.DataFrame([{"label": "a", "pad": 0, "stride": 1, "variant": "v", "status": "wrong",
                           "time_ms_median": float("nan"), "params": "{}"}])  # fmt: skip
    assert tuning.fastest(frame).empty
