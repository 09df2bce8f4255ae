"""Writing files safely: every file the project writes (caches, reports, plots, run directories) goes
through :func:`atomic_path` or one of the helpers built on it, so a failure or a crash never leaves a partial
file where a complete one was expected.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> write_text(folder / "config.json", "{}")
PosixPath('...config.json')
>>> (folder / "config.json").read_text()
'{}'
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["atomic_path", "save_figure", "write_bytes", "write_text"]

#: the temporary files of :func:`atomic_path`: ``.<name>.<pid>.<8 random characters>.tmp`` beside the target
_TEMPORARY = ".{name}.{pid}."
_TEMPORARY_SUFFIX = ".tmp"


def _remove_stale_temporaries(target: Path) -> None:
    """Remove the temporary files of ``target`` left by writers that were killed (their process is gone)."""
    pattern = re.compile(re.escape(f".{target.name}.") + r"(\d+)\.[a-z0-9_]{8}" + re.escape(_TEMPORARY_SUFFIX))
    try:
        names = os.listdir(target.parent)
    except OSError:
        return
    for name in names:
        match = pattern.fullmatch(name)
        if match is None or _process_alive(int(match.group(1))):
            continue
        with contextlib.suppress(OSError):
            (target.parent / name).unlink()


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # someone else's process (or we cannot tell): leave its file alone
    return True


def _sync(path: Path, directory: bool = False) -> None:
    """Flush a file (or a folder's entries) to disk; folders are skipped where they cannot be opened."""
    try:
        handle = os.open(path, os.O_RDONLY if directory else os.O_RDWR)
    except OSError:
        if directory:
            return  # e.g. Windows: folders cannot be opened, and renames are durable there
        raise
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path in the folder of ``path`` to write to; synced to disk and renamed to ``path`` when the
    block ends normally (with the usual permissions for the umask), removed when it raises (any exception,
    KeyboardInterrupt too).

    The temporary file is ``.<name>.<pid>.<random>.tmp`` beside ``path``. One left by a writer that was
    killed (its process no longer runs) is removed at the next write of the same ``path``. The folder must
    exist (FileNotFoundError otherwise). An existing file at ``path`` is replaced only once the new one is
    complete and on disk, so a failure or a crash never leaves a partial file at ``path``.
    """
    target = Path(path)
    if not target.parent.is_dir():
        raise FileNotFoundError(f"{target.parent}: folder does not exist (cannot write {target.name})")
    _remove_stale_temporaries(target)
    prefix = _TEMPORARY.format(name=target.name, pid=os.getpid())
    handle, name = tempfile.mkstemp(dir=target.parent, prefix=prefix, suffix=_TEMPORARY_SUFFIX)
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        _sync(temporary)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # mkstemp creates 0600; give the file the usual permissions
        os.replace(temporary, target)
        _sync(target.parent, directory=True)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_path`); returns the path."""
    with atomic_path(path) as temporary:
        temporary.write_text(text, encoding="utf-8")
    return Path(path)


def write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (:func:`atomic_path`); returns the path."""
    with atomic_path(path) as temporary:
        temporary.write_bytes(data)
    return Path(path)


def save_figure(figure: Any, path: str | os.PathLike[str]) -> Path:
    """Write a matplotlib figure as PNG atomically (:func:`atomic_path`), without a timestamp in its metadata."""
    with atomic_path(path) as temporary:
        figure.savefig(temporary, format="png", metadata={"Software": None})
    return Path(path)
