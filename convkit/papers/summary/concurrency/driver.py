"""The soak's driver: one results store, the cases run in worker processes it watches (see
:mod:`convkit.papers.summary.concurrency`)."""

from __future__ import annotations

import json
import math
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from convkit.core.problem import ConvProblem
from convkit.papers.summary.concurrency import (  # the plan and its constants
    CALLS,
    CASE_TIMEOUT_S,
    COLUMNS,
    EXPERIMENT,
    KEY_COLUMNS,
    MESSAGE,
    REPLAYS,
    SHORT,
    SoakCase,
    result_lines,
    short_plan,
    soak_plan,
    soak_table,
)

#: Where the plan lives, and what a worker is started as (``python -m``).
PACKAGE = "convkit.papers.summary.concurrency"
#: The GPU whose shipped choices a GPU with no table of its own soaks.
REFERENCE_GPU = "nvidia-h100-80gb-hbm3"


def _messages(process: subprocess.Popen) -> queue.Queue:
    """A queue of the worker's soak messages (None at its end), read on a thread of its own."""
    found: queue.Queue = queue.Queue()

    def read() -> None:
        with process.stdout:  # (closed at the worker's end: a soak starts a worker after each hung case)
            for line in process.stdout:
                if line.startswith(MESSAGE):
                    found.put(json.loads(line[len(MESSAGE) :]))
        found.put(None)

    threading.Thread(target=read, daemon=True).start()
    return found


def run_cases(
    todo: list[SoakCase],
    record: Callable[[dict[str, Any]], None],
    *,
    env: dict[str, str] | None = None,
    calls: int = CALLS,
    replays: int = REPLAYS,
    deadline: float = math.inf,
    worker_command: list[str] | None = None,
    timeout_of: Callable[[SoakCase], float] = lambda case: case.timeout_s,
) -> list[SoakCase]:
    """Run ``todo`` in worker processes, ``record``ing each row as it comes; a case silent past its timeout is
    killed and recorded as hung, a worker that dies records its case's error, and a new worker takes the cases
    left. Stops starting workers after ``deadline`` (``time.monotonic()``); returns the cases not run."""
    command = worker_command or [sys.executable, "-m", PACKAGE, "--worker", "--calls", str(calls),
                                 "--replays", str(replays)]  # fmt: skip
    todo = list(todo)
    while todo and time.monotonic() < deadline:
        with tempfile.TemporaryFile("w+") as stderr:
            process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                       text=True, env=env, start_new_session=True)  # fmt: skip
            messages, current = _messages(process), None  # read from now on: the worker never blocks on stdout
            try:
                process.stdin.write("".join(json.dumps(asdict(c)) + "\n" for c in todo))
                process.stdin.close()
            except BrokenPipeError:  # it died at start: its end comes through ``messages``
                pass
            while True:
                try:
                    message = messages.get(timeout=timeout_of(current) if current else CASE_TIMEOUT_S * 3)
                except queue.Empty:
                    os.killpg(process.pid, 9)
                    process.wait()
                    if current is not None:
                        record({**asdict(current), "calls": 0, "wrong": 0, "hung": 1,
                                "note": f"no progress in {timeout_of(current):.0f} s: killed"})  # fmt: skip
                        todo.remove(current)
                    break
                if message is None:  # the worker ended: finished, or died inside a case
                    process.wait()
                    if current is not None:
                        stderr.seek(0)
                        tail = stderr.read()[-300:].strip().replace("\n", " | ")
                        record({**asdict(current), "calls": 0, "wrong": 0, "hung": 0,
                                "note": f"worker exited {process.returncode}: {tail}"})  # fmt: skip
                        todo.remove(current)
                    break
                if "start" in message:
                    current = SoakCase(**message["start"])
                else:
                    record(message["row"])
                    todo.remove(SoakCase(**{k: message["row"][k] for k in ("problem", "implementation", "mode")}))
                    current = None
    return todo


def run(directory: Path | None = None, *, short: bool = False, budget_s: float = math.inf,
        progress: Callable[[str], None] | None = print) -> Path:  # fmt: skip
    """Run the soak (the short form with ``short``) into ``<directory>/concurrency.csv`` (default
    ``results/<this GPU>``; the short form's ``concurrency_quick.csv``), resuming; returns the directory."""
    from convkit.core import shipped
    from convkit.op import dispatch
    from convkit.op.interop import gpu_name
    from convkit.study import provenance
    from convkit.study.results import ResultStore, gpu_results_dir

    deadline = time.monotonic() + budget_s
    gpu = gpu_name()
    # a GPU with no table of its own soaks the H100's choices, every one forced through the user's cache
    table_gpu = gpu if shipped.shipped(gpu) else REFERENCE_GPU
    choices = dispatch.shipped_choices(table_gpu)
    if short:
        cases, forced = short_plan(choices), {}
    else:
        cases, forced = soak_plan(choices, _supports_here)
    if table_gpu != gpu:
        forced = {c.problem: choices[c.problem] for c in cases if c.problem in choices} | forced
    directory = gpu_results_dir(directory)
    experiment = EXPERIMENT + ("_quick" if short else "")
    store = ResultStore.open(directory, experiment, provenance.collect(), columns=COLUMNS, key_columns=KEY_COLUMNS)
    done = store.done_keys()
    todo = [c for c in cases if c.key not in done]
    if progress:
        progress(f"concurrency soak: {len(todo)} of {len(cases)} cases to run, {len(forced)} choices forced")
    with tempfile.TemporaryDirectory() as cache_home:
        env = dict(os.environ, XDG_CACHE_HOME=cache_home)
        if forced:  # the user's cache of the workers: forced choices, read before the shipped table
            dispatch.write_table(dispatch.cache_path(gpu, home=cache_home), gpu, forced)

        def record(row: dict[str, Any]) -> None:
            store.append(row)
            if progress and (row.get("wrong") or row.get("hung") or row.get("note")):
                progress(f"  {row}")

        calls = SHORT if short else {"calls": CALLS, "replays": REPLAYS}
        left = run_cases(todo, record, env=env, deadline=deadline, **calls)
    if progress:
        progress(f"concurrency soak: {len(todo) - len(left)} cases recorded, {len(left)} left for the next run")
    return directory


def _supports_here(implementation: str, problem: ConvProblem) -> bool:
    """Whether a choice of ``implementation`` can run ``problem`` on this GPU (a forced choice must)."""
    from convkit.families import variants_by_name
    from convkit.libs import cublas, cudnn

    impl, variant = implementation.split(":", 1)
    if impl == "convkit":
        return variants_by_name()[variant].supports(problem)
    if impl == "cublas":
        return cublas.supports(problem)
    if impl == "cudnn":
        return cudnn.CudnnConvolution(problem).workspace(variant).status == "ok"
    return True


def main(argv: list[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m convkit.papers.summary.concurrency",
        description=sys.modules[PACKAGE].__doc__,
    )
    parser.add_argument("directory", nargs="?", type=Path)
    parser.add_argument("--short", action="store_true", help="the short form (the GPU test's)")
    parser.add_argument("--budget-s", type=float, default=math.inf, help="start no worker after this many seconds")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, default=CALLS, help=argparse.SUPPRESS)
    parser.add_argument("--replays", type=int, default=REPLAYS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        from convkit.papers.summary.concurrency.modes import worker

        worker(sys.stdin, calls=args.calls, replays=args.replays)
        return
    directory = run(args.directory, short=args.short, budget_s=args.budget_s)
    print(*result_lines(soak_table(directory, EXPERIMENT + ("_quick" if args.short else ""))))
