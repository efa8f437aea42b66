"""The Winograd-on-wgmma probe's layer logs read together (its thirds run in separate processes and calls): the median
of each column over every layer, the Hopper family's best per layer (Winograd on wgmma at any tile, either side of the
inputs' split, or the direct split-ahead kernel), and the inputs split as staged against split ahead, layer by layer.
Prints; records nothing.

    python3 scripts/winograd_logs.py results/<gpu>/logs/winograd_wgmma*.log [--against OLDER.log ...]
        [--before OLDER.log ...]

``--against``: the split-ahead rows taken from those logs instead (an older commit's, where this one's are not to be
compared), each layer's columns otherwise from the first logs. ``--before``: each family's best per layer against
those logs' (an older commit's run) on the layers both hold, the median ratio and the medians; the columns no change
touched (cuDNN, FP32 Winograd) show the run-to-run drift between the two.
"""

from __future__ import annotations

import argparse
import re
import statistics
from collections.abc import Callable
from pathlib import Path

LINE = re.compile(r"(\S+ pad=\d+ stride=\d+) \((\d+) GFLOP\): (.*)")
RATE = re.compile(r"(.*?)\s+([\d.]+)$")


def layer_rates(paths: list[str]) -> dict[str, dict[str, float]]:
    """Each layer's TFLOP/s by column, from the probe's lines ``<layer> (<n> GFLOP): <column> <rate>; ...`` (its
    errors, ``<column> error <e>``, left out)."""
    rates: dict[str, dict[str, float]] = {}
    for path in paths:
        for line in Path(path).read_text().splitlines():
            if match := LINE.match(line.strip()):
                parts = (RATE.match(part.strip()) for part in match.group(3).split(";") if " error " not in part)
                rates[match.group(1)] = {m.group(1): float(m.group(2)) for m in parts if m}
    return rates


def staged(column: str) -> bool:
    """Whether ``column`` is a launch whose inputs are split as staged."""
    return "split staged" in column


def winograd(column: str) -> bool:
    """Whether ``column`` is Winograd on wgmma (``F(m) wgmma...``)."""
    return " wgmma" in column


def best(rates: dict[str, float], keep: Callable[[str], bool]) -> float | None:
    """The highest rate of the columns ``keep`` holds, or None where there is none."""
    chosen = [rate for column, rate in rates.items() if keep(column)]
    return max(chosen) if chosen else None


def main(paths: list[str], older: list[str]) -> None:
    rates = layer_rates(paths)
    ahead_rates = layer_rates(older) if older else rates
    columns = dict.fromkeys(column for layer in rates.values() for column in layer)
    print(f"{len(rates)} layers")
    for column in columns:
        values = [layer[column] for layer in rates.values() if column in layer]
        print(f"  {column:40s} median {statistics.median(values):6.1f} over {len(values)}")
    hopper, ratios = [], []
    for name, layer in rates.items():
        ahead = best(ahead_rates.get(name, {}), lambda c: winograd(c) and not staged(c))
        split_staged = best(layer, lambda c: winograd(c) and staged(c))
        candidates = [r for r in (ahead, split_staged, layer.get("direct split ahead")) if r is not None]
        if candidates:
            hopper.append(max(candidates))
        if ahead and split_staged:
            ratios.append(split_staged / ahead)
    if hopper:
        at_120 = sum(rate >= 120 for rate in hopper)
        print(f"the Hopper family's best per layer: median {statistics.median(hopper):.1f}, {at_120} layers at 120+")
    if ratios:
        faster, slower = sum(r > 1.05 for r in ratios), sum(r < 0.95 for r in ratios)
        print(f"inputs split staged against split ahead{' (older logs)' if older else ''}, best tile each, "
              f"{len(ratios)} layers: faster by 5%+ on {faster}, slower by 5%+ on {slower}, "
              f"within on {len(ratios) - faster - slower}; median ratio {statistics.median(ratios):.2f}")  # fmt: skip


#: The families :func:`compare` sets side by side: each one's best column per layer.
FAMILIES: dict[str, Callable[[str], bool]] = {
    "Winograd on wgmma, inputs split ahead": lambda c: winograd(c) and not staged(c),
    "Winograd on wgmma, inputs split staged": lambda c: winograd(c) and staged(c),
    "the Hopper family": lambda c: winograd(c) or c == "direct split ahead",
    "direct split ahead": lambda c: c == "direct split ahead",
    "FP32 Winograd": lambda c: c == "FP32 Winograd",
    "mma.sync Winograd": lambda c: c == "mma.sync Winograd",
    "cuDNN fastest": lambda c: c == "cuDNN fastest",
}


def compare(paths: list[str], before: list[str]) -> None:
    """Each of :data:`FAMILIES`' best per layer in ``paths`` against ``before`` on the layers both hold."""
    now, then = layer_rates(paths), layer_rates(before)
    common = [name for name in now if name in then]
    print(f"against the older logs, {len(common)} layers in both (median of the ratios; the medians now and then)")
    for family, keep in FAMILIES.items():
        pairs = [(best(now[name], keep), best(then[name], keep)) for name in common]
        pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
        if pairs:
            ratio = statistics.median(a / b for a, b in pairs)
            now_median, then_median = (statistics.median(side) for side in zip(*pairs, strict=True))
            print(f"  {family:40s} {ratio:5.3f}x over {len(pairs):3d}: {now_median:6.1f} against {then_median:6.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="The Winograd-on-wgmma probe's layer logs read together.")
    parser.add_argument("logs", nargs="+")
    parser.add_argument("--against", nargs="+", default=[], help="split-ahead rows from these logs instead")
    parser.add_argument("--before", nargs="+", default=[], help="each family against these (older) logs")
    args = parser.parse_args()
    main(args.logs, args.against)
    if args.before:
        compare(args.logs, args.before)
