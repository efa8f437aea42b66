"""The 3xTF32 chapter's measuring step without a GPU: what it tunes, what it sweeps, whose knobs it runs."""

from __future__ import annotations

from convkit.core.problem import ConvProblem
from convkit.papers import tf32x3 as chapter
from convkit.study import sweep, tuning


def test_it_tunes_only_the_3xtf32_kernel_and_sweeps_everything_at_both_chapters_knobs(monkeypatch, tmp_path):
    calls = []
    tuned_in = {"tf32x3_tuning": "igemm_tf32x3", "fp32_tuning": "fp32_igemm"}  # each table knows its own kernel
    monkeypatch.setattr(tuning, "knob_table", lambda directory, experiment: lambda problem, variant: (
        {"from": experiment} if tuned_in.get(experiment) == variant else None))  # fmt: skip
    monkeypatch.setattr(sweep, "run_experiment", lambda experiment, problems, variants, **kw: calls.append(
        (experiment, list(problems), [v.name for v in variants], kw)))  # fmt: skip
    chapter.measure(tmp_path, quick=True, progress=None)
    quick = chapter.problems(quick=True)
    tunings, sweeps = calls[0::2], calls[1::2]
    assert [c[0] for c in tunings] == ["tf32x3_tuning"] * len(tunings) and all(c[3]["tune"] for c in tunings)
    assert all(c[2] == ["igemm_tf32x3"] for c in tunings)
    assert [c[0] for c in sweeps] == ["tf32x3"] * len(sweeps)
    assert [p for c in sweeps for p in c[1]] == quick  # every problem once, in chunks
    assert sweeps[0][2] == ["igemm_tf32x3", "fp32_igemm", "fp32_winograd"]
    assert [p.name for p in sweeps[0][3]["peers"]][:2] == ["sgemm", "cutlass_tf32x3_128x64"]
    # each kernel runs its own chapter's tuned knobs, both tables read from the same folder
    knobs, p = sweeps[0][3]["tuned"], ConvProblem.same(1, 8, 8, 8, 8, 3)
    assert knobs(p, "igemm_tf32x3") == {"from": "tf32x3_tuning"} and knobs(p, "fp32_igemm") == {"from": "fp32_tuning"}
