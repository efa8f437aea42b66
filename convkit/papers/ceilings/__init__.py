"""The GPU's ceilings: the roofline every chapter measures against, measured rather than looked up.

:mod:`.measure` takes each ceiling, checked before it is timed: device-to-device copy bandwidth, the FP32
FMA rate of an own kernel (``kernels/ceilings.cu``) and of cuBLAS SGEMM with TF32 off, the SM clock
under load, the time of an empty kernel, and the global-memory load latency by pointer chasing.
:func:`convkit.study.roofline.ceilings_summary` turns them into the numbers every chapter's floors use;
:mod:`.results` gives the chapter's table and verdict, :mod:`.edges` the sanitizer's launches.
"""

from __future__ import annotations

from pathlib import Path

from convkit.families.registry import Family
from convkit.papers.ceilings import claims
from convkit.papers.ceilings.edges import edge_check
from convkit.papers.ceilings.measure import EXPERIMENT, record
from convkit.papers.ceilings.results import findings
from convkit.papers.paper import Paper


def measure_repeat(directory: Path) -> None:
    """Every ceiling measured again, at the full run's sizes, into ``ceilings_repeat.csv`` (the quick run's smaller
    sizes measure other numbers): run in a fresh process, it gives the ceilings' run-to-run spread."""
    record(directory, experiment=f"{EXPERIMENT}_repeat")


PAPER = Paper(
    "ceilings", "The GPU's ceilings", "00_ceilings", EXPERIMENT, record,
    Family("ceilings", (), sources=("ceilings",)),  # its kernels measure the GPU, not a convolution
    convolutions=False, findings=findings, edge_check=edge_check, repeat=measure_repeat,
    claims=claims.claims,
)  # fmt: skip
