"""The run directory of ``ensemble-env train``: its files, the one validating reader of each, and its lock.

=======================  ==========================================================================================
file                     what it holds; who writes it; its reader here
=======================  ==========================================================================================
``config.json``          ``{"config": every TrainConfig field, "run": {"cache", "models", "tasks",
                         "n_questions"}}``, written once when the run starts (:func:`write_config`);
                         :func:`read_config`
``progress.csv``         one row per update (:func:`progress_columns`), appended by
                         :class:`~ensemble_mappo.progress.ProgressLog`, its history rewritten atomically on
                         resume; :func:`progress_rows` (resume), :func:`read_progress` (plot)
``checkpoint.pt``        plain data (:mod:`ensemble_mappo.checkpoint`), replaced atomically every
                         ``checkpoint_every`` updates; :func:`read_checkpoint`, then :func:`load_networks`,
                         :func:`load_optimizer` and :func:`restore_env` against the live objects
                         (:func:`restore_run` does all of it for a resumed run)
``run.lock``             while a ``train`` works in the folder (:class:`RunLock`)
``evaluation_*.json``    ``ensemble-env evaluate``'s summaries; :func:`read_evaluation` (plot)
``mappo_*.png``, events  ``ensemble-env plot``'s figures and TensorBoard's event files (never read back)
=======================  ==========================================================================================

**Reading.** Every reader checks its whole file before anything uses it, and refuses a bad one with a
:class:`RunFileError` (a ValueError) naming the file, the field and the value: the command line prints it as
``ensemble-env COMMAND: error: ...`` with exit status 2. Nothing is coerced: a count that is ``"3"`` or ``3.7``
is refused, not rounded; a field a ``config.json`` lacks is refused, except the fields of :data:`LEGACY_FIELDS`,
which runs written before they existed lack (they get the value those runs were trained with).

**Writing.** Every file goes through :mod:`ensemble_env.files` (a temporary file beside the target, synced,
renamed over it), so a killed writer never leaves a partial file.

**One writer per run.** ``train`` holds the directory's :class:`RunLock` for the whole run: ``fcntl.flock`` on
``run.lock``, which the kernel releases when the holder dies however it dies, so a lock left by a killed run
is taken over by the next ``train --resume``; a live holder is named (pid, host, start time, command) in the
refusal. ``evaluate`` and ``plot`` take no lock: they read files that are only ever replaced whole, and a
checkpoint that does not belong to its ``config.json`` (a run started over while they read) is refused.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import inspect
import json
import math
import os
import re
import shlex
import socket
import stat
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

import numpy as np
import torch
from torch import Tensor

from ensemble_env import files
from ensemble_env.cache.datasets import resolve as resolve_cache
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.engine import EnsembleVectorEnv
from ensemble_env.text import show
from ensemble_mappo.agents import Agents
from ensemble_mappo.checkpoint import CHECKPOINT_NAME, check_networks, check_tensor, load_checkpoint, unpack_arrays
from ensemble_mappo.config import LIMITS, MAX_CONFIG_BYTES, TrainConfig, config_from_dict
from ensemble_mappo.networks import VALUE_HEADS
from ensemble_mappo.optim import Optimizer
from ensemble_mappo.ppo import AGENTS

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: msvcrt below
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "AGENT_LOSS_KEYS",
    "CHECKPOINT_NAME",
    "CONFIG_NAME",
    "LEGACY_FIELDS",
    "LOCK_NAME",
    "PROGRESS_NAME",
    "RUN_FILES",
    "Checkpoint",
    "RunBusyError",
    "RunConfig",
    "RunFileError",
    "RunLock",
    "describe_holder",
    "holding_run_lock",
    "load_networks",
    "load_optimizer",
    "load_run",
    "progress_columns",
    "progress_rows",
    "read_checkpoint",
    "read_config",
    "read_evaluation",
    "read_json",
    "read_progress",
    "restore_env",
    "restore_run",
    "run_cache",
    "write_config",
]

CONFIG_NAME = "config.json"
PROGRESS_NAME = "progress.csv"
LOCK_NAME = "run.lock"
#: the files that make a folder a run (``train --out`` refuses a folder holding one unless ``--overwrite``)
RUN_FILES = (CONFIG_NAME, PROGRESS_NAME, CHECKPOINT_NAME)
#: TrainConfig fields that runs written before the field existed lack, with the value those runs were trained
#: with. A field added to TrainConfig needs an entry here, or the runs written before it are refused (their
#: config would otherwise silently get the new field's default, which they were not trained with).
LEGACY_FIELDS: dict[str, Any] = {
    "decider_policy": "bernoulli",
    "decider_credit": "sampled",  # the environment's reward, the sampled answer's
    "decider_start": "prior",
    "offline_temperature": 0.05,  # unused with the prior start
    "decider_kl_coef": 0.0,
    "decider_ent_coef": -1.0,  # ent_coef's
}
#: the keys of config.json's "run" entry
RUN_KEYS = ("cache", "models", "tasks", "n_questions")
#: the per-agent statistics of the log, ``losses/<agent>_<key>`` (grad_norm per network, explained_variance per
#: agent; the other four from :class:`~ensemble_mappo.ppo.UpdateStats` per learning actor)
AGENT_LOSS_KEYS = ("policy_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm", "explained_variance")
#: the entries of a checkpoint (see ensemble_mappo.training); others are ignored
CHECKPOINT_KEYS = (
    "config",
    "iteration",
    "global_step",
    "num_iterations",
    "complete",
    "models",
    "networks",
    "optimizer",
    "generator",
    "env",
)


class RunFileError(ValueError):
    """A file of a run directory that cannot be used; the message names the file, the field and the value."""


def _refuse(path: str | Path, field: str, problem: str) -> RunFileError:
    return RunFileError(f"{path}: {field}: {problem}" if field else f"{path}: {problem}")


def _kind(value: Any) -> str:
    """What a JSON value is, in words, with a bounded excerpt (for messages)."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    kind = names.get(type(value), "a number" if isinstance(value, int | float) else type(value).__name__)
    return f"{kind} ({show(value)})"


