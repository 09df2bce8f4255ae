"""A logit cache from arrays: :func:`from_arrays` (numpy arrays in memory) and :func:`from_array_files`
(``.npz``/``.npy`` files or CSV/TSV tables), scores of shape (Q, N, C) or (Q, N*C).

The files are read without pickle, each by :func:`~ensemble_env.cache.convert.common.read_input` (a regular file
of at most ``max_file_bytes``, 1 GiB by default; a FIFO or a device is refused without blocking on it); a
problem raises :class:`~ensemble_env.cache.convert.common.ConversionError` naming the file, the line (or array)
and the field. Numbers in CSV cells are plain ASCII decimal (a fullwidth ``１２`` is refused by name).

Two rules fill what the arrays leave out:

- **Choice counts from padding.** Without ``n_choices``, trailing choices whose score is ``-inf`` or NaN (an
  empty CSV cell) for every model are padding: a question's choice count is the number before them, as the
  caches themselves pad. A question with fewer than 2 choices before its padding is an error.
- **A test split by default** (:func:`from_array_files`): without a ``split`` array, each task's last
  ``test_fraction`` (0.2) of questions, in file order, is test
  (:func:`~ensemble_env.cache.convert.splits.split_by_task`, as :func:`~ensemble_env.cache.convert.from_lm_eval` does),
  so that baselines and evaluation have questions to score.

Three rules keep what the cache stores equal to what the files say (:func:`from_arrays`): question ids must be
unique (the first id seen twice is named), every feature must be finite in float32, the type the game reads
features in (a float64 beyond float32's largest value, about 3.4e38, would become infinity there; the first such
value is named, with its question and column), and scores, costs and features wider than float64 (numpy's
longdouble, which no cache stores) are refused rather than rounded.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import os
import re
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from ensemble_env.cache.convert.common import (
    MAX_FILE_BYTES,
    ConversionError,
    conversion_error,
    decode_text,
    looks_like_number,
    number_problem,
    parse_float,
    read_input,
)
from ensemble_env.cache.convert.splits import describe_split, split_by_task
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.text import show

__all__ = ["ARRAY_FIELDS", "choices_before_padding", "from_array_files", "from_arrays"]

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
    "feature_names",
    "question_text",
)


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
    feature_names: Sequence[str] | None = None,
    feature_kind: str = "",
    question_text: Sequence[str] | None = None,
    source: str = "",
    path: str = "<memory>",
) -> LogitCache:
    """A validated cache from arrays; ``scores`` is (Q, N, C) or (Q, N*C) (model-major: column ``n*C + c``).

    ``tasks`` holds per-question task names (strings; ``task_names`` then follows their first appearance)
    or task indices into ``task_names``. Without ``n_choices``, trailing ``-inf``/NaN scores of every model
    are padding (:func:`choices_before_padding`). Every other argument is as in
    :class:`~ensemble_env.cache.LogitCache`, which validates the result (errors name ``path``).

    >>> cache = from_arrays([[0.1, 0.9, 0.6, 0.4]], [1], ["a", "b"], score_kind="prob", tasks=["t"])
    >>> cache.scores.shape, cache.preds.tolist(), cache.task_names
    ((1, 2, 2), [[1, 0]], ('t',))
    >>> inf = float("inf")
    >>> from_arrays([[[-1.0, -2.0, -inf]], [[-1.0, -2.0, -0.5]]], [0, 2], ["a"], score_kind="loglik").n_choices.tolist()
    [2, 3]
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
    _check_stored_floats(path, {"scores": array, "costs": costs, "features": features})
    if n_choices is None:
        n_choices = choices_before_padding(array, path)
    if tasks is not None:
        task_array = np.asarray(tasks)
        if task_array.dtype.kind in "US":
            if task_names is not None:
                raise ConversionError(f"{path}: tasks are names already; task_names must not be given too")
            names = [str(name) for name in task_array.reshape(-1)]
            task_names = tuple(dict.fromkeys(names))
            tasks = np.array([task_names.index(name) for name in names], dtype=np.int64).reshape(task_array.shape)
    stored_names: Any = None if task_names is None else tuple(task_names)  # None: LogitCache's default
    cache = LogitCache(
        scores=array,
        labels=labels,
        models=tuple(models),
        score_kind=score_kind,
        n_choices=n_choices,
        tasks=tasks,
        task_names=stored_names,
        split=split,
        question_ids=_strings(path, "question_ids", question_ids),
        costs=costs,
        features=features,
        feature_names=_strings(path, "feature_names", feature_names),
        feature_kind=feature_kind,
        question_text=_strings(path, "question_text", question_text),
        source=source,
        path=path,
    )
    _check_unique_ids(path, cache.question_ids)
    _check_float32_features(path, cache.features)
    return cache


