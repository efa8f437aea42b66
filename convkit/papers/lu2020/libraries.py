"""The Lu 2020 chapter against every library, past the paper (CPU only): each library's share of the roofline
floor and our best kernel's speed-up over it (:func:`library_efficiency`), the paper's "more than 2x" judged where
the floor allows it (:func:`claim_against_the_floor`), the kernel past the paper (:func:`past_the_paper`), and the
run-to-run spread within which two times tie (:func:`chapter_spread`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from convkit.papers.lu2020.loads import VARIANT_NAMES
from convkit.papers.lu2020.results import EXPERIMENT, LIBRARY_COLUMNS, REPEAT, TARGET_MIN_SIZE, in_target, tie_tolerance
from convkit.study import tables
from convkit.study.results import load_results


def chapter_spread(directory: Path) -> dict[str, float]:
    """The run-to-run spread (:func:`convkit.study.tables.spread`) of the single-channel sweep recorded in
    ``directory``: a sample of its images measured again in a fresh process; NaN where no repeat is recorded."""
    directory = Path(directory)
    if not (directory / f"{REPEAT}.csv").is_file():
        return {"cases": 0, "median": math.nan, "p95": math.nan}
    return tables.spread(load_results(directory, EXPERIMENT)[0], load_results(directory, REPEAT)[0])


def library_efficiency(single: Any, spread: dict[str, float] | None = None) -> Any:
    """Per library measured on the single-channel images (pandas, one row each, ours first: the best kernel, then
    the paper's design): the images it ran correctly, its share of the roofline floor (floor over time: median
    over every image and over the claim's images, :func:`convkit.papers.lu2020.results.in_target`), and our best
    kernel's speed-up over it (geometric mean, minimum) with the images where ours is faster and where the two tie
    (within the ``spread``'s 95th percentile, :func:`chapter_spread`)."""
    import pandas as pd

    ours = single["best_us"]
    tolerance = tie_tolerance(spread)
    target = single.index.isin(in_target(single).index)
    kernels = {"ours": "our best kernel", "lu_combined_us": f"the paper's design ({VARIANT_NAMES['lu_combined']})"}
    rows = []
    for column, name in {**kernels, **LIBRARY_COLUMNS}.items():
        times = ours if column == "ours" else single.get(column)
        if times is None or times.isna().all():
            continue
        measured = times.notna()
        share = single["floor_us"] / times
        row = {"library": name, "images": int(measured.sum()), "of floor, median (%)": 100 * share[measured].median(),
               "of floor, claim's images (%)": 100 * share[measured & target].median()}  # fmt: skip
        if column not in kernels:
            speedup = (times / ours)[measured]
            row |= {"our speed-up, geomean (x)": tables.geomean(speedup), "min (x)": speedup.min(),
                    "ours faster": f"{int((speedup > 1 + tolerance).sum())} of {len(speedup)}",
                    "ties": f"{tables.ties(speedup, tolerance)} of {len(speedup)}"}  # fmt: skip
        rows.append(row)
    return pd.DataFrame(rows)


def _spread_words(spread: dict[str, float] | None) -> str:
    """The spread in words, for the prose beside a count of ties."""
    if not spread or not spread.get("cases"):
        return "no sample was measured again, so no difference counts as a tie"
    return (f"{spread['cases']} cases measured again in a fresh process differ by {spread['median']:.1%} (median) "
            f"and {spread['p95']:.1%} (95th percentile); differences within the latter are ties")  # fmt: skip


def claim_against_the_floor(single: Any, spread: dict[str, float] | None = None) -> str:
    """Markdown: the paper's "more than 2x over image-processing libraries" judged image by image against the
    fastest library, and where the roofline floor leaves no room for 2x (the library already within 2x of it)."""
    ours, fastest = single["best_us"], single["best_lib_us"]
    room = fastest / single["floor_us"]  # the largest speed-up any kernel could have over the fastest library
    no_room = room < 2
    speedup = fastest / ours
    tolerance = tie_tolerance(spread)
    slower = speedup < 1 - tolerance
    names = sorted({name for name in single["best_lib"] if name})
    behind = "; ".join(f"{r.label} ({r.best_lib}, {speedup[i]:.2f}x)" for i, r in single[slower].iterrows())
    return (f"Against the fastest library on each image ({', '.join(names)}), our best kernel is faster on "
            f"{int((speedup > 1 + tolerance).sum())} of {len(single)} images and ties on "
            f"{tables.ties(speedup, tolerance)} (from {speedup.min():.2f}x to {speedup.max():.2f}x; "
            f"{_spread_words(spread)})" + (f"; it is behind on {behind}" if behind else "")
            + f". It is more than 2x faster on {int((speedup > 2).sum())}. On "
            f"{int(no_room.sum())} of them the fastest library already runs within 2x of the roofline floor, so "
            f"no kernel could be 2x faster there; where the floor leaves room for 2x "
            f"({int((~no_room).sum())} images), ours reaches it on {int((speedup[~no_room] > 2).sum())}.")  # fmt: skip


def past_the_paper(single: Any) -> str:
    """Markdown: what the kernel past the paper (four columns a lane) reaches against the floor and against the
    paper's design, per filter width on the images from :data:`TARGET_MIN_SIZE`."""
    wide, combined = VARIANT_NAMES["lu_wide"], VARIANT_NAMES["lu_combined"]
    large = single[single["size"] >= TARGET_MIN_SIZE]
    shares = large["floor_us"] / large["lu_wide_us"]
    parts = []
    for k, rows in large.groupby("K"):
        share = shares[rows.index]
        gain = rows["lu_combined_us"] / rows["lu_wide_us"]
        parts.append(f"{k}x{k}: {share.min():.0%} to {share.max():.0%} of the floor, {gain.min():.2f}x to "
                     f"{gain.max():.2f}x faster than {combined}")  # fmt: skip
    wins = single["best_kernel"] == wide
    text = f"From {TARGET_MIN_SIZE}x{TARGET_MIN_SIZE} up, {wide}: " + "; ".join(parts)
    if shares.max() > 1:
        text += (" (above 100% where the image and its output stay in the L2 cache: the floor counts their bytes at "
                 "the DRAM copy bandwidth, a bound L2-resident data can beat)")  # fmt: skip
    text += f". It is the fastest kernel on {int(wins.sum())} of {len(single)} images"
    if len(single[~wins]) and (single.loc[~wins, "size"] < TARGET_MIN_SIZE).all():
        text += (f"; on the others, all below {TARGET_MIN_SIZE}x{TARGET_MIN_SIZE}, a kernel of the paper's ladder is "
                 "faster: with 128 columns a warp, a small image gives too few blocks to fill the GPU")  # fmt: skip
    return text + "."
