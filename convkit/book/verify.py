"""Every chapter's claims on a results folder, against what the study recorded: ``convkit verify``.

The recorded GPU's folder holds ``claims.json`` (:func:`record`): each claim's value, tolerance and verdict as
computed when its results were recorded. :func:`verify` evaluates the claims on another folder (a rerun) and
holds it to those, on the problems both hold: a quick rerun is compared with the recorded full run restricted to
the quick run's problems (:func:`view`). On the same GPU model a claim that held on the record and now misses
the recorded value by more than its tolerance, on the losing side, fails the run (as MLCommons' TEST01 holds a
rerun within a band of the submitted result); on another GPU the verdicts are reported, not failed.
"""

from __future__ import annotations

import datetime
import json
import math
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convkit.study.claims import EXACT, FAILS, HOLDS, NOT_MEASURED, WITHIN, Claim, Evaluated, evaluate, formatted
from convkit.study.results import QUICK_SUFFIX, recorded_gpu_name

#: The file of a results folder that holds each claim's value and verdict as the study recorded them.
EXPECTED = "claims.json"
#: What a claim's comparison with the record says.
SAME, MOVED, FAILED, UNCHECKED = "reproduces", "moved past its tolerance", "fails", "not compared"
#: The columns a view of the record keeps another run's cases by: a convolution case's, a ceiling's.
CASE_KEYS = (("label", "pad", "stride", "impl", "variant", "params"), ("measurement", "metric", "params"))


def all_claims(chapter: str | None = None) -> list[Claim]:
    """Every registered paper's claims (``chapter``: one paper's), in the book's order."""
    from convkit.papers import PAPERS

    return [c for p in PAPERS if p.claims is not None and chapter in (None, p.name) for c in p.claims()]


def evaluate_all(directory: Path, chapter: str | None = None, spread_from: Path | None = None) -> list[Evaluated]:
    """Every claim (``chapter``: one paper's) on ``directory``, tolerances from ``spread_from`` (default: itself)."""
    return [evaluate(c, directory, spread_from) for c in all_claims(chapter)]


def verdict_lines(directory: Path, chapter: str, quick: bool = False) -> list[str]:
    """A chapter's claims as its result box ends them: the verdict, the claim, our value against the bar (on a
    quick run's results, their quick view; tolerances from the recorded GPU's spread where it has none)."""
    folder = view(Path(directory), quick=True) if quick else Path(directory)
    try:
        evaluated = evaluate_all(folder, chapter, spread_from=spread_folder(Path(directory)))
    finally:
        if quick:
            shutil.rmtree(folder, ignore_errors=True)
    lines = []
    for e in evaluated:
        c = e.claim
        spread = f" (tolerance {formatted(e.tolerance, c.unit)})" if c.kind != EXACT and e.tolerance else ""
        value = f"{formatted(e.value, c.unit)}, {c.bar_text()}{spread}" if e.verdict != NOT_MEASURED else "–"
        lines.append(f"**{e.verdict.capitalize()}**: {c.statement}: {value}.")
    return lines


def spread_folder(directory: Path) -> Path:
    """Where a folder's tolerances come from: itself where it holds a run-to-run sample, else the recorded GPU's
    folder (a quick run or a single rerun has no sample of its own)."""
    from convkit.study.checkout import results_dir
    from convkit.study.results import DEFAULT_RECORDED_GPU

    if any(Path(directory).glob("*_repeat.csv")):
        return Path(directory)
    return results_dir() / DEFAULT_RECORDED_GPU


def record(directory: Path) -> Path:
    """Write every claim's value, tolerance and verdict on ``directory`` into ``<directory>/claims.json`` with the
    commit and date: what ``convkit verify`` holds later runs to. A GPU run that records results calls it."""
    from convkit.study.provenance import convkit_commit

    rows = {e.claim.key: {k: v for k, v in e.row().items() if k != "key"} for e in evaluate_all(directory)}
    document = {"convkit_commit": convkit_commit(), "date": datetime.date.today().isoformat(), "claims": rows}
    path = Path(directory) / EXPECTED
    path.write_text(json.dumps(document, indent=1) + "\n")
    return path


def expected(directory: Path) -> dict[str, dict[str, Any]]:
    """The claims recorded in ``directory`` (:func:`record`), by key; empty where none are."""
    path = Path(directory) / EXPECTED
    return json.loads(path.read_text())["claims"] if path.is_file() else {}


# ---------------------------------------------------------------------------------------------
# Views: a folder's full or quick run, or the recorded run on another run's problems


def view(source: Path, *, quick: bool, like: Path | None = None) -> Path:
    """A temporary folder with ``source``'s full run (``quick=False``: its sweeps, repeats, profiles, tuning) or its
    quick run (each ``<experiment>_quick`` under the sweep's own name, and the tuning tables: what a quick run
    measured); with ``like`` (another view), only the experiments it holds, their rows cut to its problems."""
    out = Path(tempfile.mkdtemp(prefix="convkit-view-"))
    for name in sorted(p.stem for p in Path(source).glob("*.csv")):
        if quick and not (name.endswith(QUICK_SUFFIX) or name.endswith("_tuning")):
            continue
        if not quick and name.endswith(QUICK_SUFFIX):
            continue
        target = name.removesuffix(QUICK_SUFFIX) if quick else name
        if like is not None and not (Path(like) / f"{target}.csv").is_file():
            continue
        for ext in ("csv", "json"):
            if (Path(source) / f"{name}.{ext}").is_file():
                shutil.copy(Path(source) / f"{name}.{ext}", out / f"{target}.{ext}")
        if like is not None and not target.endswith("_tuning"):
            _cut_to(out / f"{target}.csv", Path(like) / f"{target}.csv")
    return out


