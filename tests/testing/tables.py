"""Reading the commands' plain-text tables in the tests: a table's rows, and the decimals each column is written
with (a column keeps one format)."""

from __future__ import annotations

import re


def table_rows(text: str, header_start: str) -> list[list[str]]:
    """The rows of the plain-text table whose header line starts with ``header_start`` (up to a blank line or a line
    of text, such as the notes under the baselines table)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) < 2:
            break
        rows.append(cells)
    return rows


def decimals_per_column(rows: list[list[str]]) -> dict[int, set[int]]:
    """Per column, the numbers of decimals its numbers are written with."""
    decimals: dict[int, set[int]] = {}
    for row in rows:
        for column, cell in enumerate(row):
            if re.fullmatch(r"[+-]?\d+\.\d+", cell):
                decimals.setdefault(column, set()).add(len(cell.split(".")[1]))
    return decimals
