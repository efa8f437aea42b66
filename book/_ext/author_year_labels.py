"""The bibliography's labels in the book's one citation style, author and year: "Chang et al., 2022" in the text
and in the list alike (pybtex's alphabetic labels, "COM22", "Grid.", read as codes). An entry without a person for
an author (a company's library) gives its ``shorthand`` field, "NVIDIA CUTLASS"."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from pybtex.plugin import register_plugin
from pybtex.richtext import Text
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.sorting import BaseSortingStyle


def _plain(latex: str) -> str:
    """BibTeX text as a reader reads it: accents decoded, braces dropped ("Jord{\\`a}" -> "Jordà")."""
    return Text.from_latex(latex).render_as("text")


def author_year(entry: Any) -> str:
    """An entry's label: "Grisett, n.d.", "Lavin and Gray, 2016", "Chang et al., 2022"; its ``shorthand`` where it
    has one."""
    if "shorthand" in entry.fields:
        return _plain(entry.fields["shorthand"])
    people = entry.persons.get("author", [])
    last = [Text(*p.rich_last_names).render_as("text") for p in people]
    others = bool(last) and last[-1] == "others"
    last = [name for name in last if name != "others"]
    if len(last) >= 3 or (others and last):
        names = f"{last[0]} et al."
    else:
        names = " and ".join(last)
    return f"{names}, {_plain(entry.fields.get('year', 'n.d.'))}"


class AuthorYearLabels(BaseLabelStyle):
    """:func:`author_year`, with a, b, ... after the year where two entries would share a label."""

    def format_labels(self, sorted_entries: Iterable[Any]) -> Iterator[str]:
        entries = list(sorted_entries)
        labels = [author_year(e) for e in entries]
        shared, seen = Counter(labels), Counter()
        for label in labels:
            if shared[label] > 1:
                seen[label] += 1
                yield f"{label}{chr(ord('a') + seen[label] - 1)}"
            else:
                yield label


class ByLabel(BaseSortingStyle):
    """Entries in the order of their labels, as a reader looks one up."""

    def sorting_key(self, entry: Any) -> tuple[str, str]:
        return author_year(entry).lower(), entry.fields.get("title", "")


class AuthorYearStyle(UnsrtStyle):
    """pybtex's plain entries, in the order of their labels, labelled by :class:`AuthorYearLabels`."""

    default_label_style = AuthorYearLabels
    default_sorting_style = ByLabel


def setup(app: Any) -> dict[str, bool]:
    register_plugin("pybtex.style.formatting", "author_year", AuthorYearStyle)
    return {"parallel_read_safe": True}
