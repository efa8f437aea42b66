"""The tuning table's selection logic and its cache (CPU)."""

from __future__ import annotations

import pandas as pd

from convkit.bench.rows import make_row
from convkit.core.problem import ConvProblem
from convkit.op.cases import Case, params_text
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
    assert tuning.knob_table(tmp_path, EXPERIMENT)(p, "cuconv_tiled") == {
        "tile": "64x64",
        "splits": 13,
    }
    assert tuning.knob_table(tmp_path, EXPERIMENT)(p, "cuconv_paper") == {"threads": 64}
    assert tuning.knob_table(tmp_path, EXPERIMENT)(p, "cuconv_split") is None  # not tuned: the heuristic applies
    assert tuning.knob_table(tmp_path, EXPERIMENT)(ConvProblem.from_label("7-8-1-32-832"), "cuconv_tiled") is None


def test_no_table_means_no_tuned_knobs(tmp_path):
    assert tuning.knob_table(tmp_path, EXPERIMENT)(ConvProblem.from_label("7-1-1-32-832"), "cuconv_tiled") is None


def test_fastest_of_an_all_failed_frame_is_empty():
    frame = pd.DataFrame([{"label": "a", "pad": 0, "stride": 1, "variant": "v", "status": "wrong",
                           "time_ms_median": float("nan"), "params": "{}"}])  # fmt: skip
    assert tuning.fastest_tuned(frame).empty


def _tuning_table(directory, problem, variant, knobs):
    ResultStore.open(directory, "x_tuning", {}).append(_row(problem, variant, knobs, ms=0.01))


def test_a_sweep_runs_the_knobs_tuned_in_its_own_folder(tmp_path, monkeypatch):
    """``convkit sweep <paper> --directory D`` tunes into D, then sweeps with D's tuned knobs (it once swept
    with the knobs of ``results/<this GPU>``)."""
    from convkit.families.fp32.launch import ImplicitGemmLaunch
    from convkit.families.registry import Variant
    from convkit.op.cases import cases
    from convkit.study import sweep

    p = ConvProblem.from_label("7-1-1-32-832")
    variant = Variant("v", lambda *a, **k: None, default=lambda q: ImplicitGemmLaunch("128x128"),
                      candidates=lambda q: [ImplicitGemmLaunch("64x64"), ImplicitGemmLaunch("32x32")],
                      launch_from=ImplicitGemmLaunch.from_params)  # fmt: skip
    elsewhere, mine = tmp_path / "results-of-this-gpu", tmp_path / "mine"
    _tuning_table(elsewhere, p, "v", {"tile": "64x64", "splits": 1, "stages": 3})
    swept = []

    def run_experiment(experiment, problems, variants, *, directory, tune=False, tuned=None, **_):
        if tune:  # the tuning run: what it found fastest lands in its folder
            _tuning_table(directory, p, "v", {"tile": "32x32", "splits": 1, "stages": 3})
        else:
            swept.extend(c.params for q in problems for c in cases(q, variants, cudnn=False, tuned=tuned))

    monkeypatch.setattr(sweep, "run_experiment", run_experiment)
    monkeypatch.setattr(sweep, "gpu_results_dir", lambda directory=None: directory or elsewhere)
    sweep.tune_then_sweep(mine, [p], [variant], tuning="x_tuning", experiment="x")
    assert swept == [params_text({"tile": "32x32", "splits": 1, "stages": 3})]