# -- the lock --------------------------------------------------------------------------------------------------
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
            raise _refuse(self.path, "", f"cannot write the lock file ({error.strerror or error})") from None
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
                raise _refuse(folder, "", "is a file, not a folder; a run directory is a folder") from None
            except OSError as error:
                raise _refuse(folder, "", f"cannot create the run directory ({error.strerror or error})") from None
        elif not folder.exists():
            raise FileNotFoundError(f"{folder}: no such run directory")
        if not folder.is_dir():
            raise _refuse(folder, "", "is a file, not a folder; a run directory is a folder")

    def _lock(self) -> int:
        """The open lock file, exclusively locked (a file that was removed meanwhile by its releasing holder is
        reopened)."""
        for _ in range(100):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK, 0o644)
            except OSError as error:
                raise _refuse(self.path, "", f"cannot open the run's lock file ({error.strerror or error})") from None
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise _refuse(self.path, "", "is not a regular file; remove it (it should be the run's lock file)")
            try:
                _lock_fd(fd)
            except BlockingIOError:
                record = _read_record(fd)
                os.close(fd)
                raise RunBusyError(_busy_message(self.run_dir, record)) from None
            except OSError as error:
                os.close(fd)
                raise _refuse(
                    self.path,
                    "",
                    f"cannot lock the run directory ({error.strerror or error}): does its filesystem "
                    "support file locks?",
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
    try:
        there = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    here = os.fstat(fd)
    return (there.st_dev, there.st_ino) == (here.st_dev, here.st_ino)


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


# -- config.json -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunConfig:
    """What a run's ``config.json`` holds, checked: the config and the cache the run was trained on."""

    path: Path
    """The ``config.json`` read."""
    config: TrainConfig
    cache: str | None
    """The cache as the run recorded it: a built-in name, an absolute path, or None (the default cache)."""
    models: tuple[str, ...]
    tasks: tuple[str, ...]
    n_questions: int

    @property
    def description(self) -> dict[str, Any]:
        """The ``run`` entry of ``config.json``."""
        return {
            "cache": self.cache,
            "models": list(self.models),
            "tasks": list(self.tasks),
            "n_questions": self.n_questions,
        }


def write_config(run_dir: str | Path, config: TrainConfig, cache: LogitCache, cache_path: str | None) -> Path:
    """Write ``run_dir/config.json`` atomically: ``config`` and the cache (``cache_path`` as recorded, its
    models, tasks and size)."""
    run = {
        "cache": cache_path,
        "models": list(cache.models),
        "tasks": list(cache.task_names or ()),
        "n_questions": int(cache.n_questions),
    }
    text = json.dumps({"config": config.to_dict(), "run": run}, indent=2, allow_nan=False)
    return files.write_text(Path(run_dir) / CONFIG_NAME, text + "\n")


def read_config(run_dir: str | Path) -> RunConfig:
    """Read and check ``run_dir/config.json``: a JSON object of exactly ``config`` (every TrainConfig field,
    each value valid; :data:`LEGACY_FIELDS` may be missing) and ``run`` (the cache, its models, tasks and
    size). Raises :class:`RunFileError` naming the file, the field and the value; FileNotFoundError when there
    is no run there."""
    folder = _run_folder(run_dir)
    path = folder / CONFIG_NAME
    hint = (
        f"{folder} holds no run (a train stopped before it wrote its config leaves nothing to resume: run "
        f"`ensemble-env train --out {folder}` again)"
        if not any(os.path.lexists(folder / name) for name in RUN_FILES)
        else f"is {folder} a directory written by `ensemble-env train`?"
    )
    data = read_json(path, MAX_CONFIG_BYTES, hint)
    if not isinstance(data, dict):
        raise _refuse(path, "", f"expected a JSON object with 'config' and 'run', got {_kind(data)}")
    _exact_keys(path, "", data, ("config", "run"))
    config = _config_entry(path, "config", data["config"])
    run = data["run"]
    if not isinstance(run, dict):
        raise _refuse(path, "run", f"expected an object of {', '.join(RUN_KEYS)}, got {_kind(run)}")
    _exact_keys(path, "run", run, RUN_KEYS)
    cache = run["cache"]
    if cache is not None and (not isinstance(cache, str) or not cache):
        raise _refuse(path, "run.cache", f"expected a cache name or path (or null: the default), got {_kind(cache)}")
    models = _names(path, "run.models", run["models"], nonempty=True)
    tasks = _names(path, "run.tasks", run["tasks"], nonempty=False)
    n_questions = _count(path, "run.n_questions", run["n_questions"], low=1)
    return RunConfig(path, config, cache, models, tasks, n_questions)


def run_cache(run: RunConfig, cache_arg: str | None = None) -> LogitCache:
    """The cache of a run: ``cache_arg`` (``--cache``) when given, else the one its ``config.json`` records (a
    failure to load that one names the config.json)."""
    if cache_arg is not None:
        return resolve_cache(cache_arg)
    try:
        return resolve_cache(run.cache)
    except FileNotFoundError as error:
        raise FileNotFoundError(f"{error} (the cache {run.path} records; --cache gives another)") from None
    except ValueError as error:
        raise RunFileError(f"{error} (the cache {run.path} records; --cache gives another)") from None


def load_run(run_dir: str | Path) -> tuple[TrainConfig, dict[str, Any]]:
    """The config and the run description (cache, models, tasks, size) of a run directory (:func:`read_config`)."""
    run = read_config(run_dir)
    return run.config, run.description


def _run_folder(run_dir: str | Path) -> Path:
    folder = Path(run_dir)
    if not folder.exists():
        raise FileNotFoundError(f"{folder}: no such run directory (`ensemble-env train --out {folder}` makes one)")
    if not folder.is_dir():
        raise _refuse(folder, "", "is a file, not a run directory (the folder `ensemble-env train --out` wrote)")
    return folder


def read_json(path: Path, limit: int, hint: str, *, constants: bool = False) -> Any:
    """The JSON value of ``path``; NaN and Infinity (not JSON) are refused unless ``constants``."""
    data = _read_bytes(path, limit, hint)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _refuse(path, "", f"not UTF-8 text (byte {error.start}); a run's JSON files are text") from None
    try:
        return json.loads(text, parse_constant=None if constants else _no_constant)
    except json.JSONDecodeError as error:
        raise _refuse(path, "", f"not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})") from None
    except (ValueError, RecursionError) as error:
        raise _refuse(path, "", f"not valid JSON ({show(str(error) or type(error).__name__, 200)})") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (a run's files hold finite numbers only)")


def _read_bytes(path: Path, limit: int, hint: str) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (a FIFO would block, a device never end)."""
    try:
        status = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} not found: {hint}") from None
    except OSError as error:
        raise _refuse(path, "", f"cannot read it ({error.strerror or error})") from None
    if not stat.S_ISREG(status.st_mode):
        raise _refuse(path, "", "not a regular file (a folder, FIFO or device)")
    if status.st_size > limit:
        raise _refuse(path, "", f"{status.st_size:,} bytes, more than the {limit:,} such a file may hold")
    try:
        with open(path, "rb") as file:
            return file.read(limit + 1)
    except OSError as error:
        raise _refuse(path, "", f"cannot read it ({error.strerror or error})") from None


def _exact_keys(path: Path, field: str, data: Mapping[str, Any], keys: Sequence[str]) -> None:
    missing = [key for key in keys if key not in data]
    unknown = sorted(key for key in data if key not in keys)
    where = f"{field} " if field else ""
    if missing:
        raise _refuse(path, field, f"lacks {', '.join(map(repr, missing))} ({where}holds {', '.join(keys)})")
    if unknown:
        raise _refuse(path, field, f"unknown key(s) {show(unknown, 200)} ({where}holds {', '.join(keys)} only)")


def _config_entry(path: Path, field: str, saved: Any) -> TrainConfig:
    """A run's saved config (config.json's, or a checkpoint's copy): every field there, every value valid."""
    if not isinstance(saved, dict):
        raise _refuse(path, field, f"expected an object of training options, got {_kind(saved)}")
    names = [item.name for item in fields(TrainConfig)]
    missing = [name for name in names if name not in saved and name not in LEGACY_FIELDS]
    if missing:
        raise _refuse(
            path, field, f"lacks {', '.join(missing)} (a run's config holds every field; was the file edited?)"
        )
    values = {**{name: value for name, value in LEGACY_FIELDS.items() if name not in saved}, **saved}
    try:
        return config_from_dict(values, where=f"{path}: {field}", merge_env=False)
    except ValueError as error:  # it names the file and the field already
        raise RunFileError(str(error)) from None


def _names(path: Path, field: str, value: Any, *, nonempty: bool) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(name, str) and name for name in value):
        raise _refuse(path, field, f"expected a list of names, got {_kind(value)}")
    if nonempty and not value:
        raise _refuse(path, field, "is empty; a run has a pool of at least one model")
    if len(set(value)) != len(value):
        raise _refuse(path, field, f"names one twice: {show(value, 200)}")
    return tuple(value)


def _count(path: str | Path, field: str, value: Any, *, low: int, high: int | None = None) -> int:
    """``value`` if it is an int (not a bool, not a float, not a string) in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise _refuse(path, field, f"expected a whole number, got {_kind(value)}")
    if value < low or (high is not None and value > high):
        bound = f"[{low:,}, {high:,}]" if high is not None else f">= {low:,}"
        raise _refuse(path, field, f"expected a whole number {bound}, got {show(value)}")
    return value


# -- progress.csv ----------------------------------------------------------------------------------------------
def progress_columns(models: Sequence[str]) -> list[str]:
    """The columns of ``progress.csv``, in order."""
    columns = ["iteration", "global_step", "time/elapsed", "time/sps", "charts/learning_rate", "charts/stage"]
    columns += ["env/reward", "env/accuracy", "env/team_size", "env/cost", "env/episode_accuracy"]
    columns += ["env/episode_return", *(f"env/select/{model}" for model in models)]
    columns += ["losses/value_loss", *(f"losses/{head}_value_loss" for head in VALUE_HEADS), "losses/critic_grad_norm"]
    columns += [f"losses/{agent}_{key}" for agent in AGENTS for key in AGENT_LOSS_KEYS]
    return columns


#: a number as the log writes it (no "nan", "inf", spaces or underscores, which float() would take)
_NUMBER = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_WHOLE = re.compile(r"[0-9]{1,19}")


def _bounds(column: str, n_models: int | None) -> tuple[float, float] | None:
    """The range of a column's values (None: any finite number)."""
    if column in ("env/accuracy", "env/episode_accuracy") or column.startswith("env/select/"):
        return 0.0, 1.0
    if column.endswith("_clip_fraction"):
        return 0.0, 1.0
    if column == "env/team_size":
        return 0.0, float(n_models) if n_models is not None else math.inf
    if column.startswith("time/") or column == "charts/learning_rate" or column.endswith(("grad_norm", "value_loss")):
        return 0.0, math.inf
    if column == "charts/stage":
        return 1.0, 2.0
    return None


#: the columns every progress.csv holds (what plot and resume read); the others are checked when present, so that
#: a log written before a statistic was added still reads
CORE_COLUMNS = ("iteration", "global_step", "env/reward", "env/accuracy", "env/team_size", "env/episode_accuracy")


def _progress_table(
    path: Path, columns: Sequence[str], *, upto: int | None, batch_size: int | None, n_models: int | None
) -> Iterator[tuple[int, dict[str, str]]]:
    """(line, row) of ``path``'s rows 1..upto (all with None), each checked: the header must hold the core
    columns among ``columns`` (:data:`CORE_COLUMNS` and the selection columns), and each of ``columns`` it
    holds is checked in every row (the others are kept as they are)."""
    try:
        status = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{path} not found: is {path.parent} a directory written by `ensemble-env train`?"
        ) from None
    except OSError as error:
        raise _refuse(path, "", f"cannot read it ({error.strerror or error})") from None
    if not stat.S_ISREG(status.st_mode):
        raise _refuse(path, "", "not a regular file (a folder, FIFO or device)")
    try:
        with open(path, newline="", encoding="utf-8") as file:
            reader = csv.reader(file, strict=True)
            header = next(reader, None)
            if not header:
                raise _refuse(path, "", "empty: no header line (the columns)")
            duplicated = sorted(name for name, count in Counter(header).items() if count > 1)
            if duplicated:
                raise _refuse(path, "header", f"names {show(duplicated, 200)} twice")
            present = set(header)
            core = [name for name in columns if name in CORE_COLUMNS or name.startswith("env/select/")]
            missing = [name for name in core if name not in present]
            if missing:
                raise _refuse(path, "header", f"lacks the column(s) {show(missing, 300)} (an edited or foreign log?)")
            checked = [name for name in columns if name in present]
            expected = 1
            if upto is not None and upto < 1:
                return
            for cells in reader:
                if not cells:  # a blank line carries nothing
                    continue
                line = reader.line_num
                if len(cells) != len(header):
                    raise _refuse(
                        path, f"line {line}", f"{len(cells)} cells for {len(header)} columns (a cut or edited row)"
                    )
                row = dict(zip(header, cells, strict=True))
                _check_row(path, line, row, checked, expected, batch_size, n_models)
                yield line, row
                expected += 1
                if upto is not None and expected > upto:
                    return  # the rows after the checkpoint (maybe cut by a kill) are redone, not read
            if upto is not None and expected <= upto:
                raise _refuse(
                    path,
                    "",
                    f"holds updates 1..{expected - 1} but the checkpoint is at update {upto}: the log lost "
                    "rows; start the run over (`ensemble-env train --out DIR --overwrite`)",
                )
    except UnicodeDecodeError as error:
        raise _refuse(path, "", f"not UTF-8 text (byte {error.start})") from None
    except csv.Error as error:
        raise _refuse(path, "", f"not a CSV file ({show(str(error), 200)})") from None
    except OSError as error:
        raise _refuse(path, "", f"cannot read it ({error.strerror or error})") from None


