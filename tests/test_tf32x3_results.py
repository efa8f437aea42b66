"""The 3xTF32 chapter's numbers from its recorded H100 run, without a GPU: the suites, the targets, the ladder,
CUTLASS beside ours, the accuracy tables, and text that follows the recorded rows."""

from __future__ import annotations

import json
import math

from convkit.papers.tf32x3 import claims, hopper, opening, results
from convkit.study import tables
from convkit.study.checkout import results_dir
from convkit.study.roofline import recorded_ceilings

RECORDED = results_dir() / "nvidia-h100-80gb-hbm3"


def _tables(directory=RECORDED):
    return results.chapter_tables(directory, recorded_ceilings(directory))


def test_every_problem_of_the_three_suites_is_in_one_run():
    t = _tables()
    assert [len(t[k]) for k in ("cuconv", "lu2020", "chang2022")] == [616, 26, 63]
    assert set(t["table"]["best"]) <= set(results.VARIANTS)
    assert t["table"][f"{results.TF32X3}_us"].notna().all()  # the 3xTF32 kernel ran every problem
    assert (t["table"]["fp32_us"] >= t["table"]["best_us"]).all()
    assert t["spread"]["cases"] > 0 and t["ceilings"]["tf32_mma_peak_tflops"] > t["ceilings"]["sgemm_tflops"]


def test_the_targets_are_reported_with_what_they_measured():
    t = _tables()
    targets = results.targets(t)
    assert len(targets) == 10 and set(targets["reached"]) <= {"yes", "no"}
    assert list(results.standing(t).columns) == ["FP32 kernels", "with 3xTF32"]  # the book's view of it
    wrong = targets.loc["3xTF32 runs checked: wrong results; largest error", "with 3xTF32"]
    assert wrong.startswith("0 of ")
    assert results.ladder(t)["layers"].iloc[0] == 94
    assert set(results.cutlass_table(t["table"]).index) == {"1x1", "3x3", "5x5"}
    assert len(results.throughput_table(t["cuconv"], t["ceilings"])) == 94


def test_the_accuracy_tables_hold_every_implementation_and_kind_of_input():
    from convkit.papers.tf32x3 import accuracy
    from convkit.papers.tf32x3.accuracy import INPUTS, problems

    t = _tables()
    curves = accuracy.error_by_k(t["accuracy"], problems()[:9])
    recorded = {json.loads(params)["inputs"] for params in t["accuracy"]["params"]}  # (a run may predate a kind)
    assert list(curves) == [kind for kind in INPUTS if kind in recorded] and len(curves) >= 4
    normal = curves["normal"]
    assert list(normal.columns) == [9, 36, 144, 288, 576, 1152, 2304, 4608, 9216]
    assert {"3xTF32 implicit GEMM (ours)", "FP32 implicit GEMM (ours)", "PyTorch TF32"} <= set(normal.index)
    summary = accuracy.error_summary(t["accuracy"])
    assert not summary.isna().any().any()  # an FP16 output that overflowed says so, no NaN
    mine, simt = accuracy.accuracy_medians(t["accuracy"])
    assert mine < 1e-5 and simt < 1e-5 and not math.isnan(mine)


def test_the_chapter_text_follows_the_recorded_numbers(tmp_path):
    import shutil

    import pandas as pd

    copy = tmp_path / RECORDED.name
    shutil.copytree(RECORDED, copy)
    before = opening.result_lines(_tables(copy))
    frame = pd.read_csv(copy / "tf32x3.csv", dtype=str, keep_default_na=False)
    mine = (frame["impl"] == "convkit") & (frame["variant"] == results.TF32X3)
    frame.loc[mine, "time_ms_median"] = [f"{float(v) / 2:.6g}" for v in frame.loc[mine, "time_ms_median"]]
    frame.to_csv(copy / "tf32x3.csv", index=False)
    after = opening.result_lines(_tables(copy))
    assert after[1] != before[1] and after[2] != before[2]


