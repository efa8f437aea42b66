"""The summary chapter's tables and result lines from the recorded H100 run, without a GPU: speed-ups in words
that cannot be read backwards, tables that fit a page, methods in words, and a verdict that follows the rows."""

from __future__ import annotations

import pandas as pd

from convkit.papers.summary import chapter, host_tables
from convkit.papers.summary import networks_tables as nets
from convkit.study.checkout import results_dir

RECORDED = results_dir() / "nvidia-h100-80gb-hbm3"


def test_a_span_of_speedups_says_faster_or_slower():
    assert nets.speedup_span([1.11, 2.12]) == "1.11x to 2.12x faster than PyTorch"
    assert nets.speedup_span([0.5, 0.8]) == "1.25x to 2.00x slower than PyTorch"
    assert nets.speedup_span([0.5, 1.5]) == "from 2.00x slower to 1.50x faster than PyTorch"
    assert nets.speedup_span([0.999, 1.2]).startswith("1.00x to 1.20x faster")


def test_the_networks_tables_fit_a_page():
    networks = nets.networks_table(RECORDED)
    timing, checked = nets.timing_table(networks), nets.correctness_table(networks)
    assert len(timing.columns) <= 9 and len(checked.columns) + 1 <= 9
    over = networks["layers over the bar"].sum()
    assert len(timing) == len(networks) and checked["layers over the bar"].sum() == over
    compact = nets.modes_compact(nets.modes_table(RECORDED))
    assert len(compact) == 10 and len(compact.columns) == 4
    host = host_tables.host_cost_table(RECORDED)
    assert len(host.columns) <= 9 and not host["op runs"].str.contains("_").any()  # methods in words, no ids


def test_the_win_map_names_methods_in_words():
    table = chapter.win_map(chapter.best_per_problem(RECORDED))
    text = " ".join(str(v) for v in table.to_numpy().ravel())
    assert "_" not in text and "FP32 Winograd" in text
    assert set(chapter.kernel_ids()["kernel id"]) == set(chapter.KERNEL_WORDS)


def test_the_verdict_follows_the_recorded_rows():
    d = RECORDED
    networks, host, spread = nets.networks_table(d), host_tables.host_cost_table(d), chapter.spreads(d)
    lines = chapter.result_lines(chapter.best_per_problem(d), networks, host, {}, spread)
    one = networks[networks["batch"] == 1]
    assert nets.speedup_span(one["GPU speed-up"]) in " ".join(lines)
    wall_tie = spread["networks wall speed-up"]["p95"]
    late = int((one["wall speed-up"] < 1 - wall_tie).sum())
    above = int((host["host ratio"] > 1 + spread["host ratio"]["p95"]).sum())
    verdict = lines[-1]
    assert verdict.startswith("**Verdict**: partly held" if late or above else "**Verdict**: held")
    if late:
        assert f"{late} of {len(one)} networks" in verdict
    if above:
        assert f"on {above} of {len(host)} layers" in verdict
    assert "PyTorch's" not in lines[2]  # speed-ups, not "x PyTorch's" time


def test_a_ratio_spread_ignores_a_host_that_slows_both_sides():
    rows = [{"label": "a", "impl": impl, "variant": "wall", "status": "ok", "time_ms_median": ms}
            for impl, ms in (("pytorch", 2.0), ("convkit", 1.0))]  # fmt: skip
    sweep = pd.DataFrame(rows)
    repeat = sweep.assign(time_ms_median=sweep["time_ms_median"] * 1.5)  # a slower host: both 50% slower
    spread = chapter._ratio_spread(sweep, repeat)
    assert spread["cases"] == 1 and abs(spread["p95"]) < 1e-12


def test_the_host_cost_of_each_path_is_told_with_the_choices_it_moved(tmp_path):
    """The paragraph on the paths' host cost: absent where it is not recorded; recorded, it names each path's cost
    and the problems where a kernel slower on the GPU won, with what that costs a graph's replay."""
    from test_dispatch import _sweep

    from convkit.core.problem import ConvProblem
    from convkit.papers.summary import network_layers, overhead

    small = ConvProblem.same(1, 64, 56, 56, 64, 1)
    _sweep(tmp_path, network_layers.EXPERIMENT, small, {("cublas", "sgemm"): 7.0, ("convkit", "fp32_igemm"): 9.5})
    assert host_tables.host_paths_text(tmp_path) == ""
    _sweep(tmp_path, overhead.PATHS_EXPERIMENT, small, {("convkit", "host_replay"): 17.0,
                                                        ("cublas", "host_replay"): 30.0,
                                                        ("pytorch", "host_replay"): 25.0})  # fmt: skip
    text = host_tables.host_paths_text(tmp_path)
    assert "17 us on convkit's own kernels" in text and "30 us through cuBLAS" in text
    assert "On 1 of the 1 problems" in text and "median 2.5 us" in text
