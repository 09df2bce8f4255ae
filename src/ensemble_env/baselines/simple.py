"""Baselines shown next to every learned policy: single models, votes, teams, stacking, oracle.

Each baseline is fitted on the *train* questions of a :class:`~ensemble_env.cache.LogitCache`
and evaluated on the *eval* questions (both given as index arrays into the cache). Every
public function has the signature ``(cache, train, test, **options) -> BaselineResult`` and
returns per-question predictions and teams, so results can be broken down by task and scored on
the environment's own axes (:meth:`BaselineResult.scores`: accuracy, reward under
:class:`RewardSettings`, team size, cost). The routing baselines (a fixed team per task, a
per-question router) are in :mod:`ensemble_env.baselines.routing`; :mod:`ensemble_env.baselines.comparison` runs them
all.

============================  ====  =========================================================
baseline                      team  how it answers a question
============================  ====  =========================================================
:func:`best_single`           1     the model with the best train accuracy (per task optional)
:func:`plurality_vote`        N     every model votes its argmax; ties to the lowest choice
:func:`mean_probability_vote` N     argmax of the mean of the models' probabilities
:func:`random_team`           k     a uniformly random team per question, mean-probability vote
:func:`greedy_focal_team`     k     a static team grown on train by focal diversity
:func:`stacking`              N     a conditional-logit model over the models' probabilities
:func:`oracle`                N     right whenever any model is right (an upper bound)
============================  ====  =========================================================

Only numpy is used (no torch, scikit-learn or scipy); every computation is vectorised over
questions and deterministic (the random team draws from a seeded ``np.random.default_rng``).
:func:`run_all` runs every baseline on a cache's splits and :func:`format_table` renders the
results as aligned plain-text tables.

>>> import numpy as np
>>> from ensemble_env.cache import LogitCache
>>> cache = LogitCache(
...     scores=np.array([
...         [[0.9, 0.1], [0.8, 0.2], [0.3, 0.7]],
...         [[0.2, 0.8], [0.6, 0.4], [0.1, 0.9]],
...         [[0.7, 0.3], [0.4, 0.6], [0.2, 0.8]],
...         [[0.6, 0.4], [0.3, 0.7], [0.4, 0.6]],
...     ]),
...     labels=np.array([0, 1, 1, 0]), models=("a", "b", "c"), score_kind="prob",
...     split=np.array([0, 0, 1, 1]))
>>> train, test = cache.select("train"), cache.select("test")
>>> result = plurality_vote(cache, train, test)
>>> result.predictions.tolist(), result.accuracy, result.task_accuracy(cache)
([1, 1], 0.5, {'default': 0.5})
>>> oracle(cache, train, test).accuracy
1.0
>>> [r.name for r in run_all(cache, k=2)]  # doctest: +NORMALIZE_WHITESPACE
['best_single', 'plurality_vote', 'mean_probability_vote', 'random_team(k=2)',
 'greedy_focal_team(k=2)', 'stacking(per_task)', 'oracle']
"""

from __future__ import annotations

import math
import operator
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike

from ensemble_env.cache.datasets import cost_unit
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.reward import DEFAULT_REWARD, RewardSettings, model_costs
from ensemble_env.metrics import focal_diversity
from ensemble_env.text import align_table

__all__ = [
    "FUSIONS",
    "STACKING_EPS",
    "BaselineResult",
    "best_single",
    "cost_format",
    "cost_note",
    "describe_costs",
    "fixed_decimals",
    "format_table",
    "greedy_focal_team",
    "mean_probability_vote",
    "mean_vote",
    "oracle",
    "plurality_vote",
    "question_indices",
    "random_team",
    "run_all",
    "stacking",
    "task_ids",
    "task_names",
    "train_test_indices",
    "valid_choices",
]

#: fusion rules accepted by :func:`greedy_focal_team`
FUSIONS = ("plurality", "mean")
#: added to a probability before its logarithm in the :func:`stacking` features
STACKING_EPS = 1e-6
_TIE_TOLERANCE = 1e-12  # focal diversities closer than this count as equal
_NEWTON_TOLERANCE = 1e-10  # stop when half the squared Newton decrement falls below this


