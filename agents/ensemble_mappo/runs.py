"""The run directory of ``ensemble-env train``: its files, its ``config.json``, and the checks every reader shares.

One run directory format for every algorithm of :data:`ensemble_mappo.algorithms.ALGORITHMS`:

=========================  ========================================================================================
file                       what it holds; who writes it; its reader
=========================  ========================================================================================
``config.json``            ``{"algorithm", "config": every field of its config, "run": {"cache", "models",
                           "tasks", "n_questions"}}``, written once when the run starts (:func:`write_config`);
                           :func:`read_config`
``progress.csv``           one row per update (:func:`ensemble_mappo.progress_format.progress_columns`), appended by
                           :class:`~ensemble_mappo.loggers.ProgressLog`, its history rewritten atomically on
                           resume; :func:`ensemble_mappo.progress_format.read_progress`
``checkpoint.pt``          plain data (:mod:`ensemble_mappo.checkpoint`), replaced atomically every
                           ``checkpoint_every`` updates; :func:`ensemble_mappo.checkpoint.read_checkpoint`
``checkpoints/update_N.pt``  the run's kept checkpoints (``checkpoints`` > 0: the start and evenly spaced ones)
``selection.json``         the policy chosen on the validation split among them, and what the choice read
                           (:func:`ensemble_mappo.evaluation.choose`); ``evaluate`` plays it
``run.lock``               while a ``train`` works in the folder (:class:`ensemble_env.run_lock.RunLock`)
``evaluation_*.json``      ``ensemble-env evaluate``'s summaries; :func:`ensemble_mappo.evaluation.read_evaluation`
``mappo_*.png``            ``ensemble-env plot``'s figures (never read back)
``tensorboard/``           with ``train --logger tensorboard``: the log's rows as TensorBoard event files
                           (:class:`~ensemble_mappo.loggers.TensorBoardLog`), replaced by progress.csv's kept rows
                           when a logged run resumes (never read back)
=========================  ========================================================================================

**Reading.** Every reader checks its whole file before anything uses it, and refuses a bad one with a
:class:`RunFileError` (a ValueError) naming the file, the field and the value: the command line prints it as
``ensemble-env COMMAND: error: ...`` with exit status 2. Nothing is coerced: a count that is ``"3"`` or ``3.7``
is refused, not rounded; a field a ``config.json`` lacks is refused, except the fields of :data:`LEGACY_FIELDS`,
which runs written before they existed lack (they get the value those runs were trained with); a field configs no
longer have (:data:`~ensemble_mappo.config.RETIRED_FIELDS`) is checked and dropped. The checks every
reader shares are here: :func:`read_json`, :func:`exact_keys`, :func:`names_of`, :func:`whole_number`,
:func:`refuse`.

**Writing.** Every file goes through :mod:`ensemble_env.files` (a temporary file beside the target, synced,
renamed over it), so a killed writer never leaves a partial file.

**One writer per run.** ``train`` holds the directory's :class:`~ensemble_env.run_lock.RunLock` for the whole run.
``evaluate`` and ``plot`` take no lock: they read files that are only ever replaced whole, and a checkpoint that
does not belong to its ``config.json`` (a run started over while they read) is refused.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ensemble_env import files
from ensemble_env.cache.datasets import resolve as resolve_cache
from ensemble_env.cache.digest import cache_digest
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.text import show
from ensemble_mappo import algorithms
from ensemble_mappo.config import MAX_CONFIG_BYTES, RETIRED_FIELDS, LearnerConfig

__all__ = [
    "CANDIDATES_DIR",
    "CHECKPOINT_NAME",
    "CONFIG_NAME",
    "LEGACY_FIELDS",
    "PROGRESS_NAME",
    "RUN_FILES",
    "SELECTION_NAME",
    "TENSORBOARD_DIR",
    "RunConfig",
    "RunFileError",
    "config_entry",
    "describe",
    "exact_keys",
    "load_run",
    "names_of",
    "read_config",
    "read_json",
    "refuse",
    "run_cache",
    "run_folder",
    "whole_number",
    "write_config",
]

CONFIG_NAME = "config.json"
PROGRESS_NAME = "progress.csv"
#: file name of a run's resumable checkpoint inside its directory
CHECKPOINT_NAME = "checkpoint.pt"
#: the folder of a run's kept checkpoints (``update_N.pt``), among which the deployed policy is chosen
CANDIDATES_DIR = "checkpoints"
#: the choice on validation among the kept checkpoints
SELECTION_NAME = "selection.json"
#: the folder of the run's TensorBoard event files (``train --logger tensorboard``)
TENSORBOARD_DIR = "tensorboard"
#: the files that make a folder a run (``train --out`` refuses a folder holding one unless ``--overwrite``)
RUN_FILES = (CONFIG_NAME, PROGRESS_NAME, CHECKPOINT_NAME, CANDIDATES_DIR, SELECTION_NAME)
#: config fields that runs written before the field existed lack, with the value those runs were trained
#: with. A field added to a config needs an entry here, or the runs written before it are refused (their
#: config would otherwise silently get the new field's default, which they were not trained with). Runs written
#: before the config's ``algorithm`` field lack it too: theirs is the file's ``algorithm``, or for a run written
#: before the registry the one :func:`ensemble_mappo.algorithms.saved_name` infers (:func:`config_entry`).
LEGACY_FIELDS: dict[str, Any] = {
    "decider_policy": "bernoulli",
    "decider_credit": "sampled",  # the environment's reward, the sampled answer's
    "decider_start": "prior",
    "offline_temperature": 0.05,  # unused with the prior start
    "decider_kl_coef": 0.0,
    "decider_ent_coef": -1.0,  # ent_coef's
    "checkpoints": 0,  # the run's policy was its last checkpoint
    "selection": "safe",  # unused without kept checkpoints
    "offline_estimator": "mean",
    "offline_level": 0.95,  # unused before the certified start
    "model_permutations": 0,
    "decider_residual_gain": 1.0,  # the residual decider's network at its one gain
    "fusion_team_size": False,  # the fusion agent read no team size
}
#: the keys of config.json's "run" entry
RUN_KEYS = ("cache", "models", "tasks", "n_questions", "digest")


class RunFileError(ValueError):
    """A file of a run directory that cannot be used; the message names the file, the field and the value."""


def refuse(path: str | Path, field: str, problem: str) -> RunFileError:
    """The error of a run's file ``path`` whose ``field`` (may be empty) has ``problem``."""
    return RunFileError(f"{path}: {field}: {problem}" if field else f"{path}: {problem}")


