"""The concurrency soak on the CPU: which cases it runs (every implementation of the shipped table on three
problems or more, every split launch, the control, forced choices on problems no other case uses), and its
driver's watchdog and resume with a fake worker: a case that hangs is killed and recorded once, as hung."""

from __future__ import annotations

import collections
import json
import sys
import textwrap

import pandas as pd
import pytest

from convkit.core.problem import ConvProblem
from convkit.core.shipped import shipped_path
from convkit.op import dispatch
from convkit.papers.summary import concurrency as soak
from convkit.papers.summary.concurrency.driver import run_cases

H100 = "nvidia-h100-80gb-hbm3"


def _choices():
    return dispatch.read_table(shipped_path(H100))


def test_the_plan_covers_every_implementation_and_every_split_launch():
    choices = _choices()
    cases, forced = soak.soak_plan(choices, lambda impl, problem: True)
    implementations = {soak.implementation_name(c) for c in choices.values()}
    per_impl = collections.defaultdict(set)
    for case in cases:
        per_impl[case.implementation].add(case.problem)
    assert implementations <= per_impl.keys()
    assert all(len(per_impl[i]) >= 3 for i in implementations), {i: len(per_impl[i]) for i in implementations}
    splits = {k for k, c in choices.items() if soak.is_split(c)}
    assert splits and splits <= per_impl["convkit:chang_multi_async"]  # 15 in the H100 table
    # one implementation per problem (a worker's choice is one per problem), the control on each, every mode
    owner = {}
    for case in cases:
        if case.implementation != soak.CONTROL and case.mode != soak.NETWORK_MODE:
            assert owner.setdefault(case.problem, case.implementation) == case.implementation
    assert {c.mode for c in cases if c.implementation == soak.CONTROL} == set(soak.TORCH_MODES)
    assert len(cases) == len({c.key for c in cases})
    assert {(c.implementation, c.mode) for c in cases if c.problem == soak.NETWORK} == {
        (soak.PATCHED, soak.NETWORK_MODE),
        ("control:" + soak.NETWORK, soak.NETWORK_MODE),
    }
    # forced choices go to problems no shipped case uses, of implementations that ship fewer than three choices for
    # the default request (a narrower request's, under "<key>@<precision>", is not soaked)
    assert forced and all(k in owner and choices[k] is not None for k in forced)
    defaults = [c for k, c in choices.items() if "@" not in k]
    for key, choice in forced.items():
        impl = soak.implementation_name(choice)
        assert sum(soak.implementation_name(c) == impl for c in defaults) < 3 or impl != owner[key]


def test_forced_choices_respect_support():
    choices = _choices()
    _, forced = soak.soak_plan(choices, lambda impl, problem: impl != "convkit:lu_direct" or problem.r == 3)
    assert all(ConvProblem.from_key(k).r == 3 for k, c in forced.items() if c.variant == "lu_direct")


def test_the_short_form_names_the_two_layers_that_hung():
    cases = soak.short_plan(_choices())
    assert {c.problem for c in cases} >= {"14-1-5-512-512-p2-s1", "7-1-3-512-512-p1-s1"}
    assert any(c.implementation == soak.CONTROL for c in cases)


def test_the_bar_is_the_transforms_for_fft_winograd_and_autotuned_cudnn():
    assert soak.bar("convkit:fp32_winograd") == soak.bar("cudnn:FFT") == soak.bar(soak.CONTROL) == 1e-3
    assert soak.bar("convkit:chang_multi_async") == soak.bar("cublas:sgemm") == 1e-5


FAKE_WORKER = textwrap.dedent("""
    import json, sys, time
    for line in sys.stdin:
        case = json.loads(line)
        print("@@soak " + json.dumps({"start": case}), flush=True)
        if case["mode"] == "hang":
            time.sleep(60)
        if case["mode"] == "die":
            sys.exit(3)
        print("noise", flush=True)
        print("@@soak " + json.dumps({"row": {**case, "calls": 4, "wrong": 0, "hung": 0}}), flush=True)
""")


