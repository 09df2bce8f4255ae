"""Reading HDF5 files that carry no checksums under a time limit: a helper process reads them first.

HDF5 checks nothing in the metadata of its older file formats (superblock 0 or 1, what h5py writes by default)
or in variable-length strings: one corrupted byte there can make the library loop forever inside a call that
Python cannot interrupt. :func:`ensemble_env.cache.hdf5.read_cache_file` therefore hands such a file to
:func:`check` before reading it itself: a helper process reads the whole file with the very same code and
reports each field it reaches. If it answers in time the file is safe to read (HDF5 is deterministic on the
same bytes); if it does not, it is killed and the file refused with a :class:`~ensemble_env.cache.CacheError`
naming the field it was stuck in; if it dies (HDF5 crashed on the file), the file is refused too.

The helper is started once per process, on the first file that needs it, and kept for the next ones (it
starts in a fraction of a second: it imports numpy, h5py and the cache modules, not the environment). It
speaks JSON, one object a line, on its standard input and output; nothing is pickled.

The helper never outlives its parent (a helper stuck in a file would otherwise spin at 100% CPU forever once
its parent is gone, e.g. killed with SIGKILL):

- Linux: before it imports or reads anything, the helper asks the kernel to SIGKILL it when its parent dies
  (``prctl(PR_SET_PDEATHSIG, SIGKILL)`` through ctypes), then checks that its parent is still the process that
  started it (``os.getppid()``), which closes the race of a parent dying before the request. The kernel sends
  that signal when the *thread* that started the helper ends, so helpers are started from one thread that lives
  as long as the process (:class:`_Spawner`), never from a caller's thread (a thread pool's worker would take
  its helper with it when it ends).
- Every POSIX system (macOS and the BSDs included, which have no parent-death signal): an idle helper sees its
  standard input close when its parent dies and exits; a helper reading a file sets an alarm first
  (``signal.alarm``, left to its default action, which the kernel carries out even while HDF5 spins without
  returning to Python) at twice the parent's time limit plus :data:`ALARM_GRACE_SECONDS`, so a helper stuck
  without a parent is killed at most that long after it began the file. While its parent lives, the parent
  kills it first, at the time limit.
- Windows has neither: there a helper stuck in a file when its parent is killed outlives it, until it is ended
  by hand (the guard only runs on files without checksums, which :func:`ensemble_env.cache.save_cache` never
  writes).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from ensemble_env.cache.logit_cache import CacheError

__all__ = ["ALARM_GRACE_SECONDS", "alarm_seconds", "check", "default_timeout"]

#: seconds the helper may take to start (import numpy and h5py) before it is given up
_START_SECONDS = 120.0
#: a helper reading a file kills itself (SIGALRM) after twice the parent's time limit plus this (see above)
ALARM_GRACE_SECONDS = 2
_BOOTSTRAP = (
    "import os, sys\n"
    "if sys.platform.startswith('linux'):  # die with the parent (PR_SET_PDEATHSIG = 1), before anything else\n"
    "    import ctypes, signal\n"
    "    words = [ctypes.c_ulong(value) for value in (signal.SIGKILL, 0, 0, 0)]\n"
    "    try:\n"
    "        ctypes.CDLL(None).prctl(1, *words)\n"
    "    except (OSError, AttributeError):  # no prctl to call: the alarm of serve() still bounds a stuck read\n"
    "        pass\n"
    "if os.getppid() != int(sys.argv[3]):\n"
    "    sys.exit('the process that started this helper is gone')  # it died before the request\n"
    "import json, types\n"
    "sys.path[:] = json.loads(sys.argv[1])\n"
    "package = types.ModuleType('ensemble_env')\n"
    "package.__path__ = [sys.argv[2]]\n"
    "sys.modules['ensemble_env'] = package  # the cache modules only, not the package's environment\n"
    "from ensemble_env.cache.hdf5 import serve\n"
    "serve()\n"
)


def default_timeout(size: int) -> float:
    """Seconds a file of ``size`` bytes may take to read: 20 s plus 1 s per 20 MB (begun)."""
    return 20.0 + math.ceil(size / 20e6)


def alarm_seconds(timeout: float) -> int:
    """The helper's own alarm for a read its parent allows ``timeout`` seconds: twice that plus
    :data:`ALARM_GRACE_SECONDS`, in whole seconds (at most what ``signal.alarm`` takes)."""
    if not math.isfinite(timeout):
        return 2**31 - 1
    return int(min(math.ceil(2 * max(timeout, 0.0)) + ALARM_GRACE_SECONDS, 2**31 - 1))


class _Spawner:
    """A thread that starts the helper processes and lives as long as the process.

    On Linux a child's parent-death signal is sent when the *thread* that started it ends, not the process;
    starting every helper from this thread ties the helper's life to the process's, whichever thread asks.
    """

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.requests: queue.Queue[tuple[list[str], queue.Queue[Any]]] = queue.Queue()
        threading.Thread(target=self._serve, name="ensemble-env-guard-spawner", daemon=True).start()

    def _serve(self) -> None:
        while True:
            command, reply = self.requests.get()
            try:
                reply.put(
                    subprocess.Popen(
                        command,
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT,
                        text=True,
                        encoding="utf-8",
                        errors="replace",
                        bufsize=1,
                    )
                )
            except BaseException as error:  # handed to the caller, raised there
                reply.put(error)

    def start(self, command: list[str]) -> subprocess.Popen[str]:
        reply: queue.Queue[Any] = queue.Queue(maxsize=1)
        self.requests.put((command, reply))
        result = reply.get()
        if isinstance(result, BaseException):
            raise result
        return result  # type: ignore[no-any-return]


_spawner_lock = threading.Lock()
_spawner: _Spawner | None = None


def _start(command: list[str]) -> subprocess.Popen[str]:
    """Start ``command`` with pipes from the process's spawner thread (a new one after a fork)."""
    global _spawner
    with _spawner_lock:
        if _spawner is None or _spawner.pid != os.getpid():
            _spawner = _Spawner()
        spawner = _spawner
    return spawner.start(command)


