"""A short sharded sweep on a node's GPUs (convkit.study.shards: a dask_cuda.LocalCUDACluster, or its workers
without it), and a worker killed mid-sweep there: the rows' keys against a one-GPU run's. Needs two GPUs and Dask
(convkit[node]); skips with the reason."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

from convkit.bench.rows import row_key
from convkit.core.problem import ConvProblem

pytestmark = pytest.mark.gpu

#: Small layers of the baseline's kind: a few seconds of measuring, every cuDNN algorithm and PyTorch beside.
PROBLEMS = [ConvProblem.same(1, c, 14, 14, 32, 3) for c in (16, 32, 48, 64)]


@pytest.fixture
def client():
    import cupy

    pytest.importorskip("distributed", reason="a node's cluster needs Dask: pip install 'convkit[node]'")
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("a sharded sweep on a node needs two GPUs")
    from convkit.study.shards import close, open_client

    found = open_client(gpus=2)
    try:
        yield found
    finally:
        close(found)


def _sweep(directory, *, sharder=None) -> None:
    from convkit.families.baseline import DIRECT
    from convkit.study.sweep import measuring_on, run_experiment

    with measuring_on(sharder):
        run_experiment("sharded", PROBLEMS, [DIRECT], directory=directory, progress=None)


def _rows(directory) -> list[dict[str, str]]:
    from convkit.study.results import ResultStore

    return ResultStore(directory, "sharded").rows()


@pytest.mark.watchdog(seconds=60)
def test_a_short_sharded_sweep_holds_a_one_gpu_runs_rows_each_once_with_each_gpu_a_run(client, tmp_path):
    from convkit.study.shards import DaskSharder

    _sweep(tmp_path / "one")
    _sweep(tmp_path / "node", sharder=DaskSharder(client))
    one, node = _rows(tmp_path / "one"), _rows(tmp_path / "node")
    keys = [row_key(r) for r in node]
    assert len(keys) == len(set(keys)) and set(keys) == {row_key(r) for r in one}
    assert all(r["status"] in ("ok", "not_supported") for r in node), [r["note"] for r in node if r["note"]][:3]
    runs = json.loads((tmp_path / "node" / "sharded.json").read_text())["runs"]
    assert len({run["gpu_uuid"] for run in runs.values()}) == 2, "both GPUs measured, each a run with its UUID"


@pytest.mark.watchdog(seconds=60)
def test_a_worker_killed_mid_sweep_on_a_node_loses_no_row_and_repeats_none(client, tmp_path):
    from convkit.study.shards import DaskSharder

    _sweep(tmp_path / "one")
    done = threading.Event()
    sweeping = threading.Thread(target=lambda: (_sweep(tmp_path / "node", sharder=DaskSharder(client)), done.set()))
    sweeping.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(client.processing().values()):
        time.sleep(0.01)
    victim = next(w for w, tasks in client.processing().items() if tasks)
    os.kill(client.run(os.getpid, workers=[victim])[victim], signal.SIGKILL)  # its nanny starts another
    sweeping.join(timeout=50)
    assert done.is_set(), "the sweep did not finish after the kill"
    keys = [row_key(r) for r in _rows(tmp_path / "node")]
    assert len(keys) == len(set(keys)) and set(keys) == {row_key(r) for r in _rows(tmp_path / "one")}
