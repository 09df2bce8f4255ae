"""Converters into logit caches: lm-evaluation-harness samples files and plain arrays.

- :func:`from_lm_eval` turns the per-sample logs of lm-evaluation-harness (``--log_samples``; also the
  Open LLM Leaderboard "details" datasets, which use the same files) into a :class:`~ensemble_env.cache.LogitCache`:
  one folder of samples files per model, questions aligned across models by ``doc_id``.
- :func:`read_samples` reads one samples file, in either layout lm-eval has written:

  ===============  ==================================  ===========================================
  lm-eval          file                                content
  ===============  ==================================  ===========================================
  >= 0.4.3         ``samples_<task>_<date>.jsonl``     JSON Lines; numbers and booleans as strings;
                                                       ``arguments`` ``{"gen_args_i": {"arg_0":
                                                       context, "arg_1": " " + choice_i}}``
  0.4.0 - 0.4.2    ``<model_args>_<task>.jsonl``       one indented JSON array; native numbers;
                                                       ``arguments`` ``[[context, continuation]]``
  ===============  ==================================  ===========================================

- :func:`from_arrays` / :func:`from_array_files` build a cache from numpy arrays, ``.npz``/``.npy`` files or
  CSV tables (scores of shape (Q, N, C) or (Q, N*C)).
- :func:`split_by_task` assigns the train/validation/test split per task (the last fraction is test, or a
  seeded random choice); the ``cache split`` command uses it too.

Every problem in an input raises :class:`ConversionError` (a ValueError) whose message names the file, the
line and the field; inputs are only read. Writing the result is :func:`ensemble_env.cache.save_cache`'s job
(atomic: temporary file, then rename). Nothing is loaded through pickle.

>>> split_by_task(np.array([0, 0, 0, 0, 0, 1, 1]), test_fraction=0.2).tolist()
[0, 0, 0, 0, 1, 0, 1]
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from ensemble_env.cache import SPLITS, LogitCache

__all__ = [
    "ARRAY_FIELDS",
    "NORMALIZATIONS",
    "ConversionError",
    "Sample",
    "find_model_folders",
    "find_task_files",
    "from_array_files",
    "from_arrays",
    "from_lm_eval",
    "read_samples",
    "split_by_task",
    "strip_task_prefix",
]

#: how per-choice log-likelihoods may be normalised: as is, per character (lm-eval ``acc_norm``), per byte
#: (lm-eval ``acc_bytes``) of the choice text
NORMALIZATIONS = ("none", "chars", "bytes")
#: arrays a ``.npz`` file given to :func:`from_array_files` may hold (the datasets of the cache format)
ARRAY_FIELDS = (
    "scores",
    "labels",
    "models",
    "n_choices",
    "tasks",
    "task_names",
    "split",
    "question_ids",
    "costs",
    "features",
)

ProgressFn = Callable[[int, int, str], None]
NotifyFn = Callable[[str], None]

# lm-eval >= 0.4.3: samples_<task>_<datetime.isoformat() with ':' replaced by '-'>.jsonl
_NEW_NAME = re.compile(r"samples_(?P<task>.+?)(?:_\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?)?\.jsonl")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_INDEX = re.compile(r"[0-9]+")
_NON_FINITE = {"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"}
_GENERATIVE = (
    "this is a generative (generate_until) task; only multiple-choice tasks, scored by a log-likelihood per "
    "choice, can become a logit cache"
)


class ConversionError(ValueError):
    """An input cannot be converted; the message names the file, the line (or array) and the field."""


def _show(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _where(path: str | Path, line: int | None, field: str | None) -> str:
    place = str(path) if line is None else f"{path}, line {line}"
    return place if field is None else f"{place}: field '{field}'"


def _error(path: str | Path, line: int | None, field: str | None, problem: str) -> ConversionError:
    return ConversionError(f"{_where(path, line, field)}: {problem}")


def _parse_float(value: Any) -> float | None:
    """A finite float from a JSON number or a numeric string; None when it is not a finite number.

    Strings must look like a plain decimal number (no spaces, underscores or hex); booleans are refused.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str) and _NUMBER.fullmatch(value):
        number = float(value)
    else:
        return None
    return number if math.isfinite(number) else None


def _number_problem(value: Any) -> str:
    """Why ``value`` (refused by :func:`_parse_float`) is not a usable number."""
    if isinstance(value, float) or (isinstance(value, str) and value.strip().lower() in _NON_FINITE):
        return f"{_show(value)} is not finite (NaN or infinity)"
    if isinstance(value, str) and _NUMBER.fullmatch(value):
        return f"{_show(value)} overflows a float"
    return f"{_show(value)} is not a number"


