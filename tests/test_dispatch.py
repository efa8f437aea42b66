"""convkit.conv2d's dispatch table on the CPU: built from the recorded sweeps, shipped in the package, the user's
cache written atomically and versioned, a damaged or stale file ignored with a warning."""

from __future__ import annotations

import json

import pytest

from convkit import __version__
from convkit.core.problem import ConvProblem
from convkit.core.shipped import shipped_path
from convkit.op import dispatch
from convkit.papers import PAPERS, shipping_sources
from convkit.study import shipping
from convkit.study.checkout import results_dir

GPU = "nvidia-h100-80gb-hbm3"
MAX_CASE = ConvProblem.same(1, 832, 7, 7, 32, 1)  # cuConv's largest speed-up


def test_the_shipped_table_is_the_recorded_results_fastest():
    recorded = shipping.table_from_results(results_dir() / GPU, shipping_sources())
    assert dispatch.read_table(shipped_path(GPU), gpu=GPU) == recorded
    assert len(recorded) > 700
    choice = recorded[MAX_CASE.key]
    ranked = shipping.explain(MAX_CASE, results_dir() / GPU, shipping_sources())
    assert (choice.impl, choice.variant, choice.time_us) == tuple(ranked.iloc[0][["impl", "variant", "us"]])
    assert choice.paper if choice.impl == "convkit" else not choice.paper
    assert list(ranked["us"]) == sorted(ranked["us"])


def test_no_fused_layer_is_a_choice_for_a_plain_convolution():
    candidates = shipping.recorded_candidates(results_dir() / GPU, shipping_sources())
    assert set(candidates["paper"]) <= {p.name for p in PAPERS if p.convolutions}
    assert not {p.name for p in PAPERS if not p.convolutions} & set(candidates["paper"])


def test_cache_is_per_gpu_and_version_under_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert dispatch.cache_path("some-gpu") == tmp_path / "convkit" / f"dispatch-some-gpu-{__version__}.json"


def test_a_tuned_choice_in_the_cache_wins_over_the_shipped_one(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    tuned = dispatch.Choice("convkit", "fp32_igemm", '{"splits":1}', "fp32", 1.0, "tuned")
    dispatch.write_table(dispatch.cache_path(GPU), GPU, {MAX_CASE.key: tuned})
    assert dispatch.lookup(MAX_CASE, GPU) == tuned
    assert not list(tmp_path.rglob("*.tmp")), "written through a temporary file and a rename"
    other = ConvProblem.same(32, 256, 56, 56, 256, 3)
    assert dispatch.lookup(other, GPU).source == "recorded"
    assert dispatch.lookup(other, "a-gpu-never-recorded") is None


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        json.dumps({"convkit": "0.0.1", "gpu": GPU, "choices": {}}),
        json.dumps({"convkit": __version__, "gpu": "another-gpu", "choices": {}}),
        json.dumps({"convkit": __version__, "gpu": GPU, "choices": {"k": {"impl": "x", "bogus": 1}}}),
    ],
    ids=["corrupt", "older-convkit", "other-gpu", "unknown-field"],
)
def test_a_damaged_or_stale_table_is_ignored_with_a_warning(tmp_path, text):
    path = tmp_path / "dispatch.json"
    path.write_text(text)
    with pytest.warns(UserWarning, match="ignoring"):
        assert dispatch.read_table(path, gpu=GPU) == {}


def test_a_key_gives_back_its_problem():
    for problem in (ConvProblem.same(8, 64, 56, 56, 64, 3), ConvProblem(1, 3, 9, 9, 5, 3, 3, pad=0, stride=2)):
        assert ConvProblem.from_key(problem.key) == problem