def _check_row(
    path: Path,
    line: int,
    row: Mapping[str, str],
    columns: Sequence[str],
    expected: int,
    batch_size: int | None,
    n_models: int | None,
) -> None:
    where = f"line {line}"
    for name in ("iteration", "global_step"):
        if name in columns and not _WHOLE.fullmatch(row[name]):
            raise _refuse(path, f"{where}, column {name}", f"expected a whole number, got {show(row[name])}")
    if "iteration" in columns and int(row["iteration"]) != expected:
        raise _refuse(
            path,
            f"{where}, column iteration",
            f"expected update {expected} (rows run 1, 2, ...), got {show(row['iteration'])}",
        )
    if batch_size is not None and "global_step" in columns and int(row["global_step"]) != expected * batch_size:
        raise _refuse(
            path,
            f"{where}, column global_step",
            f"expected {expected * batch_size} (update {expected} x {batch_size} steps), "
            f"got {show(row['global_step'])}",
        )
    for name in columns:
        if name in ("iteration", "global_step"):
            continue
        cell = row[name]
        if not cell:
            continue  # not measured (an actor that did not learn, no episode ended)
        value = float(cell) if _NUMBER.fullmatch(cell) else math.nan
        if not math.isfinite(value):
            raise _refuse(path, f"{where}, column {name}", f"expected a finite number or nothing, got {show(cell)}")
        bounds = _bounds(name, n_models)
        if bounds is not None and not bounds[0] <= value <= bounds[1]:
            raise _refuse(path, f"{where}, column {name}", f"{show(cell)} is outside [{bounds[0]:g}, {bounds[1]:g}]")