def test_the_findings_row_gives_the_result_box_numbers():
    """Each number of the book's findings row appears in the chapter's result box (one function gives both)."""
    import re
    from pathlib import Path

    row = opening.findings(RECORDED)[0]
    box = " ".join(opening.result_lines(_tables()))
    for column in ("paper's design on the H100", "our best on the H100", "efficiency"):
        for number in re.findall(r"\d+(?:\.\d+)?(?:e-\d+)?[x%]?", row[column]):
            assert number in box, (column, number)
    assert row["section"] == opening.SECTION
    notebook = (Path(__file__).parents[1] / "notebooks" / "07_tf32x3.ipynb").read_text()
    assert f"({opening.SECTION})=" in notebook


def test_the_profile_takes_cutlass_at_its_fastest_tile_of_each_profiled_layer():
    """CUTLASS's fastest 3xTF32 tile on each profiled layer, read from the recorded sweep, is profiled beside the
    128 x 128 tiles; the note under the profile says which tiles its rows are."""
    import pandas as pd

    from convkit.libs import cutlass
    from convkit.papers import tf32x3
    from convkit.papers.tf32x3 import profiled

    t = _tables()
    fastest = profiled.fastest_cutlass_tiles(t["sweep"])
    assert set(fastest) == {problem.label for _, problem in profiled.PROFILE_PROBLEMS}
    ok = t["sweep"][(t["sweep"]["impl"] == "cutlass") & (t["sweep"]["status"] == "ok")]
    for label, tile in fastest.items():
        tiles = ok[(ok["label"] == label) & ok["variant"].str.contains("tf32x3")]
        assert float(tiles.loc[tiles["variant"] == tile, "time_ms_median"].min()) == tiles["time_ms_median"].min()
    taken = {p.name for p in tf32x3.profiled_peers(RECORDED) if p.impl == cutlass.IMPL}
    assert taken == {*profiled.PROFILED_PEERS, *fastest.values()}
    assert all(name in results.NAMES for name, _ in cutlass.KERNELS)
    # the recorded profile took the 128 x 128 tiles alone; one that took the fastest tiles says so
    assert profiled.profiled_cutlass_note(t).endswith("not how CUTLASS's fastest does.")
    extra = pd.DataFrame({"variant": sorted(set(fastest.values()))})
    note = profiled.profiled_cutlass_note(t | {"kernels": pd.concat([t["kernels"], extra], ignore_index=True)})
    assert note.endswith("(128 x 64 and 64 x 64) were profiled beside it.")


def test_the_profile_is_two_tables_time_and_resources_with_the_tensor_core_kernels_first():
    """Where the time goes and what each kernel holds (registers, threads, warps, bank conflicts), the same rows in
    each; the rows of the 3xTF32 kernels, ours and CUTLASS's, picked out for the page."""
    from convkit.papers.tf32x3 import profiled

    t = _tables()
    compute, resources = profiled.profile_tables(t["kernels"])
    assert list(compute.index) == list(resources.index)
    assert "registers a thread" in resources and "registers a thread" not in compute and "top stalls" in compute
    ours = profiled.on_tensor_cores(resources)
    assert set(ours.index.get_level_values("implementation")) == {"3xTF32 implicit GEMM", "CUTLASS 3xTF32, 128 x 128"}
    mine = ours.xs("3xTF32 implicit GEMM", level="implementation")["registers a thread"]
    assert mine.between(190, 255).all()  # the recorded profile: 197 to 213
    # the registers spilled, where the profile counted them (not the recorded one: no column of blanks)
    assert "spilled MB" not in resources
    ld, st = (m.replace(".", "_") for m in tables.LOCAL_MEMORY)
    spilled = t["kernels"].assign(**{ld: 3e6, st: 1e6})
    assert (profiled.profile_tables(spilled)[1]["spilled MB"] == 4.0).all()


def test_the_ceilings_table_adds_hopper_s_own_instruction_where_measured():
    from convkit.papers.tf32x3.results import ceilings_table

    ceilings = {"fma_tflops": 60.0, "sgemm_tflops": 51.0, "tf32_gemm_tflops": 376.0, "tf32_mma_peak_tflops": 321.0}
    assert len(ceilings_table(ceilings)) == 5
    table = ceilings_table(ceilings | {"tf32_wgmma_peak_tflops": 480.0})
    assert table.loc["3xTF32 bound (wgmma peak / 3)", "TFLOP/s"] == 160.0 and len(table) == 7


