"""The Chang 2022 chapter's numbers from the recorded H100 results (CPU): what notebook 05 shows."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from convkit.book import chapter
from convkit.families.chang2022 import ranking, single
from convkit.op.cases import params_text
from convkit.papers.chang2022 import TUNING, problems
from convkit.papers.chang2022 import results as chang_results
from convkit.study.results import load_results


@pytest.fixture(scope="module")
def recorded():
    results = chapter.results("chang2022", "recorded")
    return results, chang_results.speedup_table(results.frame, chapter.ceilings("recorded"))


def test_every_configuration_has_both_kernels_and_a_library_time(recorded):
    _, table = recorded
    assert len(table) == len(problems.single_problems()) + len(problems.multi_problems())
    for variant in ("chang_single", "chang_single_fill", "chang_multi", "chang_multi_async"):
        kind = "single" if variant.startswith("chang_single") else "multi"
        part = table[table["kind"] == kind]
        assert (part[f"{variant}_us"] > 0).all() and (part["best_lib_us"] > 0).all(), variant


def test_result_box_agrees_with_the_summary(recorded):
    _, table = recorded
    summary = chang_results.summary(table).set_index(["kernel", "variant"])
    mean = summary.loc[("multi", "H100 launch (H100)"), "mean"]
    assert f"(arithmetic mean {mean:.2f}x, the paper's measure; geometric mean" in chang_results.result_lines(table)[2]
    from convkit.book.verify import evaluate_all  # the verdicts: the chapter's claims

    verdicts = {e.claim.key: e.verdict for e in evaluate_all(chapter.results_directory("recorded"), "chang2022")}
    assert verdicts["chang2022.multi_mean"] == "holds" and verdicts["chang2022.multi_geomean"] != "holds"
    assert "multi-channel** (H100 launch): mean" in chang_results.verdict(table)
    assert "goal" not in chang_results.verdict(table)


def test_findings_give_the_result_box_numbers(recorded):
    import re
    from pathlib import Path

    results, table = recorded
    box = "\n".join(chang_results.result_lines(table))
    notebook = (Path(__file__).parents[1] / "notebooks" / "05_chang2022.ipynb").read_text()
    for row in chang_results.findings(results.directory):
        assert f"({row['section']})=" in notebook
        for column in ("paper's design on the H100", "our best on the H100", "efficiency"):
            for number in re.findall(r"\d[\d,.]*(?:x|%)", row[column]):
                assert number in box, (column, number)


def _copy_results(directory, tmp_path, experiments=("chang2022", "ceilings")):
    import shutil

    for name in experiments:
        for suffix in (".csv", ".json"):
            shutil.copy(directory / f"{name}{suffix}", tmp_path / f"{name}{suffix}")
    return tmp_path


def _slow_down(path, variant, factor):
    frame = pd.read_csv(path)
    rows = frame["variant"] == variant
    frame.loc[rows, "time_ms_median"] = frame.loc[rows, "time_ms_median"] * factor
    frame.to_csv(path, index=False)


def test_result_box_and_findings_follow_the_recorded_results(recorded, tmp_path):
    results, table = recorded
    box, rows = chang_results.result_lines(table), chang_results.findings(results.directory)
    assert len(box) == 3 and "2.6x" in box[0] and "Verdict" not in box[-1]
    assert [r["claim"] for r in rows] == ["single-channel kernel beats cuDNN", "multi-channel kernel beats cuDNN"]
    assert all(set(r) == {*chapter_paper_columns(), "section", "claims"} for r in rows)
    copy = _copy_results(results.directory, tmp_path)
    _slow_down(copy / "chang2022.csv", "chang_single_fill", 3.0)
    frame, _ = load_results(copy, "chang2022")
    edited = chang_results.speedup_table(frame, chapter.ceilings("recorded"))
    assert chang_results.result_lines(edited)[1] != box[1]
    assert chang_results.findings(copy)[0] != rows[0] and chang_results.findings(copy)[1] == rows[1]


def chapter_paper_columns():
    from convkit.papers.paper import FINDING_COLUMNS

    return FINDING_COLUMNS


def test_paper_vs_ours_names_what_is_not_measured(recorded):
    _, table = recorded
    frame = chang_results.paper_vs_ours(table, chang_results.latency_model(chang_results.figures_from_ceilings(
        chapter.ceilings("recorded"), "H100")))  # fmt: skip
    text = frame.to_string()
    assert "no Maxwell GPU here" in text and "1.3x-3.7x" in text and "1.08x-1.8x" in text
    assert "Chen et al.'s kernels are not available" in text and "4x faster" in text


def test_family_table_names_the_fastest_family_of_each_3x3_and_5x5_launch(recorded):
    results, _ = recorded
    tuning, _ = load_results(results.directory, TUNING)
    families = chang_results.family_table(tuning)
    assert list(families["label"]) == [p.label for p in problems.multi_problems() if p.r > 1]
    for _, row in families.iterrows():
        times = row[list(chang_results.FAMILIES)].dropna()
        assert row["winner"] == times.idxmin()
        assert math.isnan(row["margin"]) or row["margin"] >= 1.0
    # the filter-per-thread blocks are offered on maps up to 112x112 only
    large = families[families["label"].str.startswith(("224-", "512-"))]
    assert large["filter per thread, 7x7"].isna().all()


def test_kernel_family_reads_the_recorded_knobs():
    family = chang_results.kernel_family
    assert family('{"kernel": "pointwise", "bm": 32}') == "GEMM tile"
    assert family('{"kernel": "broadcast", "tile_h": 7}') == "filter per thread, 7x7"
    assert family('{"kernel": "broadcast", "tile_h": 2}') == "filter per thread, small"
    assert family('{"rpt": 2}') == "2-D tiles, 2 rows" and family('{"rpt": 1}') == "2-D tiles"


def test_every_recorded_launch_parses_and_records_the_same_params(recorded):
    """The launches' ``to_params`` key the recorded rows: each recorded launch reads back and writes the same text."""
    results, _ = recorded
    tuning, _ = load_results(results.directory, TUNING)
    rows = pd.concat([results.frame, tuning])
    for variant, params in rows[rows["impl"] == "convkit"][["variant", "params"]].drop_duplicates().itertuples(False):
        parse = single.single_launch if variant.startswith("chang_single") else ranking.multi_launch
        assert params_text(parse(json.loads(params)).to_params()) == params, (variant, params)