def progress_rows(
    path: str | Path, columns: Sequence[str], *, upto: int, batch_size: int | None = None
) -> list[dict[str, str]]:
    """Rows 1..``upto`` of a ``progress.csv`` as text (for the rewrite on resume), each checked (with
    ``batch_size``, global_step too); the rows after them (updates after the checkpoint, redone by the resumed
    run) are not read."""
    if upto < 1:
        return []
    table = _progress_table(Path(path), columns, upto=upto, batch_size=batch_size, n_models=_n_models(columns))
    return [row for _, row in table]


def _n_models(columns: Sequence[str]) -> int | None:
    """The pool's size, from the selection columns (None for a log without them)."""
    count = sum(name.startswith("env/select/") for name in columns)
    return count or None


def read_progress(run_dir: str | Path, run: RunConfig | None = None) -> dict[str, np.ndarray]:
    """``progress.csv`` of a run as columns of floats (an empty cell is NaN), checked whole against the run's
    config (``run``, read from the folder when None): every column there, updates 1, 2, ... in order, each
    cell a finite number in its column's range, or empty."""
    folder = _run_folder(run_dir)
    run = run if run is not None else read_config(folder)
    columns = progress_columns(run.models)
    batch_size = run.config.num_envs * run.config.num_steps
    path = folder / PROGRESS_NAME
    rows = [
        row for _, row in _progress_table(path, columns, upto=None, batch_size=batch_size, n_models=len(run.models))
    ]
    if not rows:
        raise _refuse(path, "", "has no rows yet: train for at least one update")
    return {key: np.array([float(row[key]) if row.get(key) else np.nan for row in rows]) for key in columns}


