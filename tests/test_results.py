"""The results store: appends, provenance, torn lines, resumable sweeps (a real kill included)."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from convkit.bench.rows import COLUMNS, case_key, make_row, row_key
from convkit.core.problem import ConvProblem
from convkit.op.cases import Case
from convkit.papers.ceilings import measure as ceilings
from convkit.study import results
from convkit.study.results import ResultStore, absorb, load_results
from convkit.study.sweep import sweep

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import sweep_worker  # noqa: E402

P1 = ConvProblem.from_label("7-1-1-32-832")
P2 = ConvProblem.from_label("13-1-3-384-384")
CASES = [Case("convkit", "direct", '{"threads":256}'), Case("cudnn", "GEMM")]


def test_rows_are_appended_and_read_back_with_provenance(tmp_path):
    store = ResultStore.open(tmp_path, "exp", {"gpu": "fake"})
    store.append(make_row(P1, CASES[0], status="ok", rel_err=2e-7))
    store.append(make_row(P1, CASES[1], status="not_supported", note="status 3000"))
    rows = store.rows()
    assert [r["variant"] for r in rows] == ["direct", "GEMM"]
    assert rows[0]["label"] == "7-1-1-32-832" and rows[0]["C"] == "832" and rows[0]["experiment"] == "exp"
    assert rows[0]["run_id"] == store.run_id
    assert store.done_keys() == {case_key(P1, c) for c in CASES}
    with open(store.csv_path, newline="") as f:
        assert next(csv.reader(f)) == list(COLUMNS)
    doc = json.loads(store.json_path.read_text())
    assert doc["runs"][store.run_id] == {"gpu": "fake"}


def test_a_second_run_adds_its_provenance_beside_the_first(tmp_path):
    first = ResultStore.open(tmp_path, "exp", {"gpu": "a"})
    first.append(make_row(P1, CASES[0], status="ok"))
    second = ResultStore.open(tmp_path, "exp", {"gpu": "b"})
    second.append(make_row(P1, CASES[1], status="ok"))
    runs = json.loads(second.json_path.read_text())["runs"]
    assert runs == {first.run_id: {"gpu": "a"}, second.run_id: {"gpu": "b"}}


def test_absorbing_a_part_moves_its_rows_under_their_runs_provenance(tmp_path):
    """A part recorded by another process (another GPU of the node) joins the folder's rows: its rows under runs of
    the same provenance, a key both hold keeping the part's row, the rest untouched."""
    main, part = tmp_path / "main", tmp_path / "part"
    kept = ResultStore.open(main, "exp", {"gpu": "a"})
    kept.append(make_row(P1, CASES[0], status="ok", note="main"))
    kept.append(make_row(P1, CASES[1], status="ok", note="main, replaced"))
    elsewhere = ResultStore.open(part, "exp", {"gpu": "b", "gpu_index": "1"})
    elsewhere.append(make_row(P1, CASES[1], status="ok", note="part"))
    elsewhere.append(make_row(P2, CASES[0], status="ok", note="part"))
    assert absorb(main, "exp", part) == 2
    rows = ResultStore.open(main, "exp").rows()
    expected = [(P1, CASES[0], "main"), (P1, CASES[1], "part"), (P2, CASES[0], "part")]
    assert sorted((r["label"], r["variant"], r["note"]) for r in rows) == sorted(
        (p.label, c.variant, note) for p, c, note in expected
    )
    runs = json.loads((main / "exp.json").read_text())["runs"]
    assert sorted(runs.values(), key=str) == sorted([{"gpu": "a"}, {"gpu": "b", "gpu_index": "1"}], key=str)
    assert {r["run_id"] for r in rows} == set(runs)
    assert absorb(main, "exp", tmp_path / "nothing") == 0


