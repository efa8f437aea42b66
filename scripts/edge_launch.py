"""Launch every registered paper's kernels once on edge shapes, for compute-sanitizer (scripts/sanitize.sh).

Each paper's ``edge_check`` launches its kernels on shapes no block or tile divides (C = 1, M = 1,
inputs smaller than the filter, stride 2, unaligned pointers where a kernel copies 16 bytes) and
checks every output against the float64 reference. ``python3 scripts/edge_launch.py [paper ...]``
runs the named papers only (``conv2d``: the op, its bias kernel and its replays).
"""

from __future__ import annotations

import sys

from convkit.papers import PAPERS

wanted = set(sys.argv[1:])
for paper in PAPERS:
    if paper.edge_check is not None and (not wanted or paper.name in wanted):
        print(f"edge launches: {paper.name}", flush=True)
        paper.edge_check()
if not wanted or "conv2d" in wanted:  # convkit.conv2d: its bias epilogue and its replays
    from convkit.papers.summary import edges

    print("edge launches: conv2d", flush=True)
    edges.edge_check()