# -- checkpoint.pt ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Checkpoint:
    """A run's checkpoint, every entry checked (:func:`read_checkpoint`)."""

    path: Path
    config: TrainConfig
    iteration: int
    """Updates done (>= 1)."""
    global_step: int
    num_iterations: int
    """Updates the run's budget runs in all."""
    complete: bool
    models: tuple[str, ...]
    networks: dict[str, dict[str, Tensor]]
    optimizer: dict[str, Tensor]
    generator: Tensor
    env: dict[str, np.ndarray]
    """The environment's snapshot (its values are checked by ``set_state``: :func:`restore_env`)."""


def read_checkpoint(run_dir: str | Path, run: RunConfig | None = None) -> Checkpoint:
    """Read a checkpoint (a run directory or the file) and check every entry: a readable plain-data file
    (:func:`~ensemble_mappo.checkpoint.load_checkpoint`), every entry of :data:`CHECKPOINT_KEYS` there, counts
    that are ints (``3``, never ``"3"`` or ``3.7``) and agree with each other and the config, finite network
    and optimizer tensors, a generator state torch accepts, an environment snapshot archive. With ``run``
    (the folder's ``config.json``), the checkpoint must belong to it: the same config and pool."""
    path = Path(run_dir)
    if path.is_dir():
        path = path / CHECKPOINT_NAME
    payload = load_checkpoint(path)
    where = str(path)
    missing = [key for key in CHECKPOINT_KEYS if key not in payload]
    if missing:
        raise _refuse(path, "", f"lacks {', '.join(missing)} (a checkpoint of `ensemble-env train` holds all of them)")
    config = _config_entry(path, "config", payload["config"])
    batch_size = config.num_envs * config.num_steps
    num_iterations = _count(path, "num_iterations", payload["num_iterations"], low=1, high=LIMITS["total_steps"])
    iteration = _count(path, "iteration", payload["iteration"], low=1, high=num_iterations)
    global_step = _count(path, "global_step", payload["global_step"], low=0)
    if global_step != iteration * batch_size:
        raise _refuse(
            path, "global_step", f"{global_step} is not iteration x num_envs x num_steps = {iteration * batch_size}"
        )
    complete = payload["complete"]
    if not isinstance(complete, bool) or complete != (iteration >= num_iterations):
        raise _refuse(
            path,
            "complete",
            f"expected {iteration >= num_iterations} (update {iteration} of {num_iterations}), got {_kind(complete)}",
        )
    models = _names(path, "models", payload["models"], nonempty=True)
    networks = check_networks(payload["networks"], where)
    optimizer = payload["optimizer"]
    if not isinstance(optimizer, dict):
        raise _refuse(
            path, "optimizer", f"expected the optimizer's state (exp_avg, exp_avg_sq, steps), got {_kind(optimizer)}"
        )
    _exact_keys(path, "optimizer", optimizer, ("exp_avg", "exp_avg_sq", "steps"))
    moments = [check_tensor(optimizer[key], where, f"optimizer.{key}") for key in ("exp_avg", "exp_avg_sq")]
    if not all(m.is_floating_point() and m.dim() == 1 for m in moments) or moments[0].shape != moments[1].shape:
        raise _refuse(
            path,
            "optimizer.exp_avg",
            f"{moments[0].dtype} of shape {tuple(moments[0].shape)} and exp_avg_sq {moments[1].dtype} of shape "
            f"{tuple(moments[1].shape)}: expected two flat float tensors of one shape (one entry per parameter)",
        )
    if bool((moments[1] < 0).any()):
        raise _refuse(path, "optimizer.exp_avg_sq", "holds a negative value; it is a mean of squares")
    steps = check_tensor(optimizer["steps"], where, "optimizer.steps")
    if steps.dtype != torch.int64 or steps.dim() != 1 or bool((steps < 0).any()):
        raise _refuse(path, "optimizer.steps", f"expected a flat int64 tensor of step counts >= 0, got {show(steps)}")
    generator = check_tensor(payload["generator"], where, "generator")
    try:
        torch.Generator().set_state(generator)
    except (RuntimeError, TypeError, ValueError) as error:
        raise _refuse(path, "generator", f"not a state of torch's generator ({show(str(error), 200)})") from None
    env = unpack_arrays(payload["env"], f"{path}: env")
    checkpoint = Checkpoint(
        path, config, iteration, global_step, num_iterations, complete, models, networks, optimizer, generator, env
    )
    if run is not None:
        _belongs(checkpoint, run)
    return checkpoint


