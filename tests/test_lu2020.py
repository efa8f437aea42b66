"""Lu 2020 on the CPU: the compiler's verdict on the window array, the launch options, the problems, the cases."""

from __future__ import annotations

import pytest
from findings_check import assert_findings_in_lines  # tests/findings_check.py

from convkit.core.problem import ConvProblem
from convkit.cuda.launch import Launch
from convkit.cuda.ptxas import find_nvcc, ptxas_report
from convkit.families.lu2020 import exchange
from convkit.families.lu2020 import launch as lu2020
from convkit.op.cases import cases
from convkit.papers import lu2020 as chapter
from convkit.papers.lu2020 import problem_sets as lu_problems

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not on the PATH")


#: The naive kernel's stack frame (bytes) as ptxas 13.0 reported it, per filter width: identical on sm_75
#: and sm_90. K = 3: the lane-dependent index takes two values and becomes a select; 5 and 7: the window
#: iTemp[K * K] (100 and 196 bytes) goes to local memory.
NAIVE_STACK_FRAME = {3: 0, 5: 104, 7: 200}


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
@pytest.mark.parametrize("k", lu2020.FILTER_SIZES)
def test_only_the_naive_window_goes_to_local_memory(k, arch):
    resources = {r.kernel: r for r in ptxas_report("lu2020", arch, options=lu2020.build_options(k, rows=8))}
    assert resources["lu_column_naive"].stack_frame_bytes == NAIVE_STACK_FRAME[k]
    for name in ("lu_direct", "lu_column", "lu_row", "lu_combined"):
        r = resources[name]
        assert (r.stack_frame_bytes, r.spill_store_bytes, r.spill_load_bytes) == (0, 0, 0), name
    assert resources["lu_column_naive"].spill_store_bytes == 0  # local memory by indexing, not by pressure


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
def test_multi_channel_tiles_do_not_spill_at_3x3(arch):
    for launch in (lu2020.LuMultiLaunch(), lu2020.LuMultiLaunch(4, 16, 2), lu2020.LuMultiLaunch(8, 8, 2)):
        options = lu2020.build_options(3, **launch.to_params())
        multi = next(r for r in ptxas_report("lu2020", arch, options=options) if r.kernel == "lu_multi")
        assert (multi.stack_frame_bytes, multi.spill_store_bytes) == (0, 0), launch


def test_build_options_carry_the_simulated_schedule():
    options = lu2020.build_options(7, rows=16, warps=2)
    assert options[:5] == exchange.schedule_macros(exchange.exchange_schedule(7))
    assert "-DLU_LOADS=0,2,6" in options and "-DLU_ROWS=16" in options and "-DLU_WARPS=2" in options


def test_chapter_problems():
    single = lu_problems.single_problems()
    assert len(single) == 18 and {p.r for p in single} == {3, 5, 7}
    assert all(lu2020.is_single_image(p) for p in single)
    multi = lu_problems.multi_problems()
    assert len(multi) == 26 and {p.n for p in multi} == {1, 32} and {p.r for p in multi} == {3}
    assert ConvProblem.same(1, 512, 7, 7, 512, 3) in multi  # ResNet-50 res5 3x3


def test_cases_add_the_image_peer_on_single_images_only():
    image, layer = lu_problems.single_problems()[0], lu_problems.multi_problems()[0]
    peers = (chapter.NDIMAGE,)
    image_cases = cases(image, chapter.SINGLE, pytorch=False, peers=peers)
    assert [(c.impl, c.variant) for c in image_cases if c.impl == "cupyx"] == [("cupyx", "ndimage.correlate")]
    assert [c.variant for c in image_cases if c.impl == "convkit"] == [v.name for v in chapter.SINGLE]
    layer_cases = cases(layer, [*chapter.SINGLE, *chapter.MULTI], pytorch=False, peers=peers)
    assert [c.variant for c in layer_cases if c.impl in ("convkit", "cupyx")] == ["lu_multi"]


def test_paper_declares_the_chapter():
    paper = chapter.PAPER
    assert [v.name for v in paper.variants] == [f"lu_{v}" for v in (*lu2020.SINGLE_VARIANTS, "wide", "multi")]
    assert [p.name for p in paper.peers] == ["ndimage.correlate", "nppi_filter", "cvcuda_conv2d"]
    assert paper.peers[0].impl == "cupyx"
    assert (paper.experiment, paper.tuning, paper.profile.experiment) == ("lu2020", "lu2020_tuning", "lu2020_kernels")
    assert len(paper.problems(False)) == 18 + 26 and len(paper.problems(True)) == 4 + 6
    assert all(any(v.supports(p) for v in paper.variants) for p in paper.sample_problems())
    checked = {case.variant for _, todo in paper.checks() for case in todo}
    assert checked == {v.name for v in paper.variants}  # the generic GPU test reaches every kernel


