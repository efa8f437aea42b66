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
    order = ranked["counted us"] if "counted us" in ranked else ranked["us"]  # as the table ranks them
    assert list(order) == sorted(order)


def test_no_fused_layer_is_a_choice_for_a_plain_convolution():
    candidates = shipping.recorded_candidates(results_dir() / GPU, shipping_sources())
    assert set(candidates["paper"]) <= {p.name for p in PAPERS if p.convolutions} | {"summary"}  # networks' layers
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


def test_the_shipped_table_holds_launch_knobs_as_json_objects_never_text_inside_json():
    doc = json.loads(shipped_path(GPU).read_text())
    params = [c["params"] for c in doc["choices"].values()]
    assert all(p is None or isinstance(p, dict) for p in params) and any(isinstance(p, dict) for p in params)
    assert all(c["params"] is None for c in doc["choices"].values() if c["impl"] != "convkit")
    knobs = [k for by_key in doc["knobs"].values() for k in by_key.values()]
    assert knobs and all(isinstance(k, dict) for k in knobs)
    lu = dispatch.read_table(shipped_path(GPU), gpu=GPU)["1024-1-3-1-1-p1-s1"]
    assert lu.params == '{"rows":2,"warps":2}', "read back as the canonical text a results row's params hold"


def test_a_cache_of_an_earlier_convkit_with_params_as_text_is_read_the_same(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    earlier = {"impl": "convkit", "variant": "fp32_igemm", "params": '{"splits": 1}', "paper": "fp32",
               "time_us": 1.0, "source": "tuned", "precision": "ieee"}  # fmt: skip
    library = {"impl": "cudnn", "variant": "GEMM", "params": "", "time_us": 2.0, "source": "tuned"}
    path = dispatch.cache_path(GPU)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"convkit": __version__, "gpu": GPU, "choices": {"a": earlier, "b": library}}))
    found = dispatch.read_table(path, gpu=GPU)
    assert found["a"].params == '{"splits":1}' and found["b"].params == ""
    dispatch.write_table(path, GPU, found)  # written back in today's format
    assert json.loads(path.read_text())["choices"]["a"]["params"] == {"splits": 1}
    assert dispatch.read_table(path, gpu=GPU) == found


def test_a_choice_whose_params_are_no_json_object_makes_the_table_ignored_with_a_warning(tmp_path):
    path = tmp_path / "table.json"
    bad = {"impl": "convkit", "variant": "fp32_igemm", "params": "[1, 2]"}
    path.write_text(json.dumps({"convkit": __version__, "gpu": GPU, "choices": {"a": bad}}))
    with pytest.warns(UserWarning, match="unreadable"):
        assert dispatch.read_table(path, gpu=GPU) == {}


def _sweep(folder, experiment, problem, times_us):
    """A recorded sweep of ``problem``: each (impl, variant) of ``times_us`` checked and timed at that median."""
    from convkit.bench.rows import make_row
    from convkit.op.cases import Case
    from convkit.study.results import ResultStore

    store = ResultStore.open(folder, experiment, {"gpu": "fake"})
    for (impl, variant), us in times_us.items():
        ms = str(us / 1e3)
        store.append(make_row(problem, Case(impl, variant), status="ok", rel_err=1e-7)
                     | {"time_ms_median": ms, "time_ms_min": ms, "time_ms_max": ms, "reps": 10})  # fmt: skip


def test_a_host_bound_layer_takes_the_path_that_costs_the_host_least(tmp_path):
    """cuBLAS at 7 us of GPU time loses to convkit's kernel at 9 us where a call through cuBLAS costs the host 30 us
    and one of convkit's 17 us: the wall clock waits on the host either way. A layer the GPU sets the pace of keeps
    its fastest kernel, and with no host cost recorded the GPU time alone decides."""
    small, large = ConvProblem.same(1, 64, 56, 56, 64, 1), ConvProblem.same(64, 1024, 14, 14, 256, 1)
    _sweep(tmp_path, "sweep", small, {("cublas", "sgemm"): 7.0, ("convkit", "fp32_igemm"): 9.0})
    _sweep(tmp_path, "sweep", large, {("cublas", "sgemm"): 140.0, ("convkit", "fp32_igemm"): 150.0})
    sources = shipping.Sources(sweeps={"fp32": "sweep"}, host_paths="paths")
    assert shipping.host_floors(tmp_path, sources) == {}
    assert shipping.table_from_results(tmp_path, sources)[small.key].impl == "cublas"

    for problem in (small, ConvProblem.same(1, 256, 14, 14, 1024, 1)):
        _sweep(tmp_path, "paths", problem, {("convkit", "host_replay"): 17.0, ("cublas", "host_replay"): 30.0,
                                            ("pytorch", "host_replay"): 25.0})  # fmt: skip
    assert shipping.host_floors(tmp_path, sources) == pytest.approx({"convkit": 17.0, "cublas": 30.0, "pytorch": 25.0})
    table = shipping.table_from_results(tmp_path, sources)
    assert (table[small.key].impl, table[small.key].time_us) == ("convkit", pytest.approx(9.0))  # its GPU time
    assert table[large.key].impl == "cublas"
    ranked = shipping.explain(small, tmp_path, sources)  # in the table's order, each with the time it counts as
    assert list(ranked["impl"]) == ["convkit", "cublas"] and list(ranked["counted us"]) == pytest.approx([17, 30])


def test_the_op_runs_every_library_but_cublas_through_pytorchs_convolution():
    assert [dispatch.path_of(impl) for impl in ("convkit", "cublas", "cudnn", "pytorch", "cutlass")] == [
        "convkit", "cublas", "pytorch", "pytorch", "pytorch"]  # fmt: skip
    from convkit.papers.summary import overhead

    assert set(overhead.PATHS) == set(dispatch.PATHS)
