"""Logit caches: the HDF5 file that holds what a pool of models answered, and its in-memory form.

A *logit cache* stores, for Q questions, N models and up to C answer choices, each model's score of each
choice (``scores``, shape (Q, N, C)), the gold ``labels`` and the model names, plus optional task, split,
cost and feature arrays and the question texts. The format is documented in ``docs/cache-format.md``; this
module is the only place in the package that touches HDF5.

- :func:`~ensemble_env.cache.io.load_cache` reads and validates a file and returns a :class:`LogitCache`; it is
  safe on any file (no link or storage outside the file is followed, every size is checked before data are
  read, files without checksums are read under a time limit: :mod:`ensemble_env.cache.hdf5`,
  :mod:`ensemble_env.cache.guard`).
- :func:`~ensemble_env.cache.io.save_cache` writes one atomically (:func:`ensemble_env.files.atomic_path`)
  with checksums on its data and metadata.
- :class:`LogitCache` validates its arrays at construction (whether they come from a file or from code),
  computes per-choice probabilities once from ``score_kind`` over each question's valid choices, and holds
  read-only arrays.

Every rule violation, and every failure to read a file, raises :class:`CacheError` (a :class:`ValueError`)
whose message names the file (or ``<memory>``), the field and the offending value, in a few hundred
characters at most. Nothing is loaded through pickle.

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

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ensemble_env.text import show

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "SCORE_KINDS",
    "SPLITS",
    "SPLIT_CHOICES",
    "CacheError",
    "LogitCache",
    "cache_error",
]

#: the ``format`` attribute of a cache file (docs/cache-format.md)
FORMAT_NAME = "ensemble-logit-cache"
#: the ``format_version`` attribute of the files this package writes and reads
FORMAT_VERSION = 1
#: what a cache's ``scores`` hold (``score_kind``): log-likelihoods, logits, log-probabilities or probabilities
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
#: longest problem description in a CacheError (values in it are cut by ``_show`` first)
_PROBLEM_LIMIT = 400


class CacheError(ValueError):
    """A logit cache breaks a rule of the format; the message names the file, the field and the value."""


def cache_error(path: str, field_name: str, problem: str) -> CacheError:
    if len(problem) > _PROBLEM_LIMIT:
        problem = problem[: _PROBLEM_LIMIT - 3] + "..."
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
        raise cache_error(path, name, f"cannot be read as an array ({error})") from error


def _as_int_array(path: str, name: str, value: Any, shape: tuple[int, ...]) -> np.ndarray:
    array = _own(path, name, value)
    if array.dtype.kind not in "iu":
        raise cache_error(path, name, f"must hold integers, got dtype {array.dtype}")
    if array.shape != shape:
        raise cache_error(path, name, f"shape {array.shape} does not match the expected {shape}")
    return _readonly(array.astype(np.int64, copy=False))


def _as_float_array(path: str, name: str, value: Any) -> np.ndarray:
    array = _own(path, name, value)
    if array.dtype.kind != "f":
        raise cache_error(path, name, f"must hold floating-point numbers, got dtype {array.dtype}")
    return array


def _as_names(path: str, name: str, value: Any, length: int | None, entry: str = "entry") -> tuple[str, ...]:
    """A tuple of strings (bytes decoded as UTF-8); ``entry`` names an item in errors ("entry 3", "question 3")."""
    if isinstance(value, str):
        raise cache_error(path, name, f"must be a sequence of strings, got the single string {show(value)}")
    try:
        items = value.reshape(-1).tolist() if isinstance(value, np.ndarray) else list(value)
    except TypeError as error:
        raise cache_error(
            path, name, f"must be a sequence of strings, got {type(value).__name__} {show(value)}"
        ) from error
    names = []
    for index, item in enumerate(items):
        if isinstance(item, bytes):
            try:
                item = item.decode("utf-8")
            except UnicodeDecodeError as error:
                raise cache_error(path, name, f"{entry} {index}: {show(item)} is not valid UTF-8") from error
        if not isinstance(item, str | np.str_):
            problem = f"entries must be strings, {entry} {index} is {type(item).__name__} {show(item)}"
            raise cache_error(path, name, problem)
        _check_text(path, name, item, f"{entry} {index}: ")
        names.append(str(item))
    if length is not None and len(names) != length:
        raise cache_error(path, name, f"has {len(names)} entries, expected {length}")
    return tuple(names)


def _check_text(path: str, name: str, text: str, where: str = "") -> None:
    """Refuse a string HDF5 cannot store as UTF-8: a NUL character, or a lone surrogate (not encodable)."""
    if "\x00" in text:
        raise cache_error(path, name, f"{where}{show(text)} holds a NUL character (HDF5 cannot store it)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise cache_error(path, name, f"{where}{show(text)} cannot be written as UTF-8 ({error.reason})") from None


def _as_texts(path: str, value: Any, n_questions: int) -> tuple[str, ...]:
    """The question texts: one string per question, without NUL characters (HDF5 strings cannot hold them)."""
    return _as_names(path, "question_text", value, n_questions, entry="question")


def _unique_names(path: str, name: str, names: tuple[str, ...]) -> None:
    seen: set[str] = set()
    for item in names:
        if item == "":
            raise cache_error(path, name, "holds an empty name")
        if item in seen:
            raise cache_error(path, name, f"names must be unique, {show(item)} appears more than once")
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
            raise cache_error(path, "score_kind", f"{show(self.score_kind)} is not one of {', '.join(SCORE_KINDS)}")
        for name in ("source", "feature_kind"):
            text = getattr(self, name)
            if not isinstance(text, str):
                raise cache_error(path, name, f"must be a string, got {type(text).__name__} {show(text)}")
            _check_text(path, name, text)

        scores = _as_float_array(path, "scores", self.scores)
        if scores.ndim != 3:
            raise cache_error(path, "scores", f"must have shape (Q, N, C), got shape {scores.shape}")
        n_questions, n_models, max_choices = scores.shape
        if n_questions < 1 or n_models < 1:
            raise cache_error(path, "scores", f"needs at least one question and one model, got shape {scores.shape}")
        if max_choices < 2:
            raise cache_error(path, "scores", f"needs at least 2 choices (axis 2), got shape {scores.shape}")
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
                raise cache_error(
                    path,
                    "n_choices",
                    f"question {bad[0]} has n_choices={n_choices[bad[0]]}, outside 2..{max_choices}",
                )
        put("n_choices", n_choices)

        labels = _as_int_array(path, "labels", self.labels, (n_questions,))
        bad = np.flatnonzero((labels < 0) | (labels >= n_choices))
        if bad.size:
            q = bad[0]
            raise cache_error(path, "labels", f"question {q} has label {labels[q]}, outside 0..{n_choices[q] - 1}")
        put("labels", labels)

        task_names = ("default",) if self.task_names is None else _as_names(path, "task_names", self.task_names, None)
        if not task_names:
            raise cache_error(path, "task_names", "is empty")
        _unique_names(path, "task_names", task_names)
        put("task_names", task_names)
        if self.tasks is None:
            tasks = _readonly(np.zeros(n_questions, dtype=np.int64))
        else:
            tasks = _as_int_array(path, "tasks", self.tasks, (n_questions,))
            bad = np.flatnonzero((tasks < 0) | (tasks >= len(task_names)))
            if bad.size:
                q = bad[0]
                raise cache_error(
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
                raise cache_error(
                    path, "split", f"question {q} has split {split[q]}, expected 0 train, 1 test, 2 validation"
                )
        put("split", split)

        if self.question_ids is not None:
            put("question_ids", _as_names(path, "question_ids", self.question_ids, n_questions))

        if self.costs is not None:
            costs = _as_float_array(path, "costs", self.costs)
            if costs.shape not in ((n_models,), (n_questions, n_models)):
                raise cache_error(path, "costs", f"shape {costs.shape} is neither (N,)=({n_models},) nor (Q, N)")
            if not np.all(np.isfinite(costs)) or np.any(costs < 0):
                raise cache_error(path, "costs", "must be finite and non-negative")
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
        if self.features is None:
            for name in ("feature_names", "feature_kind"):
                if getattr(self, name):
                    raise cache_error(path, name, "is given without 'features'")
            put("feature_names", None)
            return
        features = _as_float_array(path, "features", self.features)
        if features.ndim != 2 or features.shape[0] != n_questions:
            raise cache_error(path, "features", f"shape {features.shape} is not (Q, F) with Q={n_questions}")
        if features.shape[1] < 1:
            raise cache_error(path, "features", f"shape {features.shape} has no feature column (F = 0)")
        if not np.all(np.isfinite(features)):
            q, f = np.argwhere(~np.isfinite(features))[0]
            raise cache_error(path, "features", f"question {q} has a non-finite feature {features[q, f]} (column {f})")
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
            raise cache_error(
                path,
                "scores",
                f"question {q}, model {show(self.models[m])}, choice {c}: non-finite value {scores[q, m, c]}",
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
            raise cache_error(
                path, "scores", f"question {q}, model {show(self.models[m])}, choice {c}: {scores[q, m, c]} {what}"
            )

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