def test_the_hopper_family_and_the_tf32_line_join_the_targets_and_ladder_once_recorded(tmp_path):
    """A run that records the wgmma kernels (here: the recorded run with the mma.sync kernel's rows copied as the
    wgmma kernel's at half the time, and as Winograd on wgmma's) and PyTorch in TF32: the direct target takes the
    faster direct kernel, the Hopper family gets its row, 3xTF32 Winograd its accuracy row, the ladder its steps;
    the TF32 line never becomes the best library."""
    import shutil

    import pandas as pd

    for name in RECORDED.iterdir():
        if name.suffix in (".csv", ".json"):
            shutil.copy(name, tmp_path / name.name)
    sweep = pd.read_csv(RECORDED / "tf32x3.csv")
    mine = sweep[sweep["variant"] == results.TF32X3]
    faster = mine.assign(variant=results.WGMMA, time_ms_median=mine["time_ms_median"] / 2)
    winograd = mine.assign(variant=results.WINOGRAD_WGMMA, rel_err=2e-6)
    tf32 = mine.assign(impl="pytorch_tf32", variant="cudnn.benchmark.tf32", time_ms_median=mine["time_ms_median"] / 10)
    pd.concat([sweep, faster, winograd, tf32]).to_csv(tmp_path / "tf32x3.csv", index=False)
    t = _tables(tmp_path)
    targets = results.targets(t)
    direct = targets.loc["direct 3xTF32 kernels, median on layers >= 20 GFLOP", "with 3xTF32"]
    assert direct.startswith("89.0 TFLOP/s")  # twice the recorded 44.5
    assert targets.loc["Hopper family (wgmma), median on layers >= 20 GFLOP", "reached"] == "no"
    assert targets.loc["3xTF32 Winograd runs: wrong results; largest error", "with 3xTF32"].endswith("2.0e-06")
    steps = results.ladder(t).index
    assert "3xTF32 implicit GEMM on wgmma (ours)" in steps and "PyTorch in TF32 (reference, not FP32)" in steps
    assert (t["table"]["best_lib"] != "cudnn.benchmark.tf32").all() and t["table"]["pytorch_tf32_us"].notna().all()
    assert len(hopper.method(t)) == 6 and hopper.method(_tables()) == []  # the method, where the run recorded it
    # the opening and the findings row read the faster direct kernel, and the verdict follows the numbers
    measured, verdict = opening.result_lines(t)[1:]
    assert "wgmma, our kernels reach 89.0 TFLOP/s" in measured and "at a median 44.5 TFLOP/s" in measured
    assert "and so does its speed" in verdict and "1.36x CUTLASS's 3xTF32 rate" in verdict
    assert "83% of the 3xTF32 bound (107 TFLOP/s, a third of the mma.sync peak)" in verdict  # no wgmma peak here
    assert opening.findings(tmp_path)[0]["efficiency"].startswith("direct 3xTF32 kernels (the faster per layer) 89.0")
    assert "does not" in opening.result_lines(_tables())[-1]  # the recorded run: the speed short
    t["ceilings"] = dict(t["ceilings"], tf32_wgmma_peak_tflops=480.0)
    assert results.direct_bound(t) == (160.0, "a third of the wgmma peak")
    assert "56% of the 3xTF32 bound (160 TFLOP/s" in opening.result_lines(t)[-1]
    throughput = results.throughput_table(t["cuconv"], t["ceilings"])  # the wgmma kernel's column, the faster's gain
    assert (throughput["wgmma (TFLOP/s)"] > throughput["3xTF32 (TFLOP/s)"]).all()
    vs_cutlass = results.cutlass_table(t["table"])["3xTF32: geometric-mean speed-up"]
    assert (vs_cutlass > results.cutlass_table(_tables()["table"])["3xTF32: geometric-mean speed-up"]).all()
    shares = results.ladder(t)["share of the 3xTF32 bound"]  # each kernel against its own instruction's bound
    assert math.isclose(shares["3xTF32 implicit GEMM on wgmma (ours)"], 89.0 / 160, rel_tol=2e-3)
    assert math.isclose(shares["3xTF32 implicit GEMM (ours)"], 44.5 / (t["ceilings"]["tf32_mma_peak_tflops"] / 3),
                        rel_tol=2e-3)  # fmt: skip
    over_cutlass = next(c for c in claims.claims() if c.key == "tf32x3.cutlass").value(tmp_path)
    assert math.isclose(over_cutlass, 89.0 / 65.5, rel_tol=2e-3)  # the faster direct kernel's rate over CUTLASS's


