"""Launch every kernel family's kernels once on edge shapes, for compute-sanitizer (scripts/sanitize.sh).

Each family's ``edge_check`` (the registry's, :data:`convkit.families.FAMILIES`) launches its kernels on shapes
no block or tile divides (C = 1, M = 1, inputs smaller than the filter, stride 2, unaligned pointers where a kernel
copies 16 bytes) and checks every output against the float64 reference; then each chapter's own (the ceilings'
probes, the fused layer's), then the op's. ``python3 scripts/edge_launch.py [name ...]`` runs the named families and
chapters only (``conv2d``: the op, its bias kernel and its replays).
"""

from __future__ import annotations

import sys

from convkit.families import FAMILIES
from convkit.papers import PAPERS

wanted = set(sys.argv[1:])
checks = [(f.name, f.edge_check) for f in FAMILIES] + [(p.name, p.edge_check) for p in PAPERS]
for name, check in checks:
    if check is not None and (not wanted or name in wanted):
        print(f"edge launches: {name}", flush=True)
        check()
if not wanted or "conv2d" in wanted:  # convkit.conv2d: its bias epilogue and its replays
    from convkit.papers.summary import edges

    print("edge launches: conv2d", flush=True)
    edges.edge_check()