# -- one samples file --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """One multiple-choice question as one model answered it: one line (or array element) of a samples file.

    ``choices`` are the continuations with the target delimiter (one leading space) removed; ``logliks`` the
    model's log-likelihood of each; ``label`` the gold choice index; ``line`` where the record starts.
    """

    doc_id: int
    line: int
    choices: tuple[str, ...]
    logliks: tuple[float, ...]
    label: int
    doc_hash: str | None = None
    filter: str | None = None


def _json_lines(path: Path, text: str) -> Iterator[tuple[int, Any]]:
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as error:
            raise _error(
                path, number, None, f"not valid JSON ({error.msg} at column {error.colno}; truncated or corrupt?)"
            ) from None


def _skip_space(text: str, index: int) -> int:
    """The index of the first character at or after ``index`` that is not JSON whitespace."""
    while index < len(text) and text[index] in " \t\n\r":
        index += 1
    return index


def _json_array(path: Path, text: str) -> Iterator[tuple[int, Any]]:
    """The elements of a JSON array (lm-eval 0.4.0-0.4.2 files), each with the line it starts on."""
    decoder = json.JSONDecoder()
    line, counted = 1, 0

    def line_at(position: int) -> int:
        nonlocal line, counted
        line += text.count("\n", counted, position)
        counted = position
        return line

    index = _skip_space(text, _skip_space(text, 0) + 1)  # after the '['
    if text.startswith("]", index):
        index += 1
    else:
        while True:
            start = line_at(index)
            try:
                record, index = decoder.raw_decode(text, index)
            except json.JSONDecodeError as error:
                raise _error(path, error.lineno, None, f"not valid JSON ({error.msg}; truncated or corrupt?)") from None
            yield start, record
            index = _skip_space(text, index)
            if index >= len(text):
                raise _error(path, line_at(index), None, "the JSON array has no closing ']' (truncated?)")
            if text[index] == "]":
                index += 1
                break
            if text[index] != ",":
                raise _error(path, line_at(index), None, f"expected ',' or ']' in the JSON array, got {text[index]!r}")
            index = _skip_space(text, index + 1)
    index = _skip_space(text, index)
    if index < len(text):
        raise _error(path, line_at(index), None, "text after the end of the JSON array")


def _records(path: Path) -> Iterator[tuple[int, Any]]:
    """(line, record) for every record of a samples file, whichever of the two layouts it has."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise _error(path, line, None, f"not UTF-8 text ({error.reason})") from None
    start = text.lstrip()
    if not start:
        raise _error(path, None, None, "the file is empty: no samples")
    yield from (_json_array if start[0] == "[" else _json_lines)(path, text)


def _argument_lists(record: Mapping[str, Any], fail: Callable[[str, str], ConversionError]) -> list[list[Any]]:
    """The request arguments of a record as lists ``[context, continuation, ...]``, in request order."""
    if "arguments" not in record:
        raise fail("arguments", "required field is missing")
    arguments = record["arguments"]
    if isinstance(arguments, dict):  # lm-eval >= 0.4.3: {"gen_args_i": {"arg_j": ...}}
        requests = []
        for i in range(len(arguments)):
            entry = arguments.get(f"gen_args_{i}")
            if not isinstance(entry, dict):
                raise fail(
                    "arguments",
                    f"expected keys gen_args_0..gen_args_{len(arguments) - 1} holding objects, got {_show(arguments)}",
                )
            if any(f"arg_{j}" not in entry for j in range(len(entry))):
                raise fail("arguments", f"gen_args_{i}: expected keys arg_0..arg_{len(entry) - 1}, got {sorted(entry)}")
            requests.append([entry[f"arg_{j}"] for j in range(len(entry))])
        return requests
    if isinstance(arguments, list) and all(isinstance(entry, list) for entry in arguments):
        return arguments  # lm-eval 0.4.0-0.4.2: [[context, continuation], ...]
    raise fail(
        "arguments",
        f"expected an object of gen_args_i or a list of [context, continuation] pairs, got {_show(arguments)}",
    )


def _continuations(record: Mapping[str, Any], fail: Callable[[str, str], ConversionError]) -> list[str]:
    continuations = []
    for i, request in enumerate(_argument_lists(record, fail)):
        if len(request) >= 2 and isinstance(request[1], dict):
            raise fail("arguments", f"request {i} carries generation settings {_show(request[1])}: {_GENERATIVE}")
        if len(request) != 2:
            raise fail(
                "arguments",
                f"request {i} has {len(request)} argument(s), expected [context, continuation] "
                "(a loglikelihood_rolling or generative task cannot become a logit cache)",
            )
        if not isinstance(request[1], str):
            raise fail("arguments", f"request {i}: the continuation must be a string, got {_show(request[1])}")
        continuations.append(request[1])
    if len(continuations) < 2:
        raise fail("arguments", f"has {len(continuations)} choice(s): a multiple-choice question needs at least 2")
    return continuations


