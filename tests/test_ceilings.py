"""The ceilings chapter on the recorded H100 results (CPU): what the chapter shows is computed here."""

from __future__ import annotations

import math
import shutil
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest
from findings_check import assert_findings_in_lines  # tests/findings_check.py

from convkit.book import chapter, display
from convkit.papers import ceilings
from convkit.papers.ceilings import results as ceilings_results
from convkit.papers.ceilings.measure import CHASE_FOOTPRINTS, COLUMNS, EXPERIMENT, KEY_COLUMNS, measurements
from convkit.papers.paper import FINDING_COLUMNS
from convkit.study.results import load_results
from convkit.study.roofline import CEILINGS_EXPERIMENT, ceilings_summary

H100 = "NVIDIA H100 80GB HBM3"


H100_DIR = chapter.results_directory("recorded")


@pytest.fixture(scope="module")
def recorded():
    return chapter.results("ceilings", "recorded")


def test_tables_show_readable_numbers(recorded):
    comparison = ceilings_results.comparison_table(recorded.frame)
    assert list(comparison.index[:2]) == ["copy, device to device", "SGEMM 8192³, FP32"]
    assert list(comparison.columns) == ["unit", "measured", "datasheet", "of datasheet (%)"]  # measured, no quotes
    assert 80 < comparison.loc["copy, device to device", "of datasheet (%)"] < 100  # 3352 GB/s on the H100 SXM
    assert math.isnan(comparison.loc["TF32 GEMM 8192³", "datasheet"])
    props = ceilings_results.properties_table(recorded.frame)
    assert props.loc["global memory", "unit"] == "GiB" and props.loc["global memory", "value"] < 100
    assert props.loc["compute capability", "value"] == "9.0"
    timed = ceilings_results.measurements_table(recorded.frame)
    assert "load latency" not in timed.index and {"SM clock under load", "launch floor (empty kernel)"} <= set(
        timed.index
    )
    assert timed.loc["launch floor (empty kernel)", "median time a run (us)"] == pytest.approx(
        timed.loc["launch floor (empty kernel)", "value"]
    )  # one unit of time: microseconds
    assert timed.loc["copy bandwidth (device to device)", "settings"] == "1 GiB copied"
    assert list(ceilings_results.latency_table(recorded.frame).index[:2]) == ["16 KiB", "64 KiB"]
    assert chapter.ceilings("recorded") == ceilings_summary(recorded.frame)
    for table in (comparison, props, timed, ceilings_results.bounds_table(recorded.frame)):
        markup = display.table(table).markup
        assert '{"' not in markup and "nan" not in markup.lower()


def _copy(tmp_path):
    for suffix in ("csv", "json"):
        shutil.copy(H100_DIR / f"ceilings.{suffix}", tmp_path / f"ceilings.{suffix}")
    return tmp_path


def _edit(directory, metric, value):
    frame = pd.read_csv(directory / "ceilings.csv", dtype=str, keep_default_na=False)
    frame.loc[frame["metric"] == metric, "value"] = str(value)
    frame.to_csv(directory / "ceilings.csv", index=False)


def test_result_box_and_findings_follow_the_recorded_values(recorded, tmp_path):
    directory = _copy(tmp_path)
    lines = ceilings_results.result_lines(recorded.frame, recorded.provenance)
    assert len(lines) == 3 and "**3,003 GB/s**" in lines[0] and H100 in lines[0]
    assert not any("specification" in line or "anchor" in line for line in lines)
    row = ceilings_results.findings(directory)
    assert [list(r) for r in row] == [[*FINDING_COLUMNS, "section", "claims"]]
    assert row[0]["our best on the H100"] == "3,003 GB/s, 51.7 TFLOP/s" and row[0]["section"] == "ceilings-measured"
    assert row[0]["paper's design on the H100"] == "n/a" and "—" not in "".join(str(v) for v in row[0].values())
    assert_findings_in_lines(row, lines)
    _edit(directory, "sgemm", 40.0)
    frame, provenance = load_results(directory, "ceilings")
    edited = ceilings_results.result_lines(frame, provenance)
    assert "SGEMM in FP32 **40.0 TFLOP/s**" in edited[0] and edited != lines
    assert ceilings_results.findings(directory)[0]["our best on the H100"] == "3,003 GB/s, 40.0 TFLOP/s"
    assert_findings_in_lines(ceilings_results.findings(directory), edited)


def test_findings_are_registered():
    assert ceilings.PAPER.findings is ceilings_results.findings


def test_paper_declares_the_chapter():
    paper = ceilings.PAPER
    assert (paper.name, paper.experiment, paper.notebook, paper.sources) == ("ceilings", "ceilings", "00_ceilings",
                                                                            ("ceilings",))  # fmt: skip
    assert EXPERIMENT == CEILINGS_EXPERIMENT and not paper.variants and paper.edge_check is not None
    assert KEY_COLUMNS == ("measurement", "metric") and set(KEY_COLUMNS) <= set(COLUMNS)
    with pytest.raises(TypeError, match="no options"):
        paper.measure(".", batches=(1,))


def test_quick_measurements_are_a_subset():
    full, quick = [name for name, _ in measurements()], [name for name, _ in measurements(quick=True)]
    assert set(quick) < set(full) and len(full) == 9 + len(CHASE_FOOTPRINTS)
    assert full[:3] == ["properties", "sm_clock_measured", "launch_floor"]


def test_resolve_device():
    assert chapter.resolve_device("recorded") == "recorded"
    with pytest.raises(ValueError, match="device must be"):
        chapter.resolve_device("tpu")


