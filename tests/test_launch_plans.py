"""The same launches: every convkit choice the H100's shipped table held at 10cd7f3 (466) and every kernel at its
default launch and each tuning candidate on sample problems (680), planned on the CPU (tests/launch_plans.py: the
kernel, grid, block, shared bytes, compile options and argument layout its runner enqueues), against the plans
recorded before the launches were reworked (tests/fixtures/, written by that script from the code at 10cd7f3; written
again since only where a launch was meant to change: Winograd's two transforms became one launch, the 3xTF32
implicit GEMM takes the op's bias as its last argument, null here, Winograd's transforms take their count of filter
items as a 64-bit integer, and its output transform takes dynamic shared memory, its tiles' rows on their way out;
every other plan as it was).
Choices shipped since (the networks' layers, papers/summary/network_layers.py) are planned too, and compared with
nothing."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
GPU = "nvidia-h100-80gb-hbm3"
FIXTURE = HERE / "fixtures" / f"launch_plans-{GPU}.json.gz"


def test_every_shipped_choice_and_candidate_plans_the_launches_it_planned_before(tmp_path):
    out = tmp_path / "plans.json"
    subprocess.run([sys.executable, str(HERE / "launch_plans.py"), GPU, str(out)], check=True, timeout=300)
    now, before = json.loads(out.read_text()), json.loads(gzip.decompress(FIXTURE.read_bytes()))
    assert not [key for key, plan in now.items() if any("error" in call for call in plan)], "every choice plans"
    assert set(before) <= set(now), "every choice planned before is still shipped (choices shipped since are new)"
    changed = [key for key in sorted(before) if now[key] != before[key]]
    assert not changed, (
        f"{len(changed)} choices launch otherwise, e.g. {changed[0]}: {now[changed[0]]} (was {before[changed[0]]})"
    )