def test_the_driver_kills_a_hung_case_records_each_case_once_and_goes_on(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(FAKE_WORKER)
    todo = [soak.SoakCase(f"p{i}", "convkit:x", mode) for i, mode in enumerate(["ok", "hang", "ok", "die", "ok"])]
    rows = []
    left = run_cases(todo, rows.append, worker_command=[sys.executable, str(script)],
                          timeout_of=lambda case: 2.0)  # fmt: skip
    assert left == []
    assert [r["problem"] for r in rows] == ["p0", "p1", "p2", "p3", "p4"]
    by = {r["problem"]: r for r in rows}
    assert by["p1"]["hung"] == 1 and "killed" in by["p1"]["note"]
    assert by["p3"]["hung"] == 0 and "exited 3" in by["p3"]["note"]
    assert all(by[p]["calls"] == 4 for p in ("p0", "p2", "p4"))


def test_a_deadline_leaves_the_rest_for_the_next_run(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(FAKE_WORKER)
    todo = [soak.SoakCase("p", "convkit:x", "ok")]
    assert run_cases(todo, lambda row: None, worker_command=[sys.executable, str(script)], deadline=0) == todo


def test_the_watchdog_fails_a_test_that_hangs(tmp_path):
    from hang_watchdog import run_watched

    (tmp_path / "test_sleeps.py").write_text("import time\n\ndef test_sleeps():\n    time.sleep(60)\n")
    (tmp_path / "test_passes.py").write_text("def test_passes():\n    assert True\n")
    with pytest.raises(pytest.fail.Exception, match="hung: killed after 3 s"):
        run_watched("test_sleeps.py::test_sleeps", 3, tmp_path)
    run_watched("test_passes.py::test_passes", 30, tmp_path)


def test_rows_have_the_issue_columns():
    assert soak.COLUMNS[1:7] == ("problem", "implementation", "mode", "calls", "wrong", "hung")
    assert json.loads(json.dumps(soak.KEY_COLUMNS)) == ["problem", "implementation", "mode"]


@pytest.mark.filterwarnings("error")  # (its rows have no note at all: read as floats, never filled with text)
def test_the_chapter_reads_the_recorded_soak():
    from convkit.study.checkout import results_dir

    table = soak.soak_table(results_dir() / H100)
    assert list(table.index) == list(soak.MODE_WORDS.values())
    assert table[["op wrong", "op hung"]].to_numpy().sum() == 0 and table["op calls"].sum() > 20_000
    assert "stopped by an error" not in table  # shown only where a case failed
    (line,) = soak.result_lines(table)
    rows = pd.read_csv(results_dir() / H100 / "concurrency.csv")  # the op's, not PyTorch's control or a network's
    ours = rows[~rows["implementation"].str.startswith("control") & (rows["mode"] != soak.NETWORK_MODE)]
    assert f"{ours['implementation'].nunique()} implementations" in line and "0 wrong, 0 hung" in line
    assert soak.result_lines(table.iloc[0:0]) == []


def test_another_gpu_s_whole_soak_gets_a_sentence_of_its_own():
    """The H200's soak, recorded whole, beside the H100's chapter: its calls, wrong and hung, as its table counts
    them; a GPU's own folder and a quick run get none."""
    from convkit.papers.summary import concurrency
    from convkit.study.checkout import results_dir

    h100, h200 = results_dir() / "nvidia-h100-80gb-hbm3", results_dir() / "nvidia-h200"
    (line,) = [line for line in concurrency.other_gpu_lines(h100) if line.startswith("On the H200,")]
    table = concurrency.soak_table(h200)
    assert f"{int(table['op calls'].sum()):,} calls of the op" in line
    assert f"{int(table['op wrong'].sum())} wrong and {int(table['op hung'].sum())} hung;" in line
    assert not [line for line in concurrency.other_gpu_lines(h200) if "H200" in line]
