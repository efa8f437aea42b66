"""The 3xTF32 chapter on more than one GPU: which GPU's run it shows (:func:`where_shown`: a GPU without TF32
tensor cores, the Colab T4, measures no 3xTF32 kernel), and each other GPU's whole run read as the chapter reads
its own (:func:`standings`), beside the per-problem table every chapter shows
(:func:`convkit.book.chapter.across_gpus`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convkit.papers.tf32x3 import results


def measured_3xtf32(directory: Path, experiment: str) -> bool:
    """Whether the sweep ``experiment`` recorded in ``directory`` ran the 3xTF32 kernel (a GPU without TF32 tensor
    cores runs the FP32 kernels and the libraries alone)."""
    from convkit.study.results import load_results

    if not (Path(directory) / f"{experiment}.csv").is_file():
        return False
    return bool((load_results(Path(directory), experiment)[0]["variant"] == results.TF32X3).any())


def where_shown(directory: Path, experiment: str, book_gpu: str) -> tuple[Path, str, str]:
    """(folder, experiment, sentence) the chapter shows: this run's where its sweep holds the 3xTF32 kernel's rows;
    else, on a GPU without TF32 tensor cores (the Colab T4), the full sweep recorded on ``book_gpu`` (a results
    folder's name) and a sentence that says so ("" where nothing is recorded there either)."""
    from convkit.study.results import recorded_elsewhere

    measured = measured_3xtf32(directory, experiment)
    elsewhere = None if measured else recorded_elsewhere(directory, book_gpu, f"{results.SWEEP}.csv")
    if elsewhere is None:
        return Path(directory), experiment, ""
    recorded, name = elsewhere
    return recorded, results.SWEEP, (f"This GPU has no TF32 tensor cores, so its run measured no 3xTF32 kernel: "
                                     f"the chapter shows the {name}'s recorded run.")  # fmt: skip


def standings(shown: Path) -> list[tuple[str, Any]]:
    """(GPU, where the kernels stand on it) for every GPU but the one whose run the chapter shows (the folder
    ``shown``) that recorded the chapter's full sweep with the 3xTF32 kernel in it; a quick run's two dozen
    problems leave out the large layers the medians are taken over, so it has none."""
    from convkit.study.results import recorded_folders
    from convkit.study.roofline import recorded_ceilings

    found = []
    for gpu, folder, stem in recorded_folders(results.SWEEP):
        if stem != results.SWEEP or folder.resolve() == Path(shown).resolve() or not measured_3xtf32(folder, stem):
            continue
        t = results.chapter_tables(folder, recorded_ceilings(folder) or {}, stem)
        found.append((gpu, results.standing(t)))
    return found