def _logliks(
    record: Mapping[str, Any], n_choices: int, fail: Callable[[str, str], ConversionError]
) -> tuple[float, ...]:
    """The per-choice log-likelihoods, from ``filtered_resps`` (or ``resps`` when it is absent)."""
    field = "filtered_resps" if "filtered_resps" in record else "resps"
    if field not in record:
        raise fail("filtered_resps", "required field is missing (and there is no 'resps' either)")
    responses = record[field]
    if not isinstance(responses, list):
        raise fail(field, f"expected a list with one entry per choice, got {_show(responses)}")
    if len(responses) != n_choices:
        raise fail(field, f"has {len(responses)} entries but 'arguments' has {n_choices} choices")
    values = []
    for i, response in enumerate(responses):
        if field == "resps":  # resps: per choice a list holding one [loglik, is_greedy] pair
            if not (isinstance(response, list) and len(response) == 1):
                raise fail(field, f"choice {i}: expected [[log-likelihood, is_greedy]], got {_show(response)}")
            response = response[0]
        if isinstance(response, str):
            raise fail(field, f"choice {i} is the text {_show(response)}, not a log-likelihood: {_GENERATIVE}")
        if not (isinstance(response, list) and len(response) == 2):
            raise fail(field, f"choice {i}: expected a [log-likelihood, is_greedy] pair, got {_show(response)}")
        value = _parse_float(response[0])
        if value is None:
            raise fail(field, f"choice {i}: log-likelihood {_number_problem(response[0])}")
        values.append(value)
    return tuple(values)


def _gold(record: Mapping[str, Any], choices: tuple[str, ...], fail: Callable[[str, str], ConversionError]) -> int:
    """The gold index: the position of ``target`` among the choices, else ``target`` as an index."""
    if "target" not in record:
        raise fail("target", "required field is missing")
    target = record["target"]
    n_choices = len(choices)
    if isinstance(target, str):
        if target in choices:
            return choices.index(target)
        if _INDEX.fullmatch(target) and int(target) < n_choices:
            return int(target)
    elif isinstance(target, int) and not isinstance(target, bool):
        if 0 <= target < n_choices:
            return target
    elif isinstance(target, list):
        raise fail("target", f"{_show(target)} holds several gold answers; a logit cache has one per question")
    raise fail(
        "target",
        f"{_show(target)} is neither one of the {n_choices} choices {_show(list(choices), 120)} "
        f"nor a choice index in 0..{n_choices - 1}",
    )


def _optional_string(record: Mapping[str, Any], field: str, fail: Callable[[str, str], ConversionError]) -> str | None:
    value = record.get(field)
    if value is not None and not isinstance(value, str):
        raise fail(field, f"must be a string, got {_show(value)}")
    return value


def _parse_record(path: Path, line: int, record: Any) -> Sample:
    def fail(field: str, problem: str) -> ConversionError:
        return _error(path, line, field, problem)

    if not isinstance(record, dict):
        raise _error(path, line, None, f"expected a JSON object (one sample), got {_show(record)}")
    if "doc_id" not in record:
        raise fail("doc_id", "required field is missing")
    doc_id = record["doc_id"]
    if isinstance(doc_id, bool) or not isinstance(doc_id, int) or doc_id < 0:
        raise fail("doc_id", f"must be a non-negative integer, got {_show(doc_id)}")
    continuations = _continuations(record, fail)
    logliks = _logliks(record, len(continuations), fail)
    choices = tuple(text[1:] if text.startswith(" ") else text for text in continuations)
    return Sample(
        doc_id=doc_id,
        line=line,
        choices=choices,
        logliks=logliks,
        label=_gold(record, choices, fail),
        doc_hash=_optional_string(record, "doc_hash", fail),
        filter=_optional_string(record, "filter", fail),
    )


def read_samples(path: str | Path) -> list[Sample]:
    """Read one lm-eval samples file (either layout) into its questions, sorted by ``doc_id``.

    Raises
    ------
    ConversionError
        Naming the file, the line and the field: invalid or truncated JSON, a missing field, a log-likelihood
        that is not a finite number, a ``target`` that is not a choice, a generative task (generation
        settings instead of continuations, texts instead of log-likelihoods, one line per filter), fewer than
        two choices, a ``doc_id`` that appears twice.
    """
    file = Path(path)
    samples = [_parse_record(file, line, record) for line, record in _records(file)]
    if not samples:
        raise _error(file, None, None, "holds no samples (an empty JSON array)")
    samples.sort(key=lambda sample: sample.doc_id)
    for first, second in itertools.pairwise(samples):
        if first.doc_id == second.doc_id:
            if first.filter != second.filter:
                raise _error(
                    file,
                    second.line,
                    "filter",
                    f"doc_id {first.doc_id} appears once per filter ({first.filter!r} on line {first.line}, "
                    f"{second.filter!r} here): {_GENERATIVE}",
                )
            raise _error(file, second.line, "doc_id", f"doc_id {first.doc_id} already appears on line {first.line}")
    return samples


# -- folders of samples files --------------------------------------------------------------------------------------


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
    return sorted(file for file in folder.glob("*.jsonl") if file.is_file() and not file.name.startswith("."))


