"""One typed launch (CPU): every kernel's launch on the sample problems of tests/launch_plans.py, planned with a
stand-in CuPy, holds what it declares. Its recorded knobs read back to the same launch (JSON and all), a knob it does
not have is rejected where the knobs are read, each launch class has a kind of its own, and the workspace it
declares is the scratch its runner allocates."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

HERE = Path(__file__).parent
GPU = "nvidia-h100-80gb-hbm3"
ITEM_BYTES = {"float32": 4, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "uint8": 1}
WORK = re.compile(r"^(?P<name>work\d+)(?:\+(?P<offset>\d+))?:(?P<dtype>\w+)\[(?P<size>\d+)\]$")


@pytest.fixture(scope="module")
def sampled(tmp_path_factory):
    folder = tmp_path_factory.mktemp("typed")
    plans, declared = folder / "plans.json", folder / "declared.json"
    subprocess.run([sys.executable, str(HERE / "launch_plans.py"), GPU, str(plans), str(declared)], check=True,
                   timeout=300)  # fmt: skip
    return json.loads(plans.read_text()), json.loads(declared.read_text())


def scratch_bytes(plan: list[dict]) -> int:
    """The bytes of work arrays a plan's launches touch (each work array's furthest byte)."""
    extent: dict[str, int] = defaultdict(int)
    for call in plan:
        for arg in call.get("args", []):
            if found := WORK.match(arg):
                end = int(found["offset"] or 0) + int(found["size"]) * ITEM_BYTES[found["dtype"]]
                extent[found["name"]] = max(extent[found["name"]], end)
    return sum(extent.values())


def test_every_launch_reads_back_from_its_recorded_knobs_and_rejects_one_it_lacks(sampled):
    _, declared = sampled
    assert len(declared) > 600
    assert not [key for key, d in declared.items() if not d["round_trip"]]
    assert not [key for key, d in declared.items() if not d["rejects_unknown_knob"]]


def test_each_launch_class_has_a_kind_of_its_own(sampled):
    _, declared = sampled
    kinds = defaultdict(set)
    for d in declared.values():
        kinds[d["kind"]].add(d["class"])
    assert all(len(classes) == 1 for classes in kinds.values()), kinds


def test_the_workspace_a_launch_declares_is_the_scratch_its_runner_allocates(sampled):
    plans, declared = sampled
    wrong = {key: (d["workspace_bytes"], scratch_bytes(plans[key])) for key, d in declared.items()
             if d["workspace_bytes"] != scratch_bytes(plans[key])}  # fmt: skip
    assert not wrong, f"{len(wrong)} launches declare other workspace than they use, e.g. {next(iter(wrong.items()))}"


def test_a_launch_that_declares_it_adds_the_bias_is_one_whose_runner_takes_it(sampled):
    _, declared = sampled
    assert sum(d["adds_bias"] for d in declared.values()) > 100
    assert not [key for key, d in declared.items() if d["adds_bias"] != d["bias_taken"]]


def test_a_misspelt_knob_fails_where_the_table_is_read_naming_it():
    from convkit.families.fp32.launch import ImplicitGemmLaunch

    with pytest.raises(ValueError, match="no knob 'tiles'; its knobs are tile, splits, stages"):
        ImplicitGemmLaunch.from_params({"tiles": "64x64", "splits": 1, "stages": 3})
    assert ImplicitGemmLaunch.from_params({"tile": "64x64"}) == ImplicitGemmLaunch("64x64")