def _check_stored_floats(path: str, arrays: dict[str, Any]) -> None:
    """Refuse floats wider than 64 bits (numpy's longdouble): a cache stores float16 to float64 and would be
    written unreadable; converting them would round every value silently."""
    for name, value in arrays.items():
        dtype = getattr(value, "dtype", None)
        if dtype is not None and dtype.kind == "f" and dtype.itemsize > 8:
            raise conversion_error(
                path,
                None,
                name,
                f"holds {dtype} numbers (extended precision), which a cache does not store: "
                "store them as float64 or float32",
            )


def _check_unique_ids(path: str, question_ids: Sequence[str] | None) -> None:
    """Refuse a question id given to two questions, naming the first such id and both questions."""
    seen: dict[str, int] = {}
    for index, question_id in enumerate(question_ids or ()):
        if question_id in seen:
            raise conversion_error(
                path,
                None,
                "question_ids",
                f"question {index} has the id {show(question_id)} of question {seen[question_id]}; "
                "question ids must be unique",
            )
        seen[question_id] = index


#: the largest magnitude a feature may have: float32's largest finite value (the game reads features as float32)
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _check_float32_features(path: str, features: np.ndarray | None) -> None:
    """Refuse a feature beyond float32's range (it would become infinity in the game), naming the first one."""
    if features is None or features.dtype.itemsize <= 4:  # float16 and float32 values are in range
        return
    beyond = np.abs(features) > _FLOAT32_MAX
    if beyond.any():
        question, column = (int(i) for i in np.argwhere(beyond)[0])
        raise conversion_error(
            path,
            None,
            "features",
            f"question {question}, column {column}: the value {features[question, column]} is beyond float32's "
            f"range (largest {_FLOAT32_MAX:.8g}); the game reads features as float32, where it would be infinite",
        )


def choices_before_padding(scores: np.ndarray, path: str = "<memory>") -> np.ndarray | None:
    """Per question, the choices before its padding: the trailing choices whose score is ``-inf`` or NaN for
    every model. None when no question is padded (every question then has all C choices).

    >>> nan = float("nan")
    >>> choices_before_padding(np.array([[[0.2, 0.8, nan], [0.5, 0.5, nan]], [[0.1, 0.2, 0.7], [0.3, 0.3, 0.4]]]))
    array([2, 3])
    >>> choices_before_padding(np.array([[[0.2, 0.8, nan], [0.5, 0.5, 0.0]]])) is None  # one model has a score
    True
    """
    if scores.dtype.kind != "f" or scores.ndim != 3 or scores.size == 0:
        return None
    padding = (np.isneginf(scores) | np.isnan(scores)).all(axis=1)  # (Q, C): no model has a score there
    trailing = np.cumprod(padding[:, ::-1], axis=1).sum(axis=1)
    if not trailing.any():
        return None
    counts = scores.shape[2] - trailing
    short = np.flatnonzero(counts < 2)
    if short.size:
        q = int(short[0])
        raise ConversionError(
            f"{path}: field 'scores': question {q} has {counts[q]} choice(s) before its padding (-inf or NaN in "
            "every model's last scores); a question needs at least 2 choices"
        )
    return counts.astype(np.int64)


def _strings(path: str, name: str, values: Sequence[str] | None) -> tuple[str, ...] | None:
    """A sequence of strings as a tuple (None stays None); a single string is refused, not split into letters."""
    if values is None:
        return None
    if isinstance(values, str):
        raise ConversionError(f"{path}: {name} must be a list of strings, got the string {show(values)}")
    return tuple(values)


_LIMIT_OPTION = "max_file_bytes (--max-file-mb)"


def _read(path: Path, limit: int) -> bytes:
    """The bytes of an input file, read by :func:`~ensemble_env.cache.convert.common.read_input`."""
    return read_input(path, limit=limit, limit_option=_LIMIT_OPTION)


def _csv_rows(path: Path, limit: int) -> Iterator[tuple[int, list[str]]]:
    """(line, cells) of the non-empty rows of a CSV/TSV file (tab-separated when the name ends in .tsv)."""
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    text = decode_text(path, _read(path, limit))
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    try:
        for cells in reader:
            if any(cell.strip() for cell in cells):
                yield reader.line_num, [cell.strip() for cell in cells]
    except csv.Error as error:
        raise conversion_error(path, None, None, f"not a valid CSV file ({error})") from None


