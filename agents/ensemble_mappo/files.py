"""Atomic file writes: a temporary file in the same folder, flushed to disk, then renamed over the target.

A reader never sees a half-written checkpoint or README, whatever interrupts the writer.

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / "note.txt"
>>> atomic_write(path, lambda file: file.write(b"done"))
>>> path.read_bytes()
b'done'
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

__all__ = ["atomic_write"]


def atomic_write(path: str | Path, write: Callable[[IO[bytes]], Any]) -> None:
    """Call ``write(file)`` on a temporary binary file next to ``path``, then rename it to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, _default_mode())  # mkstemp makes the file private; give it the usual permissions
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _default_mode() -> int:
    """Permissions of a new file under the current umask (0o644 with the usual 022)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
