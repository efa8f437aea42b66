"""The 3xTF32 chapter's measuring step without a GPU: what it tunes, what it sweeps, whose knobs it runs."""

from __future__ import annotations

from convkit.core.problem import ConvProblem
from convkit.papers import tf32x3 as chapter
from convkit.study import sweep, tuning


def test_it_tunes_and_sweeps_every_kernel_on_each_problem_in_one_run(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(tuning, "knob_table", lambda directory, experiment: lambda problem, variant: (
        {"from": experiment} if experiment == "tf32x3_tuning" else None))  # fmt: skip
    monkeypatch.setattr(sweep, "run_experiment", lambda experiment, problems, variants, **kw: calls.append(
        (experiment, list(problems), [v.name for v in variants], kw)))  # fmt: skip
    chapter.measure(tmp_path, quick=True, progress=None)
    tunings, sweeps = calls[0::2], calls[1::2]
    kernels = ["igemm_tf32x3", "fp32_igemm", "fp32_winograd"]
    assert all(c[0] == "tf32x3_tuning" and c[3]["tune"] and c[2] == kernels for c in tunings)
    assert all(c[0] == "tf32x3" and c[2] == kernels and c[3]["remeasure_changed"] for c in sweeps)
    assert [p for c in sweeps for p in c[1]] == chapter.problems(quick=True)  # every problem once, in chunks
    assert [p.name for p in sweeps[0][3]["peers"]][:2] == ["sgemm", "cutlass_tf32x3_128x64"]
    # the kernels run the knobs this chapter's own tuning table found fastest
    assert sweeps[0][3]["tuned"](ConvProblem.same(1, 8, 8, 8, 8, 3), "fp32_igemm") == {"from": "tf32x3_tuning"}