def _results_hints(folder: Path) -> tuple[set[str], set[str]]:
    """From the results ``*.json`` of a run: samples file-name prefixes (``<model_args>_``) and task names."""
    prefixes: set[str] = set()
    tasks: set[str] = set()
    for file in sorted(folder.glob("*.json")):
        try:
            results = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
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
    folder: str | Path, known_tasks: Sequence[str] = (), *, skip_unknown: bool = False
) -> dict[str, Path]:
    """Map each task of a model folder to its samples file.

    ``samples_<task>_<date>.jsonl`` (lm-eval >= 0.4.3) names its task. In ``<model_args>_<task>.jsonl``
    (lm-eval 0.4.0-0.4.2) the model arguments are found from the run's results ``*.json`` beside the file
    (``config.model_args``), or the longest of the task names listed there or in ``known_tasks`` that ends the
    file name is the task; a file whose task cannot be told is an error, or is passed over with
    ``skip_unknown`` (when the wanted tasks are named). Two files of the same task are an error.
    """
    folder = Path(folder)
    prefixes, names = _results_hints(folder)
    names.update(known_tasks)
    tasks: dict[str, Path] = {}
    for file in _jsonl_files(folder):
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
    match = _NEW_NAME.fullmatch(file.name)
    if match:
        return match["task"]
    stem = file.name.removesuffix(".jsonl")
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


# -- splits ----------------------------------------------------------------------------------------------------------


