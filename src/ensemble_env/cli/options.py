"""What the commands of ``ensemble-env`` share, the reference learner's and plugins' too: :class:`ListOption`,
:func:`status` lines, :func:`counted` nouns, the version text and how a command names and checks its cache.
The conventions every command follows are in :mod:`ensemble_env.cli.main`.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any, TextIO

import ensemble_env
from ensemble_env.cache import datasets
from ensemble_env.cache.logit_cache import SPLITS, LogitCache
from ensemble_env.errors import CLOSED_PIPE_STATUS

__all__ = [
    "CLOSED_PIPE_STATUS",
    "ListOption",
    "cache_label",
    "counted",
    "describe_cache",
    "require_split",
    "status",
    "version_text",
]


class ListOption(argparse.Action):
    """An option taking a list: ``--tasks a,b``, ``--tasks a b`` and ``--tasks a --tasks b`` all give ``[a, b]``.

    Items are stripped and empty ones dropped; an option given with no item at all (``--tasks ,``) is an error.
    The default must be None (the option absent). Values stay strings: the command converts and checks them,
    so that its errors name the option.

    >>> parser = argparse.ArgumentParser()
    >>> _ = parser.add_argument("--tasks", action=ListOption)
    >>> parser.parse_args(["--tasks", "a,b", "c", "--tasks", "d"]).tasks
    ['a', 'b', 'c', 'd']
    >>> parser.parse_args([]).tasks is None
    True
    """

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        if kwargs.get("default") is not None:
            raise ValueError(f"ListOption {dest}: the default must be None")
        kwargs.setdefault("nargs", "+")
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        words = [values] if isinstance(values, str) else list(values or [])
        items = [item.strip() for word in words for item in str(word).split(",") if item.strip()]
        if not items:
            raise argparse.ArgumentError(self, "expected at least one name (comma- or space-separated)")
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), *items])


def _is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal (a stream without ``isatty``, e.g. a test's capture, is not)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed file
        return False


class _OpenLine:
    """Stands for stderr while a :func:`status` line is open: the first other text written (the first-run
    compile message, a warning, a progress bar) ends the line first, so that it starts a line of its own."""

    def __init__(self, stream: TextIO) -> None:
        self.stream, self.open = stream, True

    def write(self, text: str) -> int:
        if self.open and text:
            self.stream.write("\n")
            self.open = False
        return self.stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextlib.contextmanager
def status(
    message: str, stream: TextIO | None = None, *, enabled: bool = True, inline: bool | None = None
) -> Iterator[None]:
    """Say on stderr what a wait of seconds is for, and how long it took.

    On a terminal (``inline=None``: when the stream is one) it is one line, left open while the work runs:
    ``ensemble-env: MESSAGE... done (8.1 s)``; when the work writes to stderr meanwhile (``sys.stderr``, e.g. the
    first-run compile message), that text gets lines of its own and the message is said again when done. Elsewhere
    (a pipe, a log file, a CI job) it is two whole lines, one when the wait starts and one when it ends:
    ``ensemble-env: MESSAGE...`` and ``ensemble-env: MESSAGE: done (8.1 s)``, with no line left open and no
    carriage return. Stdout is never touched, so ``--json`` and tables stay clean. On a failure the open line is
    ended and nothing more is said (the error follows). ``enabled=False`` says nothing.
    """
    stream = sys.stderr if stream is None else stream
    if not enabled:
        yield
        return
    start = time.perf_counter()
    if not (_is_terminal(stream) if inline is None else inline):
        stream.write(f"ensemble-env: {message}...\n")
        stream.flush()
        yield
        stream.write(f"ensemble-env: {message}: done ({time.perf_counter() - start:.1f} s)\n")
        stream.flush()
        return
    stream.write(f"ensemble-env: {message}... ")
    stream.flush()
    guard = _OpenLine(stream)
    swap = stream is sys.stderr
    if swap:
        sys.stderr = guard  # type: ignore[assignment]
    try:
        yield
    except BaseException:
        stream.write("\n" if guard.open else "")
        raise
    finally:
        if swap:
            sys.stderr = stream
    done = f"done ({time.perf_counter() - start:.1f} s)\n"
    stream.write(done if guard.open else f"ensemble-env: {message}... {done}")
    stream.flush()


def counted(number: int, noun: str) -> str:
    """``number noun`` with the plural ``s`` when needed.

    >>> counted(1, "model"), counted(5, "model")
    ('1 model', '5 models')
    """
    return f"{number} {noun}" + ("" if number == 1 else "s")


def version_text() -> str:
    """``ensemble-env X.Y.Z`` of the installed distribution (the package's ``__version__`` when not installed)."""
    try:
        number = version("ensemble-env")
    except PackageNotFoundError:  # run from a source tree without installing
        number = ensemble_env.__version__
    return f"ensemble-env {number}"


def cache_label(cache_arg: str | None) -> str:
    """How a command names its cache: the default's name, or the name or path as given."""
    return f"{datasets.DEFAULT} (the default cache)" if cache_arg is None else cache_arg


def describe_cache(cache: LogitCache, cache_arg: str | None) -> str:
    return (
        f"{cache_label(cache_arg)}: {cache.n_questions} questions, {counted(cache.n_models, 'model')} "
        f"({', '.join(cache.models)}), {counted(cache.n_tasks, 'task')} ({', '.join(cache.task_names)})"
    )


def require_split(cache: LogitCache, cache_arg: str | None, split: str, option: str) -> None:
    """Refuse a split with no question, saying how to give the cache one (``cache split``)."""
    if split == "all" or (cache.split == SPLITS[split]).any():
        return
    name = datasets.DEFAULT if cache_arg is None else cache_arg
    raise ValueError(
        f"{name} has no {split} question ({option} {split}): write a copy with a train/validation/test split, e.g. "
        f"ensemble-env cache split {name} -o split.h5 --test-fraction 0.2 --validation-fraction 0.2, "
        f"or choose another {option}"
    )
