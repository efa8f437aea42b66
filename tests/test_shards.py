"""Sweeps sharded through Dask (convkit.study.shards), on CPU: a scheduler and workers as separate processes on the
loopback address, measuring with a fake measure; a worker killed mid-sweep, a driver killed mid-sweep."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from convkit.bench.rows import case_key
from convkit.core.problem import ConvProblem
from convkit.op.cases import Case
from convkit.study.results import ResultStore
from convkit.study.shards import chunks

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import sweep_worker  # noqa: E402

distributed = pytest.importorskip("distributed", reason="the sharded sweep needs Dask: pip install 'convkit[node]'")

EXPECTED = {case_key(p, c) for p in sweep_worker.PROBLEMS for c in sweep_worker.CASES}


def _work(sizes: list[int]) -> list[tuple[ConvProblem, list[Case]]]:
    return [(ConvProblem.same(1, c + 1, 7, 7, 8, 3), [Case("convkit", f"v{i}") for i in range(n)])
            for c, n in enumerate(sizes)]  # fmt: skip


@pytest.mark.parametrize("sizes", [[3] * 10, [1, 9, 2, 2, 7, 1, 1, 30, 2], [5], [2, 2]])
@pytest.mark.parametrize("parts", [1, 2, 3, 8, 40])
def test_every_problem_lands_in_exactly_one_chunk_whole_and_in_order(sizes, parts):
    work = _work(sizes)
    found = chunks(work, parts)
    assert 1 <= len(found) <= min(parts, len(work))
    assert [w for chunk in found for w in chunk] == work  # each problem once, with all of its cases, in order
    assert all(chunk for chunk in found)
    if len(set(sizes)) == 1 and len(sizes) % parts == 0:  # equal problems share out evenly
        assert {len(chunk) for chunk in found} == {len(sizes) // parts}


def test_chunks_refuse_no_parts():
    with pytest.raises(ValueError, match="parts"):
        chunks(_work([1]), 0)


def _env() -> dict[str, str]:
    """Workers import the fake measure's module (this folder) and convkit (the checkout)."""
    paths = [str(HERE), str(HERE.parent), os.environ.get("PYTHONPATH", "")]
    return os.environ | {"PYTHONPATH": os.pathsep.join(p for p in paths if p)}


