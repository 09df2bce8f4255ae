"""How every command of the project reports what goes wrong: :func:`run_command`, the one error handler.

``ensemble-env`` (:func:`ensemble_env.cli.main`), the ``python -m`` entry points (``ensemble_env.cli.play``,
``ensemble_env.baselines.unseen``, ``ensemble_env.adapters.benchmarl``) and the repository's scripts and benchmarks
(``scripts/*.py``, ``benchmarks/*.py``, through :func:`command`) run their body through it, so that bad input, a
file that cannot be read or written (a full or read-only disk, no permission) and a missing extra are one line on
stderr, ``PROG: error: MESSAGE``, with exit status :data:`ERROR_STATUS`, never a traceback; a reader of stdout
that went away (``ensemble-env baselines | head -3``) ends the command quietly with :data:`CLOSED_PIPE_STATUS`.

>>> import contextlib, io
>>> def body() -> int:
...     raise OSError(30, "Read-only file system", "runs/a/tensorboard")
>>> err = io.StringIO()
>>> with contextlib.redirect_stderr(err):
...     status = run_command("ensemble-env train", body)
>>> status, err.getvalue()
(2, 'ensemble-env train: error: runs/a/tensorboard: Read-only file system\\n')
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import ParamSpec

__all__ = ["CLOSED_PIPE_STATUS", "ERROR_STATUS", "command", "error_text", "run_command"]

#: the exit status after the reader of stdout went away: 128 + SIGPIPE, as a shell reports for ``seq ... | head``
CLOSED_PIPE_STATUS = 141
#: the exit status of a command refused for bad input, a failing disk or a missing extra (argparse's for a bad option)
ERROR_STATUS = 2

P = ParamSpec("P")


def error_text(error: BaseException) -> str:
    """The one line a command prints for ``error``: its message, its lines joined; for an OSError raised by the
    operating system (it carries the file's name), ``PATH: CAUSE``.

    >>> error_text(OSError(28, "No space left on device", "runs/a/progress.csv"))
    'runs/a/progress.csv: No space left on device'
    >>> error_text(ValueError("cache.h5: field 'labels': must hold integers,\\n got dtype float64"))
    "cache.h5: field 'labels': must hold integers, got dtype float64"
    """
    if isinstance(error, OSError) and not isinstance(error, ValueError) and error.filename is not None:
        names = [os.fsdecode(name) for name in (error.filename, error.filename2) if name is not None]
        return f"{' -> '.join(names)}: {error.strerror or type(error).__name__}"
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if isinstance(error, OSError) and error.strerror and not error.filename and lines == [str(error)]:
        lines = [error.strerror] if str(error).startswith("[Errno") else lines
    return " ".join(lines) or type(error).__name__


def _stdout_closed() -> int:
    """The reader of stdout went away: stop quietly (:data:`CLOSED_PIPE_STATUS`)."""
    try:  # Python flushes stdout again at exit: send what is left to /dev/null, not to the closed pipe
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout without a file descriptor (e.g. captured): nothing to redirect
        pass
    return CLOSED_PIPE_STATUS


def run_command(prog: str | Callable[[], str], run: Callable[[], int | None]) -> int:
    """Run the body of a command, ``run()``, and return its exit status (None is 0), reporting what goes wrong.

    A ValueError (bad input; :class:`~ensemble_env.files.OutputError`, a file that cannot be written, is one), an
    OSError (a file that cannot be read or written: missing, no permission, a full or read-only disk) or an
    ImportError (a missing extra) is printed as one line on stderr, ``PROG: error: MESSAGE`` (:func:`error_text`),
    and the status is :data:`ERROR_STATUS`; a closed stdout ends the command quietly (:data:`CLOSED_PIPE_STATUS`).
    Anything else is a bug: its traceback is shown. ``prog`` may be a function that gives the name once it is known
    (``ensemble-env train``, after the command line is parsed)."""
    try:
        return int(run() or 0)
    except BrokenPipeError:
        return _stdout_closed()
    except (ValueError, OSError, ImportError) as error:
        name = prog() if callable(prog) else prog
        print(f"{name}: error: {error_text(error)}", file=sys.stderr)
        return ERROR_STATUS


def command(prog: str) -> Callable[[Callable[P, int | None]], Callable[P, int]]:
    """Decorator of a command's ``main``: its errors go through :func:`run_command` under the name ``prog``
    (``python -m ensemble_env.baselines.unseen``, ``soak.py``); it returns the exit status."""

    def decorate(main: Callable[P, int | None]) -> Callable[P, int]:
        @functools.wraps(main)
        def guarded(*args: P.args, **kwargs: P.kwargs) -> int:
            return run_command(prog, lambda: main(*args, **kwargs))

        return guarded

    return decorate
