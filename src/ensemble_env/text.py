"""Text helpers shared by every part that writes a message or a table: :func:`show` (a bounded ``repr`` for
error messages), :func:`listed` (items in a sentence) and :func:`align_table` (the aligned text tables of the
command line and the reports).

>>> show("x" * 100, limit=10)
"'xxxxx..."
>>> listed(["results.json", "results.md", "the plot"])
'results.json, results.md and the plot'
>>> print(chr(10).join(align_table(["name", "score"], [["a", "1.0"], ["bb", "0.25"]])))
name  score
-----------
a       1.0
bb     0.25
"""

from __future__ import annotations

import reprlib
from collections.abc import Sequence
from typing import Any

__all__ = ["align_table", "listed", "show"]

_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 3, 80, 80, 40


def show(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters (for messages; the converters use it too).

    Only a bounded part of ``value`` is looked at: a prefix of a long string, three levels of nested
    containers, a few items of each (:mod:`reprlib`), so a huge or deeply nested value is shown quickly.
    """
    if isinstance(value, str | bytes):
        text = repr(value[:limit])
    elif isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        text = f"<an integer of about {int(value.bit_length() * 0.30103) + 1} digits>"
    else:
        text = _REPR.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def listed(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``: ``items`` (at least one) as a sentence lists them."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def align_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Lines of a plain-text table: first column left-aligned, the others right-aligned."""
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        rest = (cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True))
        return "  ".join([cells[0].ljust(widths[0]), *rest]).rstrip()

    return [line(header), "-" * (sum(widths) + 2 * (len(widths) - 1)), *(line(row) for row in rows)]
