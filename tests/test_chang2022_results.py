"""The Chang 2022 chapter's numbers from the recorded H100 results (CPU): what notebook 05 shows."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from convkit import chapter
from convkit.papers.chang2022 import TUNING, multi, problems, single
from convkit.papers.chang2022 import results as chang_results
from convkit.results import load_results, params_text


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


def test_targets_agree_with_the_summary(recorded):
    _, table = recorded
    summary = chang_results.summary(table).set_index(["kernel", "variant"])
    targets = chang_results.targets(table)
    multi = targets[targets["target"].str.startswith("multi")].iloc[0]
    mean = summary.loc[("multi", "H100 launch (H100)"), "mean"]
    assert multi["measured"] == f"{mean:.2f}x" and multi["met"] == (mean >= chang_results.TARGETS["multi"])
    # the wording (the best cuDNN algorithm alone) beside the stricter best library
    alone = float(multi["over the best cuDNN algorithm alone"].rstrip("x"))
    assert alone >= mean - 0.005
    assert "multi-channel** (H100 launch): mean" in chang_results.verdict(table)


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
    """The launches' ``as_params`` key the recorded rows: each recorded launch reads back and writes the same text."""
    results, _ = recorded
    tuning, _ = load_results(results.directory, TUNING)
    rows = pd.concat([results.frame, tuning])
    for variant, params in rows[rows["impl"] == "convkit"][["variant", "params"]].drop_duplicates().itertuples(False):
        parse = single.single_launch if variant.startswith("chang_single") else multi.multi_launch
        assert params_text(parse(json.loads(params)).as_params()) == params, (variant, params)
