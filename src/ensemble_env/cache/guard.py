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
"""

from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from ensemble_env.cache.logit_cache import CacheError

__all__ = ["check", "default_timeout"]

#: seconds the helper may take to start (import numpy and h5py) before it is given up
_START_SECONDS = 120.0
_BOOTSTRAP = (
    "import json, sys, types\n"
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


class _Helper:
    """The helper process and a thread that queues its output lines; ``command`` starts another helper
    (tests do, to play a helper that hangs or dies)."""

    def __init__(self, command: list[str] | None = None) -> None:
        paths = [entry for entry in sys.path if entry]
        package = str(Path(__file__).resolve().parent.parent)  # the ensemble_env folder
        self.process = subprocess.Popen(
            command or [sys.executable, "-c", _BOOTSTRAP, json.dumps(paths), package],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf-8",
            errors="replace",
            bufsize=1,
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
        stdin.write(json.dumps({"path": path}) + "\n")
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