def _read_csv_numbers(
    path: Path, *, integer: bool, allow_empty: bool, limit: int, field: str | None = None
) -> np.ndarray:
    """A 2-D array from a CSV of numbers; an optional header row (no cell of it a number, not even one
    written wrongly, such as fullwidth digits: :func:`~ensemble_env.cache.convert.common.looks_like_number`)
    is skipped. ``field`` (the cache field the file gives, e.g. ``labels``) is named in errors.

    Empty cells are NaN when ``allow_empty`` (padding beyond a question's choices); NaN and infinity are refused.
    """
    rows = list(_csv_rows(path, limit))
    if rows and not any(looks_like_number(cell) for cell in rows[0][1]):
        rows = rows[1:]  # a header: no cell of the first row is a number
    if not rows:
        raise conversion_error(path, None, field, "holds no rows of numbers")
    width = len(rows[0][1])
    values = np.empty((len(rows), width), dtype=np.int64 if integer else np.float64)
    for r, (line, cells) in enumerate(rows):
        if len(cells) != width:
            raise conversion_error(path, line, field, f"has {len(cells)} columns, the first row of numbers has {width}")
        for c, cell in enumerate(cells):
            if integer:
                if not re.fullmatch(r"[+-]?[0-9]{1,19}", cell) or not -(2**63) <= int(cell) < 2**63:
                    problem = f"{show(cell)} is not an integer of 64 bits" if cell.isascii() else number_problem(cell)
                    raise conversion_error(path, line, field, f"column {c + 1}: {problem}")
                values[r, c] = int(cell)
            elif cell == "" and allow_empty:
                values[r, c] = np.nan
            else:
                number = parse_float(cell)
                if number is None:
                    raise conversion_error(path, line, field, f"column {c + 1}: {number_problem(cell)}")
                values[r, c] = number
    return values


#: largest factor by which a .npz member may be compressed (deflate cannot do better than about 1032)
_ZIP_RATIO = 1100


def _check_npy_header(handle: IO[bytes], available: int, where: str) -> None:
    """Refuse a .npy header whose array needs more bytes than ``available`` (read before any allocation)."""
    version = np.lib.format.read_magic(handle)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(handle)
    else:
        shape, _, dtype = np.lib.format.read_array_header_2_0(handle)
    needed = math.prod(shape) * dtype.itemsize
    if needed > available:
        raise ValueError(f"{where} declares an array of shape {shape} ({needed} bytes) but holds {available} bytes")


def _load_npy(path: Path, limit: int) -> np.ndarray:
    data = _read(path, limit)
    try:
        handle = io.BytesIO(data)
        _check_npy_header(handle, len(data), "the header")
        handle.seek(0)
        return np.asarray(np.load(handle, allow_pickle=False))
    except (ValueError, OSError, EOFError) as error:
        raise conversion_error(
            path,
            None,
            None,
            f"cannot be read as .npy without pickle ({show(str(error), 200)}); store numbers or numpy str arrays",
        ) from None


def _read_column(path: Path, kind: str, limit: int, field: str) -> np.ndarray:
    """A per-question array from ``.npy`` or a text file with one value per line (``kind``: "int" or "str"), the
    cache's ``field`` (``labels``, ``n_choices``, ``tasks``: named in errors)."""
    if path.suffix.lower() == ".npy":
        array = _load_npy(path, limit)
    elif kind == "int":
        table = _read_csv_numbers(path, integer=True, allow_empty=False, limit=limit, field=field)
        if table.shape[1] != 1:
            raise conversion_error(path, None, field, f"expected one integer per line, got {table.shape[1]} columns")
        array = table[:, 0]
    else:
        lines = decode_text(path, _read(path, limit)).split("\n")
        array = np.array([line.strip() for line in lines if line.strip()], dtype=str)
    if array.ndim != 1:
        raise conversion_error(
            path, None, field, f"expected a 1-D array (one value per question), got shape {array.shape}"
        )
    if kind == "int" and array.dtype.kind not in "iu":
        raise conversion_error(path, None, field, f"must hold integers, got dtype {array.dtype}")
    if kind == "str" and array.dtype.kind != "U":
        raise conversion_error(path, None, field, f"must hold strings, got dtype {array.dtype}")
    return array


