"""Finding lm-eval samples files: the model folders a path stands for, each folder's file per task, and the
task names stored in a cache.

- :func:`find_model_folders`: a folder of samples files is one model; else each such sub-folder is one.
- :func:`find_task_files`: the task of each samples file, from its name (``samples_<task>_<date>.jsonl``,
  lm-eval >= 0.4.3) or, for ``<model_args>_<task>.jsonl`` (0.4.0-0.4.2), with hints from the run's results
  ``*.json`` (read only then, by :func:`~ensemble_env.cache.convert.common.read_input`: regular files of at
  most :data:`~ensemble_env.cache.convert.common.MAX_RESULTS_BYTES`, inside the folder given) or from the
  task names given. A ``samples_`` file renamed after lm-eval wrote it takes the text
  before its date (``samples_<task>_<date>.first25.jsonl``) or, without a date, the longest task of the
  results file (or of the names given) that its name starts with, else all of it.
- :func:`strip_task_prefix`: the shared prefix (e.g. ``leaderboard_bbh_``) removed from the stored names.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from ensemble_env.cache.convert.common import (
    MAX_RESULTS_BYTES,
    ConversionError,
    decode_text,
    json_decoder,
    read_input,
)

__all__ = ["find_model_folders", "find_task_files", "strip_task_prefix"]

# lm-eval >= 0.4.3: samples_<task>_<datetime.isoformat() with ':' replaced by '-'>.jsonl
_DATE = r"_[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}-[0-9]{2}-[0-9]{2}(?:\.[0-9]+)?"
_NEW_NAME = re.compile(rf"samples_(?P<task>.+?)(?P<date>{_DATE})?\.jsonl")
# the same name with more after the date (a renamed or cut copy): the task is what precedes the first date
_DATED_NAME = re.compile(rf"samples_(?P<task>.+?){_DATE}")


def find_model_folders(path: str | Path) -> list[tuple[str, Path]]:
    """The (model name, folder) pairs a PATH argument stands for.

    A folder holding samples files (``*.jsonl``) is one model, named after the folder; otherwise each of its
    sub-folders that holds samples files is a model (sorted by name), as ``lm_eval --output_path`` lays them out.
    """
    folder = Path(path)
    if not folder.exists():
        raise FileNotFoundError(f"{path}: no such folder")
    if not folder.is_dir():
        raise ConversionError(
            f"{path}: not a folder; give the folder of a model's samples files, or a folder of such folders"
        )
    if _jsonl_files(folder):
        return [(folder.resolve().name, folder)]
    models = [(sub.name, sub) for sub in sorted(folder.iterdir()) if sub.is_dir() and _jsonl_files(sub)]
    if not models:
        raise ConversionError(f"{path}: no lm-eval samples files (*.jsonl) in this folder nor in its sub-folders")
    return models


def _jsonl_files(folder: Path) -> list[Path]:
    """The samples files of a folder: its ``*.jsonl`` entries but folders and hidden files. A FIFO, a device
    or a link is listed too, so that reading it refuses it by name rather than leaving its task out unsaid."""
    return sorted(file for file in folder.glob("*.jsonl") if not file.is_dir() and not file.name.startswith("."))


def _dated_task(name: str) -> str | None:
    """The task of a samples file whose name holds lm-eval's date (``samples_<task>_<date>...``), else None."""
    match = _NEW_NAME.fullmatch(name)
    if match and match["date"]:
        return match["task"]
    dated = _DATED_NAME.match(name.removesuffix(".jsonl"))
    return dated["task"] if dated else None


def _results_hints(folder: Path, root: Path) -> tuple[set[str], set[str]]:
    """From the results ``*.json`` of a run: samples file-name prefixes (``<model_args>_``) and task names.

    A file that is not JSON (or not a results file) only gives no hint; one that cannot be read safely (not a
    regular file, larger than :data:`MAX_RESULTS_BYTES`, a link leading out of ``root``) is an error."""
    prefixes: set[str] = set()
    tasks: set[str] = set()
    for file in sorted(folder.glob("*.json")):
        if file.is_dir():
            continue
        try:
            data = read_input(file, limit=MAX_RESULTS_BYTES, root=root)
        except FileNotFoundError:  # gone, or a broken link: no hint
            continue
        try:
            results = json_decoder().decode(decode_text(file, data))
        except (ValueError, RecursionError):  # ValueError: not JSON, not UTF-8
            continue  # not a results file we can use; the hint is optional
        if not isinstance(results, dict):
            continue
        config = results.get("config")
        if isinstance(config, dict) and isinstance(config.get("model_args"), str):
            prefixes.add(re.sub("/|=", "__", config["model_args"]) + "_")  # as lm-eval 0.4.0-0.4.2 names files
        for key in ("configs", "results"):
            if isinstance(results.get(key), dict):
                tasks.update(name for name in results[key] if isinstance(name, str))
    return prefixes, tasks


