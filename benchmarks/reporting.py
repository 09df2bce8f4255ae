"""Small helpers of the benchmark scripts: mean +- std cells and marked blocks of ``benchmarks/README.md``.

The scripts run as ``python benchmarks/NAME.py`` and import this module as a sibling (``from reporting import ...``).

The README's ``## MAPPO`` section holds blocks between ``<!-- mappo:NAME -->`` and ``<!-- /mappo:NAME -->``
lines; a script regenerates its own block and leaves the rest of the file (other sections) alone.

>>> mean_std([0.5, 0.6, 0.7]), mean_std([0.25, 0.25])
('0.600 ± 0.082', '0.250')
>>> replace_block("# Benchmarks\\n", "speed", "fast")
'# Benchmarks\\n\\n## MAPPO\\n\\n<!-- mappo:speed -->\\nfast\\n<!-- /mappo:speed -->\\n'
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ensemble_env.cache.convert.common import decode_text, read_input
from ensemble_env.files import write_text

__all__ = ["SECTION", "mean_std", "replace_block", "write_block"]

#: the heading of the MAPPO section of benchmarks/README.md
SECTION = "## MAPPO"


def mean_std(values: Sequence[float] | np.ndarray, digits: int = 3) -> str:
    """``"mean ± std"`` (population std over the seeds); just the value when they are all equal."""
    array = np.asarray(values, dtype=np.float64)
    if array.size == 1 or np.all(array == array[0]):
        return f"{array[0]:.{digits}f}"
    return f"{array.mean():.{digits}f} ± {array.std():.{digits}f}"


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with block ``name`` replaced by ``body`` (added at the end of the MAPPO section if absent)."""
    start, end = f"<!-- mappo:{name} -->", f"<!-- /mappo:{name} -->"
    block = f"{start}\n{body.strip()}\n{end}"
    if start in text and end in text:
        before, rest = text.split(start, 1)
        _, after = rest.split(end, 1)
        return before + block + after
    lines = text.splitlines()
    if SECTION not in lines:
        return text.rstrip("\n") + f"\n\n{SECTION}\n\n{block}\n"
    heading = lines.index(SECTION)
    following = next((i for i in range(heading + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    section = "\n".join(lines[heading:following]).rstrip("\n")
    merged = [*lines[:heading], section + f"\n\n{block}\n", *lines[following:]]
    return "\n".join(merged).rstrip("\n") + "\n"


def write_block(path: str | Path, name: str, body: str) -> None:
    """Replace block ``name`` of the file at ``path`` (created if missing), atomically; the file is read as the
    converters read their inputs (a regular UTF-8 file within the size limit: never a FIFO or a device)."""
    path = Path(path)
    text = decode_text(path, read_input(path)) if os.path.lexists(path) else "# Benchmarks\n"
    write_text(path, replace_block(text, name, body))