def describe(value: Any) -> str:
    """What a JSON value is, in words, with a bounded excerpt (for messages)."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    kind = names.get(type(value), "a number" if isinstance(value, int | float) else type(value).__name__)
    return f"{kind} ({show(value)})"


@dataclass(frozen=True)
class RunConfig:
    """What a run's ``config.json`` holds, checked: the config and the cache the run was trained on."""

    path: Path
    """The ``config.json`` read."""
    algorithm: str
    """The algorithm's name (:data:`ensemble_mappo.algorithms.ALGORITHMS`)."""
    config: LearnerConfig
    cache: str | None
    """The cache as the run recorded it: a built-in name, an absolute path, or None: the default cache, or a cache
    given in memory (``ensemble-env benchmark``, the Python API), which ``digest`` tells apart."""
    models: tuple[str, ...]
    tasks: tuple[str, ...]
    n_questions: int
    digest: str | None = None
    """The content digest of the cache the run trained on (:func:`ensemble_env.cache.digest.cache_digest`; None for
    a run written before it was recorded)."""

    @property
    def description(self) -> dict[str, Any]:
        """The ``run`` entry of ``config.json``."""
        return {
            "cache": self.cache,
            "models": list(self.models),
            "tasks": list(self.tasks),
            "n_questions": self.n_questions,
            "digest": self.digest,
        }


def write_config(run_dir: str | Path, config: LearnerConfig, cache: LogitCache, cache_path: str | None) -> Path:
    """Write ``run_dir/config.json`` atomically: the algorithm, ``config`` and the cache (``cache_path`` as
    recorded, its models, tasks, size and content digest)."""
    run = {
        "cache": cache_path,
        "models": list(cache.models),
        "tasks": list(cache.task_names or ()),
        "n_questions": int(cache.n_questions),
        "digest": cache_digest(cache),
    }
    entry = {"algorithm": config.algorithm, "config": config.to_dict(), "run": run}
    text = json.dumps(entry, indent=2, allow_nan=False)
    return files.write_text(Path(run_dir) / CONFIG_NAME, text + "\n")