def test_launches_follow_the_protocol_and_record_the_old_params():
    single, multi = lu2020.default_single("combined"), lu2020.LuMultiLaunch()
    assert isinstance(single, Launch) and isinstance(multi, Launch)
    assert single.to_params() == {"rows": 8, "warps": 4}  # the variant is the row's own column
    assert multi.to_params() == {"rows": 4, "filters": 8, "warps": 4, "stage_channels": 8}
    image = ConvProblem.same(2, 1, 100, 70, 3, 5)
    assert single.kernel_name(image) == "lu_combined" and single.block(image) == (32, 4)
    assert single.grid(image) == (3, 4, 6)  # ceil(70 / 32), ceil(100 / (8 rows x 4 warps)), N x M
    assert multi.grid(ConvProblem.same(2, 16, 100, 70, 20, 3)) == (3, 7, 6)  # N x ceil(20 / 8) filter groups
    assert single.options(image) == lu2020.build_options(5, rows=8, warps=4)


def test_can_implement_names_the_argument_or_knob():
    image = ConvProblem.same(1, 1, 16, 16, 1, 5)
    with pytest.raises(ValueError, match="variant must be one of"):
        lu2020.LuSingleLaunch("shared").can_implement(image)
    with pytest.raises(ValueError, match=r"launch\.rows"):
        lu2020.LuSingleLaunch("column", rows=4).can_implement(image)
    with pytest.raises(ValueError, match=r"launch\.filters"):
        lu2020.LuMultiLaunch(filters=6).can_implement(image)
    with pytest.raises(ValueError, match="C = 1"):
        lu2020.default_single("row").can_implement(ConvProblem.same(1, 2, 16, 16, 1, 5))
    with pytest.raises(ValueError, match="square 3x3, 5x5 or 7x7"):
        lu2020.LuMultiLaunch().can_implement(ConvProblem(1, 2, 16, 16, 1, 3, 5, pad=1))
    with pytest.raises(ValueError, match="stride must be 1"):
        lu2020.LuMultiLaunch().can_implement(ConvProblem(1, 2, 16, 16, 1, 3, 3, pad=1, stride=2))
    with pytest.raises(ValueError, match="pad must be below"):
        lu2020.LuMultiLaunch().can_implement(ConvProblem(1, 2, 16, 16, 1, 3, 3, pad=3))


def test_tuning_candidates():
    assert [c.rows for c in lu2020.single_candidates("column")] == [1, 1, 1]
    assert {c.rows for c in lu2020.single_candidates("combined")} == {2, 4, 8, 16}
    assert all(c.rows * c.filters <= 64 for c in lu2020.MULTI_CANDIDATES)
    assert {(c.rows, c.warps) for c in lu2020.WIDE_CANDIDATES} == {(r, w) for r in (2, 4, 8, 16) for w in (1, 2, 4, 8)}


def _recorded_copy(tmp_path):
    """The Lu 2020 sweep, its ncu profile and the ceilings, copied from the recorded H100 results."""
    import shutil

    from convkit.book.chapter import results_directory

    source = results_directory("recorded")
    for name in ("lu2020", "lu2020_kernels", "ceilings"):
        for suffix in (".csv", ".json"):
            shutil.copy(source / f"{name}{suffix}", tmp_path / f"{name}{suffix}")
    return source, tmp_path


def test_result_box_and_findings_follow_the_recorded_results(tmp_path):
    import pandas as pd

    from convkit.papers.lu2020 import results as lu_results
    from convkit.papers.paper import FINDING_COLUMNS

    source, copy = _recorded_copy(tmp_path)
    box = lu_results.result_lines(*lu_results.chapter_tables(source))
    rows = lu_results.findings(source)
    assert len(box) == 5 and "25 to 10" in box[0] and not box[-1].startswith("**Verdict**")
    assert box[1].startswith("**Loads on the H100**") and "from 25 to 10" in box[1] and "3 per window" in box[1]
    assert box[3].startswith("**Past the paper**") and "CV-CUDA" in box[2]
    assert len(rows) == 3 and all(tuple(r) == (*FINDING_COLUMNS, "section", "claims") for r in rows)
    assert [r["section"] for r in rows] == ["lu2020-column-reuse", "lu2020-single-channel", "lu2020-multichannel"]
    assert rows[0]["paper's design on the H100"].startswith("25 -> 10")
    assert_findings_in_lines(rows, box)
    # multi channel: our best (the paper's kernel, the only convkit kernel of the run there) against the best
    # library, and the paper's own comparison labelled as such
    assert rows[2]["our best on the H100"].startswith("faster than the best library on 2 of 26")
    assert rows[2]["paper's design on the H100"].endswith("as the paper compares: cuDNN alone")
    assert "geometric mean" in rows[2]["paper's design on the H100"]
    assert "(geometric mean 0.38x" in box[4] and "as the paper compares: cuDNN alone" in box[4]
    frame = pd.read_csv(copy / "lu2020.csv")
    combined = frame["variant"] == "lu_combined"
    frame.loc[combined, "time_ms_median"] *= 2.0
    frame.to_csv(copy / "lu2020.csv", index=False)
    assert lu_results.result_lines(*lu_results.chapter_tables(copy))[2] != box[2]
    edited = lu_results.findings(copy)
    assert edited[1] != rows[1] and edited[0] == rows[0]
    assert_findings_in_lines(edited, lu_results.result_lines(*lu_results.chapter_tables(copy)))


