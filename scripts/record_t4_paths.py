"""Record a part of the T4-paths run (scripts/t4_paths.sh) in results/<this GPU>/t4_paths.json.

Usage: record_t4_paths.py --pytest JUNIT_XML [test files...] | --sanitizer LOG. Runs on the GPU that ran the
part; the provenance is that run's (its device name says ``as compute_75``).
"""

from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET

from convkit.core.gpu import gpu_slug
from convkit.core.paths import replace_text
from convkit.study import provenance
from convkit.study.checkout import results_dir

#: How a pytest part's key begins; the test files follow.
PYTEST = "pytest -m gpu "


def pytest_counts(path: str) -> dict[str, int]:
    suites = ET.parse(path).getroot()
    suite = suites if suites.tag == "testsuite" else suites.find("testsuite")
    total, failures, errors, skipped = (int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped"))
    return {"passed": total - failures - errors - skipped, "failed": failures, "errors": errors, "skipped": skipped}


def sanitizer_counts(path: str) -> dict[str, int]:
    text = open(path).read()
    tools = re.findall(r"== compute-sanitizer --tool (\w+)", text)
    exits = [int(e) for e in re.findall(r"exit (\d+)", text)]
    errors = sum(int(n) for n in re.findall(r"ERROR SUMMARY: (\d+) error", text))
    hazards = sum(int(n) for n in re.findall(r"RACECHECK SUMMARY: (\d+) hazard", text))
    return {"tools": len(tools), "tools_clean": sum(e == 0 for e in exits), "errors": errors, "race_hazards": hazards}


def main(argv: list[str]) -> None:
    prov = provenance.collect()
    real_gpu = gpu_slug(prov["gpu"].split(" as ")[0])  # the GPU's own folder, not the "... as compute_75" name
    path = results_dir() / real_gpu / "t4_paths.json"
    doc = json.loads(path.read_text()) if path.exists() else {"experiment": "t4_paths", "parts": {}}
    if argv[0] == "--sanitizer":
        key, counts = "compute-sanitizer (memcheck, racecheck, initcheck, synccheck)", sanitizer_counts(argv[1])
    else:
        key, counts = PYTEST + (" ".join(argv[2:]) or "tests"), pytest_counts(argv[1])
        covered = set(argv[2:])  # an earlier part whose test files this run covers again is superseded by it
        doc["parts"] = {k: v for k, v in doc["parts"].items()
                        if not (k.startswith(PYTEST) and set(k[len(PYTEST):].split()) <= covered)}  # fmt: skip
    doc["parts"][key] = {"counts": counts, "provenance": prov}
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_text(path, json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(f"{key}: {counts} -> {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
