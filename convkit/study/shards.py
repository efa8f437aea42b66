"""Sweeps sharded over the GPUs of a node, or of a cluster, through Dask.

A :class:`DaskSharder` is what :func:`convkit.study.sweep.measuring_on` takes: each sweep in its block splits the
problems still to measure into :func:`chunks` (a problem whole, with every case of it, in exactly one chunk, so each
same-run comparison of a convkit kernel with the libraries stays on one GPU in one process), measures the chunks on
the cluster's workers (one per GPU, one task at a time), and appends their rows in this process, the one writer.
A chunk's rows come back together or not at all: a worker killed mid-chunk loses nothing but time, Dask runs the
chunk again elsewhere, and a row already held is never written twice. Each worker is a run of its own in the
results' provenance, with its GPU's index and UUID.

Whole steps that are not sweeps (the ceilings, a run-to-run sample, the summary's networks) run on a worker in a
scratch folder, as a command in a fresh process (:meth:`DaskSharder.step`); the files they change come back and
replace this folder's.

Dask and distributed are the ``convkit[node]`` extra (with dask-cuda for one node's GPUs); nothing here imports
them before a cluster is asked for.
"""

from __future__ import annotations

import functools
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from convkit.bench.rows import make_row, row_key
from convkit.core.paths import replace_text
from convkit.study.results import ResultStore
from convkit.study.sweep import RowsOf, Work, measure_each

#: Chunks per worker in each sweep: enough that one slow chunk does not leave the other GPUs idle at its end.
CHUNKS_PER_WORKER = 4
NODE_EXTRA = "convkit[node]"


def chunks(work: Sequence[Work], parts: int) -> list[list[Work]]:
    """``work`` in at most ``parts`` runs of consecutive problems with about as many cases each; every problem whole,
    in exactly one chunk, in order."""
    if parts < 1:
        raise ValueError(f"parts must be at least 1, got {parts}")
    total = sum(len(todo) for _, todo in work)
    found: list[list[Work]] = [[]] if work else []
    held = 0
    for problem, todo in work:
        if len(found) < parts and held >= total * len(found) / parts:  # this chunk holds its share: the next
            found.append([])
        found[-1].append((problem, todo))
        held += len(todo)
    return found


def visible_gpu() -> str:
    """The GPU this process measures on, as its node counts them (the first of ``CUDA_VISIBLE_DEVICES``: dask-cuda
    gives each worker its own GPU first), or its UUID where the node names GPUs so."""
    return os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip() or "0"


@functools.cache
def gpu_provenance() -> dict[str, Any]:
    """This worker's run: :func:`convkit.study.provenance.collect` and which of the node's GPUs it measures on
    (index as the node counts them, UUID), the host and the process."""
    from convkit.study import provenance

    visible = visible_gpu()
    uuid = visible if visible.startswith(("GPU-", "MIG-")) else provenance.nvidia_smi("uuid", visible)
    return provenance.collect() | {"gpu_index": visible, "gpu_uuid": uuid, "pid": os.getpid()}