# -- results -----------------------------------------------------------------------------------


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
        per_task = {task_names(cache)[t]: means(tasks == t) for t in range(cache.n_tasks) if np.any(tasks == t)}
        overall = means(slice(None))
        overall["accuracy"] = float(np.mean([entry["accuracy"] for entry in per_task.values()]))
        return {**overall, "tasks": per_task}


# -- validation --------------------------------------------------------------------------------


def task_ids(cache: LogitCache) -> np.ndarray:
    """(Q,) task index of each question (always set after construction; typed optional)."""
    return cast(np.ndarray, cache.tasks)


def task_names(cache: LogitCache) -> tuple[str, ...]:
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
    return question_indices(cache, train, "train"), question_indices(cache, test, "test")


def _team_size_k(cache: LogitCache, k: int) -> int:
    try:
        size = operator.index(k)
    except TypeError:
        raise ValueError(f"k must be an integer team size in 1..{cache.n_models}, got {k!r}") from None
    if not 1 <= size <= cache.n_models:
        raise ValueError(f"k={size} is outside 1..{cache.n_models} (the cache has {cache.n_models} models)")
    return size


# -- fusion ------------------------------------------------------------------------------------


def valid_choices(cache: LogitCache, questions: np.ndarray) -> np.ndarray:
    """(Q, C) bool: which choices exist for each question."""
    return np.arange(cache.max_choices)[None, :] < cast(np.ndarray, cache.n_choices)[questions, None]


def _plurality(preds: np.ndarray, n_classes: int) -> np.ndarray:
    """Row-wise plurality of (Q, M) class indices in 0..n_classes-1; ties to the lowest class."""
    n_rows = preds.shape[0]
    flat = (np.arange(n_rows)[:, None] * n_classes + preds).ravel()
    votes = np.bincount(flat, minlength=n_rows * n_classes).reshape(n_rows, n_classes)
    return votes.argmax(axis=1)