def test_a_run_that_records_nothing_leaves_no_provenance(tmp_path):
    first = ResultStore.open(tmp_path, "exp", {"gpu": "a"})
    first.append(make_row(P1, CASES[0], status="ok"))
    ResultStore.open(tmp_path, "exp", {"gpu": "b"})  # e.g. a resumed sweep with nothing left to do
    assert json.loads(first.json_path.read_text())["runs"] == {first.run_id: {"gpu": "a"}}


def test_a_deleted_csv_takes_its_runs_provenance_with_it(tmp_path):
    """Deleting a results CSV to measure it again leaves its JSON: the next run keeps no provenance of runs
    whose rows are gone."""
    first = ResultStore.open(tmp_path, "exp", {"gpu": "a"})
    first.append(make_row(P1, CASES[0], status="ok"))
    first.csv_path.unlink()
    second = ResultStore.open(tmp_path, "exp", {"gpu": "b"})
    second.append(make_row(P1, CASES[0], status="ok"))
    assert json.loads(second.json_path.read_text())["runs"] == {second.run_id: {"gpu": "b"}}


def test_a_torn_last_line_is_dropped_on_reopen(tmp_path):
    store = ResultStore.open(tmp_path, "exp", {})
    store.append(make_row(P1, CASES[0], status="ok"))
    with open(store.csv_path, "a") as f:
        f.write("exp,7-1-1-32-832,1,83")  # a kill in the middle of a write
    reopened = ResultStore.open(tmp_path, "exp", {})
    assert len(reopened.rows()) == 1
    reopened.append(make_row(P1, CASES[1], status="ok"))
    assert [r["variant"] for r in reopened.rows()] == ["direct", "GEMM"]


def test_unknown_columns_and_statuses_are_refused(tmp_path):
    store = ResultStore.open(tmp_path, "exp", {})
    with pytest.raises(ValueError, match="columns the store does not know"):
        store.append({"label": "x", "speed": 3})
    with pytest.raises(ValueError, match="status must be one of"):
        make_row(P1, CASES[0], status="fast")


