"""Ship a GPU's dispatch table under another GPU's name (in a copy of the tree): that GPU then has no shipped
table, as every GPU but the H100 today, while its layers stay the common layers ``convkit prebuild`` builds the
first-use tuner's kernels for. Usage: python scripts/ship_as_other_gpu.py GPU"""

from __future__ import annotations

import json
import sys

from convkit.core.shipped import shipped_path

OTHER = "simulated-other-gpu"

if __name__ == "__main__":
    path = shipped_path(sys.argv[1])
    document = json.loads(path.read_text())
    document["gpu"] = OTHER
    shipped_path(OTHER).write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    path.unlink()
    print(f"{path.name} now ships as {OTHER}: {sys.argv[1]} has no table")
