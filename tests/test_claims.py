"""The study's claims (convkit.study.claims, convkit verify): verdicts, the committed expectations, a perturbed
rerun. CPU only: they read the recorded results."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from convkit.book import chapter
from convkit.book import verify as v
from convkit.papers import PAPERS
from convkit.study.claims import FAILS, HOLDS, NOT_MEASURED, WITHIN, Claim, verdict

RECORDED = chapter.results_directory("recorded")


def _claim(at_least: bool = True) -> Claim:
    return Claim("test.claim", "a test", lambda d: 1.0, 2.0, at_least=at_least)


@pytest.mark.parametrize(
    ("value", "tol", "at_least", "expected"),
    [(2.1, 0.0, True, HOLDS), (1.95, 0.1, True, WITHIN), (1.5, 0.1, True, FAILS), (math.nan, 0.1, True, NOT_MEASURED),
     (1.9, 0.0, False, HOLDS), (2.05, 0.1, False, WITHIN), (2.5, 0.1, False, FAILS)],
)  # fmt: skip
def test_a_verdict_follows_the_bar_and_the_tolerance(value: float, tol: float, at_least: bool, expected: str) -> None:
    assert verdict(_claim(at_least), value, tol) == expected


def test_every_finding_is_checked_by_claims_and_every_claim_belongs_to_a_finding() -> None:
    keys = {c.key for c in v.all_claims()}
    assert len(keys) == len(v.all_claims()), "claim keys must be unique"
    found = [row for p in PAPERS if p.findings for row in p.findings(RECORDED)]
    named = [k for row in found for k in row.get("claims", ())]
    assert all(row.get("claims") for row in found), "a findings row without claims"
    assert set(named) == keys


def test_the_committed_claims_match_the_recorded_results() -> None:
    assert v.stale(RECORDED) == []


def test_the_findings_table_has_a_verdict_for_every_row() -> None:
    table = chapter.findings_markdown(RECORDED)
    rows = [line for line in table.splitlines() if line.startswith("| ") and "**" in line]
    assert rows and all(line.rstrip(" |").rsplit("|", 1)[1].strip() not in ("", "–") for line in rows)


def test_a_perturbed_rerun_fails_the_perturbed_chapters_claims(tmp_path: Path) -> None:
    """Every convkit time of the cuConv sweep tripled: its speed-up claims that held fail; the other chapters'
    claims reproduce."""
    import pandas as pd

    rerun = tmp_path / RECORDED.name
    shutil.copytree(RECORDED, rerun)
    frame = pd.read_csv(rerun / "cuconv.csv", keep_default_na=False, na_values=[""], dtype=str)
    mine = frame["impl"] == "convkit"
    for column in ("time_ms_median", "time_ms_min", "time_ms_max"):
        times = pd.to_numeric(frame.loc[mine, column], errors="coerce") * 3
        frame.loc[mine, column] = times.map(lambda t: "" if pd.isna(t) else repr(float(t)))
    frame.to_csv(rerun / "cuconv.csv", index=False)
    rows, same_gpu = v.verify(rerun, recorded=RECORDED)
    assert same_gpu
    status = {r.now.claim.key: r.status for r in rows}
    held = [r.now.claim.key for r in rows if r.now.claim.chapter == "cuconv" and r.recorded_verdict in (HOLDS, WITHIN)]
    assert held and all(status[k] == v.FAILED for k in held)
    assert all(s == v.SAME for k, s in status.items() if not k.startswith("cuconv."))