def measure_chunk(
    work: list[Work], measure: RowsOf, provenance: Callable[[], dict[str, Any]] = gpu_provenance
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """On a worker: (its run's provenance, every row of ``work``, errors as rows: :func:`measure_each`)."""
    return provenance(), list(measure_each(work, measure))


#: Where a whole step's command names its results folder.
FOLDER = "{directory}"


def run_step(argv: Sequence[str], inputs: dict[str, bytes]) -> dict[str, bytes]:
    """On a worker: ``python *argv`` in a fresh process, :data:`FOLDER` in ``argv`` replaced by a scratch folder
    holding ``inputs`` (file name -> bytes); every file there that is new or changed afterwards (name -> bytes).
    Raises RuntimeError with the end of its output where it fails."""
    with tempfile.TemporaryDirectory(prefix="convkit-step-") as scratch:
        folder = Path(scratch)
        for name, data in inputs.items():
            (folder / name).write_bytes(data)
        command = [sys.executable, *(arg.replace(FOLDER, str(folder)) for arg in argv)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"python {' '.join(argv)} failed ({done.returncode}): {done.stderr[-2000:]}")
        return {p.name: p.read_bytes() for p in sorted(folder.iterdir())
                if p.is_file() and inputs.get(p.name) != p.read_bytes()}  # fmt: skip


class DaskSharder:
    """Measures sweeps on a Dask cluster's workers (see the module doc); ``client``: a ``distributed.Client``.

    ``provenance`` is what each worker's run records (default :func:`gpu_provenance`; a test's fake measure passes
    its own). ``progress`` gets one line per finished chunk (the experiment, rows done, the GPU, time left) where the
    sweep passes no callback of its own.
    """

    def __init__(self, client: Any, *, provenance: Callable[[], dict[str, Any]] = gpu_provenance,
                 progress: Callable[[str], None] | None = print):  # fmt: skip
        self.client = client
        self.provenance = provenance
        self.progress = progress

    @property
    def workers(self) -> int:
        return max(1, len(self.client.scheduler_info()["workers"]))

    def sweep(self, store: ResultStore, work: list[Work], measure: RowsOf, *,
              progress: Callable[[str], None] | None = None) -> int:  # fmt: skip
        """Measure ``work`` in chunks on the workers, append the rows to ``store``'s folder as each chunk finishes,
        each worker's rows under its own run; rows written. A chunk that fails as a whole (its worker died once
        too often) is recorded as error rows, and the sweep goes on."""
        from distributed import as_completed

        if not work:
            return 0
        parts = chunks(work, min(len(work), CHUNKS_PER_WORKER * self.workers))
        futures = {self.client.submit(measure_chunk, part, measure, self.provenance, pure=False): part
                   for part in parts}  # fmt: skip
        progress = progress or self.progress
        runs: dict[str, ResultStore] = {}
        done, total, written, start = store.done_keys(), sum(len(t) for _, t in work), 0, time.monotonic()
        for finished, future in enumerate(as_completed(futures), 1):
            try:
                run, rows = future.result()
            except Exception as exc:  # the chunk, not a case of it, failed: its cases recorded with the reason
                run, rows = _driver_run(), _lost(futures[future], exc)
            identity = json.dumps(run, sort_keys=True, default=str)
            if identity not in runs:  # a worker's first chunk: its run, opened once
                runs[identity] = _run_store(store, run)
            into = runs[identity]
            for row in rows:
                if (key := row_key(row, store.key_columns)) not in done:  # a chunk measured twice adds nothing
                    into.append(row)
                    done.add(key)
                    written += 1
            if progress:
                progress(_progress_line(store.experiment, finished, len(parts), written, total, run, start))
        return written

    def step(self, argv: Sequence[str], directory: Path, reads: Iterable[str], *, into: Path | None = None,
             worker: str | None = None) -> list[str]:  # fmt: skip
        """``python *argv`` on a worker (:func:`run_step`; ``worker``: on that one), given the files of ``directory``
        that match the globs ``reads``; the files it wrote replace those of ``into`` (default ``directory``), each
        atomically. Returns their names."""
        inputs = {p.name: p.read_bytes() for pattern in reads for p in sorted(Path(directory).glob(pattern))
                  if p.is_file()}  # fmt: skip
        pinned = {"workers": [worker], "allow_other_workers": False} if worker else {}
        written = self.client.submit(run_step, list(argv), inputs, pure=False, **pinned).result()
        target = Path(into or directory)
        target.mkdir(parents=True, exist_ok=True)
        for name, data in written.items():
            replace_text(target / name, data.decode())
        return sorted(written)

    def gpu_indices(self) -> dict[str, str]:
        """Each worker's address -> the index of the GPU it measures on, as its node counts them."""
        return dict(self.client.run(visible_gpu))

    def gpu_names(self) -> dict[str, str]:
        """Each worker's address -> the name of the GPU it measures on."""
        from convkit.core.gpu import device_name

        return dict(self.client.run(device_name))


def _run_store(store: ResultStore, run: dict[str, Any]) -> ResultStore:
    return ResultStore.open(store.directory, store.experiment, run, columns=store.columns,
                            key_columns=store.key_columns)  # fmt: skip


def _driver_run() -> dict[str, Any]:
    """The run that records a lost chunk's cases: this process, which measured none of them."""
    from convkit.study.provenance import convkit_commit

    return {"role": "sharded sweep's writer: cases of a chunk that failed as a whole", "host": platform.node(),
            "convkit_commit": convkit_commit()}  # fmt: skip


def _lost(part: list[Work], exc: BaseException) -> list[dict[str, Any]]:
    note = f"{type(exc).__name__}: {exc}"[:500]
    return [make_row(problem, case, status="error", note=note) for problem, todo in part for case in todo]


def _progress_line(experiment: str, finished: int, parts: int, rows: int, total: int, run: dict[str, Any],
                   start: float) -> str:  # fmt: skip
    elapsed = time.monotonic() - start
    left = elapsed / rows * (total - rows) if rows else math.nan
    where = f"GPU {run['gpu_index']} of {run.get('host', '?')}" if "gpu_index" in run else "lost"
    eta = f"about {left / 60:.1f} min left" if math.isfinite(left) else "time left unknown"
    return f"{experiment}: chunk {finished}/{parts} done ({where}), {rows}/{total} rows, {eta}"


def open_client(*, gpus: int | None = None, scheduler: str | None = None) -> Any:
    """A ``distributed.Client``: of the cluster at ``scheduler`` (``tcp://host:port``), else of a cluster on this
    node's first ``gpus`` GPUs, one single-threaded worker each, pinned by ``CUDA_VISIBLE_DEVICES``
    (``dask_cuda.LocalCUDACluster``; where dask-cuda cannot be imported, the same workers started by
    :func:`gpu_workers`). Waits for the workers; raises ImportError naming the extra where Dask is not installed."""
    try:
        from distributed import Client
    except ImportError as exc:
        raise ImportError(f"sharding needs Dask: pip install '{NODE_EXTRA}'") from exc
    if scheduler:
        client = Client(scheduler)
        client.wait_for_workers(1, timeout=120)
        return client
    if not gpus or gpus < 2:
        raise ValueError(f"gpus must be 2 or more for a cluster (1 measures in this process), got {gpus}")
    try:
        from dask_cuda import LocalCUDACluster

        cluster = LocalCUDACluster(CUDA_VISIBLE_DEVICES=list(range(gpus)), threads_per_worker=1)
    except ImportError as exc:  # dask-cuda, or the CUDA Python packages it imports, missing: the same workers
        print(f"convkit: dask-cuda not usable here ({exc}); one Dask worker per GPU without it", file=sys.stderr)
        cluster = gpu_workers(gpus)
    client = Client(cluster)
    client.wait_for_workers(gpus, timeout=300)
    return client


def gpu_workers(gpus: int) -> Any:
    """A ``distributed.SpecCluster`` of ``gpus`` single-threaded workers, each a process (under its nanny) whose
    ``CUDA_VISIBLE_DEVICES`` lists its own GPU first, as dask-cuda orders them: worker ``i`` measures on GPU ``i``."""
    from distributed import Nanny, Scheduler, SpecCluster

    def visible(i: int) -> str:
        return ",".join(str((i + k) % gpus) for k in range(gpus))

    workers = {i: {"cls": Nanny, "options": {"nthreads": 1, "env": {"CUDA_VISIBLE_DEVICES": visible(i)}}}
               for i in range(gpus)}  # fmt: skip
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": None}}
    return SpecCluster(workers=workers, scheduler=scheduler, silence_logs=True)


def close(client: Any) -> None:
    """Close ``client``, and the cluster :func:`open_client` started for it on this node (a cluster at a scheduler
    address is left running: it is not this process's)."""
    cluster = getattr(client, "cluster", None)
    client.close()
    if cluster is not None:
        cluster.close()