def _belongs(checkpoint: Checkpoint, run: RunConfig) -> None:
    if checkpoint.config != run.config:
        changed = [
            item.name
            for item in fields(TrainConfig)
            if getattr(checkpoint.config, item.name) != getattr(run.config, item.name)
        ]
        raise _refuse(
            checkpoint.path,
            "config",
            f"differs from {run.path} in {', '.join(changed)}: the two files belong to different runs (was the run "
            "started over, or a file copied in?)",
        )
    if checkpoint.models != run.models:
        raise _refuse(
            checkpoint.path,
            "models",
            f"{show(list(checkpoint.models), 200)} differ from {run.path}'s run.models {show(list(run.models), 200)}",
        )


def load_networks(agents: Agents, networks: Mapping[str, Mapping[str, Tensor]], source: str) -> None:
    """Load ``networks`` (a checkpoint's, or ``Agents.state_dict()``) into ``agents`` after checking them
    against the agents' own: the same networks, tensor names, shapes and dtypes, every value finite.
    ``source`` (the checkpoint file) is named in the errors, with the tensor."""
    check_networks(networks, source)
    modules = agents.modules()
    unknown = sorted(set(networks) - set(modules))
    missing = [name for name in modules if name not in networks]
    if missing or unknown:
        raise _refuse(source, "networks", f"holds {show(sorted(networks), 200)}, expected {', '.join(modules)}")
    for name, module in modules.items():
        state, expected = networks[name], module.state_dict()
        lacking = [key for key in expected if key not in state]
        extra = sorted(key for key in state if key not in expected)
        if lacking or extra:
            detail = f"lacks {show(lacking, 200)}" if lacking else f"holds unexpected {show(extra, 200)}"
            raise _refuse(source, f"networks.{name}", f"{detail}: a checkpoint of another kind of network")
        for key, reference in expected.items():
            value = state[key]
            if value.shape != reference.shape or value.dtype != reference.dtype:
                raise _refuse(
                    source,
                    f"networks.{name}.{key}",
                    f"{value.dtype} of shape {tuple(value.shape)}, expected {reference.dtype} of shape "
                    f"{tuple(reference.shape)} (a checkpoint of another pool, observation or hidden_size?)",
                )
    norm = networks["value_norm"]
    for key in ("var", "count"):
        if key in norm and bool((norm[key] < 0).any()):
            raise _refuse(source, f"networks.value_norm.{key}", "holds a negative value; it is a variance or a count")
    try:
        agents.load_state_dict(networks)
    except (RuntimeError, ValueError, KeyError) as error:
        raise _refuse(source, "networks", f"not loadable ({show(str(error), 300)})") from None


