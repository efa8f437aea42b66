"""The roofline's numbers from the recorded H100 ceilings (CPU): the summary, the floors, the launch term."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from convkit.core.problem import ConvProblem
from convkit.study.checkout import results_dir
from convkit.study.results import load_results
from convkit.study.roofline import (
    LAUNCH_US,
    ceilings_summary,
    floor_us,
    latency_curve,
    launch_text,
    launch_us,
    recorded_ceilings,
)

H100 = results_dir() / "nvidia-h100-80gb-hbm3"


@pytest.fixture(scope="module")
def frame():
    return load_results(H100, "ceilings")[0]


def test_ceilings_summary_is_complete_and_plausible(frame):
    s = ceilings_summary(frame)
    assert all(not math.isnan(v) for v in s.values()), s
    assert s["sgemm_tflops"] < s["fp32_theoretical_tflops"] * 1.01
    assert s["fma_tflops"] < s["fp32_theoretical_tflops"] * 1.01
    assert s["dram_latency_cycles"] > s["l2_latency_cycles"]
    assert recorded_ceilings(H100) == s
    assert recorded_ceilings(H100 / "nowhere") is None


def test_floors_use_the_recorded_launch_floor_else_the_assumed_launch(frame):
    problem = ConvProblem.same(1, 1, 28, 28, 32, 3)
    recorded = ceilings_summary(frame)
    assert 1.0 < recorded["launch_us"] < 20.0  # the H100's, measured in notebook 00
    without = frame[frame["measurement"] != "launch_floor"]  # a GPU recorded before it
    assumed = ceilings_summary(without)
    launch = {"metric": "launch_floor", "measurement": "launch_floor", "value": 3.7, "unit": "us", "status": "ok"}
    measured = ceilings_summary(pd.concat([without, pd.DataFrame([launch])], ignore_index=True))
    assert measured["launch_us"] == 3.7 and "launch_us" not in assumed
    assert launch_us(assumed) == LAUNCH_US and launch_us(measured) == 3.7
    assert floor_us(problem, measured) - floor_us(problem, assumed) == pytest.approx(0.7)
    assert "3.7 us, an empty kernel measured" in launch_text(measured)
    assert "3 us, assumed" in launch_text(assumed)


def test_floor_is_the_longer_of_memory_and_compute():
    ceil = {"copy_gbps": 1000.0, "sgemm_tflops": 10.0, "fma_tflops": 20.0, "launch_us": 0.0}
    small = ConvProblem.same(1, 1, 28, 28, 1, 3)  # memory-bound
    assert floor_us(small, ceil) == pytest.approx(small.min_bytes / 1e6)
    big = ConvProblem.same(1, 256, 56, 56, 256, 3)  # compute-bound
    assert floor_us(big, ceil) == pytest.approx(big.flops / 1e7)  # at the SGEMM rate, not the FMA peak


def test_one_roof_for_the_floors_and_the_plots(frame):
    """The floor and every roofline plot use the measured copy bandwidth and SGEMM rate (not the FMA peak)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from convkit.book import plots
    from convkit.study.roofline import ROOF, roof

    s = ceilings_summary(frame)
    assert ROOF == ("copy_gbps", "sgemm_tflops") and roof(s) == (s["copy_gbps"], s["sgemm_tflops"])
    big = ConvProblem.same(1, 256, 56, 56, 256, 3)
    assert floor_us(big, s) == pytest.approx(big.flops / (s["sgemm_tflops"] * 1e6) + launch_us(s))
    for ax in (plots.roofline(s), plots.roofline(s["copy_gbps"], s["sgemm_tflops"])):
        top = max(line.get_ydata().max() for line in ax.get_lines())
        assert top == pytest.approx(s["sgemm_tflops"] * 1e3)
        assert f"{s['sgemm_tflops']:.1f} TFLOP/s" in ax.get_legend().get_texts()[0].get_text()
    plt.close("all")