def _fraction(value: float, name: str) -> Fraction:
    """A fraction in [0, 1] as the exact decimal it was written as (0.2 is 1/5, not the float nearest 0.2)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or not 0 <= value <= 1:
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    return Fraction(repr(float(value)))


def split_by_task(
    tasks: np.ndarray,
    test_fraction: float = 0.2,
    *,
    validation_fraction: float = 0.0,
    seed: int | None = None,
) -> np.ndarray:
    """Split codes (0 train, 2 validation, 1 test, as stored in a cache) assigned per task.

    For a task of ``n`` questions, ``n_train = floor((1 - test_fraction - validation_fraction) * n)`` and
    ``n_test = n - floor((1 - test_fraction) * n)``, computed exactly from the decimal fractions (so with 0.2,
    ``n_train`` is ``floor(0.8 n)``). Without ``seed`` the task's questions, in the order they appear, are
    train first, then validation, and the last ``n_test`` are test; with ``seed`` they are assigned by a random
    permutation per task, drawn from ``np.random.default_rng(seed)`` in task-index order.

    >>> split_by_task(np.zeros(10, dtype=int), 0.2, validation_fraction=0.1).tolist()
    [0, 0, 0, 0, 0, 0, 0, 2, 1, 1]
    >>> codes = split_by_task(np.zeros(10, dtype=int), 0.2, seed=1)
    >>> int((codes == 1).sum()), codes.tolist() == split_by_task(np.zeros(10, dtype=int), 0.2, seed=1).tolist()
    (2, True)
    """
    test = _fraction(test_fraction, "test_fraction")
    validation = _fraction(validation_fraction, "validation_fraction")
    if test + validation > 1:
        raise ValueError(
            f"test_fraction + validation_fraction must be at most 1, got {test_fraction} + {validation_fraction}"
        )
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int | np.integer)):
        raise ValueError(f"seed must be an integer or None, got {seed!r}")
    task_index = np.asarray(tasks)
    if task_index.ndim != 1 or task_index.dtype.kind not in "iu":
        raise ValueError(
            f"tasks must be a 1-D integer array, got shape {task_index.shape} and dtype {task_index.dtype}"
        )
    codes = np.zeros(task_index.size, dtype=np.int64)
    rng = None if seed is None else np.random.default_rng(int(seed))
    for task in np.unique(task_index):
        rows = np.flatnonzero(task_index == task)
        n = rows.size
        n_train = math.floor((1 - test - validation) * n)
        n_not_test = math.floor((1 - test) * n)
        position_codes = np.full(n, SPLITS["test"], dtype=np.int64)
        position_codes[:n_not_test] = SPLITS["validation"]
        position_codes[:n_train] = SPLITS["train"]
        if rng is not None:
            rows = rows[rng.permutation(n)]
        codes[rows] = position_codes
    return codes


# -- many models -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Model:
    name: str
    folder: Path
    files: dict[str, Path]


def _find_models(paths: Sequence[str | Path], known_tasks: Sequence[str]) -> list[_Model]:
    models: list[_Model] = []
    seen: dict[str, Path] = {}
    if isinstance(paths, str | Path) or not paths:
        raise ValueError(f"paths must be a non-empty list of folders, got {paths!r}")
    for path in paths:
        for name, folder in find_model_folders(path):
            if name in seen:
                raise ConversionError(
                    f"two model folders are named {name!r}: {seen[name]} and {folder}; model names must be unique"
                )
            seen[name] = folder
            files = find_task_files(folder, known_tasks, skip_unknown=bool(known_tasks))
            models.append(_Model(name, folder, files))
    return models


def _select_tasks(models: list[_Model], short: dict[str, str], tasks: Sequence[str] | None) -> list[str]:
    """Full names of the tasks to convert, in the order of their stored (short) names."""
    if tasks is None:
        chosen = list(short)
    else:
        by_name = {**{name: name for name in short}, **{name: full for full, name in short.items()}}
        unknown = [task for task in tasks if task not in by_name]
        if unknown:
            raise ConversionError(
                f"--tasks: {', '.join(map(repr, unknown))} not found in the samples of "
                f"{', '.join(m.name for m in models)}; they hold: {', '.join(sorted(short.values()))}"
            )
        chosen = list(dict.fromkeys(by_name[task] for task in tasks))
    return sorted(chosen, key=lambda full: short[full])


def _normalized(sample: Sample, normalize: str, file: Path) -> tuple[float, ...]:
    if normalize == "none":
        return sample.logliks
    lengths = [len(choice) if normalize == "chars" else len(choice.encode("utf-8")) for choice in sample.choices]
    for i, length in enumerate(lengths):
        if length == 0:
            raise _error(
                file,
                sample.line,
                "arguments",
                f"choice {i} is empty: cannot normalise its log-likelihood by its length",
            )
    return tuple(value / length for value, length in zip(sample.logliks, lengths, strict=True))


def _mismatch(reference: Sample, other: Sample) -> str | None:
    if reference.doc_hash is not None and other.doc_hash is not None and reference.doc_hash != other.doc_hash:
        return "doc_hash"
    if reference.choices != other.choices:
        return "choices"
    if reference.label != other.label:
        return "label"
    return None


def from_lm_eval(
    paths: Sequence[str | Path],
    *,
    tasks: Sequence[str] | None = None,
    test_fraction: float = 0.2,
    split_seed: int | None = None,
    normalize: str = "none",
    strip_prefix: str = "auto",
    intersect: bool = False,
    progress: ProgressFn | None = None,
    notify: NotifyFn | None = None,
) -> LogitCache:
    """Build a logit cache from lm-evaluation-harness samples files.

    Parameters
    ----------
    paths
        Folders: each the folder of one model's samples files (the model is named after the folder) or a
        folder of such folders.
    tasks
        Tasks to convert, by full or stored name (default: every task found).
    test_fraction, split_seed
        The split, per task, by :func:`split_by_task` over the questions in ``doc_id`` order.
    normalize
        ``"none"``: summed log-likelihoods (lm-eval ``acc``); ``"chars"``: divided by the choice's length in
        characters (``acc_norm``); ``"bytes"``: in UTF-8 bytes (``acc_bytes``). The choice is the continuation
        without the target delimiter (one leading space), as lm-eval measures it.
    strip_prefix
        How the stored task names are derived from lm-eval's (see :func:`strip_task_prefix`); the prefix is
        computed over every task found in the folders, whatever ``tasks`` selects.
    intersect
        Keep only the questions (and tasks) every model answered alike, instead of raising an error; the count
        dropped is reported through ``notify`` and recorded in the cache's ``source``.
    progress
        Called as ``progress(done, total, "<model>: <task>")`` while files are read.
    notify
        Called with messages for the user (the questions dropped by ``intersect``).

    Returns
    -------
    LogitCache
        ``score_kind="loglik"``; questions grouped by task (tasks sorted by stored name), ``doc_id`` order
        within a task; padding beyond a question's choices is ``-inf``; ``question_ids`` from ``doc_hash`` when
        present, else ``"<task>/<doc_id>"``.
    """
    if normalize not in NORMALIZATIONS:
        raise ValueError(f"normalize must be one of {', '.join(NORMALIZATIONS)}, got {normalize!r}")
    split_by_task(np.zeros(1, dtype=np.int64), test_fraction, seed=split_seed)  # validate before reading
    if isinstance(tasks, str):
        raise ValueError(f"tasks must be a list of task names, got the string {tasks!r}")
    models = _find_models(paths, tasks or ())
    short = strip_task_prefix(sorted({task for model in models for task in model.files}), strip_prefix)
    chosen = _select_tasks(models, short, tasks)
    say = notify or (lambda message: None)

    kept_tasks = []
    for task in chosen:
        lacking = [model for model in models if task not in model.files]
        if not lacking:
            kept_tasks.append(task)
            continue
        having = next(model for model in models if task in model.files)
        if not intersect:
            raise ConversionError(
                f"task {short[task]!r}: model {lacking[0].name!r} has no samples file for it in {lacking[0].folder} "
                f"(model {having.name!r} has {having.files[task].name}); leave the task out with --tasks, or keep "
                "what every model answered with --intersect"
            )
        say(f"--intersect: task {short[task]!r} left out: no samples file for {', '.join(m.name for m in lacking)}")
    if not kept_tasks:
        raise ConversionError("no task has samples files for every model")

    total, done = len(kept_tasks) * len(models), 0
    read: dict[tuple[str, str], dict[int, Sample]] = {}
    for task in kept_tasks:
        for model in models:
            if progress is not None:
                progress(done, total, f"{model.name}: {short[task]}")
            read[task, model.name] = {sample.doc_id: sample for sample in read_samples(model.files[task])}
            done += 1
    if progress is not None:
        progress(total, total, "")

    blocks: list[tuple[str, list[int]]] = []
    n_missing = n_differing = n_questions = 0
    for task in kept_tasks:
        per_model = [read[task, model.name] for model in models]
        doc_ids = sorted(set().union(*per_model))
        n_questions += len(doc_ids)
        kept = []
        for doc_id in doc_ids:
            absent = [model for model, samples in zip(models, per_model, strict=True) if doc_id not in samples]
            if absent:
                if not intersect:
                    raise _missing_error(short[task], task, doc_id, models, per_model)
                n_missing += 1
                continue
            reference = per_model[0][doc_id]
            problems = [
                (model, samples[doc_id], what)
                for model, samples in zip(models[1:], per_model[1:], strict=True)
                if (what := _mismatch(reference, samples[doc_id])) is not None
            ]
            if problems:
                if not intersect:
                    model, sample, what = problems[0]
                    raise ConversionError(
                        f"task {short[task]!r}, doc_id {doc_id}: the models disagree on the {what}: "
                        f"{models[0].name!r} ({models[0].files[task]}, line {reference.line}) has "
                        f"{_describe(reference, what)}, {model.name!r} ({model.files[task]}, line {sample.line}) has "
                        f"{_describe(sample, what)}; pass --intersect to drop such questions"
                    )
                n_differing += 1
                continue
            kept.append(doc_id)
        if kept:
            blocks.append((task, kept))
        elif intersect:
            say(f"--intersect: task {short[task]!r} left out: no question answered alike by every model")
    dropped = n_missing + n_differing
    if intersect and dropped:
        say(
            f"--intersect: dropped {dropped} of {n_questions} questions ({n_missing} missing for some model, "
            f"{n_differing} with differing labels, choices or doc_hash)"
        )
    if not blocks:
        raise ConversionError("no question is left after dropping the ones the models do not share")
    return _build(models, blocks, read, short, normalize, test_fraction, split_seed, dropped)


def _describe(sample: Sample, what: str) -> str:
    if what == "doc_hash":
        return f"doc_hash {sample.doc_hash}"
    if what == "choices":
        return f"choices {_show(list(sample.choices), 100)}"
    return f"label {sample.label} ({sample.choices[sample.label]!r})"


def _missing_error(
    name: str, task: str, doc_id: int, models: list[_Model], per_model: list[dict[int, Sample]]
) -> ConversionError:
    parts = []
    answered = set().union(*per_model)
    for model, samples in zip(models, per_model, strict=True):
        lacking = sorted(answered - samples.keys())
        if lacking:
            shown = ", ".join(map(str, lacking[:5])) + (", ..." if len(lacking) > 5 else "")
            parts.append(f"model {model.name!r} ({model.files[task]}) lacks {len(lacking)} (doc_id {shown})")
    return ConversionError(
        f"task {name!r}: some models lack questions the others answered (first: doc_id {doc_id}): "
        f"{'; '.join(parts)}; pass --intersect to keep only the questions every model answered"
    )


def _build(
    models: list[_Model],
    blocks: list[tuple[str, list[int]]],
    read: dict[tuple[str, str], dict[int, Sample]],
    short: dict[str, str],
    normalize: str,
    test_fraction: float,
    split_seed: int | None,
    dropped: int,
) -> LogitCache:
    n_questions = sum(len(doc_ids) for _, doc_ids in blocks)
    max_choices = max(len(read[task, models[0].name][d].choices) for task, doc_ids in blocks for d in doc_ids)
    scores = np.full((n_questions, len(models), max_choices), -np.inf)
    labels = np.zeros(n_questions, dtype=np.int64)
    n_choices = np.zeros(n_questions, dtype=np.int64)
    task_index = np.zeros(n_questions, dtype=np.int64)
    question_ids = []
    row = 0
    for index, (task, doc_ids) in enumerate(blocks):
        for doc_id in doc_ids:
            reference = read[task, models[0].name][doc_id]
            size = len(reference.choices)
            for column, model in enumerate(models):
                sample = read[task, model.name][doc_id]
                scores[row, column, :size] = _normalized(sample, normalize, model.files[task])
            labels[row], n_choices[row], task_index[row] = reference.label, size, index
            question_ids.append(reference.doc_hash or f"{short[task]}/{doc_id}")
            row += 1
    rule = (
        f"seeded random {test_fraction} (seed {split_seed})"
        if split_seed is not None
        else f"last {test_fraction} by doc_id"
    )
    source = (
        f"lm-evaluation-harness samples of {len(models)} models; normalize={normalize}; split per task: {rule} is test"
    )
    if dropped:
        source += f"; {dropped} questions not shared by every model dropped (--intersect)"
    return LogitCache(
        scores=scores,
        labels=labels,
        models=tuple(model.name for model in models),
        score_kind="loglik",
        n_choices=n_choices,
        tasks=task_index,
        task_names=tuple(short[task] for task, _ in blocks),
        split=split_by_task(task_index, test_fraction, seed=split_seed),
        question_ids=tuple(question_ids),
        source=source,
    )


# -- arrays ------------------------------------------------------------------------------------------------------------


def from_arrays(
    scores: Any,
    labels: Any,
    models: Sequence[str],
    *,
    score_kind: str,
    n_choices: Any = None,
    tasks: Any = None,
    task_names: Sequence[str] | None = None,
    split: Any = None,
    question_ids: Sequence[str] | None = None,
    costs: Any = None,
    features: Any = None,
    source: str = "",
    path: str = "<memory>",
) -> LogitCache:
    """A validated cache from arrays; ``scores`` is (Q, N, C) or (Q, N*C) (model-major: column ``n*C + c``).

    ``tasks`` holds per-question task names (strings; ``task_names`` then follows their first appearance)
    or task indices into ``task_names``. Every other argument is as in :class:`~ensemble_env.cache.LogitCache`,
    which validates the result (errors name ``path``).

    >>> cache = from_arrays([[0.1, 0.9, 0.6, 0.4]], [1], ["a", "b"], score_kind="prob", tasks=["t"])
    >>> cache.scores.shape, cache.preds.tolist(), cache.task_names
    ((1, 2, 2), [[1, 0]], ('t',))
    """
    try:
        array = np.asarray(scores)
    except (TypeError, ValueError) as error:
        raise ConversionError(f"{path}: scores cannot be read as an array ({error})") from None
    if isinstance(models, str):
        raise ConversionError(f"{path}: models must be a list of names, got the string {models!r}")
    n_models = len(models)
    if array.ndim == 2:
        if n_models == 0 or array.shape[1] % n_models:
            raise ConversionError(
                f"{path}: scores of shape {array.shape} (Q, N*C) cannot be split among {n_models} models: "
                f"{array.shape[1]} columns is not a multiple of {n_models}"
            )
        array = array.reshape(array.shape[0], n_models, array.shape[1] // n_models)
    elif array.ndim != 3:
        raise ConversionError(f"{path}: scores must have shape (Q, N, C) or (Q, N*C), got shape {array.shape}")
    if tasks is not None:
        task_array = np.asarray(tasks)
        if task_array.dtype.kind in "US":
            if task_names is not None:
                raise ConversionError(f"{path}: tasks are names already; task_names must not be given too")
            names = [str(name) for name in task_array.reshape(-1)]
            task_names = tuple(dict.fromkeys(names))
            tasks = np.array([task_names.index(name) for name in names], dtype=np.int64).reshape(task_array.shape)
    stored_names: Any = None if task_names is None else tuple(task_names)  # None: LogitCache's default
    return LogitCache(
        scores=array,
        labels=labels,
        models=tuple(models),
        score_kind=score_kind,
        n_choices=n_choices,
        tasks=tasks,
        task_names=stored_names,
        split=split,
        question_ids=None if question_ids is None else tuple(question_ids),
        costs=costs,
        features=features,
        source=source,
        path=path,
    )


def _csv_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(line, cells) of the non-empty rows of a CSV/TSV file (tab-separated when the name ends in .tsv)."""
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            reader = csv.reader(handle, delimiter=delimiter, strict=True)
            for cells in reader:
                if any(cell.strip() for cell in cells):
                    yield reader.line_num, [cell.strip() for cell in cells]
    except UnicodeDecodeError as error:
        raise _error(path, None, None, f"not UTF-8 text ({error.reason})") from None
    except csv.Error as error:
        raise _error(path, None, None, f"not a valid CSV file ({error})") from None


