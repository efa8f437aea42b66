"""A chapter's findings rows against its result box, for the chapters' tests (imported as a sibling module)."""

from __future__ import annotations

import re

#: The findings' fields that carry numbers (each must appear in the chapter's result box).
NUMBER_FIELDS = ("paper's number", "paper's design on the H100", "our best on the H100", "best library on the H100",
                 "efficiency")  # fmt: skip


def assert_findings_in_lines(rows, lines):
    """Every number of the findings rows (``1.42x``, ``20 of 26``, ``3,003``, ``63%``) is in the result lines."""
    box = " ".join(lines).replace("**", "")
    for row in rows:
        for field in NUMBER_FIELDS:
            for number in re.findall(r"\d[\d,.]*(?:x|%)?", row[field]):
                number = number.rstrip(".,")
                assert number in box, f"{row['claim']}: {field} gives {number}, the result box does not"