@pytest.fixture
def cluster(tmp_path):
    """A scheduler and two single-threaded workers, each a process of its own on 127.0.0.1 (no nanny: a killed
    worker stays dead); yields (scheduler address, worker processes)."""
    file = tmp_path / "scheduler.json"
    scheduler = [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                 "--no-dashboard", "--scheduler-file", str(file)]  # fmt: skip
    quiet = {"env": _env(), "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    procs = [subprocess.Popen(scheduler, **quiet)]
    try:
        deadline = time.monotonic() + 60
        while not file.is_file() and time.monotonic() < deadline:
            time.sleep(0.1)
        address = json.loads(file.read_text())["address"]
        worker = [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1", "--no-nanny",
                  "--no-dashboard", "--host", "127.0.0.1"]  # fmt: skip
        workers = [subprocess.Popen(worker, **quiet) for _ in range(2)]
        procs += workers
        with distributed.Client(address) as client:
            client.wait_for_workers(2, timeout=60)
        yield address, workers
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(timeout=10)


def _rows(directory: Path) -> list[dict[str, str]]:
    return ResultStore(directory, "killtest").rows()


@pytest.mark.watchdog(seconds=120)
def test_rows_from_two_workers_arrive_once_each_worker_a_run_with_its_gpu(cluster, tmp_path):
    address, _ = cluster
    assert sweep_worker.run(tmp_path, 0.01, address) == len(EXPECTED)
    rows = _rows(tmp_path)
    assert len(rows) == len(EXPECTED) and {case_key_of(r) for r in rows} == EXPECTED
    runs = json.loads((tmp_path / "killtest.json").read_text())["runs"]
    assert {r["run_id"] for r in rows} == set(runs) and len(runs) == 2, "one run per worker, with rows"
    assert all({"gpu_index", "gpu_uuid"} <= set(run) for run in runs.values())
    assert sweep_worker.run(tmp_path, 0.0, address) == 0  # everything held: nothing measured again


def case_key_of(row: dict[str, str]) -> tuple[str, ...]:
    from convkit.bench.rows import row_key

    return row_key(row)


@pytest.mark.watchdog(seconds=120)
def test_a_worker_killed_mid_sweep_loses_no_row_and_repeats_none(cluster, tmp_path):
    address, workers = cluster
    driver = subprocess.Popen([sys.executable, str(HERE / "sweep_worker.py"), str(tmp_path), "0.1", address],
                              env=_env(), stdout=subprocess.PIPE, text=True)  # fmt: skip
    with distributed.Client(address) as client:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # both workers busy with a chunk, one chunk already written
            busy = [w for w, tasks in client.processing().items() if tasks]
            if len(busy) == 2 and (tmp_path / "killtest.csv").is_file():
                break
            time.sleep(0.02)
        else:
            pytest.fail("the two workers were never busy together")
        workers[1].send_signal(signal.SIGKILL)
        workers[1].wait(timeout=10)
    out, _ = driver.communicate(timeout=90)
    assert driver.returncode == 0, out
    rows = _rows(tmp_path)
    keys = [case_key_of(r) for r in rows]
    assert len(keys) == len(set(keys)) == len(EXPECTED) and set(keys) == EXPECTED  # 0 lost, 0 repeated
    assert all(r["status"] == "ok" for r in rows), "the killed worker's chunk ran again elsewhere"


@pytest.mark.watchdog(seconds=120)
def test_a_sharded_sweep_killed_as_a_whole_resumes_with_no_row_lost_or_repeated(cluster, tmp_path):
    address, _ = cluster
    driver = subprocess.Popen([sys.executable, str(HERE / "sweep_worker.py"), str(tmp_path), "0.05", address],
                              env=_env(), stdout=subprocess.DEVNULL)  # fmt: skip
    csv_path = tmp_path / "killtest.csv"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (csv_path.is_file() and csv_path.read_text().count("\n") > 4):
        time.sleep(0.01)
    driver.send_signal(signal.SIGKILL)
    driver.wait(timeout=10)
    partial = _rows(tmp_path)
    assert 3 <= len(partial) < len(EXPECTED), "the kill did not land mid-sweep"
    sweep_worker.run(tmp_path, 0.0, address)  # resumed, sharded again
    keys = [case_key_of(r) for r in _rows(tmp_path)]
    assert len(keys) == len(set(keys)) == len(EXPECTED) and set(keys) == EXPECTED


def test_one_gpu_starts_no_cluster(monkeypatch, tmp_path):
    from convkit.book import node
    from convkit.study import shards

    def no_cluster(**kwargs):
        raise AssertionError("--gpus 1 opened a cluster")

    seen = {}
    monkeypatch.setattr(shards, "open_client", no_cluster)
    monkeypatch.setattr(shards, "gpu_provenance", lambda: {"gpu": "Fake GPU"})
    monkeypatch.setattr(
        node, "measure_study", lambda sharder, folder, **kw: seen.update(sharder=sharder) or {"all": 1.0}
    )
    assert node.run_on_node(gpus=1, scheduler=None, directory=tmp_path, quick=True) == tmp_path
    assert seen == {"sharder": None}


def test_a_cluster_of_one_gpu_is_refused_with_the_reason():
    from convkit.study.shards import open_client

    with pytest.raises(ValueError, match="gpus"):
        open_client(gpus=1)


@pytest.mark.watchdog(seconds=120)
def test_a_whole_step_runs_on_the_worker_named_in_a_scratch_copy_and_its_files_come_back(cluster, tmp_path):
    from convkit.study.shards import FOLDER, DaskSharder

    address, _ = cluster
    (tmp_path / "kept_tuning.csv").write_text("read\n")
    (tmp_path / "other.csv").write_text("not sent\n")
    # a fresh process, the worker's child, in a folder holding only what the step reads
    script = ("import os, pathlib, sys; d = pathlib.Path(sys.argv[1]); assert os.listdir(d) == ['kept_tuning.csv']; "
              "(d / 'made.csv').write_text(f'{os.getppid()} {os.getpid()}')")  # fmt: skip
    with distributed.Client(address) as client:
        sharder = DaskSharder(client)
        worker = sorted(client.scheduler_info()["workers"])[1]
        pid = client.run(os.getpid, workers=[worker])[worker]
        made = sharder.step(["-c", script, FOLDER], tmp_path, ["*_tuning.csv"], into=tmp_path / "out", worker=worker)
        with pytest.raises(RuntimeError, match="failed"):
            sharder.step(["-c", "raise SystemExit(3)"], tmp_path, [])
    assert made == ["made.csv"]
    parent, child = (int(v) for v in (tmp_path / "out" / "made.csv").read_text().split())
    assert parent == pid and child != pid
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept_tuning.csv", "other.csv", "out", "scheduler.json"]


def test_agreement_puts_the_spread_across_gpus_beside_the_run_to_run_spread(tmp_path):
    from convkit.bench.rows import make_row
    from convkit.book.node import ACROSS, agreement

    problem = ConvProblem.same(1, 8, 7, 7, 8, 3)

    def record(folder: Path, experiment: str, times: list[float]) -> None:
        store = ResultStore.open(folder, experiment, {"gpu": "fake"})
        for i, t in enumerate(times):
            store.append(make_row(problem, Case("convkit", f"v{i}"), status="ok") | {"time_ms_median": t, "reps": 10})

    record(tmp_path, "baseline", [1.0, 2.0, 4.0])
    record(tmp_path, "baseline_repeat", [1.0, 2.0, 4.2])  # run to run: 0%, 0%, 5%
    record(tmp_path / ACROSS / "gpu0", "baseline_repeat", [1.0, 2.0, 4.0])
    record(tmp_path / ACROSS / "gpu1", "baseline_repeat", [1.1, 2.0, 4.0])  # across GPUs: 10%, 0%, 0%
    found = agreement(tmp_path)
    assert list(found["chapter"]) == ["The baseline: every cuDNN algorithm"] and list(found["gpus"]) == ["0 and 1"]
    row = found.iloc[0]
    assert row["cases"] == 3 and row["p95"] == pytest.approx(0.09, abs=0.01)
    assert row["run_to_run_p95"] == pytest.approx(0.045, abs=0.01) and row["run_to_run_on"] == tmp_path.name


def test_a_node_without_a_run_to_run_sample_of_its_own_is_set_beside_the_books_gpus(tmp_path, monkeypatch):
    """The node's GPU model has no run-to-run sample recorded: the agreement takes the book's GPU's, and the rerun
    page's section names that GPU beside the node's times."""
    from convkit.bench.rows import make_row
    from convkit.book import node
    from convkit.book.run_times import run_times_store
    from convkit.study import checkout
    from convkit.study.results import DEFAULT_RECORDED_GPU

    problem = ConvProblem.same(1, 8, 7, 7, 8, 3)

    def record(folder: Path, experiment: str, times: list[float], gpu: str) -> None:
        store = ResultStore.open(folder, experiment, {"gpu": gpu})
        for i, t in enumerate(times):
            store.append(make_row(problem, Case("convkit", f"v{i}"), status="ok") | {"time_ms_median": t, "reps": 10})

    book_gpu, node_gpu = tmp_path / DEFAULT_RECORDED_GPU, tmp_path / "nvidia-h200"
    record(book_gpu, "baseline", [1.0, 2.0, 4.0], "NVIDIA H100 80GB HBM3")
    record(book_gpu, "baseline_repeat", [1.0, 2.0, 4.2], "NVIDIA H100 80GB HBM3")
    record(node_gpu, "baseline_quick", [1.0, 2.0, 4.0], "NVIDIA H200")
    record(node_gpu / node.ACROSS / "gpu0", "baseline_repeat", [1.0, 2.0, 4.0], "NVIDIA H200")
    record(node_gpu / node.ACROSS / "gpu1", "baseline_repeat", [1.0, 2.0, 4.4], "NVIDIA H200")
    for gpus, wall in ((1, 100.0), (2, 55.0)):
        times = run_times_store(node_gpu, {"gpu": "NVIDIA H200", "gpus": gpus})
        for name in ("baseline", "all"):
            times.append({"notebook": name, "step": "measuring", "mode": "quick", "gpus": gpus, "status": "ok",
                          "wall_s": wall})  # fmt: skip
    monkeypatch.setattr(checkout, "results_dir", lambda: tmp_path)
    row = node.agreement(node_gpu).iloc[0]
    assert row["run_to_run_on"] == DEFAULT_RECORDED_GPU and row["run_to_run_p95"] == pytest.approx(0.045, abs=0.01)
    page = node.node_page({"baseline": "The baseline"})
    assert page.startswith("On the H200s of one node") and "| chapter | 1 H200 | 2 H200s |" in page
    assert "(1.82x, 91% efficiency)" in page
    assert "| The baseline: every cuDNN algorithm | 3 | 0.0% | 9.0% | 4.5% (H100) |" in page
    assert "In 0 of 1 chapters the widest pair of GPUs lies within one GPU's run-to-run spread, in the others at " \
           "most 4.5 points past it; the pairs' medians are at most 0.0%." in page  # fmt: skip


@pytest.mark.watchdog(seconds=120)
def test_chapters_measured_side_by_side_on_the_cluster_each_after_those_it_reads(cluster, tmp_path, monkeypatch):
    """node.measure_study with two fake chapters (the second reads the first's tuning, as 3xTF32 reads FP32's): every
    row once, the second started after the first finished, one progress line per finished chunk."""
    from types import SimpleNamespace

    from convkit.book import node
    from convkit.study.shards import DaskSharder
    from convkit.study.sweep import run_sweep

    address, _ = cluster
    order: list[str] = []

    def chapter(name: str, after: tuple[str, ...]) -> SimpleNamespace:
        def measure(directory, *, quick, experiment, progress):
            order.append(f"{name} started")
            run_sweep(experiment, sweep_worker.PROBLEMS, lambda p: sweep_worker.CASES, sweep_worker.fake_measure(0.01),
                      directory=directory, progress=progress)  # fmt: skip
            order.append(f"{name} finished")

        return SimpleNamespace(name=name, experiment=name, measure=measure, measured_after=after)

    fakes = {"first": chapter("first", ()), "second": chapter("second", ("first",))}
    monkeypatch.setattr(node, "chapters", lambda only=None: list(fakes))
    monkeypatch.setattr(node, "paper", fakes.__getitem__)
    lines: list[str] = []
    with distributed.Client(address) as client:
        sharder = DaskSharder(client, provenance=sweep_worker.fake_provenance, progress=lines.append)
        times = node.measure_study(sharder, tmp_path, quick=True, progress=lines.append)
    assert order == ["first started", "first finished", "second started", "second finished"]
    assert set(times) == {"first", "second", "all"} and times["second"] <= times["all"]
    for name in fakes:
        keys = [case_key_of(r) for r in ResultStore(tmp_path, f"{name}_quick").rows()]
        assert len(keys) == len(set(keys)) and set(keys) == EXPECTED
    chunk_lines = [line for line in lines if "chunk" in line]
    assert len(chunk_lines) >= 4 and all("rows" in line and "left" in line for line in chunk_lines), lines


@pytest.mark.watchdog(seconds=120)
def test_without_dask_cuda_a_node_still_gets_one_worker_per_gpu_each_seeing_its_own_first(monkeypatch, capsys):
    from convkit.study.shards import close, open_client, visible_gpu

    monkeypatch.setitem(sys.modules, "dask_cuda", None)  # as where dask-cuda (or cuda.core) cannot be imported
    client = open_client(gpus=3)
    try:
        seen = sorted(client.run(visible_gpu).values())
        orders = sorted(client.run(lambda: os.environ["CUDA_VISIBLE_DEVICES"]).values())
        threads = set(client.nthreads().values())
    finally:
        close(client)
    assert seen == ["0", "1", "2"] and orders == ["0,1,2", "1,2,0", "2,0,1"] and threads == {1}
    assert "dask-cuda not usable here" in capsys.readouterr().err