def _read_csv_numbers(path: Path, *, integer: bool, allow_empty: bool) -> np.ndarray:
    """A 2-D array from a CSV of numbers; an optional header row (no cell of it a number) is skipped.

    Empty cells are NaN when ``allow_empty`` (padding beyond a question's choices); NaN and infinity are refused.
    """
    rows = list(_csv_rows(path))
    if rows and not any(_parse_float(cell) is not None for cell in rows[0][1]):
        rows = rows[1:]  # a header: no cell of the first row is a number
    if not rows:
        raise _error(path, None, None, "holds no rows of numbers")
    width = len(rows[0][1])
    values = np.empty((len(rows), width), dtype=np.int64 if integer else np.float64)
    for r, (line, cells) in enumerate(rows):
        if len(cells) != width:
            raise _error(path, line, None, f"has {len(cells)} columns, the first row of numbers has {width}")
        for c, cell in enumerate(cells):
            if integer:
                if not re.fullmatch(r"[+-]?[0-9]+", cell):
                    raise _error(path, line, None, f"column {c + 1}: {cell!r} is not an integer")
                values[r, c] = int(cell)
            elif cell == "" and allow_empty:
                values[r, c] = np.nan
            else:
                number = _parse_float(cell)
                if number is None:
                    raise _error(path, line, None, f"column {c + 1}: {_number_problem(cell)}")
                values[r, c] = number
    return values