def _check_npz(data: bytes) -> None:
    """Refuse members whose declared arrays exceed what they store, or that are compressed beyond deflate's
    reach (a zip bomb), before numpy reads them."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for member in archive.infolist():
            if member.file_size > max(member.compress_size, 1) * _ZIP_RATIO + 65536:
                raise ValueError(f"member {member.filename} expands {member.compress_size} bytes to {member.file_size}")
            if member.filename.endswith(".npy"):
                with archive.open(member) as handle:
                    _check_npy_header(handle, member.file_size, f"member {member.filename}")


def _read_npz(path: Path, limit: int) -> dict[str, np.ndarray]:
    data = _read(path, limit)
    try:
        _check_npz(data)
        archive = np.load(io.BytesIO(data), allow_pickle=False)
    except Exception as error:  # zipfile, zlib and numpy raise many kinds on a corrupted archive
        message = show(f"{type(error).__name__}: {error}", 200)
        raise conversion_error(path, None, None, f"cannot be read as a .npz archive ({message})") from None
    with archive:
        unknown = sorted(set(archive.files) - set(ARRAY_FIELDS))
        if unknown:
            raise conversion_error(
                path, None, None, f"unknown arrays {show(unknown, 200)}; a .npz may hold {', '.join(ARRAY_FIELDS)}"
            )
        arrays = {}
        for name in archive.files:
            try:
                arrays[name] = archive[name]
            except Exception as error:  # corrupted member (zlib, CRC) or an object array (pickle)
                message = show(f"{type(error).__name__}: {error}", 200)
                raise conversion_error(
                    path, None, name, f"cannot be read without pickle ({message}); store numbers or numpy str arrays"
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
    test_fraction: float = 0.2,
    validation_fraction: float = 0.0,
    split_seed: int | None = None,
    max_file_bytes: int = MAX_FILE_BYTES,
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
    test_fraction, validation_fraction, split_seed
        The split when the files hold none (no ``split`` array in the ``.npz``): per task, as
        :func:`~ensemble_env.cache.convert.splits.split_by_task` assigns it to the questions in file order
        (default: the last 20% of each task is test, the rest train).
    max_file_bytes
        The largest file read (default 1 GiB); every file must be a regular file (not a FIFO, a device).

    A field given both in the ``.npz`` and as an argument is an error, as is a missing ``labels`` or
    ``models``. Without ``n_choices``, trailing ``-inf``/NaN scores (empty CSV cells) are padding.
    """
    split_by_task(np.zeros(0, dtype=np.int64), test_fraction, validation_fraction=validation_fraction, seed=split_seed)
    if isinstance(max_file_bytes, bool) or not isinstance(max_file_bytes, int) or max_file_bytes < 1:
        raise ValueError(f"max_file_bytes must be a positive integer, got {max_file_bytes!r}")
    limit = max_file_bytes
    path = Path(scores)
    if not os.path.lexists(path):
        raise FileNotFoundError(f"{scores}: no such file")
    suffix = path.suffix.lower()
    if suffix == ".npz":
        arrays: dict[str, Any] = _read_npz(path, limit)
        if "scores" not in arrays:
            raise conversion_error(path, None, "scores", "required array is missing")
    elif suffix == ".npy":
        arrays = {"scores": _load_npy(path, limit)}
    elif suffix in (".csv", ".tsv", ".txt"):
        arrays = {"scores": _read_csv_numbers(path, integer=False, allow_empty=True, limit=limit)}
    else:
        raise conversion_error(path, None, None, "unknown file type: expected .npz, .npy, .csv, .tsv or .txt")
    given: dict[str, Any] = {
        "labels": None if labels is None else _read_column(Path(labels), "int", limit, "labels"),
        "n_choices": None if n_choices is None else _read_column(Path(n_choices), "int", limit, "n_choices"),
        "tasks": None if tasks is None else _read_column(Path(tasks), "str", limit, "tasks"),
        "models": None if models is None else list(models),
    }
    for name, value in given.items():
        if value is None:
            continue
        if name in arrays:
            raise conversion_error(
                path, None, name, f"is given twice: in {path.name} and as --{name.replace('_', '-')}"
            )
        arrays[name] = value
    for name in ("labels", "models"):
        if name not in arrays:
            raise conversion_error(
                path, None, name, f"missing: give it with --{name} (or store a '{name}' array in a .npz)"
            )
    model_names = arrays.pop("models")
    if isinstance(model_names, np.ndarray):
        if model_names.dtype.kind != "U":
            raise conversion_error(
                path, None, "models", f"must hold strings (a numpy str array), got dtype {model_names.dtype}"
            )
        model_names = model_names.reshape(-1).tolist()
    files = ", ".join(str(p) for p in (scores, labels, n_choices, tasks) if p is not None)
    source = f"arrays: {', '.join(Path(p).name for p in (scores, labels, n_choices, tasks) if p is not None)}"
    split_rule = None
    if "split" not in arrays:
        split_rule = describe_split(test_fraction, validation_fraction, split_seed, order="in file order")
        source += f"; {split_rule}"
    cache = from_arrays(
        arrays.pop("scores"),
        arrays.pop("labels"),
        model_names,
        score_kind=score_kind,
        source=source,
        path=files,
        **arrays,
    )
    if split_rule is None:
        return cache
    split = split_by_task(cache.tasks, test_fraction, validation_fraction=validation_fraction, seed=split_seed)
    return dataclasses.replace(cache, split=split)
