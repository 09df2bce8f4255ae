"""Atomic file writes: a temporary file in the same folder, synced to disk, then renamed over the target.

A reader never sees a half-written checkpoint or README, whatever interrupts the writer.

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / "note.txt"
>>> atomic_write(path, lambda file: file.write(b"done"))
>>> path.read_bytes()
b'done'
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from ensemble_env.files import atomic_path

__all__ = ["atomic_write"]


def atomic_write(path: str | Path, write: Callable[[IO[bytes]], Any]) -> None:
    """Call ``write(file)`` on a temporary binary file next to ``path``, then rename it to ``path``.

    The temporary file, its sync to disk, the rename and the removal of a killed writer's leftovers are
    :func:`ensemble_env.cache.atomic_path`'s.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as temporary, temporary.open("wb") as file:
        write(file)