def _load_npy(path: Path) -> np.ndarray:
    try:
        return np.asarray(np.load(path, allow_pickle=False))
    except ValueError as error:
        raise _error(
            path, None, None, f"cannot be read without pickle ({error}); store numbers or numpy str arrays"
        ) from None


def _read_column(path: Path, kind: str) -> np.ndarray:
    """A per-question array from ``.npy`` or a text file with one value per line (``kind``: "int" or "str")."""
    if path.suffix.lower() == ".npy":
        array = _load_npy(path)
    elif kind == "int":
        table = _read_csv_numbers(path, integer=True, allow_empty=False)
        if table.shape[1] != 1:
            raise _error(path, None, None, f"expected one integer per line, got {table.shape[1]} columns")
        array = table[:, 0]
    else:
        try:
            lines = path.read_text(encoding="utf-8").split("\n")
        except UnicodeDecodeError as error:
            raise _error(path, None, None, f"not UTF-8 text ({error.reason})") from None
        array = np.array([line.strip() for line in lines if line.strip()], dtype=str)
    if array.ndim != 1:
        raise _error(path, None, None, f"expected a 1-D array (one value per question), got shape {array.shape}")
    if kind == "int" and array.dtype.kind not in "iu":
        raise _error(path, None, None, f"must hold integers, got dtype {array.dtype}")
    if kind == "str" and array.dtype.kind != "U":
        raise _error(path, None, None, f"must hold strings, got dtype {array.dtype}")
    return array


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    try:
        archive = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as error:
        raise _error(path, None, None, f"cannot be read as a .npz archive ({error})") from None
    with archive:
        unknown = sorted(set(archive.files) - set(ARRAY_FIELDS))
        if unknown:
            raise _error(path, None, None, f"unknown arrays {unknown}; a .npz may hold {', '.join(ARRAY_FIELDS)}")
        arrays = {}
        for name in archive.files:
            try:
                arrays[name] = archive[name]
            except ValueError as error:
                raise _error(
                    path, None, name, f"cannot be read without pickle ({error}); store numpy str arrays"
                ) from None
    return arrays