def test_many_roofline_points_stay_inside_the_axes_and_see_through():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from convkit.book import plots

    rng = np.random.default_rng(0)
    points = [
        ("", float(ai), float(g), "convkit" if i % 2 else "cuDNN")
        for i, (ai, g) in enumerate(zip(rng.uniform(1, 500, 1300), rng.uniform(10, 80_000, 1300), strict=True))
    ]
    ax = plots.roofline({"copy_gbps": 3000.0, "sgemm_tflops": 50.0}, points=points)
    low, high = ax.get_ylim()
    assert low <= min(p[2] for p in points) and high >= max(p[2] for p in points) * 1.1
    for collection in ax.collections:
        assert collection.get_alpha() is not None and collection.get_alpha() <= 0.6
        assert max(collection.get_sizes()) <= 12
    plt.close("all")


def test_latency_curve_is_sorted_by_footprint(frame):
    curve = latency_curve(frame)
    assert list(curve.columns) == ["footprint_bytes", "cycles"] and curve["footprint_bytes"].is_monotonic_increasing
    assert len(curve) == int((frame["metric"] == "load_latency").sum())


def test_plots_draw_the_specification_beside_the_measurement(frame):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from convkit.book import plots

    s = ceilings_summary(frame)
    ax = plots.roofline(s, roofs={"specification (H100)": (3006.0, 51.7)},
                        points=[("", 1.0, 500.0, "a layer")])  # fmt: skip
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[1] == "specification (H100): 3,006 GB/s, 51.7 TFLOP/s" and "a layer" in labels
    assert ax.get_ylim()[1] > s["sgemm_tflops"] * 1e3 and ax.get_xlabel().startswith("arithmetic intensity")
    ax = plots.latency_curve(latency_curve(frame), l2_bytes=s["l2_bytes"], clock_mhz=s["sm_clock_mhz"])
    assert "L2 size (50 MiB)" in [t.get_text() for t in ax.get_legend().get_texts()]
    results = load_results(H100, "baseline")[0]
    label = results["label"].iloc[0]
    ax = plots.algorithm_times(results, names={label: "first"}, quoted={label: 43.1}, quoted_label="PyTorch, quoted")
    assert ax.get_yticklabels()[0].get_text() == "first"
    assert "PyTorch, quoted" in [t.get_text() for t in ax.get_legend().get_texts()]
    plt.close("all")


def test_a_t4_takes_the_bandwidth_ratio_and_the_fp32_ratio_longer():
    from convkit.study.roofline import T4_DATASHEET, slowdown_range

    low, high = slowdown_range({"copy_gbps": 3200.0, "fma_tflops": 64.8})
    assert (low, high) == (64.8 / T4_DATASHEET["fma_tflops"], 3200.0 / T4_DATASHEET["copy_gbps"])


def test_the_rerun_table_gives_each_quick_run_and_its_t4_estimate():
    from convkit.book.reproduce import rerun_markdown
    from convkit.study.checkout import results_dir

    table = rerun_markdown(results_dir() / "nvidia-h100-80gb-hbm3", "https://github.com/example/convkit")
    header, _, *rows = [line for line in table.strip().split("\n") if line.startswith("|")]
    assert header.endswith("| quick run on a T4, estimated |")
    assert all(row.count("|") == header.count("|") for row in rows)
    assert "| full run on the H100 | quick run on the H100 |" in header
    *chapters, total = rows
    for row in chapters:  # every quick run recorded, and its estimate; every full run measured or projected
        full, h100, t4 = row.split("|")[-4:-1]
        assert h100.strip().endswith(" min") and t4.strip().endswith(" min"), row
        assert full.strip().endswith((" min", " h", " min, projected¹", " h, projected¹")), row
    assert total.startswith("| **All chapters** |") and total.split("|")[4].strip().endswith(" h**"), total
    assert "projected¹" not in table or "\n¹ Projected:" in table
    assert "github/example/convkit/blob/main/notebooks/06_fp32.ipynb" in table
    assert "github/example/convkit/blob/main/notebooks/08_summary.ipynb" in table
    assert "/blob/dev/" in rerun_markdown(results_dir() / "nvidia-h100-80gb-hbm3", "https://github.com/e/c", "dev")