def test_unknown_recorded_gpu_names_what_exists():
    with pytest.raises(FileNotFoundError, match="nvidia-h100-80gb-hbm3"):
        chapter.ceilings("recorded", recorded_gpu="no-such-gpu")


def test_summary_has_no_nan(recorded):
    assert all(not math.isnan(v) for v in ceilings_summary(recorded.frame).values())


def test_the_tensor_core_ceilings_join_the_summary_where_recorded():
    import pandas as pd

    from convkit.study.roofline import ceilings_summary

    rows = [("sm_count", 132), ("sm_clock_measured", 1755), ("fp32_lanes_per_sm", 128), ("copy_bandwidth", 3000),
            ("sgemm", 51.7), ("fp32_fma_peak", 60), ("l2_cache", 50 << 20)]  # fmt: skip
    frame = pd.DataFrame([{"measurement": m, "metric": m, "value": v, "status": "ok", "params": "{}"} for m, v in rows])
    assert {"tf32_gemm_tflops", "int8_mma_peak_tops"}.isdisjoint(ceilings_summary(frame))  # older files lack them
    tensor_cores = (("tf32_gemm", 410.0), ("tf32_mma_peak", 330.0), ("int8_mma_peak", 1300.0))
    more = pd.DataFrame([{"measurement": m, "metric": m, "value": v, "status": "ok", "params": "{}"}
                         for m, v in tensor_cores])  # fmt: skip
    summary = ceilings_summary(pd.concat([frame, more]))
    assert summary["tf32_gemm_tflops"] == 410.0 and summary["tf32_mma_peak_tflops"] == 330.0
    assert summary["int8_mma_peak_tops"] == 1300.0


def test_the_wgmma_ceilings_are_measured_on_hopper_alone(monkeypatch):
    from convkit.papers.ceilings import measure

    monkeypatch.setattr(measure, "build_target", lambda: "sm_90")
    names = [name for name, _ in measure.measurements()]
    assert names.index("tf32_wgmma_peak") == names.index("int8_mma_peak") + 1 and "int8_wgmma_peak" in names
    for elsewhere in ("sm_80", "compute_75", "no GPU"):
        monkeypatch.setattr(measure, "build_target", lambda e=elsewhere: e)
        assert not any("wgmma" in name for name, _ in measure.measurements())


class _FakeCupy:
    """NumPy standing in for CuPy where the tensor-core ceilings build their operands and check the sums."""

    full, count_nonzero = staticmethod(np.full), staticmethod(np.count_nonzero)
    int32, uint32, float32 = np.int32, np.uint32, np.float32

    class cuda:  # CuPy's name
        class Device:
            attributes: ClassVar[dict[str, int]] = {"MultiProcessorCount": 2}


@pytest.mark.parametrize("precision", ["tf32", "int8"])
@pytest.mark.parametrize("instruction", ["mma", "wgmma"])
def test_the_tensor_core_ceilings_check_the_exact_sums_and_count_the_operations(monkeypatch, precision, instruction):
    """A kernel that sums as the real one does (each thread MMA_CHAINS x 4 outputs of k products a step for mma.sync,
    128 outputs of WGMMA_BATCH products a group for wgmma) passes the check and gives ops over time in the unit of
    its precision; one thread's sum off by a product fails it, naming the ceiling."""
    from convkit.cuda.timing import Timing
    from convkit.papers.ceilings import measure

    k = {"mma": {"tf32": 8, "int8": 32}, "wgmma": measure.WGMMA_K}[instruction][precision]
    launched = {}

    def kernel(grid, block, args):
        out, word, iters = args[0], args[1], int(args[-1])
        product = float(word) ** 2 if precision == "tf32" else 1  # four INT8 ones a word: a product of two is 1
        per_thread = (measure.MMA_CHAINS * 4 * iters if instruction == "mma" else 128 * iters * measure.WGMMA_BATCH) * k
        out[...] = per_thread * product
        out[0] += launched.get("off", 0) * product
        launched["threads"] = grid[0] * block[0]

    monkeypatch.setattr(measure, "require_cupy", lambda: _FakeCupy)
    monkeypatch.setattr(measure, "load_kernel", lambda *args, **kwargs: kernel)
    monkeypatch.setattr(measure, "benchmark", lambda run, **kwargs: (run(), Timing((2.0,)))[1])
    monkeypatch.setattr(measure, "build_target", lambda: "sm_90")
    monkeypatch.setattr("convkit.core.gpu.has_tf32_tensor_cores", lambda: True)
    ceiling = (lambda: measure.mma_peak(precision, iters=4)) if instruction == "mma" else (
        lambda: measure.wgmma_peak(precision, iters=4))  # fmt: skip
    row = ceiling()
    if instruction == "mma":  # 16 x 8 x k a product, per warp
        per_run = 2 * 16 * 8 * k * measure.MMA_CHAINS * 4 * launched["threads"] // 32
    else:  # 64 x 256 x k a product, per warpgroup of the 2 SMs' blocks
        per_run = 2 * 64 * 256 * k * measure.WGMMA_BATCH * 4 * 2 * measure.WGMMA_WARPGROUPS
    assert row["status"] == "ok" and row["metric"] == f"{precision}_{instruction}_peak"
    assert row["value"] == pytest.approx(per_run / 2e9)
    assert row["unit"] == ("TFLOP/s" if precision == "tf32" else "TOP/s")
    launched["off"] = 1
    with pytest.raises(RuntimeError, match=f"{precision}_{instruction}_peak left 1 of"):
        ceiling()