def from_array_files(
    scores: str | Path,
    *,
    score_kind: str,
    labels: str | Path | None = None,
    models: Sequence[str] | None = None,
    n_choices: str | Path | None = None,
    tasks: str | Path | None = None,
) -> LogitCache:
    """A cache from files of arrays.

    Parameters
    ----------
    scores
        ``.npz`` holding arrays named as the cache's datasets (:data:`ARRAY_FIELDS`; at least ``scores``),
        ``.npy`` holding the scores, or a ``.csv``/``.tsv`` table of numbers with one row per question and
        N*C columns (model-major; an optional header row is skipped; an empty cell is padding beyond the
        question's choices).
    score_kind
        How the scores become probabilities (see :data:`ensemble_env.cache.SCORE_KINDS`).
    labels, n_choices
        Files of integers (``.npy`` or one per line), one per question.
    models
        The model names, in column order.
    tasks
        Per-question task names (``.npy`` of strings or one per line).

    A field given both in the ``.npz`` and as an argument is an error, as is a missing ``labels`` or
    ``models``.
    """
    path = Path(scores)
    if not path.is_file():
        raise FileNotFoundError(f"{scores}: no such file")
    suffix = path.suffix.lower()
    if suffix == ".npz":
        arrays: dict[str, Any] = _read_npz(path)
        if "scores" not in arrays:
            raise _error(path, None, "scores", "required array is missing")
    elif suffix == ".npy":
        arrays = {"scores": _load_npy(path)}
    elif suffix in (".csv", ".tsv", ".txt"):
        arrays = {"scores": _read_csv_numbers(path, integer=False, allow_empty=True)}
    else:
        raise _error(path, None, None, "unknown file type: expected .npz, .npy, .csv, .tsv or .txt")
    given: dict[str, Any] = {
        "labels": None if labels is None else _read_column(Path(labels), "int"),
        "n_choices": None if n_choices is None else _read_column(Path(n_choices), "int"),
        "tasks": None if tasks is None else _read_column(Path(tasks), "str"),
        "models": None if models is None else list(models),
    }
    for name, value in given.items():
        if value is None:
            continue
        if name in arrays:
            raise _error(path, None, name, f"is given twice: in {path.name} and as --{name.replace('_', '-')}")
        arrays[name] = value
    for name in ("labels", "models"):
        if name not in arrays:
            raise _error(path, None, name, f"missing: give it with --{name} (or store a '{name}' array in a .npz)")
    model_names = arrays.pop("models")
    if isinstance(model_names, np.ndarray):
        if model_names.dtype.kind != "U":
            raise _error(path, None, "models", f"must hold strings (a numpy str array), got dtype {model_names.dtype}")
        model_names = model_names.reshape(-1).tolist()
    files = ", ".join(str(p) for p in (scores, labels, n_choices, tasks) if p is not None)
    return from_arrays(
        arrays.pop("scores"),
        arrays.pop("labels"),
        model_names,
        score_kind=score_kind,
        source=f"arrays: {', '.join(Path(p).name for p in (scores, labels, n_choices, tasks) if p is not None)}",
        path=files,
        **arrays,
    )
