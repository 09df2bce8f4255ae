"""What a baseline answered, as a record: :class:`BaselineResult` and its scores on the environment's axes.

A result holds, for each eval question, the answer, the team consulted and the gold label, so that it can be
scored without the baseline that made it (:meth:`BaselineResult.scores`: accuracy, reward under
:class:`~ensemble_env.game.reward.RewardSettings`, team size, cost; overall and per task) and broken down by task.
The question helpers every baseline validates its arguments with (:func:`question_indices`,
:func:`train_test_indices`, :func:`task_ids`, :func:`task_names`) live here too.

>>> import numpy as np
>>> from ensemble_env.cache import LogitCache
>>> cache = LogitCache(
...     scores=np.array([[[0.9, 0.1]], [[0.2, 0.8]], [[0.7, 0.3]]]),
...     labels=np.array([0, 1, 1]), models=("a",), score_kind="prob")
>>> result = BaselineResult.from_cache("a", cache, [0, 1, 2], predictions=[0, 1, 0], team_size=1)
>>> result.accuracy, result.mean_team_size
(0.6666666666666666, 1.0)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike

from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.reward import DEFAULT_REWARD, RewardSettings, model_costs

__all__ = ["BaselineResult", "question_indices", "task_ids", "task_names", "train_test_indices"]


def _frozen(array: np.ndarray) -> np.ndarray:
    array = np.array(array, copy=True)
    array.flags.writeable = False
    return array


@dataclass(frozen=True, eq=False)
class BaselineResult:
    """What one baseline answered on the eval questions.

    Parameters
    ----------
    name
        Name of the baseline, e.g. ``"plurality_vote"`` or ``"random_team(k=3)"``.
    predictions
        (Q_eval,) int: the chosen answer index for each eval question.
    team_size
        (Q_eval,) float: how many models the baseline consulted for each question.
    questions
        (Q_eval,) int: indices of the eval questions in the cache.
    labels
        (Q_eval,) int: gold answers of those questions (so :attr:`accuracy` needs no cache).
    info
        Extra facts about the fit, e.g. the chosen model(s) or team, for reports.
    teams
        (Q_eval, N) bool, optional: the models consulted for each question (its row sums must equal
        ``team_size``). Needed for the cost of a cache with ``costs`` and for a reward by cost share.

    Notes
    -----
    All arrays are stored as read-only copies. Use :meth:`from_cache` to build a result for
    predictions made elsewhere (e.g. a learned policy) so it can join :func:`format_table`.
    :meth:`scores` gives accuracy, the environment's reward, team size and cost, overall and per task.
    """

    name: str
    predictions: np.ndarray
    team_size: np.ndarray
    questions: np.ndarray
    labels: np.ndarray
    info: Mapping[str, Any] = field(default_factory=dict)
    teams: np.ndarray | None = None

    def __post_init__(self) -> None:
        put = object.__setattr__
        questions = np.asarray(self.questions)
        if questions.ndim != 1 or questions.size == 0:
            raise ValueError(f"questions must be a non-empty 1-D array, got shape {questions.shape}")
        shape = questions.shape
        for name, kind in (("predictions", "iu"), ("labels", "iu"), ("questions", "iu"), ("team_size", "iuf")):
            array = np.asarray(getattr(self, name))
            if array.shape != shape:
                raise ValueError(f"{name} has shape {array.shape}, expected {shape} like questions")
            if array.dtype.kind not in kind:
                raise ValueError(f"{name} has dtype {array.dtype}, expected a numeric kind in {kind!r}")
            dtype = np.float64 if name == "team_size" else np.int64
            put(self, name, _frozen(array.astype(dtype)))
        put(self, "name", str(self.name))
        put(self, "info", dict(self.info))
        if self.teams is not None:
            teams = np.asarray(self.teams)
            if teams.dtype != np.bool_ or teams.ndim != 2 or teams.shape[0] != shape[0]:
                raise ValueError(
                    f"teams must be a (Q_eval, N) bool array with Q_eval={shape[0]}, got {teams.dtype} {teams.shape}"
                )
            if not np.array_equal(teams.sum(axis=1), self.team_size):
                raise ValueError("teams: the row sums differ from team_size")
            put(self, "teams", _frozen(teams))

    @classmethod
    def from_cache(
        cls,
        name: str,
        cache: LogitCache,
        questions: ArrayLike,
        predictions: ArrayLike,
        team_size: ArrayLike | float,
        info: Mapping[str, Any] | None = None,
        teams: ArrayLike | None = None,
    ) -> BaselineResult:
        """Build a result taking the gold labels from ``cache``; a scalar ``team_size`` is broadcast."""
        index = question_indices(cache, questions, "questions")
        sizes = np.broadcast_to(np.asarray(team_size, dtype=np.float64), index.shape)
        members = None if teams is None else np.asarray(teams)
        return cls(name, np.asarray(predictions), sizes, index, cache.labels[index], info or {}, members)

    @property
    def n_questions(self) -> int:
        """Number of eval questions."""
        return int(self.questions.size)

    @property
    def correct(self) -> np.ndarray:
        """(Q_eval,) bool: whether each prediction is the gold answer."""
        return self.predictions == self.labels

    @property
    def accuracy(self) -> float:
        """Fraction of eval questions answered correctly."""
        return float(self.correct.mean())

    @property
    def mean_team_size(self) -> float:
        """Mean number of models consulted per eval question."""
        return float(self.team_size.mean())

    def _check_cache(self, cache: LogitCache) -> None:
        if int(self.questions.max()) >= cache.n_questions or int(self.questions.min()) < 0:
            raise ValueError(f"cache: result {self.name!r} has question indices outside 0..{cache.n_questions - 1}")
        if not np.array_equal(cache.labels[self.questions], self.labels):
            raise ValueError(f"cache: the labels of result {self.name!r} differ from this cache's")

    def task_accuracy(self, cache: LogitCache) -> dict[str, float]:
        """Accuracy per task, for the tasks (in ``cache.task_names`` order) that have eval questions.

        Raises ValueError when ``cache`` is not the cache the result was computed on (indices out
        of range or different labels).
        """
        self._check_cache(cache)
        tasks = task_ids(cache)[self.questions]
        counts = np.bincount(tasks, minlength=cache.n_tasks)
        right = np.bincount(tasks, weights=self.correct.astype(np.float64), minlength=cache.n_tasks)
        return {
            task_names(cache)[task]: float(right[task] / counts[task]) for task in range(cache.n_tasks) if counts[task]
        }

    def macro_accuracy(self, cache: LogitCache) -> float:
        """Unweighted mean of :meth:`task_accuracy` over the tasks with eval questions."""
        return float(np.mean(list(self.task_accuracy(cache).values())))

    def costs(self, cache: LogitCache) -> np.ndarray:
        """(Q_eval,) what each question cost: the summed ``cache.costs`` of its team (the team size when the
        cache has no costs, as the environment's ``cost`` info). NaN when the cache has costs and the result
        has no :attr:`teams`."""
        self._check_cache(cache)
        if cache.costs is None:
            return self.team_size.copy()
        if self.teams is None:
            return np.full(self.n_questions, np.nan)
        return (model_costs(cache, self.questions) * self.teams).sum(axis=1)

    def rewards(self, cache: LogitCache, reward: RewardSettings = DEFAULT_REWARD) -> np.ndarray:
        """(Q_eval,) the environment's reward of each answer (:class:`RewardSettings`); a share of the costs
        (``use_costs``) needs :attr:`teams`."""
        self._check_cache(cache)
        if reward.use_costs and self.teams is None:
            raise ValueError(f"result {self.name!r} has no teams: its share of the costs is unknown (use_costs)")
        total = model_costs(cache, self.questions).sum(axis=1)
        return reward.rewards(self.correct, reward.share(cache, self.team_size, self.costs(cache), total))

    def scores(self, cache: LogitCache, reward: RewardSettings = DEFAULT_REWARD) -> dict[str, Any]:
        """JSON-ready ``{"accuracy", "reward", "team_size", "cost", "tasks": {task: {the same four}}}``.

        ``accuracy`` is the macro accuracy (mean over tasks); ``reward`` (see :meth:`rewards`), ``team_size``
        and ``cost`` (see :meth:`costs`; None when unknown) are means over the eval questions, as an episode
        over them averages them; per task, everything is a mean over that task's questions.
        """
        columns = {
            "correct": self.correct.astype(np.float64),
            "reward": self.rewards(cache, reward),
            "team_size": self.team_size,
            "cost": self.costs(cache),
        }

        def means(rows: np.ndarray | slice) -> dict[str, Any]:
            values: dict[str, Any] = {name: float(column[rows].mean()) for name, column in columns.items()}
            values["accuracy"] = values.pop("correct")
            values["cost"] = None if np.isnan(values["cost"]) else values["cost"]
            return {key: values[key] for key in ("accuracy", "reward", "team_size", "cost")}

        tasks = task_ids(cache)[self.questions]
        order = np.argsort(tasks, kind="stable")  # each task's questions, ascending: the rows a mask of it selects
        present, starts = np.unique(tasks[order], return_index=True)
        groups = np.split(order, starts[1:])
        per_task = {task_names(cache)[t]: means(rows) for t, rows in zip(present, groups, strict=True)}
        overall = means(slice(None))
        overall["accuracy"] = float(np.mean([entry["accuracy"] for entry in per_task.values()]))
        return {**overall, "tasks": per_task}


def task_ids(cache: LogitCache) -> np.ndarray:
    """(Q,) task index of each question (always set after construction; typed optional)."""
    return cast(np.ndarray, cache.tasks)


def task_names(cache: LogitCache) -> tuple[str, ...]:
    """The task names, in task-index order (always set after construction; typed optional)."""
    return cast("tuple[str, ...]", cache.task_names)


def question_indices(cache: LogitCache, value: ArrayLike, name: str) -> np.ndarray:
    """Validate question indices (or a boolean mask over all questions) and return int64 indices."""
    array = np.asarray(value)
    if array.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of question indices, got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{name} is empty: a baseline needs at least one {name} question")
    if array.dtype == np.bool_:
        if array.shape[0] != cache.n_questions:
            raise ValueError(
                f"{name} is a boolean mask of length {array.shape[0]}, "
                f"expected one entry per question ({cache.n_questions})"
            )
        array = np.flatnonzero(array)
        if array.size == 0:
            raise ValueError(f"{name} is empty: its boolean mask selects no question")
    elif array.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold integer question indices, got dtype {array.dtype}")
    bad = np.flatnonzero((array < 0) | (array >= cache.n_questions))
    if bad.size:
        raise ValueError(f"{name} holds question index {array[bad[0]]}, outside 0..{cache.n_questions - 1}")
    return array.astype(np.int64)


def train_test_indices(cache: LogitCache, train: ArrayLike, test: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """:func:`question_indices` of ``train`` and of ``test`` (errors name them ``train`` and ``test``)."""
    return question_indices(cache, train, "train"), question_indices(cache, test, "test")