def test_the_rerun_table_gives_a_recorded_full_run_beside_the_quick_one(tmp_path):
    import shutil

    from convkit.book.reproduce import rerun_markdown
    from convkit.book.run_times import RUN_TIMES
    from convkit.study.checkout import results_dir

    source = results_dir() / "nvidia-h100-80gb-hbm3"
    for name in ("ceilings.csv", "ceilings.json", f"{RUN_TIMES}.csv", f"{RUN_TIMES}.json"):
        shutil.copy(source / name, tmp_path / name)
    with open(tmp_path / f"{RUN_TIMES}.csv", "a") as f:
        f.write(f"{RUN_TIMES},02_lu2020,notebook,full,1,ok,5400.0,,a56221b5258b\n")
    row = next(r for r in rerun_markdown(tmp_path, "https://github.com/e/c").split("\n") if "02_lu2020" in r)
    assert row.split("|")[-4].strip() == "90 min" and row.split("|")[-3].strip() == "1.4 min", row


def test_a_full_run_is_measured_where_timed_and_else_projected_with_the_projection_checked(tmp_path):
    """Each chapter's full time on one GPU: the timed run where there is one, else its cases' GPU time plus the host
    cost per case of the chapters timed in full; each timed chapter also projected from the others (the check)."""
    import csv

    from convkit.bench.rows import make_row
    from convkit.book.run_times import full_times, run_times_store
    from convkit.core.problem import ConvProblem
    from convkit.op.cases import Case
    from convkit.study.results import ResultStore

    def record(experiment: str, cases: int, time_ms: float) -> None:
        store = ResultStore.open(tmp_path, experiment, {"gpu": "fake"})
        problem = ConvProblem.same(1, 8, 7, 7, 8, 3)
        for i in range(cases):
            row = make_row(problem, Case("convkit", f"v{i}"), status="ok")
            store.append(row | {"time_ms_median": time_ms, "reps": 100})

    record("a", 100, 10.0)  # 100 cases, 100 s on the GPU
    record("b", 50, 2.0)  # 50 cases, 10 s
    record("c", 1000, 1.0)  # 1000 cases, 100 s: never timed
    times = run_times_store(tmp_path, {"gpu": "fake"})
    for notebook, wall in (("nb_a", 150.0), ("nb_b", 60.0)):  # host cost: 0.5 s and 1.0 s a case
        times.append({"notebook": notebook, "step": "notebook", "mode": "full", "gpus": 1, "status": "ok",
                      "wall_s": wall})  # fmt: skip
    found = full_times(tmp_path, {"nb_a": ("a",), "nb_b": ("b",), "nb_c": ("c",)})
    assert found["nb_a"].measured and found["nb_a"].seconds == 150.0 and found["nb_a"].check == 100 * 1.0 + 100
    assert found["nb_b"].measured and found["nb_b"].check == 50 * 0.5 + 10
    assert not found["nb_c"].measured and found["nb_c"].seconds == 1000 * 0.75 + 100
    with open(tmp_path / "notebook_runs.csv", newline="") as f:
        assert list(next(csv.reader(f))) == ["experiment", "notebook", "step", "mode", "gpus", "status", "wall_s",
                                             "note", "run_id"]  # fmt: skip


def test_the_node_table_gives_each_gpu_count_and_the_efficiency_over_one(tmp_path):
    from convkit.book.run_times import node_markdown, run_times_store

    assert node_markdown(tmp_path, "H100", {}).startswith("No run of the measuring on several GPUs has been timed")
    for gpus, walls in ((1, {"lu2020": 300.0, "all": 600.0}), (2, {"lu2020": 160.0, "all": 330.0}),
                        (4, {"lu2020": 90.0, "all": 176.0})):  # fmt: skip
        times = run_times_store(tmp_path, {"gpu": "fake", "gpus": gpus})
        for name, wall in walls.items():
            times.append({"notebook": name, "step": "measuring", "mode": "quick", "gpus": gpus, "status": "ok",
                          "wall_s": wall})  # fmt: skip
    table = node_markdown(tmp_path, "H100", {"lu2020": "Lu 2020"})
    assert "| chapter | 1 H100 | 2 H100s | 4 H100s |" in table
    assert "| Lu 2020 | 5.0 min | 2.7 min | 1.5 min |" in table
    assert "(1.82x, 91% efficiency)" in table and "(3.41x, 85% efficiency)" in table
