"""The 3xTF32 chapter's measuring step without a GPU: what it tunes, what it sweeps, whose knobs it runs."""

from __future__ import annotations

import json

from convkit.core.problem import ConvProblem
from convkit.papers import tf32x3 as chapter
from convkit.study import sweep, tuning

TABLES = {("tf32x3_tuning", "igemm_tf32x3"), ("fp32_tuning", "fp32_igemm")}


def test_it_tunes_its_kernel_and_sweeps_every_kernel_on_each_problem_in_one_run(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(tuning, "knob_table", lambda directory, experiment: lambda problem, variant: (
        {"from": experiment} if (experiment, variant) in TABLES else None))  # fmt: skip
    monkeypatch.setattr(sweep, "run_experiment", lambda experiment, problems, variants, **kw: calls.append(
        (experiment, list(problems), [v.name for v in variants], kw)))  # fmt: skip
    chapter.measure(tmp_path, quick=True, progress=None)
    tunings, sweeps = calls[0::2], calls[1::2]
    kernels = ["igemm_tf32x3", "winograd_tf32x3", "igemm_wgmma_tf32x3", "winograd_wgmma_tf32x3", "fp32_igemm",
               "fp32_winograd"]  # fmt: skip
    assert all(c[0] == "tf32x3_tuning" and c[3]["tune"] and c[2] == kernels[:4] for c in tunings)
    assert all(c[0] == "tf32x3" and c[2] == kernels and c[3]["remeasure_changed"] for c in sweeps)
    assert [p for c in sweeps for p in c[1]] == chapter.problems(quick=True)  # every problem once, in chunks
    assert [p.name for p in sweeps[0][3]["peers"]][:2] == ["sgemm", "cutlass_tf32x3_128x64"]
    # the 3xTF32 kernel runs the knobs this chapter tuned, the FP32 kernels the FP32 chapter's
    knobs = sweeps[0][3]["tuned"]
    layer = ConvProblem.same(1, 8, 8, 8, 8, 3)
    assert knobs(layer, "igemm_tf32x3") == {"from": "tf32x3_tuning"}
    assert knobs(layer, "fp32_igemm") == {"from": "fp32_tuning"}


def test_the_accuracy_experiment_checks_every_precision_on_every_kind_of_input(monkeypatch):
    from convkit.core import gpu
    from convkit.families import fp32 as fp32_family
    from convkit.families import tf32x3 as tf32x3_family
    from convkit.families.tf32x3 import wgmma, wgmma_pick, wgmma_settings
    from convkit.libs import cutlass
    from convkit.libs.cudnn import FORWARD_ALGORITHMS
    from convkit.papers.tf32x3 import accuracy

    monkeypatch.setattr(gpu, "has_gpu", lambda: True)
    monkeypatch.setattr(gpu, "compute_capability", lambda: (9, 0))
    monkeypatch.setattr(cutlass, "available", lambda: False)
    for module in (fp32_family, tf32x3_family, wgmma, wgmma_pick, wgmma_settings):  # the H100's 132 SMs for the
        monkeypatch.setattr(module, "sm_count", lambda: 132)  # heuristic launches (no driver asked)
    problems = accuracy.problems()
    ks = [p.c * p.r * p.s for p in problems[:12]]
    assert ks[:9] == [9, 36, 144, 288, 576, 1152, 2304, 4608, 9216] and ks[9:] == [256, 1024, 4096]
    assert len(problems) == 12 + len(range(0, 671, accuracy.STUDY_STEP))
    cases = accuracy.cases(problems[0])
    per_input = 3 + len(FORWARD_ALGORITHMS) + len(accuracy.TORCH_PRECISIONS)  # (our three direct kernels on Hopper)
    assert len(cases) == len(accuracy.INPUTS) * per_input
    assert {json.loads(c.params)["inputs"] for c in cases} == set(accuracy.INPUTS)
    assert [c.variant for c in cases[:3]] == ["fp32_igemm", "igemm_tf32x3", "igemm_wgmma_tf32x3"]
    assert "tile" in json.loads(cases[1].params)  # the heuristic launch, recorded beside the kind of input
    assert "schedule" in json.loads(cases[2].params)
