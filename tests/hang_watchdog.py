"""The watchdog of GPU tests that can hang: a ``@pytest.mark.watchdog(seconds)`` test runs in a pytest process of
its own, killed with its process group after ``seconds``, so that a hang (a kernel waiting on another launch's
state, a stream that never drains) fails that test instead of stalling the suite. The hook is in conftest.py."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

#: Set in the process the watchdog starts: there the test runs as usual.
CHILD = "CONVKIT_WATCHDOG_CHILD"
DEFAULT_SECONDS = 60.0


def seconds_of(marker: pytest.Mark) -> float:
    """The limit a ``watchdog`` marker sets (its first argument or ``seconds=``; default 60 s)."""
    return float(marker.kwargs.get("seconds", marker.args[0] if marker.args else DEFAULT_SECONDS))


def run_watched(nodeid: str, seconds: float, rootdir: Path) -> None:
    """Run the test ``nodeid`` in a new pytest process; fail if it hangs past ``seconds`` or fails, skip if it
    skips."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")} | {CHILD: "1"}
    command = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:xdist", nodeid]
    process = subprocess.Popen(command, cwd=rootdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, start_new_session=True)  # fmt: skip
    try:
        output, _ = process.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"hung: killed after {seconds:.0f} s\n{output[-3000:]}", pytrace=False)
    if process.returncode == 0 and re.search(r"\b1 skipped\b", output) and not re.search(r"\bpassed\b", output):
        reason = re.search(r"SKIPPED \[\d+\] [^:]+:\d+: (.*)", output)
        pytest.skip(reason.group(1) if reason else "skipped in the watchdog's process")
    if process.returncode != 0:
        pytest.fail(f"failed in the watchdog's process (exit {process.returncode})\n{output[-6000:]}", pytrace=False)