def read_config(run_dir: str | Path) -> RunConfig:
    """Read and check ``run_dir/config.json``: a JSON object of exactly ``algorithm`` (a registered one; a MAPPO
    run written before the field existed lacks it), ``config`` (every field of the algorithm's config, each value
    valid, its ``algorithm`` the file's; :data:`LEGACY_FIELDS` may be missing) and ``run`` (the cache, its models,
    tasks and size). Raises
    :class:`RunFileError` naming the file, the field and the value; FileNotFoundError when there is no run there."""
    folder = run_folder(run_dir)
    path = folder / CONFIG_NAME
    hint = (
        f"{folder} holds no run (a train stopped before it wrote its config leaves nothing to resume: run "
        f"`ensemble-env train --out {folder}` again)"
        if not any(os.path.lexists(folder / name) for name in RUN_FILES)
        else f"is {folder} a directory written by `ensemble-env train`?"
    )
    data = read_json(path, MAX_CONFIG_BYTES, hint)
    if not isinstance(data, dict):
        raise refuse(path, "", f"expected a JSON object with 'algorithm', 'config' and 'run', got {describe(data)}")
    name = data.get("algorithm", "mappo")  # MAPPO's runs before the algorithm registry (and IPPO's: critic="local")
    exact_keys(path, "", data, ("algorithm", "config", "run") if "algorithm" in data else ("config", "run"))
    if not isinstance(name, str) or name not in algorithms.ALGORITHMS:
        raise refuse(path, "algorithm", f"expected one of {', '.join(algorithms.ALGORITHMS)}, got {describe(name)}")
    config = config_entry(path, "config", data["config"], name if "algorithm" in data else None)
    run = data["run"]
    if not isinstance(run, dict):
        raise refuse(path, "run", f"expected an object of {', '.join(RUN_KEYS)}, got {describe(run)}")
    exact_keys(path, "run", run, RUN_KEYS if "digest" in run else RUN_KEYS[:-1])  # no digest: an earlier run
    digest = run.get("digest")
    if digest is not None and (not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest)):
        raise refuse(path, "run.digest", f"expected the cache's sha256 digest (64 hex digits), got {describe(digest)}")
    cache = run["cache"]
    if cache is not None and (not isinstance(cache, str) or not cache):
        raise refuse(path, "run.cache", f"expected a cache name or path (or null: the default), got {describe(cache)}")
    models = names_of(path, "run.models", run["models"], nonempty=True)
    tasks = names_of(path, "run.tasks", run["tasks"], nonempty=False)
    n_questions = whole_number(path, "run.n_questions", run["n_questions"], low=1)
    return RunConfig(path, config.algorithm, config, cache, models, tasks, n_questions, digest)


def run_cache(run: RunConfig, cache_arg: str | None = None) -> LogitCache:
    """The cache of a run: ``cache_arg`` (``--cache``) when given, else the one its ``config.json`` records (a
    failure to load that one names the config.json; a run that records none and trained on another cache than the
    default, by its digest, is refused: nothing is evaluated on a cache the run did not name)."""
    if cache_arg is not None:
        return resolve_cache(cache_arg)
    try:
        cache = resolve_cache(run.cache)
    except FileNotFoundError as error:
        raise FileNotFoundError(f"{error} (the cache {run.path} records; --cache gives another)") from None
    except ValueError as error:
        raise RunFileError(f"{error} (the cache {run.path} records; --cache gives another)") from None
    if run.cache is None and run.digest is not None and cache_digest(cache) != run.digest:
        raise refuse(
            run.path,
            "run.cache",
            f"null, and the run's digest {run.digest[:12]}... is not the default cache's: the run trained on a cache "
            "given in memory (ensemble-env benchmark, the Python API); give that cache with --cache",
        )
    return cache


def load_run(run_dir: str | Path) -> tuple[LearnerConfig, dict[str, Any]]:
    """The config and the run description (cache, models, tasks, size) of a run directory (:func:`read_config`)."""
    run = read_config(run_dir)
    return run.config, run.description


def run_folder(run_dir: str | Path) -> Path:
    """``run_dir`` if it is a folder (FileNotFoundError when there is none, RunFileError for a file)."""
    folder = Path(run_dir)
    if not folder.exists():
        raise FileNotFoundError(f"{folder}: no such run directory (`ensemble-env train --out {folder}` makes one)")
    if not folder.is_dir():
        raise refuse(folder, "", "is a file, not a run directory (the folder `ensemble-env train --out` wrote)")
    return folder