def test_a_file_with_other_columns_is_refused(tmp_path):
    (tmp_path / "exp.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="other columns"):
        ResultStore.open(tmp_path, "exp", {})


def test_sweep_skips_done_keys_and_records_failures(tmp_path):
    store = ResultStore.open(tmp_path, "exp", {})
    store.append(make_row(P1, CASES[0], status="ok"))
    calls = []

    def measure(problem, todo):
        calls.append((problem.label, [c.variant for c in todo]))
        if problem == P2:
            yield make_row(problem, todo[0], status="ok")
            raise RuntimeError("planted failure")
        for case in todo:
            yield make_row(problem, case, status="ok")

    written = sweep(store, [P1, P2], lambda p: CASES, measure)
    assert calls == [("7-1-1-32-832", ["GEMM"]), ("13-1-3-384-384", ["direct", "GEMM"])]
    assert written == 3
    rows = {row_key(r): r for r in store.rows()}
    failed = rows[case_key(P2, CASES[1])]
    assert failed["status"] == "error" and "planted failure" in failed["note"]
    assert sweep(store, [P1, P2], lambda p: CASES, measure) == 0  # everything recorded, errors included


def test_an_interrupted_sweep_records_no_error_for_its_pending_cases_and_resumes(tmp_path):
    """Ctrl-C mid-problem stops the sweep: what was measured is kept, the cases not yet measured are not
    recorded as failures (a KeyboardInterrupt is no Exception), and the next run measures just those."""
    store = ResultStore.open(tmp_path, "exp", {})

    def interrupted(problem, todo):
        yield make_row(problem, todo[0], status="ok")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sweep(store, [P1, P2], lambda p: CASES, interrupted)
    assert [(r["variant"], r["status"]) for r in store.rows()] == [(CASES[0].variant, "ok")]

    def measure(problem, todo):
        for case in todo:
            yield make_row(problem, case, status="ok")

    assert sweep(store, [P1, P2], lambda p: CASES, measure) == 3
    keys = [row_key(r) for r in store.rows()]
    assert len(keys) == len(set(keys)) == 4 and all(r["status"] == "ok" for r in store.rows())


def test_a_problem_whose_launch_changed_is_measured_again_whole(tmp_path):
    """remeasure_changed: P1's convkit row ran other params than its case has now (tuned again), so all of P1's
    rows go (cuDNN's too: one run per problem) with their run's provenance, and P1 is measured again; P2,
    unchanged, is not touched."""
    old = ResultStore.open(tmp_path, "exp", {"run": "old"})
    retuned = Case("convkit", "direct", '{"threads":128}')
    for problem in (P1, P2):
        for case in CASES:
            old.append(make_row(problem, case, status="ok"))
    calls = []

    def measure(problem, todo):
        calls.append((problem.label, [c.params for c in todo]))
        for case in todo:
            yield make_row(problem, case, status="ok")

    def cases(problem):
        return [retuned, CASES[1]] if problem == P1 else CASES

    assert sweep(ResultStore.open(tmp_path, "exp", {"run": "new"}), [P1, P2], cases, measure) == 1  # P1's new launch
    assert calls == [("7-1-1-32-832", ['{"threads":128}'])]
    calls.clear()
    store = ResultStore.open(tmp_path, "exp", {"run": "third"})
    assert sweep(store, [P1, P2], cases, measure, remeasure_changed=True) == 2
    assert calls == [("7-1-1-32-832", ['{"threads":128}', "{}"])]
    rows = store.rows()
    assert sorted(row_key(r) for r in rows) == sorted(
        [case_key(P1, c) for c in cases(P1)] + [case_key(P2, c) for c in CASES]
    )
    runs = json.loads(store.json_path.read_text())["runs"]
    assert {r["run_id"] for r in rows} == set(runs)  # the second run's only row went with P1
    assert sorted(p["run"] for p in runs.values()) == ["old", "third"]
    assert sweep(store, [P1, P2], cases, measure, remeasure_changed=True) == 0


def test_a_problem_lacking_a_case_is_measured_again_whole(tmp_path):
    """remeasure_changed: P1 holds one of its two cases (a kernel added since, or a run cut short within it), so its
    row goes and both cases are measured in this run; P2, whole, is not touched."""
    old = ResultStore.open(tmp_path, "exp", {"run": "old"})
    old.append(make_row(P1, CASES[0], status="ok"))
    for case in CASES:
        old.append(make_row(P2, case, status="ok"))
    calls = []

    def measure(problem, todo):
        calls.append((problem.label, len(todo)))
        for case in todo:
            yield make_row(problem, case, status="ok")

    store = ResultStore.open(tmp_path, "exp", {"run": "new"})
    assert sweep(store, [P1, P2], lambda p: CASES, measure, remeasure_changed=True) == 2
    assert calls == [(P1.label, 2)]
    runs = json.loads(store.json_path.read_text())["runs"]
    by_problem = {(r["label"], r["run_id"]) for r in store.rows()}
    assert {runs[run]["run"] for label, run in by_problem if label == P1.label} == {"new"}
    assert {runs[run]["run"] for label, run in by_problem if label == P2.label} == {"old"}
    assert sweep(store, [P1, P2], lambda p: CASES, measure, remeasure_changed=True) == 0


def test_drop_removes_rows_and_the_provenance_left_without_rows(tmp_path):
    first = ResultStore.open(tmp_path, "exp", {"run": "first"})
    first.append(make_row(P1, CASES[0], status="ok"))
    second = ResultStore.open(tmp_path, "exp", {"run": "second"})
    second.append(make_row(P2, CASES[0], status="ok"))
    second.append(make_row(P2, CASES[1], status="ok"))
    assert second.drop(lambda row: row["label"] == P2.label and row["impl"] == "cudnn") == 1
    assert len(json.loads(second.json_path.read_text())["runs"]) == 2
    assert second.drop(lambda row: row["label"] == P1.label) == 1
    assert [p["run"] for p in json.loads(second.json_path.read_text())["runs"].values()] == ["second"]
    assert second.drop(lambda row: False) == 0
    frame, _ = load_results(tmp_path, "exp")
    assert list(frame["label"]) == [P2.label]


def test_ceilings_layout(tmp_path):
    store = ceilings.open_store(tmp_path, {"gpu": "fake"})
    store.append({"measurement": "copy_bandwidth", "metric": "copy_bandwidth", "value": 3000.0, "unit": "GB/s"})
    assert store.done_keys() == {("copy_bandwidth", "copy_bandwidth")}
    frame, provenance = load_results(tmp_path, ceilings.EXPERIMENT)
    assert frame.loc[0, "value"] == 3000.0 and provenance["runs"][store.run_id] == {"gpu": "fake"}
    with pytest.raises(FileNotFoundError):
        load_results(tmp_path, "missing")


def test_a_sweep_killed_midway_resumes_with_no_row_lost_or_duplicated(tmp_path):
    expected = {case_key(p, c) for p in sweep_worker.PROBLEMS for c in sweep_worker.CASES}
    csv_path = tmp_path / "killtest.csv"
    proc = subprocess.Popen([sys.executable, str(HERE / "sweep_worker.py"), str(tmp_path), "0.05"])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if csv_path.exists() and csv_path.read_text().count("\n") > 6:
                break
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    partial = ResultStore(tmp_path, "killtest").rows()
    assert 5 <= len(partial) < len(expected), "the kill did not land mid-sweep"

    sweep_worker.run(tmp_path, 0.0)  # resume in this process
    rows = ResultStore(tmp_path, "killtest").rows()
    keys = [row_key(r) for r in rows]
    assert len(keys) == len(set(keys)) == len(expected)
    assert set(keys) == expected
    assert all(r["status"] == "ok" and r["note"].startswith("c=") for r in rows)
    assert len(json.loads((tmp_path / "killtest.json").read_text())["runs"]) == 2


RECORDED = sorted((HERE.parent / "results").glob("*/*.csv"))


@pytest.mark.parametrize("csv_path", RECORDED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_recorded_files_carry_provenance_for_exactly_their_runs(csv_path):
    from convkit.book import profile, run_times
    from convkit.papers.summary import concurrency, inference

    stem = csv_path.stem.removesuffix("_quick").removesuffix("_repeat").removesuffix(inference.COLD)
    if stem == "ceilings":
        keys = ceilings.KEY_COLUMNS
    elif stem == inference.EXPERIMENT:
        keys = inference.KEY_COLUMNS
    elif stem == concurrency.EXPERIMENT:
        keys = concurrency.KEY_COLUMNS
    elif csv_path.stem == run_times.RUN_TIMES:
        keys = run_times.RUN_TIME_KEY
    elif csv_path.stem.endswith("_kernels"):
        keys = profile.KEY_COLUMNS
    else:
        keys = results.KEY_COLUMNS
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    runs = json.loads(csv_path.with_suffix(".json").read_text())["runs"]
    assert {r["run_id"] for r in rows} == set(runs), "a row without provenance, or provenance without rows"
    for run in runs.values():
        for key in ("gpu", "driver", "cuda_runtime", "nvrtc", "cupy", "cudnn", "convkit_commit", "date"):
            assert str(run.get(key, "")), key
    assert len({row_key(r, keys) for r in rows}) == len(rows), "a key recorded twice"


def test_every_recording_of_an_experiment_is_listed_once_under_its_own_label(tmp_path, monkeypatch):
    """The book's GPU first, a quick run where no full one is recorded, and a label of its own where two folders'
    runs name the same GPU (the labels name the every-GPU table's columns)."""
    monkeypatch.setattr(results, "results_dir", lambda: tmp_path)
    recorded = (("nvidia-a100", "sweep_quick", "NVIDIA A100"), ("copy", "sweep", "NVIDIA H100"),
                (results.DEFAULT_RECORDED_GPU, "sweep", "NVIDIA H100"), ("empty", "other", "X"))  # fmt: skip
    for folder, stem, gpu in recorded:
        (tmp_path / folder).mkdir()
        (tmp_path / folder / f"{stem}.csv").write_text("experiment\n")
        (tmp_path / folder / f"{stem}.json").write_text(json.dumps({"runs": {"r": {"gpu": gpu}}}))
    found = [(label, folder.name, stem) for label, folder, stem in results.recorded_folders("sweep")]
    assert found == [("H100", results.DEFAULT_RECORDED_GPU, "sweep"), ("H100 (copy)", "copy", "sweep"),
                     ("A100 (quick)", "nvidia-a100", "sweep_quick")]  # fmt: skip


@dataclass(frozen=True)
class Launch:
    """A launch as :func:`convkit.study.sweep.build_first` meets it: it runs problems of more than one channel."""

    tile: int

    def not_supported_reasons(self, problem: ConvProblem) -> list[str]:
        return [] if problem.c > 1 else ["one channel"]


def test_build_first_builds_each_launch_s_kernels_once_in_parallel(monkeypatch):
    """Every default launch and tuning candidate of the variants that run a problem, their builds collected (here
    a build per launch and problem, one shared) and built in one parallel call; a launch that cannot run is left
    to the sweep; a chapter's ``build_first`` passes its problems (quick or not) and its kernels."""
    from convkit.cuda.launch import Build
    from convkit.families.registry import Variant
    from convkit.op import prebuild
    from convkit.papers import paper
    from convkit.study import sweep as sweeping

    def builds(variant, problem, launch):
        if launch.tile == 3:
            raise ValueError("no such launch here")
        return {Build("shared", "k", (), None), Build(variant.name, f"c{problem.c}", (f"-DTILE={launch.tile}",), None)}

    built = []
    monkeypatch.setattr(prebuild, "launch_builds", builds)
    monkeypatch.setattr(prebuild, "build_in_parallel", lambda b, workers: built.append((b, workers)) or len(b))
    tuned = Variant("tuned", print, default=lambda p: Launch(1), candidates=lambda p: [Launch(1), Launch(2), Launch(3)])
    fixed, peer = Variant("fixed", print, default=lambda p: Launch(9)), Variant("peer", print, impl="cupyx")
    problems = [ConvProblem.same(1, c, 8, 8, 4, 3) for c in (1, 2, 4)]
    assert sweeping.build_first(problems, [tuned, fixed, peer], 16) == 7  # 2 problems x 3 launches, and one shared
    [(listed, workers)] = built
    assert workers == 7 and Build("tuned", "c2", ("-DTILE=2",), None) in listed and listed[0].source == "fixed"
    assert not any(b.kernel == "c1" for b in listed)  # the one-channel problem runs no launch

    asked = []
    monkeypatch.setattr(sweeping, "build_first", lambda p, v, w: asked.append((len(p), tuple(v), w)) or 0)
    chapter = paper("tf32x3")
    assert chapter.build_first(True, 4) == 0 and asked == [(len(chapter.problems(True)), chapter.variants, 4)]


def test_a_build_that_fails_ahead_of_a_sweep_is_left_to_the_sweep(monkeypatch):
    from convkit.cuda.launch import Build
    from convkit.families.registry import Variant
    from convkit.op import prebuild
    from convkit.study import sweep as sweeping

    def fails(builds, workers):
        raise RuntimeError("NVRTC failed for sm_90a")

    said = []
    monkeypatch.setattr(prebuild, "launch_builds", lambda v, p, launch: {Build("s", "k", (), None)})
    monkeypatch.setattr(prebuild, "build_in_parallel", fails)
    variant = Variant("fixed", print, default=lambda p: Launch(1))
    assert sweeping.build_first([ConvProblem.same(1, 2, 8, 8, 4, 3)], [variant], 4, progress=said.append) == 0
    assert "NVRTC failed" in said[0] and "the sweep builds as it goes" in said[0]