def test_a_second_gpu_s_whole_run_gets_its_own_standing_a_quick_run_none(tmp_path, monkeypatch):
    """Three GPUs' folders (the recorded H100 run; a stand-in H200 whose run recorded the wgmma kernel at half the
    mma.sync kernel's time, with the H200's recorded ceilings; a third GPU with a quick run only): each GPU's
    standing is read as the chapter reads its own, for every GPU but the one shown, and the every-GPU table
    compares each with its own run's best FP32 library."""
    import shutil

    import pandas as pd

    from convkit.book import chapter
    from convkit.papers.tf32x3 import gpus
    from convkit.study import results as store

    h100, h200, quick = (tmp_path / name for name in ("nvidia-h100-80gb-hbm3", "nvidia-h200", "nvidia-a100"))
    for folder in (h100, h200, quick):
        folder.mkdir()
    for name in RECORDED.glob("tf32x3*"):
        shutil.copy(name, h100 / name.name)
    for name in ("ceilings.csv", "ceilings.json"):
        shutil.copy(RECORDED / name, h100 / name)
        shutil.copy(RECORDED.parent / "nvidia-h200" / name, h200 / name)
    sweep = pd.read_csv(RECORDED / "tf32x3.csv")
    mine = sweep[sweep["variant"] == results.TF32X3]
    faster = mine.assign(variant=results.WGMMA, time_ms_median=mine["time_ms_median"] / 2)
    tf32 = mine.assign(impl="pytorch_tf32", variant="cudnn.benchmark.tf32", time_ms_median=mine["time_ms_median"] / 10)
    pd.concat([sweep, faster, tf32]).to_csv(h200 / "tf32x3.csv", index=False)
    shutil.copy(RECORDED / "tf32x3.json", h200 / "tf32x3.json")
    sweep.head(40).to_csv(quick / "tf32x3_quick.csv", index=False)
    shutil.copy(RECORDED / "tf32x3.json", quick / "tf32x3_quick.json")
    monkeypatch.setattr(store, "results_dir", lambda: tmp_path)

    [(gpu, standing)] = gpus.standings(h100)
    assert gpu == "H200" and list(standing.columns) == ["FP32 kernels", "with 3xTF32"]
    direct = standing.loc["direct 3xTF32 kernels, median on layers >= 20 GFLOP", "with 3xTF32"]
    assert direct.startswith("89.0 TFLOP/s")  # twice the recorded 44.5
    assert [gpu for gpu, _ in gpus.standings(h200)] == ["H100 80GB HBM3"]
    table = chapter.across_gpus("tf32x3")  # the problems all three recorded: the quick run's first three
    assert len(table) == 3 and sum(column.endswith("(quick): speed-up") for column in table) == 1
    assert (table["H200: speed-up"] > table["H100 80GB HBM3: speed-up"]).all()
    assert (table["H200: best library (us)"] == table["H100 80GB HBM3: best library (us)"]).all()  # not TF32


def test_a_quick_run_alone_is_shown_without_the_measures_it_did_not_take():
    """The H200's recorded quick run (no accuracy experiment, no sample measured again): the chapter reads it where
    the folder has no full run, and its opening, standing and ties sentence say nothing of what it did not measure
    (no NaN where a reader looks)."""
    from convkit.book import chapter

    h200 = RECORDED.parent / "nvidia-h200"
    shown = chapter.results("tf32x3", "recorded", recorded_gpu="nvidia-h200")
    assert shown.experiment == "tf32x3_quick" and len(shown.frame)
    t = results.chapter_tables(h200, recorded_ceilings(h200), shown.experiment)
    assert t["accuracy"].empty and t["spread"]["cases"] == 0
    words = " ".join(opening.result_lines(t)) + tables.ties_words(t["cuconv"]["speedup"], t["spread"])
    assert "nan" not in words.lower() and "median error" not in words
    assert "no difference is counted as a tie" in words
    standing = results.standing(t)
    assert not any("median error" in measure for measure in standing.index)
    assert "nan" not in standing.to_string().lower()
