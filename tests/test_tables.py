"""The chapters' shared numbers: CUTLASS is a peer of its own, never "the best library"."""

from __future__ import annotations

import pandas as pd

from convkit.bench.rows import make_row
from convkit.core.problem import ConvProblem
from convkit.op.cases import Case
from convkit.study import tables


def test_cutlass_is_compared_apart_from_the_best_library():
    p = ConvProblem.same(2, 64, 14, 14, 32, 3)
    times = {("convkit", "igemm_tf32x3"): 0.100, ("cudnn", "IMPLICIT_GEMM"): 0.120,
             ("pytorch", "cudnn.benchmark"): 0.110, ("cutlass", "cutlass_tf32x3_128x64"): 0.050}  # fmt: skip
    frame = pd.DataFrame([make_row(p, Case(impl, variant), status="ok") | {"time_ms_median": ms}
                          for (impl, variant), ms in times.items()])  # fmt: skip
    (row,) = tables.problem_rows(frame, ["igemm_tf32x3"])
    assert row["best_lib"] == "cudnn.benchmark" and row["best_lib_us"] == 110.0
    assert row["best_cutlass"] == "cutlass_tf32x3_128x64" and row["best_cutlass_us"] == 50.0
    assert row["speedup_igemm_tf32x3"] == 1.1
    (plain,) = tables.problem_rows(frame[frame["impl"] != "cutlass"], ["igemm_tf32x3"])
    assert "best_cutlass" not in plain  # no column where CUTLASS did not run


def test_pytorch_in_tf32_is_a_reference_line_never_the_best_library(tmp_path):
    """Recorded beside the FP32 cases (``pytorch_tf32_us``), but neither "the best library" nor a case the shipped
    table can choose: it is not FP32."""
    from convkit.study import shipping
    from convkit.study.results import ResultStore

    p = ConvProblem.same(2, 64, 14, 14, 32, 3)
    times = {("convkit", "igemm_tf32x3"): 0.100, ("cudnn", "IMPLICIT_GEMM"): 0.120,
             ("pytorch", "cudnn.benchmark"): 0.110, ("pytorch_tf32", "cudnn.benchmark.tf32"): 0.030}  # fmt: skip
    rows = [make_row(p, Case(impl, variant), status="ok") | {"time_ms_median": ms}
            for (impl, variant), ms in times.items()]  # fmt: skip
    (row,) = tables.problem_rows(pd.DataFrame(rows), ["igemm_tf32x3"])
    assert row["best_lib"] == "cudnn.benchmark" and row["pytorch_us"] == 110.0 and row["pytorch_tf32_us"] == 30.0
    assert tables.library_name("cudnn.benchmark.tf32") == "PyTorch in TF32 (not FP32)"
    store = ResultStore(tmp_path, "sweep", {"test": True})
    for r in rows:
        store.append(r)
    sources = shipping.Sources(sweeps={"chapter": "sweep"})
    assert "pytorch_tf32" not in set(shipping.recorded_candidates(tmp_path, sources)["impl"])


def test_every_comparison_with_the_best_library_leaves_out_the_same_rows(monkeypatch):
    """The per-problem table, a claim's speed-up spread and the every-GPU table take "the best library" by one rule
    (:func:`convkit.study.tables.library_rows`): neither CUTLASS, nor PyTorch in TF32, nor convkit's host-timed
    rows, each here faster than cuDNN."""
    from types import SimpleNamespace

    from convkit.book import chapter

    p = ConvProblem.same(2, 64, 14, 14, 32, 3)
    times = {("convkit", "igemm_tf32x3"): 0.100, ("cudnn", "IMPLICIT_GEMM"): 0.120,
             ("cutlass", "cutlass_tf32x3_128x64"): 0.050, ("pytorch_tf32", "cudnn.benchmark.tf32"): 0.030,
             ("convkit_host", "igemm_tf32x3"): 0.040}  # fmt: skip
    frame = pd.DataFrame([make_row(p, Case(impl, variant), status="ok") | {"time_ms_median": ms}
                          for (impl, variant), ms in times.items()])  # fmt: skip
    assert set(tables.library_rows(frame)["impl"]) == {"cudnn"}
    (row,) = tables.problem_rows(frame, ["igemm_tf32x3"])
    assert row["best_lib_us"] == 120.0
    assert list(tables.case_speedups(frame)) == [1.2]
    recorded = [("H100", SimpleNamespace(frame=frame)), ("H200", SimpleNamespace(frame=frame))]
    monkeypatch.setattr(chapter, "recorded_gpus", lambda name: recorded)
    across = chapter.across_gpus("tf32x3")
    assert list(across["H100: best library (us)"]) == [120.0] and list(across["H200: speed-up"]) == [1.2]
