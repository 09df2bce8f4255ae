"""Logit caches: the HDF5 file that holds what a pool of models answered, and its in-memory form.

A *logit cache* stores, for Q questions, N models and up to C answer choices, each model's score of each
choice (``scores``, shape (Q, N, C)), the gold ``labels`` and the model names, plus optional task, split,
cost and feature arrays and the question texts. The format is documented in ``docs/cache-format.md``; this
module is the only place in the package that touches HDF5.

- :func:`load_cache` reads and validates a file and returns a :class:`LogitCache`.
- :func:`save_cache` writes one atomically (temporary file in the same folder, then rename).
- :class:`LogitCache` validates its arrays at construction (whether they come from a file or from code),
  computes per-choice probabilities once from ``score_kind`` over each question's valid choices, and holds
  read-only arrays.

Every rule violation raises :class:`CacheError` (a :class:`ValueError`) whose message names the file (or
``<memory>``), the field and the offending value. Nothing is loaded through pickle.

>>> import numpy as np
>>> cache = LogitCache(
...     scores=np.array([[[2.0, 0.0], [0.0, 1.0]]]), labels=np.array([0]),
...     models=("a", "b"), score_kind="logit")
>>> cache.n_questions, cache.n_models, cache.max_choices
(1, 2, 2)
>>> cache.correct.tolist()
[[True, False]]
"""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "SCORE_KINDS",
    "SPLITS",
    "SPLIT_CHOICES",
    "CacheError",
    "LogitCache",
    "atomic_path",
    "default_cache_path",
    "load_cache",
    "load_default_cache",
    "save_cache",
]

FORMAT_NAME = "ensemble-logit-cache"
FORMAT_VERSION = 1
SCORE_KINDS = ("loglik", "logit", "logprob", "prob")
#: split codes stored in the ``split`` dataset
SPLITS = {"train": 0, "test": 1, "validation": 2}
#: split names the options and commands accept: the cache's splits, and "all" (every question)
SPLIT_CHOICES = (*SPLITS, "all")
#: tolerance above 1 accepted for ``prob`` (and above 0 for ``logprob``) scores, from float16 rounding
_PROB_TOLERANCE = 1e-3
_CHUNK = 65536  # questions per chunk when computing probabilities (bounds temporary memory)
#: compressed question texts are stored as fixed-length UTF-8 strings (HDF5 cannot compress variable-length
#: ones) when the padded array (questions x longest text in bytes) stays under this size
_FIXED_TEXT_BYTES = 64 * 2**20


class CacheError(ValueError):
    """A logit cache breaks a rule of the format; the message names the file, the field and the value."""


def _fail(path: str, field_name: str, problem: str) -> CacheError:
    return CacheError(f"{path}: field '{field_name}': {problem}")


def _readonly(array: np.ndarray) -> np.ndarray:
    """A read-only view (of an array the cache owns: inputs are copied first, see ``_own``)."""
    view = array.view()
    view.flags.writeable = False
    return view


def _own(path: str, name: str, value: Any) -> np.ndarray:
    """A private copy of an array input, so later changes by the caller cannot leak into a validated cache."""
    try:
        return np.array(value, copy=True)
    except (TypeError, ValueError) as error:
        raise _fail(path, name, f"cannot be read as an array ({error})") from error


def _as_int_array(path: str, name: str, value: Any, shape: tuple[int, ...]) -> np.ndarray:
    array = _own(path, name, value)
    if array.dtype.kind not in "iu":
        raise _fail(path, name, f"must hold integers, got dtype {array.dtype}")
    if array.shape != shape:
        raise _fail(path, name, f"shape {array.shape} does not match the expected {shape}")
    return _readonly(array.astype(np.int64, copy=False))


def _as_float_array(path: str, name: str, value: Any) -> np.ndarray:
    array = _own(path, name, value)
    if array.dtype.kind != "f":
        raise _fail(path, name, f"must hold floating-point numbers, got dtype {array.dtype}")
    return array


