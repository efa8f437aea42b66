"""One typed launch (CPU): every kernel's launch on the sample problems of tests/launch_plans.py, planned with a
stand-in CuPy, holds what it declares. Its recorded knobs read back to the same launch (JSON and all), a knob it does
not have is rejected where the knobs are read, each launch class has a kind of its own, its runner touches no array
but the operands it declares, within the workspace it declares, and it takes the bias where it says it adds it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from convkit.cuda.operands import WORKSPACE_ALIGN

HERE = Path(__file__).parent
GPU = "nvidia-h100-80gb-hbm3"


@pytest.fixture(scope="module")
def sampled(tmp_path_factory):
    folder = tmp_path_factory.mktemp("typed")
    plans, declared, builds = folder / "plans.json", folder / "declared.json", folder / "builds.json"
    subprocess.run([sys.executable, str(HERE / "launch_plans.py"), GPU, str(plans), str(declared), str(builds)],
                   check=True, timeout=300)  # fmt: skip
    return json.loads(plans.read_text()), json.loads(declared.read_text()), json.loads(builds.read_text())


def test_every_launch_reads_back_from_its_recorded_knobs_and_rejects_one_it_lacks(sampled):
    _, declared, _ = sampled
    assert len(declared) > 600
    assert not [key for key, d in declared.items() if not d["round_trip"]]
    assert not [key for key, d in declared.items() if not d["rejects_unknown_knob"]]


def test_each_launch_class_has_a_kind_of_its_own(sampled):
    _, declared, _ = sampled
    kinds = defaultdict(set)
    for d in declared.values():
        kinds[d["kind"]].add(d["class"])
    assert all(len(classes) == 1 for classes in kinds.values()), kinds


def test_a_runner_touches_only_the_operands_it_declares_within_the_workspace_it_declares(sampled):
    _, declared, _ = sampled
    assert not {key: d["undeclared"] for key, d in declared.items() if d["undeclared"]}, "arrays beside the operands"
    assert sum(d["workspace_bytes"] > 0 for d in declared.values()) > 300
    wrong = {key: (d["workspace_bytes"], d["workspace_reach"]) for key, d in declared.items()
             if not d["workspace_bytes"] - WORKSPACE_ALIGN < d["workspace_reach"] <= d["workspace_bytes"]
             and (d["workspace_bytes"] or d["workspace_reach"])}  # fmt: skip
    assert not wrong, f"{len(wrong)} launches use other workspace than they declare, e.g. {next(iter(wrong.items()))}"
    assert {d["class"] for d in declared.values() if d["zeroed_workspace"] and d["workspace_bytes"]} == {
        "TiledMultiLaunch", "PointwiseMultiLaunch", "BroadcastMultiLaunch"}  # the split counters  # fmt: skip


def test_a_launch_takes_the_bias_where_it_declares_it_adds_it_and_refuses_it_elsewhere(sampled):
    _, declared, _ = sampled
    assert sum(d["adds_bias"] for d in declared.values()) > 100
    assert not [key for key, d in declared.items() if d["adds_bias"] != d["bias_taken"]]
    assert not [key for key, d in declared.items() if d["adds_bias"] and d["bias_refused"]]


def test_a_misspelt_knob_fails_where_the_table_is_read_naming_it():
    from convkit.families.fp32.launch import ImplicitGemmLaunch

    with pytest.raises(ValueError, match="no knob 'tiles'; its knobs are tile, splits, stages"):
        ImplicitGemmLaunch.from_params({"tiles": "64x64", "splits": 1, "stages": 3})
    assert ImplicitGemmLaunch.from_params({"tile": "64x64"}) == ImplicitGemmLaunch("64x64")


def test_prebuild_lists_every_kernel_build_the_shipped_choices_launch(sampled):
    """``convkit prebuild`` runs each shipped choice's launcher without launching to list its builds: the same
    builds (source, kernel, compile options) as the choices' planned launches."""
    _, _, builds = sampled
    assert len(builds["prebuild"]) > 100
    assert builds["prebuild"] == builds["planned"]


def test_prebuild_also_lists_what_the_first_use_tuner_times_on_the_recorded_layers(sampled):
    """Beside the shipped choices, what a GPU with no table tunes: the tuner's kernels at the launches it times,
    the implicit GEMM (the fallback) on every filter size recorded, a 7x7 stem's among them."""
    _, _, builds = sampled
    gemm = [options for source, kernel, options in builds["tuner"] if kernel == "implicit_gemm"]
    assert len(builds["tuner"]) > 20 and any("-DCONVKIT_R=7" in options for options in gemm)
    assert {kernel for _, kernel, _ in builds["tuner"]} >= {
        "implicit_gemm",
        "winograd_transforms",
        "implicit_gemm_tf32x3",
    }
