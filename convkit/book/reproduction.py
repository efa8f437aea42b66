"""The book's "Does it reproduce?" page: every claim's verdict on the recorded GPU beside its verdicts on the
reruns the results folders hold (a quick rerun on the same GPU model, quick runs on other GPUs), each compared
with the record on the cases both measured (:func:`convkit.book.verify.verify`)."""

from __future__ import annotations

import math
from pathlib import Path

from convkit.book.verify import FAILED, MOVED, SAME, UNCHECKED, Checked, evaluate_all, verify
from convkit.papers import paper
from convkit.study.checkout import results_dir
from convkit.study.claims import formatted
from convkit.study.results import QUICK_SUFFIX, recorded_gpu_name

#: The generated table the page includes (ignored by git, written at each build).
REPRODUCTION_TABLE = "reproduction_table.md"


def reruns(recorded: Path) -> list[tuple[str, Path]]:
    """(column title, folder) of every quick run the results hold: the recorded GPU's own first."""
    out = []
    folders = [recorded, *sorted(p for p in results_dir().iterdir() if p.is_dir() and p != recorded)]
    for folder in folders:
        if any(folder.glob(f"*{QUICK_SUFFIX}.csv")):
            name = recorded_gpu_name(folder.name).removeprefix("NVIDIA ")
            out.append((f"{name}, quick rerun" if folder == recorded else f"{name}, quick run", folder))
    return out


def _why(row: Checked) -> str:
    """Why a rerun's claim does not simply reproduce, in words."""
    c, now = row.now.claim, row.now
    if row.status == UNCHECKED:
        if math.isnan(now.value):
            return "this run did not measure it"
        return (
            "the record holds none of this run's cases for it: the same problems at other launches or sizes (a "
            "quick run measures the ceilings at smaller sizes; another GPU tunes its own launches)"
        )
    moved = now.value / row.recorded - 1 if row.recorded else math.nan
    side = "in its favour" if (moved > 0) == c.at_least else "against it"
    return (
        f"moved {abs(moved):.1%} from the record on the same cases ({formatted(row.recorded, c.unit)}), "
        f"past its tolerance of {formatted(now.tolerance, c.unit)}, {side}"
    )


def reproduction_markdown(recorded: Path) -> str:
    """The page's table (a row per claim: the recorded verdict and each rerun's), a line per rerun saying how many
    of its claims reproduce per chapter, and why each other one does not."""
    evaluated = evaluate_all(recorded)
    columns = [(title, verify(folder, quick=True)[0]) for title, folder in reruns(recorded)]
    gpu = recorded_gpu_name(recorded.name).removeprefix("NVIDIA ")
    header = ["chapter", "claim", "paper", f"{gpu}, recorded", *(title for title, _ in columns)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for i, e in enumerate(evaluated):
        c = e.claim
        cells = [paper(c.chapter).title, c.statement, c.paper or "–", f"{formatted(e.value, c.unit)}, {e.verdict}"]
        for _, rows in columns:
            r = rows[i]
            cells.append(f"{formatted(r.now.value, c.unit)}, {r.now.verdict}" if not math.isnan(r.now.value)
                         else r.now.verdict)  # fmt: skip
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    notes = []
    for title, rows in columns:
        chapters = dict.fromkeys(r.now.claim.chapter for r in rows)
        per = []
        for chapter in chapters:
            mine = [r for r in rows if r.now.claim.chapter == chapter and r.status != UNCHECKED]
            if mine:
                per.append(f"{paper(chapter).title} {sum(r.status == SAME for r in mine)} of {len(mine)}")
        compared = [r for r in rows if r.status != UNCHECKED]
        same = sum(r.status == SAME for r in compared)
        failed = sum(r.status == FAILED for r in compared)
        notes.append(f"**{title}**: {same} of {len(compared)} claims compared reproduce the record within their "
                     f"tolerance ({'; '.join(per)}); {failed} fail.")  # fmt: skip
        for r in rows:
            if r.status in (MOVED, FAILED, UNCHECKED):
                notes.append(f"- {r.now.claim.statement}: {_why(r)}.")
    return "\n".join(lines) + "\n\n" + "\n".join(notes) + "\n"
