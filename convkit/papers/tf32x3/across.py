"""The 3xTF32 chapter on every GPU that recorded it: each other GPU's full run read as the chapter reads its own
(:func:`convkit.papers.tf32x3.results.standing`), beside the per-problem table every chapter shows
(:func:`convkit.book.chapter.across_gpus`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convkit.papers.tf32x3 import results


def standings(shown: Path) -> list[tuple[str, Any]]:
    """(GPU, where the kernels stand on it) for every GPU but the one whose run the chapter shows (the folder
    ``shown``) that recorded the chapter's full sweep; a quick run's two dozen problems leave out the large
    layers the medians are taken over, so it has none."""
    from convkit.study.results import recorded_folders
    from convkit.study.roofline import recorded_ceilings

    found = []
    for gpu, folder, stem in recorded_folders(results.SWEEP):
        if stem != results.SWEEP or folder.resolve() == Path(shown).resolve():
            continue
        t = results.chapter_tables(folder, recorded_ceilings(folder) or {}, stem)
        found.append((gpu, results.standing(t)))
    return found