def read_json(path: Path, limit: int, hint: str, *, constants: bool = False) -> Any:
    """The JSON value of ``path``; NaN and Infinity (not JSON) are refused unless ``constants``."""
    data = _read_bytes(path, limit, hint)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise refuse(path, "", f"not UTF-8 text (byte {error.start}); a run's JSON files are text") from None
    try:
        return json.loads(text, parse_constant=None if constants else _no_constant)
    except json.JSONDecodeError as error:
        raise refuse(path, "", f"not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})") from None
    except (ValueError, RecursionError) as error:
        raise refuse(path, "", f"not valid JSON ({show(str(error) or type(error).__name__, 200)})") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (a run's files hold finite numbers only)")


def _read_bytes(path: Path, limit: int, hint: str) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (a FIFO would block, a device never end)."""
    try:
        status = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} not found: {hint}") from None
    except OSError as error:
        raise refuse(path, "", f"cannot read it ({error.strerror or error})") from None
    if not stat.S_ISREG(status.st_mode):
        raise refuse(path, "", "not a regular file (a folder, FIFO or device)")
    if status.st_size > limit:
        raise refuse(path, "", f"{status.st_size:,} bytes, more than the {limit:,} such a file may hold")
    try:
        with open(path, "rb") as file:
            return file.read(limit + 1)
    except OSError as error:
        raise refuse(path, "", f"cannot read it ({error.strerror or error})") from None


def exact_keys(path: Path, field: str, data: Mapping[str, Any], keys: Sequence[str]) -> None:
    """Refuse ``data`` (the object at ``field`` of ``path``) unless its keys are exactly ``keys``."""
    missing = [key for key in keys if key not in data]
    unknown = sorted(key for key in data if key not in keys)
    where = f"{field} " if field else ""
    if missing:
        raise refuse(path, field, f"lacks {', '.join(map(repr, missing))} ({where}holds {', '.join(keys)})")
    if unknown:
        raise refuse(path, field, f"unknown key(s) {show(unknown, 200)} ({where}holds {', '.join(keys)} only)")


def config_entry(path: Path, field: str, saved: Any, algorithm: str | None) -> LearnerConfig:
    """A run's saved config (config.json's, or a checkpoint's copy) of ``algorithm``, the file's (None: a run
    written before the registry; its config's own ``algorithm``, or for a run written before configs named theirs,
    the one :func:`ensemble_mappo.algorithms.saved_name` infers): every field there, every value valid, its
    ``algorithm`` (given to a config saved without one) the file's."""
    if not isinstance(saved, dict):
        raise refuse(path, field, f"expected an object of training options, got {describe(saved)}")
    if algorithm is None:
        algorithm = algorithms.saved_name(saved)
    entry = algorithms.get(algorithm)
    legacy = {**LEGACY_FIELDS, "algorithm": entry.name}  # a config saved before it named its algorithm: the run's
    names = [item.name for item in fields(entry.config_class)]
    missing = [name for name in names if name not in saved and name not in legacy]
    if missing:
        raise refuse(
            path, field, f"lacks {', '.join(missing)} (a run's config holds every field; was the file edited?)"
        )
    for name, (default, _) in RETIRED_FIELDS.items():  # runs written before the field left the config hold it
        if name in saved and type(saved[name]) is not type(default):
            kind = describe(default).split(" (")[0]
            raise refuse(
                path, f"{field}.{name}", f"expected {kind} (a retired field, not read), got {describe(saved[name])}"
            )
    saved = {name: value for name, value in saved.items() if name not in RETIRED_FIELDS}
    values = {**{name: legacy[name] for name in names if name not in saved and name in legacy}, **saved}
    try:
        return entry.from_dict(values, where=f"{path}: {field}", merge_env=False)
    except ValueError as error:  # it names the file and the field already
        raise RunFileError(str(error)) from None


def names_of(path: Path, field: str, value: Any, *, nonempty: bool) -> tuple[str, ...]:
    """``value`` if it is a list of distinct non-empty strings (non-empty itself with ``nonempty``)."""
    if not isinstance(value, list) or not all(isinstance(name, str) and name for name in value):
        raise refuse(path, field, f"expected a list of names, got {describe(value)}")
    if nonempty and not value:
        raise refuse(path, field, "is empty; a run has a pool of at least one model")
    if len(set(value)) != len(value):
        raise refuse(path, field, f"names one twice: {show(value, 200)}")
    return tuple(value)


def whole_number(path: str | Path, field: str, value: Any, *, low: int, high: int | None = None) -> int:
    """``value`` if it is an int (not a bool, not a float, not a string) in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise refuse(path, field, f"expected a whole number, got {describe(value)}")
    if value < low or (high is not None and value > high):
        bound = f"[{low:,}, {high:,}]" if high is not None else f">= {low:,}"
        raise refuse(path, field, f"expected a whole number {bound}, got {show(value)}")
    return value
