"""How the book shows numbers: one table formatter, result boxes and collapsed sections, as HTML.

Every table a chapter shows passes through :func:`table`: readable headers with units, about three
significant digits, a dash (with a footnote saying why) where there is no number, short text for
launch parameters and long kernel names (the full name in a footnote). :func:`result_box` is the
admonition a chapter opens with; :func:`dropdown` folds method detail and large tables away.
Each returns an object Jupyter renders as HTML (and as plain text in a terminal).
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: A cell with no number.
DASH = "–"
#: Longest text shown in a cell; longer text (kernel names) is cut and given in full in a footnote.
MAX_CELL = 40
#: Words that stay as they are in headers (snake_case is otherwise turned into words).
_KEEP = {"us": "us", "ms": "ms", "gflop": "GFLOP", "tflops": "TFLOP/s", "gbps": "GB/s", "cudnn": "cuDNN",
         "pytorch": "PyTorch", "lib": "library", "k": "K", "n": "N", "c": "C", "m": "M", "h": "H",
         "w": "W"}  # fmt: skip
_UNIT_SUFFIX = {"_us": "us", "_ms": "ms", "_tflops": "TFLOP/s", "_gbps": "GB/s", "_gflop": "GFLOP", "_pct": "%"}


@dataclass(frozen=True)
class Shown:
    """HTML for the book, plain text for a terminal."""

    markup: str
    text: str = ""

    def _repr_html_(self) -> str:
        return self.markup

    def __repr__(self) -> str:
        return self.text or re.sub(r"<[^>]+>", "", self.markup)


def header(column: str, units: Mapping[str, str] | None = None) -> str:
    """A readable header: ``best_cudnn_us`` -> ``best cuDNN (us)``; ``units`` overrides the unit."""
    name, unit = str(column), (units or {}).get(str(column))
    for suffix, guessed in _UNIT_SUFFIX.items():
        if unit is None and name.endswith(suffix):
            name, unit = name[: -len(suffix)], guessed
    if "_" in name or name.islower():
        name = " ".join(_KEEP.get(word, word) for word in name.split("_"))
    return f"{name} ({unit})" if unit else name


def number(value: float, digits: int = 3) -> str:
    """About ``digits`` significant digits, thousands separated, no trailing exponent noise."""
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    if magnitude >= 6:  # counts: 9.77 G, not 9,773,980,000
        prefix = min(magnitude // 3, 4)
        return f"{value / 10 ** (3 * prefix):.{digits}g} {' kMGT'[prefix]}"
    if magnitude >= digits - 1:
        return f"{round(value):,}"
    decimals = max(0, digits - 1 - magnitude)
    if decimals > 6:
        return f"{value:.{digits - 1}e}"
    return f"{value:,.{decimals}f}"


def params_text(params: str) -> str:
    """A launch's recorded knobs (JSON) as short text: ``tile 64x64, splits 13``."""
    try:
        knobs = json.loads(params)
    except (TypeError, ValueError):
        return str(params)
    if not isinstance(knobs, dict):
        return str(params)
    if not knobs:
        return "defaults"

    def value(v: Any) -> str:
        if isinstance(v, list | tuple):
            return "x".join(str(x) for x in v)
        if isinstance(v, bool):
            return "yes" if v else "no"
        return str(v)

    return ", ".join(f"{k.replace('_', ' ')} {value(v)}" for k, v in knobs.items())


def _missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return bool(math.isnan(value))
    except TypeError:
        return str(value).strip().lower() in ("", "nan", "<na>", "none")


class _Notes:
    """Footnotes collected while formatting one table."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def mark(self, text: str) -> str:
        if text not in self.texts:
            self.texts.append(text)
        return f"<sup>{self.texts.index(text) + 1}</sup>"


def _cell(value: Any, notes: _Notes, missing_why: str, digits: int, max_cell: int = MAX_CELL) -> str:
    if _missing(value):
        return DASH + notes.mark(missing_why)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, float):
        return number(value, digits)
    text = str(value)
    if text.startswith("{") and text.endswith("}"):
        text = params_text(text)
    if len(text) > max_cell:
        return html.escape(text[: max_cell - 1]) + "…" + notes.mark(html.escape(text))
    return html.escape(text)


def table(
    frame: Any,
    *,
    units: Mapping[str, str] | None = None,
    digits: int = 3,
    missing: str = "not measured, or no correct run",
    index: bool | None = None,
    caption: str = "",
    columns: Iterable[str] | None = None,
    max_cell: int = MAX_CELL,
) -> Shown:
    """A pandas frame as the book's table.

    Args:
        frame: the numbers; its index is shown when it is not a plain range (or as ``index`` says).
        units: unit per column where the column's name does not end in one (``_us``, ``_ms``, ...).
        digits: significant digits of every float.
        missing: the footnote of a dash (why a cell has no number).
        caption: a line above the table.
        columns: the columns to show, in order (default: all).
        max_cell: longest text shown in a cell (longer is cut, the full text in a footnote); raise it for
            tables of prose.
    """
    import pandas as pd

    frame = frame if columns is None else frame[list(columns)]
    show_index = index if index is not None else not isinstance(frame.index, pd.RangeIndex)
    if show_index:
        frame = frame.reset_index()
    notes = _Notes()
    head = "".join(f"<th>{html.escape(header(c, units))}</th>" for c in frame.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{_cell(v, notes, missing, digits, max_cell)}</td>" for v in row) + "</tr>"
        for row in frame.itertuples(index=False)
    )
    foot = "".join(f"<li>{t}</li>" for t in notes.texts)
    markup = ('<div class="convkit-table">' + (f"<p><strong>{html.escape(caption)}</strong></p>" if caption else "")
              + f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
              + (f'<ol class="table-notes">{foot}</ol>' if foot else "") + "</div>")  # fmt: skip
    text = frame.to_string(index=False)
    return Shown(markup, text)


def result_box(title: str, lines: Iterable[str]) -> Shown:
    """The admonition a chapter opens with: the paper's claim, our number, the verdict (HTML-escaped lines;
    ``**bold**`` is kept)."""
    bold = re.compile(r"[*][*](.+?)[*][*]")
    items = "".join("<li>" + bold.sub(r"<strong>\1</strong>", html.escape(line)) + "</li>" for line in lines)
    markup = (f'<div class="admonition tip result"><p class="admonition-title">{html.escape(title)}</p>'
              f"<ul>{items}</ul></div>")  # fmt: skip
    return Shown(markup, title + "\n" + "\n".join(f"- {line}" for line in lines))


def dropdown(summary: str, *parts: Any) -> Shown:
    """A collapsed section: ``parts`` (:class:`Shown`, objects with ``_repr_html_``, or text) behind ``summary``."""
    inner = []
    for part in parts:
        if hasattr(part, "_repr_html_"):
            inner.append(part._repr_html_())
        else:
            inner.append(f"<p>{html.escape(str(part))}</p>")
    markup = f'<details class="convkit-dropdown"><summary>{html.escape(summary)}</summary>{"".join(inner)}</details>'
    return Shown(markup, summary)