def _as_names(path: str, name: str, value: Any, length: int | None, entry: str = "entry") -> tuple[str, ...]:
    """A tuple of strings (bytes decoded as UTF-8); ``entry`` names an item in errors ("entry 3", "question 3")."""
    if isinstance(value, str):
        raise _fail(path, name, f"must be a sequence of strings, got the single string {_show(value)}")
    try:
        items = value.reshape(-1).tolist() if isinstance(value, np.ndarray) else list(value)
    except TypeError as error:
        raise _fail(path, name, f"must be a sequence of strings, got {type(value).__name__} {value!r}") from error
    names = []
    for index, item in enumerate(items):
        if isinstance(item, bytes):
            try:
                item = item.decode("utf-8")
            except UnicodeDecodeError as error:
                raise _fail(path, name, f"{entry} {index}: {_show(item)} is not valid UTF-8") from error
        if not isinstance(item, str | np.str_):
            raise _fail(path, name, f"entries must be strings, {entry} {index} is {type(item).__name__} {item!r}")
        names.append(str(item))
    if length is not None and len(names) != length:
        raise _fail(path, name, f"has {len(names)} entries, expected {length}")
    return tuple(names)


def _show(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters (for messages; the converters use it too)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _as_texts(path: str, value: Any, n_questions: int) -> tuple[str, ...]:
    """The question texts: one string per question, without NUL characters (HDF5 strings cannot hold them)."""
    texts = _as_names(path, "question_text", value, n_questions, entry="question")
    for index, text in enumerate(texts):
        if "\x00" in text:
            raise _fail(
                path, "question_text", f"question {index}: {_show(text)} holds a NUL character (HDF5 cannot store it)"
            )
    return texts


def _unique_names(path: str, name: str, names: tuple[str, ...]) -> None:
    seen: set[str] = set()
    for item in names:
        if item == "":
            raise _fail(path, name, "holds an empty name")
        if item in seen:
            raise _fail(path, name, f"names must be unique, {item!r} appears more than once")
        seen.add(item)


@dataclass(frozen=True, eq=False)
class LogitCache:
    """What a pool of models answered on a benchmark, as validated read-only arrays.

    Parameters
    ----------
    scores
        (Q, N, C) float: per question, model and choice; entries beyond a question's ``n_choices`` are
        ignored.
    labels
        (Q,) int: gold choice index, ``0 <= label < n_choices``.
    models
        N unique model names.
    score_kind
        How scores become probabilities: ``"loglik"`` or ``"logit"`` (softmax over the question's valid
        choices), ``"logprob"`` (exp), ``"prob"`` (as is).
    n_choices
        (Q,) int in 2..C, valid choices per question (default: C for every question).
    tasks, task_names
        (Q,) task index per question and the T names of the indices (default: one task ``"default"``).
    split
        (Q,) int: 0 train, 1 test, 2 validation (default: all train).
    question_ids
        Q stable ids (optional).
    costs
        (N,) or (Q, N) non-negative cost of asking a model (optional).
    features
        (Q, F) finite float per-question features for routing, computed from the question alone (optional).
    feature_names
        F names of the feature columns (optional, only with ``features``).
    feature_kind
        How the features were made, e.g. ``"text-tfidf-svd"`` (optional, only with ``features``).
    question_text
        Q strings: each question as the models saw it, without few-shot examples (optional).
    source
        Free text: where the scores came from.
    path
        Where the cache was read from, used in error messages (``"<memory>"`` for caches built in code).

    Attributes computed once at construction: ``probs`` (Q, N, C) float32, zero beyond each question's
    choices; ``preds`` (Q, N) int64, each model's argmax over the valid choices (ties to the lowest index);
    ``correct`` (Q, N) bool.
    """

    scores: np.ndarray
    labels: np.ndarray
    models: tuple[str, ...]
    score_kind: str
    # The next four accept None and are always filled in by __post_init__ (hence the non-Optional types).
    n_choices: np.ndarray = None  # type: ignore[assignment]
    tasks: np.ndarray = None  # type: ignore[assignment]
    task_names: tuple[str, ...] = None  # type: ignore[assignment]
    split: np.ndarray = None  # type: ignore[assignment]
    question_ids: tuple[str, ...] | None = None
    costs: np.ndarray | None = None
    features: np.ndarray | None = None
    feature_names: tuple[str, ...] | None = None
    feature_kind: str = ""
    question_text: tuple[str, ...] | None = None
    source: str = ""
    path: str = "<memory>"
    probs: np.ndarray = field(init=False, repr=False)
    preds: np.ndarray = field(init=False, repr=False)
    correct: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        path = str(self.path)
        put = functools.partial(object.__setattr__, self)
        put("path", path)
        if self.score_kind not in SCORE_KINDS:
            raise _fail(path, "score_kind", f"{self.score_kind!r} is not one of {', '.join(SCORE_KINDS)}")

        scores = _as_float_array(path, "scores", self.scores)
        if scores.ndim != 3:
            raise _fail(path, "scores", f"must have shape (Q, N, C), got shape {scores.shape}")
        n_questions, n_models, max_choices = scores.shape
        if n_questions < 1 or n_models < 1:
            raise _fail(path, "scores", f"needs at least one question and one model, got shape {scores.shape}")
        if max_choices < 2:
            raise _fail(path, "scores", f"needs at least 2 choices (axis 2), got shape {scores.shape}")
        put("scores", _readonly(scores))

        models = _as_names(path, "models", self.models, n_models)
        _unique_names(path, "models", models)
        put("models", models)

        if self.n_choices is None:
            n_choices = _readonly(np.full(n_questions, max_choices, dtype=np.int64))
        else:
            n_choices = _as_int_array(path, "n_choices", self.n_choices, (n_questions,))
            bad = np.flatnonzero((n_choices < 2) | (n_choices > max_choices))
            if bad.size:
                raise _fail(
                    path,
                    "n_choices",
                    f"question {bad[0]} has n_choices={n_choices[bad[0]]}, outside 2..{max_choices}",
                )
        put("n_choices", n_choices)

        labels = _as_int_array(path, "labels", self.labels, (n_questions,))
        bad = np.flatnonzero((labels < 0) | (labels >= n_choices))
        if bad.size:
            q = bad[0]
            raise _fail(path, "labels", f"question {q} has label {labels[q]}, outside 0..{n_choices[q] - 1}")
        put("labels", labels)

        task_names = ("default",) if self.task_names is None else _as_names(path, "task_names", self.task_names, None)
        if not task_names:
            raise _fail(path, "task_names", "is empty")
        _unique_names(path, "task_names", task_names)
        put("task_names", task_names)
        if self.tasks is None:
            tasks = _readonly(np.zeros(n_questions, dtype=np.int64))
        else:
            tasks = _as_int_array(path, "tasks", self.tasks, (n_questions,))
            bad = np.flatnonzero((tasks < 0) | (tasks >= len(task_names)))
            if bad.size:
                q = bad[0]
                raise _fail(
                    path,
                    "tasks",
                    f"question {q} has task index {tasks[q]}, outside 0..{len(task_names) - 1} "
                    f"(task_names has {len(task_names)} entries)",
                )
        put("tasks", tasks)

        if self.split is None:
            split = _readonly(np.zeros(n_questions, dtype=np.int64))
        else:
            split = _as_int_array(path, "split", self.split, (n_questions,))
            bad = np.flatnonzero(~np.isin(split, list(SPLITS.values())))
            if bad.size:
                q = bad[0]
                raise _fail(path, "split", f"question {q} has split {split[q]}, expected 0 train, 1 test, 2 validation")
        put("split", split)

        if self.question_ids is not None:
            put("question_ids", _as_names(path, "question_ids", self.question_ids, n_questions))

        if self.costs is not None:
            costs = _as_float_array(path, "costs", self.costs)
            if costs.shape not in ((n_models,), (n_questions, n_models)):
                raise _fail(path, "costs", f"shape {costs.shape} is neither (N,)=({n_models},) nor (Q, N)")
            if not np.all(np.isfinite(costs)) or np.any(costs < 0):
                raise _fail(path, "costs", "must be finite and non-negative")
            put("costs", _readonly(costs))

        self._check_features(put, n_questions)
        if self.question_text is not None:
            put("question_text", _as_texts(path, self.question_text, n_questions))

        valid = np.arange(max_choices)[None, :] < n_choices[:, None]  # (Q, C)
        self._check_scores(valid)
        probs, preds = self._probabilities(valid)
        put("probs", _readonly(probs))
        put("preds", _readonly(preds))
        put("correct", _readonly(preds == labels[:, None]))

    def _check_features(self, put: Callable[[str, Any], None], n_questions: int) -> None:
        path = self.path
        if not isinstance(self.feature_kind, str):
            raise _fail(path, "feature_kind", f"must be a string, got {type(self.feature_kind).__name__}")
        if self.features is None:
            for name in ("feature_names", "feature_kind"):
                if getattr(self, name):
                    raise _fail(path, name, "is given without 'features'")
            put("feature_names", None)
            return
        features = _as_float_array(path, "features", self.features)
        if features.ndim != 2 or features.shape[0] != n_questions:
            raise _fail(path, "features", f"shape {features.shape} is not (Q, F) with Q={n_questions}")
        if features.shape[1] < 1:
            raise _fail(path, "features", f"shape {features.shape} has no feature column (F = 0)")
        if not np.all(np.isfinite(features)):
            q, f = np.argwhere(~np.isfinite(features))[0]
            raise _fail(path, "features", f"question {q} has a non-finite feature {features[q, f]} (column {f})")
        put("features", _readonly(features))
        if self.feature_names is not None:
            names = _as_names(path, "feature_names", self.feature_names, features.shape[1])
            _unique_names(path, "feature_names", names)
            put("feature_names", names)

    def _check_scores(self, valid: np.ndarray) -> None:
        scores, path = self.scores, self.path
        finite = np.isfinite(scores) | ~valid[:, None, :]
        if not finite.all():
            q, m, c = np.argwhere(~finite)[0]
            raise _fail(
                path,
                "scores",
                f"question {q}, model {self.models[m]!r}, choice {c}: non-finite value {scores[q, m, c]}",
            )
        if self.score_kind == "prob":
            bad = valid[:, None, :] & ((scores < 0) | (scores > 1 + _PROB_TOLERANCE))
            what = "outside [0, 1] for score_kind 'prob'"
        elif self.score_kind == "logprob":
            bad = valid[:, None, :] & (scores > _PROB_TOLERANCE)
            what = "above 0 for score_kind 'logprob'"
        else:
            return
        if bad.any():
            q, m, c = np.argwhere(bad)[0]
            raise _fail(path, "scores", f"question {q}, model {self.models[m]!r}, choice {c}: {scores[q, m, c]} {what}")

    def _probabilities(self, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n_questions, n_models, max_choices = self.scores.shape
        probs = np.zeros((n_questions, n_models, max_choices), dtype=np.float32)
        preds = np.zeros((n_questions, n_models), dtype=np.int64)
        for start in range(0, n_questions, _CHUNK):
            block = slice(start, start + _CHUNK)
            mask = valid[block][:, None, :]
            scores = np.where(mask, self.scores[block].astype(np.float64), -np.inf)
            preds[block] = np.argmax(scores, axis=2)  # first maximum: ties go to the lowest index
            if self.score_kind in ("loglik", "logit"):
                shifted = np.exp(scores - scores.max(axis=2, keepdims=True))
                block_probs = shifted / shifted.sum(axis=2, keepdims=True)
            elif self.score_kind == "logprob":
                block_probs = np.where(mask, np.exp(np.minimum(scores, 0.0)), 0.0)
            else:
                block_probs = np.where(mask, np.clip(scores, 0.0, 1.0), 0.0)
            probs[block] = block_probs
        return probs, preds

    # -- sizes and lookups -------------------------------------------------------------------------
    @property
    def n_questions(self) -> int:
        return int(self.scores.shape[0])

    @property
    def n_models(self) -> int:
        return int(self.scores.shape[1])

    @property
    def max_choices(self) -> int:
        return int(self.scores.shape[2])

    @property
    def n_tasks(self) -> int:
        return len(self.task_names)

    def model_index(self, model: int | str) -> int:
        """Index of a model given by index or name (ValueError naming the model otherwise)."""
        if isinstance(model, str):
            if model not in self.models:
                raise ValueError(f"unknown model {model!r}; the cache {self.path} has {', '.join(self.models)}")
            return self.models.index(model)
        if isinstance(model, bool) or not isinstance(model, int | np.integer):
            raise ValueError(f"model must be an index or a name, got {model!r}")
        index = int(model)
        if not 0 <= index < self.n_models:
            raise ValueError(f"model index {model!r} outside 0..{self.n_models - 1}")
        return index

    def task_index(self, task: str) -> int:
        """Index of a task name (ValueError listing the tasks otherwise)."""
        if task not in self.task_names:
            raise ValueError(f"unknown task {task!r}; the cache {self.path} has {', '.join(self.task_names)}")
        return self.task_names.index(task)

    def select(self, split: str = "all", tasks: Sequence[str] | None = None) -> np.ndarray:
        """Indices (ascending) of the questions in ``split`` ("train", "test", "validation", "all") and ``tasks``.

        Raises ValueError when the split name or a task name is unknown, or when nothing is selected.
        """
        if split == "all":
            keep = np.ones(self.n_questions, dtype=bool)
        elif split in SPLITS:
            keep = self.split == SPLITS[split]
        else:
            raise ValueError(f"split {split!r} is not one of all, {', '.join(SPLITS)}")
        if tasks is not None:
            if isinstance(tasks, str):
                raise ValueError(f"tasks must be a sequence of task names, got the string {tasks!r}")
            keep &= np.isin(self.tasks, [self.task_index(task) for task in tasks])
        indices = np.flatnonzero(keep)
        if indices.size == 0:
            raise ValueError(f"no question of {self.path} is in split {split!r} and tasks {tasks!r}")
        return indices

    def subset(self, questions: np.ndarray) -> LogitCache:
        """A new cache holding only the given questions (indices or boolean mask), all models."""
        index = np.asarray(questions)
        if index.dtype == bool:
            if index.shape != (self.n_questions,):
                raise ValueError(f"subset: boolean mask of shape {index.shape}, expected ({self.n_questions},)")
            index = np.flatnonzero(index)
        if index.size == 0:
            raise ValueError("subset: no question selected")
        pick = functools.partial(np.take, indices=index, axis=0)
        costs = self.costs
        if costs is not None and costs.ndim == 2:
            costs = pick(costs)
        return LogitCache(
            scores=pick(self.scores),
            labels=pick(self.labels),
            models=self.models,
            score_kind=self.score_kind,
            n_choices=pick(self.n_choices),
            tasks=pick(self.tasks),
            task_names=self.task_names,
            split=pick(self.split),
            question_ids=None if self.question_ids is None else tuple(self.question_ids[i] for i in index),
            costs=costs,
            features=None if self.features is None else pick(self.features),
            feature_names=self.feature_names,
            feature_kind=self.feature_kind,
            question_text=None if self.question_text is None else tuple(self.question_text[i] for i in index),
            source=self.source,
            path=self.path,
        )

    def model_accuracy(self, questions: np.ndarray | None = None) -> np.ndarray:
        """(N,) accuracy of each model on the given questions (all by default)."""
        correct = self.correct if questions is None else self.correct[questions]
        if correct.shape[0] == 0:
            raise ValueError("model_accuracy: no question selected")
        return correct.mean(axis=0)


# -- HDF5 --------------------------------------------------------------------------------------------

_OPTIONAL_DATASETS = ("n_choices", "tasks", "task_names", "split", "question_ids", "costs", "features", "question_text")
_STRING_DATASETS = ("models", "task_names", "question_ids", "question_text")


def _read_dataset(h5file: Any, path: str, name: str) -> Any:
    import h5py

    try:
        node = h5file[name]
    except (KeyError, OSError) as error:
        raise _fail(path, name, f"cannot be opened (a broken link?): {error}") from error
    if not isinstance(node, h5py.Dataset):
        raise _fail(path, name, f"is a {type(node).__name__}, expected a dataset")
    if node.shape is None:
        raise _fail(path, name, "has no data (empty dataspace)")
    if name in _STRING_DATASETS:
        if h5py.check_string_dtype(node.dtype) is not None:
            try:
                return tuple(str(item) for item in np.asarray(node.asstr()[()]).reshape(-1))
            except UnicodeDecodeError as error:
                raise _fail(path, name, "holds bytes that are not valid UTF-8") from error
        raise _fail(path, name, f"must hold strings, got dtype {node.dtype}")
    if node.dtype.kind not in "iuf":
        raise _fail(path, name, f"must hold numbers, got dtype {node.dtype}")
    return node[()]


def _read_attr(h5file: Any, path: str, name: str, required: bool) -> Any:
    if name not in h5file.attrs:
        if required:
            raise _fail(path, name, "required root attribute is missing")
        return None
    value = h5file.attrs[name]
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    if isinstance(value, np.ndarray):
        if value.shape != ():
            raise _fail(path, name, f"root attribute must be a single value, got an array of shape {value.shape}")
        value = value[()]
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    return value


def _read_feature_attributes(node: Any, path: str) -> dict[str, Any]:
    """``feature_names`` ((F,) strings) and ``feature_kind`` (a string): attributes of the ``features`` dataset."""
    found: dict[str, Any] = {}
    if "feature_names" in node.attrs:
        value = node.attrs["feature_names"]
        if not isinstance(value, np.ndarray) or value.ndim != 1:
            raise _fail(path, "feature_names", f"attribute of 'features' must be a 1-D array of strings, got {value!r}")
        found["feature_names"] = value
    if "feature_kind" in node.attrs:
        value = node.attrs["feature_kind"]
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError as error:
                raise _fail(path, "feature_kind", "attribute of 'features' is not valid UTF-8") from error
        if not isinstance(value, str):
            raise _fail(path, "feature_kind", f"attribute of 'features' must be a string, got {value!r}")
        found["feature_kind"] = value
    return found


def load_cache(path: str | os.PathLike[str]) -> LogitCache:
    """Read and validate a logit cache file.

    Raises FileNotFoundError when the file does not exist and :class:`CacheError` (a ValueError naming the
    file and the field) when it is not a valid cache: not HDF5, wrong ``format`` or ``format_version``,
    missing or malformed dataset, shapes that disagree, labels or choice counts out of range, non-finite
    valid scores, duplicate model names.
    """
    import h5py

    file_path = Path(path)
    name = str(path)
    if not file_path.is_file():
        raise FileNotFoundError(f"{name}: no such cache file")
    if not h5py.is_hdf5(file_path):
        raise CacheError(f"{name}: not an HDF5 file (a logit cache is HDF5, see docs/cache-format.md)")
    try:
        with h5py.File(file_path, "r") as h5file:
            file_format = _read_attr(h5file, name, "format", required=True)
            if not isinstance(file_format, str) or file_format != FORMAT_NAME:
                raise _fail(name, "format", f"is {file_format!r}, expected {FORMAT_NAME!r}")
            version = _read_attr(h5file, name, "format_version", required=True)
            if not isinstance(version, int | np.integer) or int(version) != FORMAT_VERSION:
                raise _fail(
                    name, "format_version", f"{version!r} is not supported (this reader knows {FORMAT_VERSION})"
                )
            score_kind = _read_attr(h5file, name, "score_kind", required=True)
            if not isinstance(score_kind, str):
                raise _fail(name, "score_kind", f"must be a string, got {score_kind!r}")
            source = _read_attr(h5file, name, "source", required=False)
            arrays: dict[str, Any] = {}
            for dataset in ("scores", "labels", "models"):
                if dataset not in h5file:
                    raise _fail(name, dataset, "required dataset is missing")
                arrays[dataset] = _read_dataset(h5file, name, dataset)
            for dataset in _OPTIONAL_DATASETS:
                if dataset in h5file:
                    arrays[dataset] = _read_dataset(h5file, name, dataset)
            if "features" in arrays:
                arrays.update(_read_feature_attributes(h5file["features"], name))
    except OSError as error:
        raise CacheError(f"{name}: cannot be read as HDF5 ({error})") from error
    return LogitCache(score_kind=str(score_kind), source="" if source is None else str(source), path=name, **arrays)


def save_cache(path: str | os.PathLike[str], cache: LogitCache, *, compression: str | None = "gzip") -> Path:
    """Write ``cache`` to ``path`` atomically (a temporary file in the same folder, then a rename).

    The folder must exist. An existing file at ``path`` is replaced only once the new one is complete.
    Returns the path written.
    """
    import h5py

    strings = h5py.string_dtype("utf-8")
    with atomic_path(path) as temporary:
        with h5py.File(temporary, "w") as h5file:
            h5file.attrs["format"] = FORMAT_NAME
            h5file.attrs["format_version"] = FORMAT_VERSION
            h5file.attrs["score_kind"] = cache.score_kind
            if cache.source:
                h5file.attrs["source"] = cache.source
            h5file.create_dataset("scores", data=cache.scores, compression=compression)
            h5file.create_dataset("labels", data=cache.labels)
            h5file.create_dataset("models", data=list(cache.models), dtype=strings)
            h5file.create_dataset("n_choices", data=cache.n_choices)
            h5file.create_dataset("tasks", data=cache.tasks)
            h5file.create_dataset("task_names", data=list(cache.task_names), dtype=strings)
            h5file.create_dataset("split", data=cache.split)
            if cache.question_ids is not None:
                h5file.create_dataset("question_ids", data=list(cache.question_ids), dtype=strings)
            if cache.costs is not None:
                h5file.create_dataset("costs", data=cache.costs)
            if cache.features is not None:
                node = h5file.create_dataset("features", data=cache.features, compression=compression)
                if cache.feature_names is not None:
                    node.attrs.create("feature_names", list(cache.feature_names), dtype=strings)
                if cache.feature_kind:
                    node.attrs["feature_kind"] = cache.feature_kind
            if cache.question_text is not None:
                _write_texts(h5file, "question_text", cache.question_text, compression)
    return Path(path)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path in the folder of ``path`` to write to; renamed to ``path`` when the block ends
    normally (with the usual permissions for the umask), removed when it raises.

    The folder must exist (FileNotFoundError otherwise). An existing file at ``path`` is replaced only once
    the new one is complete, so a failure never leaves a partial file.
    """
    target = Path(path)
    if not target.parent.is_dir():
        raise FileNotFoundError(f"{target.parent}: folder does not exist (cannot write {target.name})")
    handle, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # mkstemp creates 0600; give the file the usual permissions
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _write_texts(h5file: Any, name: str, texts: Sequence[str], compression: str | None) -> None:
    """A (Q,) UTF-8 string dataset: fixed-length (compressible) when compressing and the padding stays small.

    The texts hold no NUL character (checked by :class:`LogitCache`), so the NUL padding of fixed-length
    strings reads back exactly.
    """
    import h5py

    encoded = [text.encode("utf-8") for text in texts]
    width = max(1, *(len(item) for item in encoded))
    if compression is not None and len(encoded) * width <= _FIXED_TEXT_BYTES:
        fixed = h5py.string_dtype("utf-8", width)
        h5file.create_dataset(name, data=np.array(encoded, dtype=fixed), compression=compression)
    else:
        h5file.create_dataset(name, data=list(texts), dtype=h5py.string_dtype("utf-8"))


def default_cache_path() -> Path:
    """Path of the default built-in cache (:data:`ensemble_env.datasets.DEFAULT`)."""
    from ensemble_env import datasets

    return datasets.path(datasets.DEFAULT)


def load_default_cache() -> LogitCache:
    """The default built-in cache, loaded once per process (its arrays are read-only)."""
    from ensemble_env import datasets

    return datasets.load(datasets.DEFAULT)