class _Helper:
    """The helper process and a thread that queues its output lines; ``command`` starts another helper
    (tests do, to play a helper that hangs or dies)."""

    def __init__(self, command: list[str] | None = None) -> None:
        paths = [entry for entry in sys.path if entry]
        package = str(Path(__file__).resolve().parent.parent)  # the ensemble_env folder
        self.process = _start(
            command or [sys.executable, "-c", _BOOTSTRAP, json.dumps(paths), package, str(os.getpid())]
        )
        self.pid = os.getpid()
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.notes: list[str] = []
        stdout: IO[str] = self.process.stdout  # type: ignore[assignment]
        threading.Thread(target=self._pump, args=(stdout,), daemon=True).start()
        reply = self._next(time.monotonic() + _START_SECONDS)
        if reply is None or "ready" not in reply:
            self.stop()
            raise RuntimeError(
                "the helper process that reads HDF5 files without checksums did not start"
                + (f": {self.notes[-1]}" if self.notes else "")
            )

    def _pump(self, stdout: IO[str]) -> None:
        with stdout:
            for line in stdout:
                self.lines.put(line)
        self.lines.put(None)

    def _next(self, deadline: float) -> dict[str, Any] | None:
        """The helper's next message; None at its end; raises TimeoutError after ``deadline``."""
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError from None
            if line is None:
                return None
            try:
                message = json.loads(line)
            except ValueError:
                message = None
            if isinstance(message, dict):
                return message
            self.notes = [*self.notes[-4:], line.strip()[:200]]  # e.g. a crash report on stderr

    def ask(self, path: str, timeout: float) -> None:
        stdin: IO[str] = self.process.stdin  # type: ignore[assignment]
        stdin.write(json.dumps({"path": path, "seconds": timeout}) + "\n")
        stdin.flush()
        field: str | None = None
        deadline = time.monotonic() + timeout
        while True:
            try:
                reply = self._next(deadline)
            except TimeoutError:
                self.stop()
                raise _refusal(path, field, f"reading did not finish within {timeout:g} s") from None
            if reply is None:
                self.stop()
                code = self.process.returncode
                if code == -getattr(signal, "SIGALRM", 0):  # its own alarm (the parent was held up past it)
                    raise _refusal(path, field, f"reading did not finish within {timeout:g} s") from None
                how = f"signal {-code}" if code < 0 else f"exit status {code}"
                raise _refusal(path, field, f"HDF5 crashed reading it (the reading process ended with {how})")
            if "field" in reply:
                field = str(reply["field"])
            elif "error" in reply:
                raise CacheError(str(reply["error"]))
            elif "missing" in reply:
                raise FileNotFoundError(str(reply["missing"]))
            elif "done" in reply:
                return

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        with contextlib.suppress(OSError):
            self.process.stdin.close()  # type: ignore[union-attr]  # (its output closes when the pump sees the end)


def _refusal(path: str, field: str | None, problem: str) -> CacheError:
    where = f"{path}: field '{field}'" if field is not None else f"{path}: opening it"
    return CacheError(
        f"{where}: {problem}; the file is corrupted (or made to hang HDF5) and carries no checksums: refused"
    )


_lock = threading.Lock()
_helper: _Helper | None = None


def check(path: str, size: int, timeout: float | None = None) -> None:
    """Read the cache file ``path`` (of ``size`` bytes) in the helper process within ``timeout`` seconds
    (default :func:`default_timeout`); raises the CacheError the reading raised, or one saying it did not
    finish or crashed. Returns when the file reads without error."""
    global _helper
    limit = default_timeout(size) if timeout is None else float(timeout)
    with _lock:
        if _helper is None or _helper.pid != os.getpid() or _helper.process.poll() is not None:
            _helper = _Helper()
        helper = _helper
        try:
            helper.ask(path, limit)
        finally:
            if helper.process.poll() is not None:
                _helper = None


@atexit.register
def _stop_helper() -> None:
    if _helper is not None and _helper.pid == os.getpid():
        _helper.stop()