def load_optimizer(optimizer: Optimizer, state: Mapping[str, Tensor], source: str) -> None:
    """Load a checkpoint's optimizer state after checking it against ``optimizer``'s own: the same entries,
    shapes and dtypes, finite moments, second moments and step counts >= 0. ``source`` is named in errors."""
    if not isinstance(state, Mapping):
        raise _refuse(source, "optimizer", f"expected the optimizer's state, got {show(state)}")
    expected = optimizer.state_dict()
    _exact_keys(Path(source), "optimizer", state, tuple(expected))
    for key, reference in expected.items():
        value = check_tensor(state[key], source, f"optimizer.{key}")
        if value.shape != reference.shape or value.dtype != reference.dtype:
            raise _refuse(
                source,
                f"optimizer.{key}",
                f"{value.dtype} of shape {tuple(value.shape)}, expected {reference.dtype} of shape "
                f"{tuple(reference.shape)}",
            )
    for key in ("exp_avg_sq", "steps"):
        if key in state and bool((state[key] < 0).any()):
            raise _refuse(source, f"optimizer.{key}", "holds a negative value")
    try:
        optimizer.load_state_dict(state)
    except (RuntimeError, ValueError, KeyError) as error:
        raise _refuse(source, "optimizer", f"not loadable ({show(str(error), 300)})") from None