def find_task_files(
    folder: str | Path,
    known_tasks: Sequence[str] = (),
    *,
    skip_unknown: bool = False,
    root: str | Path | None = None,
) -> dict[str, Path]:
    """Map each task of a model folder to its samples file.

    ``samples_<task>_<date>.jsonl`` (lm-eval >= 0.4.3) names its task. In ``<model_args>_<task>.jsonl``
    (lm-eval 0.4.0-0.4.2) the model arguments are found from the run's results ``*.json`` beside the file
    (``config.model_args``), or the longest of the task names listed there or in ``known_tasks`` that ends the
    file name is the task; a file whose task cannot be told is an error, or is passed over with
    ``skip_unknown`` (when the wanted tasks are named). Two files of the same task are an error. The results
    files are read only when a file name holds no date, as the folder given (``root``, default ``folder``)
    allows (:func:`~ensemble_env.cache.convert.common.read_input`).
    """
    folder = Path(folder)
    files = _jsonl_files(folder)
    prefixes: set[str] = set()
    names: set[str] = set()
    if any(_dated_task(file.name) is None for file in files):
        prefixes, names = _results_hints(folder, Path(folder if root is None else root))
    names.update(known_tasks)
    tasks: dict[str, Path] = {}
    for file in files:
        try:
            task = _task_of(file, prefixes, names)
        except ConversionError:
            if skip_unknown:
                continue
            raise
        if task in tasks:
            raise ConversionError(
                f"{folder}: task {task!r} has two samples files, {tasks[task].name} and {file.name}; "
                "keep one (e.g. the latest run) in the folder"
            )
        tasks[task] = file
    return tasks


def _task_of(file: Path, prefixes: set[str], names: set[str]) -> str:
    """The task of a samples file, by the rules of :func:`find_task_files`.

    >>> _task_of(Path("samples_arc_easy_2024-06-17T16-06-39.458097.jsonl"), set(), set())
    'arc_easy'
    >>> _task_of(Path("samples_bias_2024-06-17T16-06-39.458097.first25.jsonl"), set(), set())
    'bias'
    >>> _task_of(Path("samples_bias_classification_v2.jsonl"), set(), {"bias_classification", "bias"})
    'bias_classification'
    """
    stem = file.name.removesuffix(".jsonl")
    dated = _dated_task(file.name)  # with more after the date: a renamed or cut copy
    if dated is not None:
        return dated
    match = _NEW_NAME.fullmatch(file.name)
    if match:  # samples_<name>.jsonl without a date: the longest known task it starts with, else all of it
        rest = match["task"]
        starts = [name for name in names if rest == name or rest.startswith((name + "_", name + "."))]
        return max(starts, key=len) if starts else rest
    for prefix in sorted(prefixes, key=len, reverse=True):
        if stem.startswith(prefix) and len(stem) > len(prefix):
            return stem[len(prefix) :]
    endings = [name for name in names if stem.endswith("_" + name)]
    if endings:
        return max(endings, key=len)
    raise ConversionError(
        f"{file}: cannot tell the task from the file name: lm-eval >= 0.4.3 writes samples_<task>_<date>.jsonl and "
        "0.4.0-0.4.2 writes <model_args>_<task>.jsonl; for the latter keep the run's results .json (it holds "
        "config.model_args) beside the file, or name the task with --tasks"
    )


def strip_task_prefix(task_names: Sequence[str], strip_prefix: str = "auto") -> dict[str, str]:
    """Map full task names to the names stored in the cache.

    ``strip_prefix="auto"``: remove the longest prefix, ending with ``_``, shared by all the names (when there
    are at least two), e.g. ``leaderboard_bbh_``. ``""``: keep the names. Any other string: remove it from the
    names that start with it. Raises ConversionError when two names would coincide or one would be empty.

    >>> strip_task_prefix(["leaderboard_bbh_navigate", "leaderboard_bbh_snarks"])
    {'leaderboard_bbh_navigate': 'navigate', 'leaderboard_bbh_snarks': 'snarks'}
    >>> strip_task_prefix(["arc_easy", "arc_challenge"], "")
    {'arc_easy': 'arc_easy', 'arc_challenge': 'arc_challenge'}
    """
    names = list(dict.fromkeys(task_names))
    prefix = strip_prefix
    if strip_prefix == "auto":
        prefix = ""
        if len(names) >= 2:
            common = names[0][: min(map(len, names))]
            for name in names[1:]:
                while not name.startswith(common):
                    common = common[:-1]
            prefix = common[: common.rfind("_") + 1]
    stripped = {name: name[len(prefix) :] if prefix and name.startswith(prefix) else name for name in names}
    seen: dict[str, str] = {}
    for name, short in stripped.items():
        if not short:
            raise ConversionError(f"--strip-prefix {prefix!r} would leave task {name!r} without a name")
        if short in seen:
            raise ConversionError(
                f"tasks {seen[short]!r} and {name!r} would both be named {short!r}; choose another --strip-prefix"
            )
        seen[short] = name
    return stripped