def _cut_to(path: Path, other: Path) -> None:
    """Keep the rows of ``path`` whose case ``other`` holds too: the same problem, implementation, variant and
    launch (a quick run times some kernels at an untuned launch); the same measurement and settings for the
    ceilings."""
    import pandas as pd

    mine = pd.read_csv(path, keep_default_na=False, na_values=[""], dtype=str)
    theirs = pd.read_csv(other, keep_default_na=False, na_values=[""], dtype=str)
    keys = next((k for k in CASE_KEYS if set(k) <= set(mine) and set(k) <= set(theirs)), None)
    if keys is None:
        return
    keep = set(map(tuple, theirs[list(keys)].to_numpy()))
    mine[[tuple(r) in keep for r in mine[list(keys)].to_numpy()]].to_csv(path, index=False)


# ---------------------------------------------------------------------------------------------
# verify


@dataclass(frozen=True)
class Checked:
    """A claim on a rerun beside the record: this run's evaluation, the recorded value on the same problems, the
    recorded verdict (on the full run), and what the comparison says."""

    now: Evaluated
    recorded: float
    recorded_verdict: str
    status: str


def _status(now: Evaluated, recorded: float, recorded_verdict: str, same_gpu: bool) -> str:
    c = now.claim
    if math.isnan(now.value) or math.isnan(recorded):
        return UNCHECKED
    if abs(now.value - recorded) <= now.tolerance + 1e-12 * max(abs(recorded), 1.0):
        return SAME
    losing = (now.value < recorded) if c.at_least else (now.value > recorded)
    if same_gpu and losing and recorded_verdict in (HOLDS, WITHIN):
        return FAILED
    return MOVED


def verify(directory: Path, *, quick: bool = False, recorded: Path | None = None) -> tuple[list[Checked], bool]:
    """Every claim on ``directory`` (its quick run with ``quick``) against the recorded folder of the same GPU
    model (``recorded``; default ``results/<its GPU>``, else the book's GPU), on the problems both hold; returns
    the rows and whether the folder was recorded on the same GPU model. Against the recorded folder itself (its
    full run), the values must equal the committed ``claims.json``."""
    from convkit.core.gpu import gpu_slug
    from convkit.study.checkout import results_dir
    from convkit.study.results import DEFAULT_RECORDED_GPU

    directory = Path(directory)
    gpu = recorded_gpu_name(directory)
    if recorded is None:
        recorded = results_dir() / gpu_slug(gpu)
        if not (recorded / EXPECTED).is_file():
            recorded = results_dir() / DEFAULT_RECORDED_GPU
    same_gpu = recorded_gpu_name(recorded) == gpu
    committed = expected(recorded)
    mine = view(directory, quick=quick)
    theirs = view(recorded, quick=False, like=mine)
    spread = spread_folder(recorded)
    rows = []
    try:
        for claim in all_claims():
            now = evaluate(claim, mine, spread_from=spread)
            was = evaluate(claim, theirs, spread_from=spread).value
            recorded_verdict = str(committed.get(claim.key, {}).get("verdict", NOT_MEASURED))
            rows.append(Checked(now, was, recorded_verdict, _status(now, was, recorded_verdict, same_gpu)))
    finally:
        shutil.rmtree(mine, ignore_errors=True)
        shutil.rmtree(theirs, ignore_errors=True)
    return rows, same_gpu


def stale(directory: Path) -> list[str]:
    """The claims whose committed value or verdict (``claims.json``) differs from what ``directory`` computes now:
    empty when the committed expectations match the recorded results."""
    committed = expected(directory)
    out = []
    for e in evaluate_all(directory):
        entry = committed.get(e.claim.key)
        if entry is None:
            out.append(f"{e.claim.key}: not in {EXPECTED}")
            continue
        value = entry.get("value")
        same_value = (value is None and math.isnan(e.value)) or (
            value is not None and math.isclose(float(value), e.value, rel_tol=1e-9, abs_tol=1e-12))  # fmt: skip
        if not same_value or entry.get("verdict") != e.verdict:
            out.append(f"{e.claim.key}: recorded {entry.get('value_text')} ({entry.get('verdict')}), "
                       f"computed {formatted(e.value, e.claim.unit)} ({e.verdict})")  # fmt: skip
    return out


def table(rows: list[Checked]) -> Any:
    """The rows of :func:`verify` as ``convkit verify`` prints them (pandas)."""
    import pandas as pd

    return pd.DataFrame([{
        "claim": r.now.claim.key, "value": formatted(r.now.value, r.now.claim.unit),
        "recorded": formatted(r.recorded, r.now.claim.unit),
        "tolerance": formatted(r.now.tolerance, r.now.claim.unit) if r.now.claim.kind != EXACT else "0",
        "verdict": r.now.verdict, "recorded verdict": r.recorded_verdict, "against the record": r.status,
    } for r in rows])  # fmt: skip


def summary(rows: list[Checked]) -> dict[str, int]:
    """How many claims each verdict and each comparison got."""
    out = {v: 0 for v in (HOLDS, WITHIN, FAILS, NOT_MEASURED, SAME, MOVED, FAILED, UNCHECKED)}
    for r in rows:
        out[r.now.verdict] += 1
        out[r.status] += 1
    return out