def restore_env(venv: EnsembleVectorEnv, snapshot: Mapping[str, np.ndarray], source: str) -> None:
    """``venv.set_state(snapshot)``, which checks every array by value against the engine (its cache, options
    and copies); a refusal is raised as a :class:`RunFileError` naming ``source`` (the checkpoint file)."""
    try:
        venv.set_state(snapshot)
    except ValueError as error:  # CacheError is one: the snapshot no play of this engine could have produced
        raise _refuse(source, "env", f"the environment's snapshot is refused: {show(str(error), 600)[1:-1]}") from None


def restore_run(
    run_dir: str | Path,
    config: TrainConfig,
    num_iterations: int,
    agents: Agents,
    optimizer: Optimizer,
    generator: torch.Generator,
    venv: EnsembleVectorEnv,
) -> int:
    """Restore the run saved in ``run_dir`` into the live objects of a resumed run; the updates it had done.

    The folder's ``config.json`` must hold ``config``; its checkpoint must belong to it (:func:`read_checkpoint`),
    be of ``venv``'s pool and of a budget of ``num_iterations`` updates. A run stopped before its first checkpoint
    has none: it starts again from update 0 (0 is returned and nothing is loaded). Nothing is changed before
    everything is checked, apart from the objects loaded in turn (networks, optimizer, generator, environment),
    which a refusal leaves to be thrown away.
    """
    folder = _run_folder(run_dir)
    run = read_config(folder)
    if run.config != config:
        changed = [
            item.name for item in fields(TrainConfig) if getattr(run.config, item.name) != getattr(config, item.name)
        ]
        raise _refuse(
            run.path,
            "config",
            f"the run was trained with a different config (other {', '.join(changed)}); resume it with its own config",
        )
    path = folder / CHECKPOINT_NAME
    if not os.path.lexists(path):
        return 0  # stopped before its first checkpoint: the run starts over, with its saved config
    checkpoint = read_checkpoint(path, run)
    pool = tuple(venv.cache.models)
    if checkpoint.models != pool:
        raise _refuse(
            path,
            "models",
            f"the run's pool {show(list(checkpoint.models), 200)} is not the cache's {show(list(pool), 200)}",
        )
    if checkpoint.num_iterations != num_iterations:
        raise _refuse(
            path,
            "num_iterations",
            f"the run's budget was {checkpoint.num_iterations} updates; its config on this cache gives "
            f"{num_iterations} (another cache or tasks?)",
        )
    source = str(path)
    load_networks(agents, checkpoint.networks, source)
    load_optimizer(optimizer, checkpoint.optimizer, source)
    generator.set_state(checkpoint.generator)
    restore_env(venv, checkpoint.env, source)
    return checkpoint.iteration


# -- evaluation_*.json -----------------------------------------------------------------------------------------
#: the largest evaluation summary read (one of bbh5's test split: about 10 KB)
MAX_EVALUATION_BYTES = 64 * 2**20


def read_evaluation(path: str | Path, models: Sequence[str]) -> dict[str, Any]:
    """Read an evaluation summary (``evaluate``'s ``evaluation_*.json``) and check what ``plot`` reads of it:
    ``macro_accuracy`` in [0, 1], ``mean_team_size`` in [0, N], a ``selection_frequency`` in [0, 1] for each
    of ``models``."""
    path = Path(path)
    # an evaluation may hold a NaN where nothing was measured (json writes it so); what plot reads is checked below
    data = read_json(path, MAX_EVALUATION_BYTES, "evaluate the run first (`ensemble-env evaluate DIR`)", constants=True)
    if not isinstance(data, dict):
        raise _refuse(path, "", f"expected a JSON object (an evaluation summary), got {_kind(data)}")
    checks = {"macro_accuracy": 1.0, "mean_team_size": float(len(models))}
    for key, high in checks.items():
        _number(path, key, data.get(key, None), high, key in data)
    frequencies = data.get("selection_frequency")
    if not isinstance(frequencies, dict):
        raise _refuse(path, "selection_frequency", f"expected an object of models, got {_kind(frequencies)}")
    for model in models:
        _number(path, f"selection_frequency.{model}", frequencies.get(model), 1.0, model in frequencies)
    return data


def _number(path: Path, field: str, value: Any, high: float, present: bool) -> None:
    if not present:
        raise _refuse(path, field, "missing")
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= high:
        raise _refuse(path, field, f"expected a number in [0, {high:g}], got {_kind(value)}")
