"""The FP32-ceiling kernels on the CPU: Winograd's matrices, the tile and split arithmetic, argument errors,
and builds without spills for the T4 and the H100."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import numpy as np
import pytest

from convkit.core.problem import ConvProblem
from convkit.cuda.nvrtc import kernel_source
from convkit.families.fp32 import launch, winograd
from convkit.papers import fp32
from convkit.study.layer_sets import three_chapter_suites as suites


@pytest.mark.parametrize(("m", "r"), [*winograd.TILES, (6, 3), (3, 5)])
def test_winograd_tile_is_the_correlation(m, r, rng):
    a = m + r - 1
    d, g = rng.standard_normal((a, a)), rng.standard_normal((r, r))
    direct = np.array([[np.sum(d[i : i + r, j : j + r] * g) for j in range(m)] for i in range(m)])
    np.testing.assert_allclose(winograd.correlate_tile(d, g, m), direct, rtol=1e-12, atol=1e-12)


def test_winograd_input_transform_has_integer_entries():
    for m, r in winograd.TILES:
        bt = winograd.matrices(m, r)[2]
        assert np.array_equal(bt, np.round(bt)), (m, r)


def test_the_kernel_holds_the_matrices_convkit_computes():
    assert winograd.kernel_tables() in kernel_source("winograd").read_text()


def test_tiles_threads_and_shared_memory():
    assert [launch.tile_shape(t) for t in launch.TILES] == [
        (128, 128, 256),
        (128, 64, 128),
        (64, 128, 128),
        (64, 64, 64),
    ]
    assert launch.stage_bytes("128x128") == 4 * 8 * (132 + 128)
    for tile, stages in itertools.product(launch.TILES, launch.STAGES):
        assert stages * launch.stage_bytes(tile) <= launch.STATIC_SHARED_BYTES


def test_split_k_lands_on_whole_slices():
    p = ConvProblem.same(1, 832, 7, 7, 32, 1)
    for splits in (1, 2, 3, 13, 26, 104):
        spec = launch.ImplicitGemmLaunch("64x64", splits)
        per = launch.k_per_split(p, splits)
        assert per % launch.SLICE_K == 0
        assert (spec.effective_splits(p) - 1) * per < 832 <= spec.effective_splits(p) * per
    assert launch.ImplicitGemmLaunch("64x64", 26).grid(p) == (1, 1, 26)
    assert launch.ImplicitGemmLaunch("64x64", 26).workspace_elements(p) == 26 * 32 * 49


def test_vector_copies_only_where_rows_are_whole_float4s():
    assert launch.vector_width(ConvProblem(2, 8, 14, 14, 16, 1, 1)) == 4
    assert launch.vector_width(ConvProblem(2, 8, 7, 7, 16, 1, 1)) == 1  # 49 positions a row
    assert launch.vector_width(ConvProblem(2, 8, 14, 14, 16, 1, 1), aligned=False) == 1
    assert launch.vector_width(ConvProblem(2, 8, 14, 14, 16, 1, 1, stride=2)) == 1
    assert launch.vector_width(ConvProblem(2, 8, 14, 14, 16, 3, 3, pad=1)) == 1


def test_heuristic_and_candidates_fill_the_gpu():
    small, large = ConvProblem.same(1, 832, 7, 7, 32, 1), ConvProblem.same(256, 256, 56, 56, 256, 3)
    assert launch.default_knobs(small).effective_splits(small) > 1
    assert launch.default_knobs(large) == launch.ImplicitGemmLaunch("128x128")
    for p in (small, large):
        found = launch.candidates(p)
        assert found[0] == launch.default_knobs(p) and len(set(found)) == len(found)
        for spec in found:
            spec.can_implement(p)
    medium = ConvProblem.same(8, 256, 56, 56, 256, 3)
    assert {s.m for s in winograd.winograd_candidates(medium)} == {2, 4, 6}
    for spec in winograd.winograd_candidates(large):  # the batch in passes that fit the 1 GiB cuDNN is allowed too
        per_pass = spec.images_per_pass(large)
        assert 1 <= per_pass < large.n
        assert spec.pass_bytes(dataclasses.replace(large, n=per_pass)) <= 1 << 30
        assert spec.pass_bytes(dataclasses.replace(large, n=per_pass + 1)) > 1 << 30
    assert all(s.images_per_pass(medium) == medium.n for s in winograd.winograd_candidates(medium))


@pytest.mark.parametrize(
    ("spec", "problem", "named"),
    [
        (launch.ImplicitGemmLaunch("96x96"), ConvProblem(1, 4, 8, 8, 4, 3, 3), "tile"),
        (launch.ImplicitGemmLaunch(stages=5), ConvProblem(1, 4, 8, 8, 4, 3, 3), "stages"),
        (launch.ImplicitGemmLaunch(splits=0), ConvProblem(1, 4, 8, 8, 4, 3, 3), "splits"),
        (launch.ImplicitGemmLaunch(splits=9), ConvProblem(1, 4, 8, 8, 4, 1, 1), "splits"),
        (winograd.WinogradLaunch(2), ConvProblem(1, 4, 8, 8, 4, 3, 3, stride=2), "stride"),
        (winograd.WinogradLaunch(6), ConvProblem(1, 4, 8, 8, 4, 5, 5), "F(6, 5x5)"),
        (winograd.WinogradLaunch(2), ConvProblem(1, 4, 8, 8, 4, 3, 5), "F(2, 3x5)"),
        # the output transform's tiles in shared memory: 512 of F(6x6) take 80 KiB
        (winograd.WinogradLaunch(6, threads=512), ConvProblem(1, 4, 8, 8, 4, 3, 3), "threads=512"),
    ],
)
def test_launches_name_what_they_cannot_run(spec, problem, named):
    with pytest.raises(ValueError, match=named.replace("(", r"\(").replace(")", r"\)")):
        spec.can_implement(problem)


def test_sweep_problems_cover_three_chapters_once():
    by_chapter = suites()
    assert [len(by_chapter[k]) for k in ("cuconv", "lu2020", "chang2022")] == [616, 26, 63]
    assert len(fp32.problems()) == len(set(fp32.problems()))
    assert set(fp32.problems(quick=True)) <= set(fp32.problems())


@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
def test_kernels_build_without_spills(arch):
    from convkit.cuda.ptxas import find_nvcc, ptxas_report

    if find_nvcc() is None:
        pytest.skip("nvcc is not on the PATH")
    shapes = [ConvProblem(1, 8, 8, 8, 8, 1, 1), ConvProblem(1, 8, 7, 7, 8, 1, 1)]  # 16-byte copies and 4-byte
    shapes += [ConvProblem(1, 8, 9, 9, 8, k, k) for k in (3, 5, 7)]
    builds = [("implicit_gemm", launch.ImplicitGemmLaunch(tile, stages=s).options(p))
              for tile in launch.TILES for p in shapes for s in (4,)]  # fmt: skip
    builds += [
        ("winograd", winograd.WinogradLaunch(m).options(ConvProblem(1, 4, 9, 9, 4, r, r))) for m, r in winograd.TILES
    ]
    for source, options in builds:
        for k in ptxas_report(source, arch, options=options):
            assert k.spill_store_bytes == k.spill_load_bytes == 0, (source, options, k)


def test_chapter_numbers_from_the_recorded_run():
    from convkit.papers.fp32 import results
    from convkit.study.checkout import results_dir
    from convkit.study.roofline import recorded_ceilings

    directory = results_dir() / "nvidia-h100-80gb-hbm3"
    t = results.chapter_tables(directory, recorded_ceilings(directory))
    assert [len(t[k]) for k in ("cuconv", "lu2020", "chang2022")] == [616, 26, 63]
    assert set(t["table"]["best"]) <= {results.IGEMM, results.WINOGRAD}
    assert (t["table"]["speedup"] > 0).all() and t["spread"]["cases"] > 0
    # where the study stood before comes from the earlier chapters' recorded sweeps
    assert round(t["before"]["cuconv_share"], 1) == 15.9 and t["before"]["chang_slower"] == 13
    why = results.pascal_regression(t)  # the grid's regression, explained by the rows that show it
    assert why["slower"] == 21 and why["one_by_one"] <= why["slower"] and why["to_cublas"] <= why["one_by_one"]
    assert len(results.limits_lines(t)) >= 2
    assert len(results.cell_table(t["cuconv"])) == 3
    text, table = results.for_chapter(directory, t["ceilings"], "lu2020")
    assert "of 26" in text and len(table) == 26


def test_the_chapter_text_follows_the_recorded_numbers(tmp_path):
    import shutil

    import pandas as pd

    from convkit.papers.fp32 import results
    from convkit.study.checkout import results_dir
    from convkit.study.roofline import recorded_ceilings

    source = results_dir() / "nvidia-h100-80gb-hbm3"
    copy = tmp_path / source.name
    shutil.copytree(source, copy)
    ceilings = recorded_ceilings(copy)

    def lines(directory):
        t = results.chapter_tables(directory, ceilings)
        return results.result_lines(t)

    before = lines(copy)
    frame = pd.read_csv(copy / "fp32.csv", dtype=str, keep_default_na=False)
    mine = frame["impl"] == "convkit"
    frame.loc[mine, "time_ms_median"] = [f"{float(v) / 2:.6g}" for v in frame.loc[mine, "time_ms_median"]]
    frame.to_csv(copy / "fp32.csv", index=False)
    after = lines(copy)
    assert after[1] != before[1] and after[3] != before[3]
    steps = results.ladder(copy, ceilings["sgemm_tflops"])
    assert list(steps.index) == [step for step, *_ in results.LADDER]


def test_the_findings_row_gives_the_result_box_numbers():
    """Each number of the book's findings row appears in the chapter's result box (one function gives both)."""
    import re

    from convkit.papers.fp32 import results
    from convkit.study.checkout import results_dir
    from convkit.study.roofline import recorded_ceilings

    directory = results_dir() / "nvidia-h100-80gb-hbm3"
    row = results.findings(directory)[0]
    box = " ".join(results.result_lines(results.chapter_tables(directory, recorded_ceilings(directory))))
    for column in ("paper's design on the H100", "our best on the H100", "efficiency"):
        for number in re.findall(r"\d+(?:\.\d+)?(?:e-\d+)?[x%]?", row[column]):
            assert number in box, (column, number)
    assert row["section"] == results.SECTION
    notebook = (Path(__file__).parents[1] / "notebooks" / "06_fp32.ipynb").read_text()
    assert f"({results.SECTION})=" in notebook
