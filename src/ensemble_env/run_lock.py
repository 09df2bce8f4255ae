"""The one writer of a folder (a run directory): :class:`RunLock`, an ``fcntl.flock`` on ``run.lock`` that the kernel
releases when its holder dies, and :func:`holding_run_lock`, which makes a function hold it.

- :class:`RunLock`: taken by ``train`` (and the scripts that write a folder of runs) for the whole run; a second
  writer is refused with :class:`RunBusyError`, naming the holder (:func:`describe_holder`).
- :data:`LOCK_NAME`: the lock file, which records who holds it (pid, host, start time, command).

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp()) / "run"
>>> with RunLock(folder, command="ensemble-env train --out run") as lock:
...     (folder / LOCK_NAME).exists()
True
>>> (folder / LOCK_NAME).exists()
False
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import os
import shlex
import socket
import stat
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

from ensemble_env.filesystem import cause, file_id
from ensemble_env.text import show

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: msvcrt below
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_NAME", "RunBusyError", "RunLock", "describe_holder", "holding_run_lock"]

#: the lock file of a folder held by :class:`RunLock`
LOCK_NAME = "run.lock"


def _lock_error(path: str | os.PathLike[str], problem: str) -> ValueError:
    return ValueError(f"{path}: {problem}")


class RunBusyError(ValueError):
    """Another process works in the run directory; the message names it (pid, host, start time, command)."""


@dataclass
class _Holding:
    """A lock this process holds: the open lock file, the thread that took it, and how often it was re-entered."""

    fd: int
    thread: int
    depth: int


_HOLDINGS: dict[str, _Holding] = {}
_HOLDINGS_GUARD = threading.Lock()


class RunLock:
    """The exclusive lock of a run directory, held by one ``train`` for the whole run; a context manager.

    ``RunLock(run_dir).acquire()`` (or ``with RunLock(run_dir):``) creates the folder (unless ``create`` is
    False: then it must exist) and takes an exclusive ``fcntl.flock`` on ``run_dir/run.lock``, recording in
    the file who holds it: pid, host, start time (UTC) and ``command`` (default: this process's command line).
    A lock another process holds raises :class:`RunBusyError` naming that holder. The kernel releases a flock
    when its holder dies, by any signal, so a lock file left by a killed run is taken over; the dead holder's
    record is then :attr:`taken_over`. Releasing removes the file.

    Re-entrant in the thread that holds it (``train`` called inside the ``train`` command, which took the lock
    first); another thread, or another process, is refused. On NFS, ``flock`` works where the server supports
    locks (Linux maps it to POSIX locks); a filesystem without locks is refused with a message.
    """

    def __init__(self, run_dir: str | os.PathLike[str], *, create: bool = True, command: str | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_NAME
        self.create = create
        self.command = command if command is not None else _command_line()
        self.taken_over: dict[str, Any] | None = None
        """The record of a holder that died with the lock (a stale ``run.lock`` taken over), else None."""
        self._key: str | None = None

    def acquire(self) -> RunLock:
        if self._key is not None:
            raise RuntimeError(f"{self.path}: this RunLock is already held; make a new one")
        self._prepare_folder()
        key = os.path.realpath(self.path)
        with _HOLDINGS_GUARD:
            holding = _HOLDINGS.get(key)
            if holding is not None and holding.thread == threading.get_ident():
                holding.depth += 1
                self._key = key
                return self
        fd = self._lock()
        try:
            previous = _read_record(fd)
            self.taken_over = previous or None
            _write_record(fd, self.command)
        except OSError as error:
            _unlock(fd, self.path)
            raise _lock_error(self.path, f"cannot write the lock file ({cause(error)})") from None
        with _HOLDINGS_GUARD:
            _HOLDINGS[key] = _Holding(fd, threading.get_ident(), 1)
        self._key = key
        return self

    def release(self) -> None:
        key, self._key = self._key, None
        if key is None:
            return
        with _HOLDINGS_GUARD:
            holding = _HOLDINGS.get(key)
            if holding is None:  # released already, through the outer lock of this thread
                return
            holding.depth -= 1
            if holding.depth > 0:
                return
            del _HOLDINGS[key]
        _unlock(holding.fd, self.path)

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.release()

    def _prepare_folder(self) -> None:
        folder = self.run_dir
        if self.create:
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except FileExistsError:
                raise _lock_error(folder, "is a file, not a folder; a run directory is a folder") from None
            except OSError as error:
                raise _lock_error(folder, f"cannot create the run directory ({cause(error)})") from None
        elif not folder.exists():
            raise FileNotFoundError(f"{folder}: no such run directory")
        if not folder.is_dir():
            raise _lock_error(folder, "is a file, not a folder; a run directory is a folder")

    def _lock(self) -> int:
        """The open lock file, exclusively locked (a file that was removed meanwhile by its releasing holder is
        reopened)."""
        for _ in range(100):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK, 0o644)
            except OSError as error:
                raise _lock_error(self.path, f"cannot open the run's lock file ({cause(error)})") from None
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise _lock_error(self.path, "is not a regular file; remove it (it should be the run's lock file)")
            try:
                _lock_fd(fd)
            except BlockingIOError:
                record = _read_record(fd)
                os.close(fd)
                raise RunBusyError(_busy_message(self.run_dir, record)) from None
            except OSError as error:
                os.close(fd)
                raise _lock_error(
                    self.path,
                    f"cannot lock the run directory ({cause(error)}): does its filesystem support file locks?",
                ) from None
            if _same_file(fd, self.path):
                return fd
            os.close(fd)  # its holder removed it between our open and our lock: take the new one
        raise RunBusyError(f"{self.run_dir}: the lock changed hands 100 times while this process tried to take it")


def _command_line() -> str:
    """This process's command line, as a user would type it (``ensemble-env train --out runs/a ...``)."""
    words = list(sys.argv) or ["python"]
    if os.path.basename(words[0]) in ("ensemble-env", "__main__.py"):
        words[0] = "ensemble-env"
    elif words[0] == "-c":
        words[0] = "python -c ..."
    return " ".join([words[0], shlex.join(words[1:])]).strip()


if fcntl is not None:

    def _lock_fd(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError when another open file holds it

    def _unlock(fd: int, path: Path) -> None:
        """Remove the lock file (while still holding it, and only if it is still ours), then release it."""
        if _same_file(fd, path):
            with contextlib.suppress(OSError):
                os.unlink(path)
        os.close(fd)  # closing the last descriptor of the open file releases the flock

else:  # pragma: no cover - Windows: a lock on a byte far past the record, released by the OS when the holder dies
    import msvcrt

    _LOCKED_BYTE = 2**30

    def _lock_fd(fd: int) -> None:
        os.lseek(fd, _LOCKED_BYTE, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except PermissionError as error:
            raise BlockingIOError(str(error)) from None

    def _unlock(fd: int, path: Path) -> None:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # an open file cannot be removed on Windows: the empty file stays


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` (not followed, if a link) is the open file ``fd``."""
    here = os.fstat(fd)
    return file_id(path, follow_links=False) == (here.st_dev, here.st_ino)


def _read_record(fd: int) -> dict[str, Any]:
    """The holder's record in the lock file ({} when there is none or it cannot be read)."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = os.read(fd, 8192)
        record = json.loads(data.decode("utf-8")) if data.strip() else {}
    except (OSError, ValueError, RecursionError):
        return {}
    return record if isinstance(record, dict) else {}


def _write_record(fd: int, command: str) -> None:
    record = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": command,
    }
    data = (json.dumps(record) + "\n").encode("utf-8")
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, data)


def describe_holder(record: Mapping[str, Any]) -> str:
    """A lock record in words: ``pid 123 on host h, started 2025-01-01T10:00:00+00:00: ensemble-env train ...``."""
    pid = record.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool):
        return "a process that left no readable record in the lock file"
    text = f"pid {pid}"
    if isinstance(record.get("host"), str):
        text += f" on host {show(record['host'], 80)[1:-1]}"
    if isinstance(record.get("started"), str):
        text += f", started {show(record['started'], 40)[1:-1]}"
    if isinstance(record.get("command"), str):
        text += f": {show(record['command'], 300)[1:-1]}"
    return text


def _busy_message(run_dir: Path, record: Mapping[str, Any]) -> str:
    pid = record.get("pid")
    stop = f"stop it (kill {pid})" if isinstance(pid, int) and not isinstance(pid, bool) else "stop it"
    return (
        f"{run_dir} is in use by another training run ({describe_holder(record)}); two runs in one folder would mix "
        f"their config, log and checkpoint. Wait for it to end or {stop}, or train into another folder"
    )


P = ParamSpec("P")
R = TypeVar("R")


def holding_run_lock(parameter: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorator: the function runs holding the :class:`RunLock` of the run directory given as its argument
    ``parameter`` (re-entrant: a caller that holds it already, such as the ``train`` command, keeps it)."""

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(function)

        @functools.wraps(function)
        def locked(*args: P.args, **kwargs: P.kwargs) -> R:
            folder = signature.bind(*args, **kwargs).arguments[parameter]
            with RunLock(folder):
                return function(*args, **kwargs)

        return locked

    return decorate