def test_the_fp32_kernels_join_the_result_box_as_their_own_run():
    import pandas as pd

    from convkit.book.chapter import results_directory
    from convkit.papers.lu2020 import results as lu_results

    single, multi = lu_results.chapter_tables(results_directory("recorded"))
    box = lu_results.result_lines(single, multi, pd.DataFrame({"speedup": [2.0, 0.5, 1.5]}))
    assert len(box) == 6 and "in their own run" in box[5] and "on 2 of 3 (geometric mean 1.14x)" in box[5]


def test_the_papers_examples_are_counted_by_the_simulator():
    from convkit.papers.lu2020 import results as lu_results

    figure1 = lu_results.figure1_table().set_index("kernel")["input loads"]
    assert figure1.to_dict() == {"direct": 50, "column reuse, packed": 20, "row reuse": 30, "column + row reuse": 12}
    example = lu_results.row_reuse_table().iloc[0]
    assert (example["input rows, direct"], example["input rows, row reuse"], example["paper"]) == (9, 5, "9 -> 5")


def test_every_library_against_the_floor_follows_the_recorded_results(tmp_path):
    import pandas as pd

    from convkit.papers.lu2020 import libraries as lu_libraries
    from convkit.papers.lu2020 import results as lu_results

    source, copy = _recorded_copy(tmp_path)
    single, _ = lu_results.chapter_tables(source)
    table = lu_libraries.library_efficiency(single)
    assert table["library"].iloc[0] == "our best kernel"
    assert {"cuDNN (fastest algorithm)", "PyTorch (cuDNN autotuned)", "cupyx.ndimage", "NVIDIA NPP"} <= set(
        table["library"]
    )
    assert ((table["of floor, median (%)"] > 0) & (table["of floor, median (%)"] <= 105)).all()
    assert len(table.columns) <= 8  # fits the page at 1280 px
    text = lu_libraries.claim_against_the_floor(single)
    assert f"of {len(single)} images" in text and "within 2x of the roofline floor" in text
    spread = lu_libraries.chapter_spread(source)  # the recorded repeat; the copy has none
    assert spread["cases"] > 0 and lu_libraries.chapter_spread(copy)["cases"] == 0
    assert "fresh process" in lu_libraries.claim_against_the_floor(single, spread)
    loose = lu_libraries.library_efficiency(single, {"cases": 1, "median": 0.5, "p95": 1e3})  # every one a tie
    assert (loose["ties"].dropna() == f"0 of {len(single)}").sum() == 0
    assert (loose["ours faster"].dropna() == f"0 of {len(single)}").all()
    wide = lu_libraries.past_the_paper(single)
    assert "four columns a lane" in wide and "of the floor" in wide
    frame = pd.read_csv(copy / "lu2020.csv")
    frame.loc[frame["impl"] == "npp", "time_ms_median"] /= 10.0  # NPP ten times faster: the table follows
    frame.to_csv(copy / "lu2020.csv", index=False)
    edited = lu_libraries.library_efficiency(lu_results.chapter_tables(copy)[0])
    npp = lambda t: t[t["library"] == "NVIDIA NPP"].iloc[0]  # noqa: E731
    assert npp(edited)["our speed-up, geomean (x)"] < npp(table)["our speed-up, geomean (x)"]


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
@pytest.mark.parametrize("k", [3, 5, 7])
def test_the_wide_kernel_keeps_its_window_and_outputs_in_registers(k, arch):
    from convkit.families.lu2020.launch import LuWideLaunch

    p = ConvProblem(1, 1, 64, 64, 1, k, k, pad=k // 2)
    (wide,) = [r for r in ptxas_report("lu2020", arch, options=LuWideLaunch().options(p)) if r.kernel == "lu_wide"]
    assert wide.spill_store_bytes == 0 and wide.stack_frame_bytes == 0, wide


@pytest.mark.parametrize(("problem", "named"), [
    (ConvProblem(1, 1, 16, 16, 1, 7, 7, pad=0), "pad"),  # six halo columns on the right
    (ConvProblem(1, 2, 16, 16, 1, 3, 3, pad=1), "C = 1"),
])  # fmt: skip
def test_the_wide_launch_names_what_it_cannot_run(problem, named):
    from convkit.families.lu2020.launch import LuWideLaunch

    with pytest.raises(ValueError, match=named):
        LuWideLaunch().can_implement(problem)
    with pytest.raises(ValueError, match=r"launch\.rows"):
        LuWideLaunch(rows=3).can_implement(ConvProblem(1, 1, 16, 16, 1, 3, 3, pad=1))