def mean_vote(probs: np.ndarray, members: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Argmax over valid choices of the summed probabilities of each row's members.

    ``probs`` is (Q, N, C), ``members`` (Q, N) bool. The sum (not the mean) is used: dividing by
    the team size does not move the argmax. Every call sums in model order, so a full team gives
    exactly the same numbers whichever function asks.
    """
    total = (probs.astype(np.float64) * members[:, :, None]).sum(axis=1)
    return np.where(valid, total, -np.inf).argmax(axis=1)


def _full_team(n_rows: int, n_models: int) -> np.ndarray:
    return np.ones((n_rows, n_models), dtype=bool)


def _fixed_team(n_rows: int, n_models: int, members: ArrayLike) -> np.ndarray:
    """(n_rows, n_models) bool: the same team (model indices) on every row."""
    teams = np.zeros((n_rows, n_models), dtype=bool)
    teams[:, np.asarray(members, dtype=np.int64)] = True
    return teams


# -- baselines ---------------------------------------------------------------------------------


def best_single(cache: LogitCache, train: ArrayLike, test: ArrayLike, *, per_task: bool = False) -> BaselineResult:
    """Answer with the single model that has the best train accuracy.

    Parameters
    ----------
    cache
        The logit cache.
    train, test
        Question indices (or boolean masks) to fit on and to evaluate on.
    per_task
        ``False`` (default, as the RL-Focal paper compares): one model for the whole benchmark.
        ``True``: for each task, the model with the best accuracy on that task's train
        questions; a task without train questions falls back to the overall best model.

    Returns
    -------
    BaselineResult
        Named ``"best_single"`` (or ``"best_single(per_task)"``), team size 1; ``info["model"]``
        is the chosen model name, or ``info["models"]`` maps each eval task to its model.

    Notes
    -----
    Ties in train accuracy go to the lower model index.
    """
    train, test = train_test_indices(cache, train, test)
    overall = int(np.argmax(cache.correct[train].mean(axis=0)))
    chosen = np.full(cache.n_tasks, overall, dtype=np.int64)
    eval_tasks = np.unique(task_ids(cache)[test])
    if per_task:
        for task in eval_tasks:
            rows = train[task_ids(cache)[train] == task]
            if rows.size:
                chosen[task] = int(np.argmax(cache.correct[rows].mean(axis=0)))
        info: dict[str, Any] = {"models": {task_names(cache)[t]: cache.models[chosen[t]] for t in eval_tasks}}
    else:
        info = {"model": cache.models[overall]}
    model = chosen[task_ids(cache)[test]]
    predictions = cache.preds[test, model]
    name = "best_single(per_task)" if per_task else "best_single"
    teams = np.eye(cache.n_models, dtype=bool)[model]
    return BaselineResult(name, predictions, np.ones(test.size), test, cache.labels[test], info, teams)


def plurality_vote(cache: LogitCache, train: ArrayLike, test: ArrayLike) -> BaselineResult:
    """All N models vote their argmax; the most voted choice wins, ties to the lowest index.

    ``train`` is validated but unused (nothing is fitted). Team size N.
    """
    _, test = train_test_indices(cache, train, test)
    predictions = _plurality(cache.preds[test], cache.max_choices)
    return BaselineResult.from_cache(
        "plurality_vote", cache, test, predictions, cache.n_models, teams=_full_team(test.size, cache.n_models)
    )


def mean_probability_vote(cache: LogitCache, train: ArrayLike, test: ArrayLike) -> BaselineResult:
    """Argmax over the valid choices of the mean of the N models' probabilities (ties lowest).

    ``train`` is validated but unused (nothing is fitted). Team size N.
    """
    _, test = train_test_indices(cache, train, test)
    teams = _full_team(test.size, cache.n_models)
    predictions = mean_vote(cache.probs[test], teams, valid_choices(cache, test))
    return BaselineResult.from_cache("mean_probability_vote", cache, test, predictions, cache.n_models, teams=teams)


def random_team(
    cache: LogitCache, train: ArrayLike, test: ArrayLike, *, k: int = 3, seed: int | None = 0
) -> BaselineResult:
    """Per question, a uniformly random team of ``k`` models fused by mean-probability vote.

    Parameters
    ----------
    cache
        The logit cache.
    train, test
        Question indices; ``train`` is validated but unused.
    k
        Team size, 1..N. With ``k = N`` the result equals :func:`mean_probability_vote`.
    seed
        Seed of ``np.random.default_rng``; the same seed gives the same teams.

    Returns
    -------
    BaselineResult
        Named ``"random_team(k=...)"``, team size ``k``.
    """
    _, test = train_test_indices(cache, train, test)
    size = _team_size_k(cache, k)
    rng = np.random.default_rng(seed)
    order = np.argsort(rng.random((test.size, cache.n_models)), axis=1)  # uniform permutations
    members = np.zeros((test.size, cache.n_models), dtype=bool)
    np.put_along_axis(members, order[:, :size], True, axis=1)
    predictions = mean_vote(cache.probs[test], members, valid_choices(cache, test))
    return BaselineResult(
        f"random_team(k={size})",
        predictions,
        np.full(test.size, float(size)),
        test,
        cache.labels[test],
        {"k": size, "seed": seed},
        members,
    )


def greedy_focal_team(
    cache: LogitCache,
    train: ArrayLike,
    test: ArrayLike,
    *,
    k: int = 3,
    fuse: str = "plurality",
) -> BaselineResult:
    """A static team of ``k`` models grown greedily on train by focal diversity.

    The team starts from the model with the best train accuracy; then, ``k - 1`` times, the
    model that maximises the focal diversity (:func:`ensemble_env.metrics.focal_diversity`) of
    the enlarged team on the train correctness matrix joins it. Ties (within 1e-12) go to the
    higher train accuracy, then to the lower model index. The same team answers every eval
    question.

    Parameters
    ----------
    cache
        The logit cache.
    train, test
        Question indices to choose the team on and to evaluate on.
    k
        Team size, 1..N (default 3).
    fuse
        ``"plurality"`` (default: the members vote their argmax, ties to the lowest choice) or
        ``"mean"`` (argmax of the members' mean probabilities).

    Returns
    -------
    BaselineResult
        Named ``"greedy_focal_team(k=...)"`` (with ``",mean"`` for mean fusion), team size
        ``k``; ``info["team"]`` holds the member names in the order they joined and
        ``info["focal_diversity"]`` the team's focal diversity on train.
    """
    train, test = train_test_indices(cache, train, test)
    size = _team_size_k(cache, k)
    if fuse not in FUSIONS:
        raise ValueError(f"fuse={fuse!r} is not one of {', '.join(FUSIONS)}")
    correct = cache.correct[train]
    accuracy = correct.mean(axis=0)
    team = [int(np.argmax(accuracy))]
    while len(team) < size:
        candidates = [m for m in range(cache.n_models) if m not in team]
        scores = np.array([focal_diversity(correct[:, [*team, m]]) for m in candidates])
        tied = [m for m, s in zip(candidates, scores, strict=True) if s >= scores.max() - _TIE_TOLERANCE]
        team.append(min(tied, key=lambda m: (-accuracy[m], m)))
    members = np.array(team)
    teams = _fixed_team(test.size, cache.n_models, members)
    if fuse == "plurality":
        predictions = _plurality(cache.preds[test][:, members], cache.max_choices)
    else:
        predictions = mean_vote(cache.probs[test], teams, valid_choices(cache, test))
    name = f"greedy_focal_team(k={size})" if fuse == "plurality" else f"greedy_focal_team(k={size},mean)"
    info = {
        "team": tuple(cache.models[m] for m in team),
        "focal_diversity": focal_diversity(correct[:, members]),
        "fuse": fuse,
    }
    return BaselineResult(name, predictions, np.full(test.size, float(size)), test, cache.labels[test], info, teams)


def oracle(cache: LogitCache, train: ArrayLike, test: ArrayLike) -> BaselineResult:
    """Right whenever any of the N models is right, else the plurality vote: an upper bound.

    It bounds, question by question, every rule that answers with some model's argmax (a
    single model, a plurality vote of any team). Probability fusion (mean vote, stacking) can
    be right on a question where no model's argmax is, so for those it is an upper bound in
    practice rather than by construction.
    ``train`` is validated but unused. Team size N.
    """
    _, test = train_test_indices(cache, train, test)
    fallback = _plurality(cache.preds[test], cache.max_choices)
    predictions = np.where(cache.correct[test].any(axis=1), cache.labels[test], fallback)
    teams = _full_team(test.size, cache.n_models)
    return BaselineResult.from_cache("oracle", cache, test, predictions, cache.n_models, teams=teams)


# -- stacking ----------------------------------------------------------------------------------


def _stacking_features(cache: LogitCache, questions: np.ndarray) -> np.ndarray:
    """(Q, C, 2N): per choice, the N models' probabilities and their logs (plus STACKING_EPS)."""
    probs = cache.probs[questions].astype(np.float64).transpose(0, 2, 1)  # (Q, C, N)
    return np.concatenate([probs, np.log(probs + STACKING_EPS)], axis=2)


def _choice_probabilities(phi: np.ndarray, valid: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Softmax over the valid choices of ``phi @ theta``; returns (log-normaliser - max, probs)."""
    scores = np.where(valid, phi @ theta, -np.inf)
    top = scores.max(axis=1, keepdims=True)
    weights = np.exp(scores - top)
    total = weights.sum(axis=1, keepdims=True)
    return scores - top - np.log(total), weights / total


def _nll(
    phi: np.ndarray, valid: np.ndarray, labels: np.ndarray, theta: np.ndarray, l2: float
) -> tuple[float, np.ndarray]:
    log_probs, probs = _choice_probabilities(phi, valid, theta)
    rows = np.arange(labels.size)
    loss = -float(log_probs[rows, labels].mean()) + 0.5 * l2 * float(theta @ theta)
    return loss, probs


def _fit_conditional_logit(
    phi: np.ndarray, valid: np.ndarray, labels: np.ndarray, l2: float, max_iter: int
) -> tuple[np.ndarray, int]:
    """Minimise the L2-penalised mean negative log-likelihood by damped Newton steps.

    The objective is strictly convex (l2 > 0), so Newton's method with a backtracking
    (Armijo) line search converges from zero; it stops when half the squared Newton decrement
    is below 1e-10 or after ``max_iter`` steps. Returns the weights and the steps taken.
    """
    n_rows, _, n_features = phi.shape
    rows = np.arange(n_rows)
    flat_phi = phi.reshape(-1, n_features)
    theta = np.zeros(n_features)
    loss, probs = _nll(phi, valid, labels, theta, l2)
    ridge = l2 * np.eye(n_features)
    for step_count in range(max_iter):
        residual = probs.copy()
        residual[rows, labels] -= 1.0
        gradient = np.einsum("qc,qcd->d", residual, phi) / n_rows + l2 * theta
        mean_phi = np.einsum("qc,qcd->qd", probs, phi)
        hessian = ((flat_phi * probs.reshape(-1, 1)).T @ flat_phi - mean_phi.T @ mean_phi) / n_rows + ridge
        direction = -np.linalg.solve(hessian, gradient)
        decrement = -float(gradient @ direction)
        if decrement / 2.0 < _NEWTON_TOLERANCE:
            return theta, step_count
        length = 1.0
        while length > 1e-12:
            candidate = theta + length * direction
            new_loss, new_probs = _nll(phi, valid, labels, candidate, l2)
            if new_loss <= loss - 0.25 * length * decrement:
                theta, loss, probs = candidate, new_loss, new_probs
                break
            length /= 2.0
        else:  # no decrease possible: at the optimum up to round-off
            return theta, step_count
    return theta, max_iter


def stacking(
    cache: LogitCache,
    train: ArrayLike,
    test: ArrayLike,
    *,
    per_task: bool = True,
    l2: float = 1e-3,
    max_iter: int = 500,
) -> BaselineResult:
    """Supervised stacking: a conditional-logit model over the N models' probabilities.

    Design: questions may have different numbers of choices, so the model scores each choice
    with weights shared across choice positions. For question ``q`` and choice ``c`` the
    feature vector is ``phi(q, c) = [p_1c, ..., p_Nc, log(p_1c + eps), ..., log(p_Nc + eps)]``
    (2N features, ``p_nc`` model n's probability of choice c, ``eps`` = :data:`STACKING_EPS`)
    and ``P(c | q) = softmax over the question's valid choices of theta . phi(q, c)``. Invalid
    choices (beyond ``n_choices``) get probability 0 and are never predicted. A feature equal
    across a question's choices cancels in the softmax, so no intercept is needed; there is no
    per-position prior (choice "A" is not favoured). The log features let the model act as a
    weighted product of experts (a confident-and-wrong model can be down-weighted or inverted),
    the linear ones as a weighted mean vote.

    ``theta`` minimises the mean negative log-likelihood of the train labels plus
    ``l2 / 2 * ||theta||^2``, a strictly convex problem solved by damped Newton steps
    (2N x 2N Hessian; deterministic, typically under 30 steps). The prediction is the argmax
    over valid choices, ties to the lowest index.

    Parameters
    ----------
    cache
        The logit cache.
    train, test
        Question indices to fit on and to evaluate on.
    per_task
        ``True`` (default, since models are good at different tasks): one model per task, fitted
        on that task's train questions; a task without train questions uses a model fitted on
        all train questions. ``False``: one model for all tasks.
    l2
        Ridge penalty, > 0 (keeps the optimum finite when a model is always right on train).
    max_iter
        Maximum number of Newton steps, >= 1.

    Returns
    -------
    BaselineResult
        Named ``"stacking(per_task)"`` or ``"stacking"``, team size N; ``info["weights"]`` maps
        each fitted task name (or ``"all"``) to its 2N weights and ``info["iterations"]`` to the
        Newton steps taken.
    """
    train, test = train_test_indices(cache, train, test)
    try:
        penalty = float(l2)
    except (TypeError, ValueError):
        raise ValueError(f"l2 must be a finite number > 0, got {l2!r}") from None
    if not (np.isfinite(penalty) and penalty > 0):
        raise ValueError(f"l2 must be a finite number > 0, got {l2!r}")
    try:
        steps = operator.index(max_iter)
    except TypeError:
        raise ValueError(f"max_iter must be an integer >= 1, got {max_iter!r}") from None
    if steps < 1:
        raise ValueError(f"max_iter must be an integer >= 1, got {max_iter!r}")

    weights: dict[str, np.ndarray] = {}
    iterations: dict[str, int] = {}

    def fit(name: str, rows: np.ndarray) -> np.ndarray:
        if name not in weights:
            theta, used = _fit_conditional_logit(
                _stacking_features(cache, rows),
                valid_choices(cache, rows),
                cache.labels[rows],
                penalty,
                steps,
            )
            weights[name], iterations[name] = theta, used
        return weights[name]

    test_tasks = task_ids(cache)[test]
    theta_per_row = np.empty((test.size, 2 * cache.n_models))
    if per_task:
        for task in np.unique(test_tasks):
            rows = train[task_ids(cache)[train] == task]
            theta = fit(task_names(cache)[task], rows) if rows.size else fit("all", train)
            theta_per_row[test_tasks == task] = theta
    else:
        theta_per_row[:] = fit("all", train)
    scores = np.einsum("qcd,qd->qc", _stacking_features(cache, test), theta_per_row)
    predictions = np.where(valid_choices(cache, test), scores, -np.inf).argmax(axis=1)
    return BaselineResult(
        "stacking(per_task)" if per_task else "stacking",
        predictions,
        np.full(test.size, float(cache.n_models)),
        test,
        cache.labels[test],
        {"weights": weights, "iterations": iterations, "l2": penalty},
        _full_team(test.size, cache.n_models),
    )


# -- all at once -------------------------------------------------------------------------------


def run_all(
    cache: LogitCache,
    split: str = "test",
    train_split: str = "train",
    k: int = 3,
    seed: int | None = 0,
) -> list[BaselineResult]:
    """Run every baseline with its default options, fitted on ``train_split``, evaluated on ``split``.

    Order: best_single, plurality_vote, mean_probability_vote, random_team (``k``, ``seed``),
    greedy_focal_team (``k``), stacking, oracle. Split names are those of
    :meth:`LogitCache.select` (ValueError when unknown or empty); ``k`` must be in 1..N.
    """
    train = cache.select(train_split)
    test = cache.select(split)
    _team_size_k(cache, k)
    return [
        best_single(cache, train, test),
        plurality_vote(cache, train, test),
        mean_probability_vote(cache, train, test),
        random_team(cache, train, test, k=k, seed=seed),
        greedy_focal_team(cache, train, test, k=k),
        stacking(cache, train, test),
        oracle(cache, train, test),
    ]


def fixed_decimals(scale: float) -> int:
    """The decimals that show numbers of about ``scale`` in fixed notation (never ``5.027e+00``) with 3 significant
    digits, and 2 at least.

    >>> [f"{value:.{fixed_decimals(value)}f}" for value in (39.47, 1.0563, 0.03125, 0.0003)]
    ['39.47', '1.06', '0.0312', '0.000300']
    """
    if not (math.isfinite(scale) and scale > 0):
        return 2
    return max(2, 2 - math.floor(math.log10(scale)))


def cost_format(cache: LogitCache) -> str:
    """How tables print a mean cost: in fixed notation, 2 decimals (a count of models when the cache has no
    ``costs``; bbh5's 1.06 to 39.47), more for caches whose models cost less than 1 (:func:`fixed_decimals` of the
    cheapest model's mean cost per question: 0.0003 prints 0.000300)."""
    if cache.costs is None:
        return "{:.2f}"
    per_model = np.asarray(cache.costs, dtype=np.float64).reshape(-1, cache.n_models).mean(axis=0)
    positive = per_model[per_model > 0]
    return f"{{:.{fixed_decimals(float(positive.min()) if positive.size else 1.0)}f}}"


def cost_note(cache: LogitCache) -> str:
    """What a table's costs are, in words: the unit of the cache's costs (:func:`ensemble_env.cache.datasets.cost_unit`:
    a built-in cache's, else the cache maker's), or that a cache without costs counts models.

    >>> from ensemble_env import datasets
    >>> cost_note(datasets.load("bbh5"))
    'cost unit: billion active parameters x thousand prompt characters'
    """
    return describe_costs(cache.costs is not None, cost_unit(cache))


def describe_costs(priced: bool, unit: str | None) -> str:
    """:func:`cost_note` of a cache known by whether it has costs (``priced``) and their unit (None: unknown), as
    ``results.json`` of ``ensemble-env benchmark`` keeps it."""
    if not priced:
        return "the cache has no costs (every model costs 1, so a team's cost is its size)"
    unknown = "the cache maker's (a cache may give its costs in any unit: docs/cache-format.md)"
    return f"cost unit: {unit or unknown}"


def format_table(
    cache: LogitCache,
    results: Sequence[BaselineResult],
    reward: RewardSettings = DEFAULT_REWARD,
    ids: Sequence[str] | None = None,
) -> str:
    """Two plain-text tables of results (:meth:`BaselineResult.scores`), columns aligned, and what they mean.

    The first has one row per result, under its id (``ids``, one per result; default ``b1``, ``b2``, ... in
    order; a result whose id is its name shows the name alone): macro accuracy (the mean of the per-task
    accuracies), the accuracy over all questions (only when it differs from the macro one for some result: with
    tasks of one size the two are equal), the environment's mean reward (``reward``), mean team size and mean cost
    (only on a cache with costs: without, it is the team size; ``-`` when unknown). Under it, a note says what the
    columns are and the costs' unit (:func:`cost_note`). The second has one row per task that any result was
    evaluated on (full task names) and each result's accuracy under its id (``-`` where it has no question of the
    task). Accuracies and rewards have 4 decimals, team sizes 2, costs :func:`cost_format` (fixed notation).
    """
    if not results:
        raise ValueError("results is empty: nothing to tabulate")
    if ids is None:
        ids = [f"b{number}" for number in range(1, len(results) + 1)]
    if len(ids) != len(results):
        raise ValueError(f"format_table: {len(ids)} ids for {len(results)} results")
    scores = [result.scores(cache, reward) for result in results]
    costs = cost_format(cache)
    pooled = any(abs(score["accuracy"] - result.accuracy) > 1e-9 for result, score in zip(results, scores, strict=True))
    priced = cache.costs is not None
    rows = [
        [
            result.name if label == result.name else f"{label} {result.name}",
            f"{score['accuracy']:.4f}",
            *([f"{result.accuracy:.4f}"] if pooled else []),
            f"{score['reward']:.4f}",
            f"{score['team_size']:.2f}",
            *([("-" if score["cost"] is None else costs.format(score["cost"]))] if priced else []),
        ]
        for label, result, score in zip(ids, results, scores, strict=True)
    ]
    header = ["baseline", "accuracy", *(["accuracy(all questions)"] if pooled else [])]
    header += [f"reward(alpha={reward.alpha:g})", "team", *(["cost"] if priced else [])]
    accuracy = "accuracy: mean over tasks" + (
        "; accuracy(all questions): over every question" if pooled else " (here also over all questions)"
    )
    notes = [f"{accuracy}; reward, team (models){', cost' if priced else ''}: means per question"]
    notes.append(cost_note(cache) if priced else f"no cost column: {cost_note(cache)}")
    tasks = [name for name in task_names(cache) if any(name in score["tasks"] for score in scores)]
    task_rows = [
        [name, *(f"{score['tasks'][name]['accuracy']:.4f}" if name in score["tasks"] else "-" for score in scores)]
        for name in tasks
    ]
    return "\n".join(
        [
            *align_table(header, rows),
            *(line for note in notes for line in textwrap.wrap(note, width=120)),
            "",
            "accuracy per task (columns: the ids above)",
            *align_table(["task", *ids], task_rows),
        ]
    )
