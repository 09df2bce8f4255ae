"""Routing baselines on the environment's own axes: a fixed team per task, and a per-question router.

Both choose, among every non-empty team of the N models (``2**N - 1`` teams; N <= :data:`MAX_TEAM_MODELS`),
the team that answers a question by its mean-probability vote, and are scored by the environment's reward
(:class:`ensemble_env.game.reward.RewardSettings`: +1 when right, else -1 - alpha * share, the share being the
team's size over N or, with ``use_costs``, its share of the cache's costs).

===================  ===================================================================================
baseline             how it picks the team of a question
===================  ===================================================================================
:func:`static_team`  per task, the team with the best mean reward at ``alpha`` on the task's train
                     questions (``criterion="accuracy"``: the best train accuracy, ``static_team_acc``)
:func:`router`       per question, the team with the best *expected* reward at ``alpha``, from predicted
                     probabilities that each team's vote is right given the question's inputs (features,
                     or task one-hots), fitted on train (:func:`fit_router`)
===================  ===================================================================================

The router predicts, for every team S (the N single models included), P(the mean vote of S is right | x_q)
with one L2-penalised logistic regression per team on the question's inputs x_q: the cache's ``features``
(standardised with the train mean and spread) or, without features, the task one-hots. The expected reward
of S on q is P * r(right, share) + (1 - P) * r(wrong, share), both rewards the environment's. Teams
are predicted directly rather than assembled from per-model predictions: model errors are correlated (hard
questions defeat most models), so treating members as independent overrates large teams. With task one-hots
and a weak penalty the router reduces to :func:`static_team`, so ``router`` against ``router(tasks)`` is a
clean comparison of per-question features with per-task teams. The logistic regressions are fitted with the
same damped Newton solver as :func:`ensemble_env.baselines.stacking` (numpy only); their penalty is chosen
on the validation questions (summed log loss of the teams' correctness) when given, never on the eval ones.

Selection reads the labels of train (and validation) questions only: the eval questions' labels serve only
to score the answers.

>>> import numpy as np
>>> from ensemble_env.cache import LogitCache
>>> all_teams(3).astype(int).tolist()
[[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0], [1, 0, 1], [0, 1, 1], [1, 1, 1]]
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ensemble_env.baselines import pooling
from ensemble_env.baselines.simple import (
    BaselineResult,
    mean_vote,
    question_indices,
    task_ids,
    task_names,
    train_test_indices,
    valid_choices,
)
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.reward import DEFAULT_REWARD, RewardSettings, model_costs

__all__ = [
    "CRITERIA",
    "MAX_TEAM_MODELS",
    "ROUTER_DEFAULT_L2",
    "ROUTER_INPUTS",
    "ROUTER_L2_GRID",
    "RouterFit",
    "all_teams",
    "fit_router",
    "router",
    "static_team",
    "team_correct",
    "team_shares",
    "team_vote",
]

#: the most models whose every team is enumerated (2**12 - 1 = 4095 teams)
MAX_TEAM_MODELS = 12
#: :func:`static_team` criteria: train mean reward at alpha, or train accuracy
CRITERIA = ("reward", "accuracy")
#: what the router reads of a question: ``auto`` is ``features`` when the cache has them, else ``tasks``
ROUTER_INPUTS = ("auto", "features", "tasks", "features+tasks")
#: the penalties (on the mean log loss) the router tries on the validation questions
ROUTER_L2_GRID = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5)
#: the router's penalty when there are no validation questions
ROUTER_DEFAULT_L2 = 1e-3
_INTERCEPT_L2 = 1e-8  # keeps the intercept finite when a team is always (or never) right on train
_ROUTER_MAX_ITER = 100
_DIGITS = 10  # train scores equal to this many decimals tie (static_team)
_NEWTON_TOLERANCE = 1e-10  # stop a fit when half its squared Newton decrement falls below this


# -- teams -------------------------------------------------------------------------------------


def all_teams(n_models: int) -> np.ndarray:
    """(2**N - 1, N) bool: every non-empty team of ``n_models`` models, by size, then in combination order.

    ValueError when ``n_models`` is outside 1..:data:`MAX_TEAM_MODELS`.
    """
    if not 1 <= n_models <= MAX_TEAM_MODELS:
        raise ValueError(
            f"teams of every size are enumerated only for 1..{MAX_TEAM_MODELS} models (2**N - 1 teams), "
            f"the cache has {n_models}"
        )
    teams = np.zeros((2**n_models - 1, n_models), dtype=bool)
    members = (team for size in range(1, n_models + 1) for team in itertools.combinations(range(n_models), size))
    for row, team in enumerate(members):
        teams[row, list(team)] = True
    return teams


def team_correct(cache: LogitCache, questions: ArrayLike, teams: np.ndarray) -> np.ndarray:
    """(K, Q) bool: whether the mean-probability vote of each of the K ``teams`` ((K, N) bool) is right on
    each of ``questions`` (the vote of :func:`ensemble_env.baselines.mean_probability_vote`)."""
    rows = question_indices(cache, questions, "questions")
    valid, labels = valid_choices(cache, rows), cache.labels[rows]
    correct = np.empty((teams.shape[0], rows.size), dtype=bool)
    for k, team in enumerate(teams):
        members = np.broadcast_to(team, (rows.size, cache.n_models))
        correct[k] = mean_vote(cache.probs, members, valid, rows=rows) == labels
    return correct


def team_shares(cache: LogitCache, questions: np.ndarray, teams: np.ndarray, reward: RewardSettings) -> np.ndarray:
    """(K, Q) the share of the pool each of the K ``teams`` takes on each of ``questions``, as the reward sees it."""
    costs = model_costs(cache, questions)
    sizes = teams.sum(axis=1, dtype=np.float64)[:, None]
    return reward.share(cache, sizes, teams.astype(np.float64) @ costs.T, costs.sum(axis=1)[None, :])


def team_vote(
    name: str, cache: LogitCache, test: ArrayLike, members: np.ndarray, info: dict[str, Any] | None = None
) -> BaselineResult:
    """The answers of per-question ``members`` ((Q, N) bool, a team for each of the ``test`` questions) by the
    mean-probability vote of each question's team (e.g. to score a learned decider's teams without its fusion
    agent)."""
    test = question_indices(cache, test, "test")
    members = np.asarray(members, dtype=bool)
    if members.shape != (test.size, cache.n_models) or not members.any(axis=1).all():
        raise ValueError(f"members must be ({test.size}, {cache.n_models}) bool with a model in every row")
    predictions = mean_vote(cache.probs, members, valid_choices(cache, test), rows=test)
    return BaselineResult.from_cache(name, cache, test, predictions, members.sum(axis=1), info, members)


def _team_name(cache: LogitCache, team: np.ndarray) -> tuple[str, ...]:
    return tuple(cache.models[m] for m in np.flatnonzero(team))


# -- static team per task ------------------------------------------------------------------------


def static_team(
    cache: LogitCache,
    train: ArrayLike,
    test: ArrayLike,
    *,
    reward: RewardSettings = DEFAULT_REWARD,
    criterion: str = "reward",
    estimator: str = "mean",
    strength: float | None = None,
    level: float = pooling.CERTIFIED_LEVEL,
    seed: int = 0,
) -> BaselineResult:
    """Per task, the fixed team with the best train score, answering by its mean-probability vote.

    Every non-empty team of the N models (N <= :data:`MAX_TEAM_MODELS`) is scored on the task's train
    questions: ``criterion="reward"`` by its mean ``reward`` (the environment's, at its alpha), ties to the higher
    train accuracy; ``"accuracy"`` by its train accuracy. Remaining ties go to the smaller mean share of
    the pool, then to the earlier team of :func:`all_teams`. A task without train questions takes the team
    chosen on all train questions. ``estimator="pooled"`` (with the reward criterion) estimates each team's
    reward per task shrunk toward its reward over all tasks, the strength chosen by cross-validation on the train
    questions (:mod:`ensemble_env.baselines.pooling`; ``strength`` fixes it); ``"certified"`` keeps the task's best
    single model unless the best team's paired gain over it is certified at ``level`` (a one-sided bootstrap over
    the task's train questions, resampled from ``seed``: :func:`~ensemble_env.baselines.pooling.certified_teams`);
    ``"mean"``, the default, is the task's own mean.

    Returns
    -------
    BaselineResult
        Named ``"static_team"`` (or ``"static_team_acc"``); ``info["teams"]`` maps each eval task to its
        team (model names), ``info["train_reward"]`` and ``info["train_accuracy"]`` to the team's train
        scores.
    """
    train, test = train_test_indices(cache, train, test)
    if criterion not in CRITERIA:
        raise ValueError(f"criterion={criterion!r} is not one of {', '.join(CRITERIA)}")
    teams = all_teams(cache.n_models)
    correct = team_correct(cache, train, teams)
    share = team_shares(cache, train, teams, reward)
    rewards = reward.rewards(correct, share)
    order = np.arange(teams.shape[0])

    def choose(rows: np.ndarray) -> int:
        # Means rounded so that equal scores tie whatever the order of summation; np.lexsort: last key first.
        accuracy, mean_share = correct[:, rows].mean(axis=1), np.round(share[:, rows].mean(axis=1), _DIGITS)
        keys: tuple[np.ndarray, ...] = (order, mean_share, -np.round(accuracy, _DIGITS))
        if criterion == "reward":
            keys = (*keys, -np.round(rewards[:, rows].mean(axis=1), _DIGITS))
        return int(np.lexsort(keys)[0])

    train_tasks, test_tasks = task_ids(cache)[train], task_ids(cache)[test]
    pooled: dict[str, Any] = {}
    if estimator in ("pooled", "certified"):
        if criterion != "reward":
            raise ValueError(f"estimator={estimator!r} estimates rewards: use criterion='reward'")
        fit = pooling.estimate_teams(
            cache, rewards, train_tasks, share, estimator=estimator, strength=strength, seed=seed, correct=correct,
            teams=teams, level=level,
        )  # fmt: skip
        chosen = fit.chosen
        if estimator == "pooled":
            pooled = {"estimator": "pooled", "strength": fit.strength, "cv_reward": fit.scores}
        else:
            decisions = fit.certified or {}
            per_task = {key: dict(zip(task_names(cache), values, strict=True)) for key, values in decisions.items()}
            pooled = {"estimator": "certified", "level": fit.level, **per_task}
    elif estimator == "mean":
        fallback = choose(np.arange(train.size))
        chosen = np.full(cache.n_tasks, fallback)
        for task in np.unique(test_tasks):
            rows = np.flatnonzero(train_tasks == task)
            if rows.size:
                chosen[task] = choose(rows)
    else:
        raise ValueError(f"estimator={estimator!r} is not one of {', '.join(pooling.ESTIMATORS)}")
    names = task_names(cache)
    eval_tasks = np.unique(test_tasks)

    def train_score(values: np.ndarray, task: int) -> float:
        rows = train_tasks == task if np.any(train_tasks == task) else slice(None)
        return float(values[chosen[task], rows].mean())

    info = {
        "criterion": criterion,
        "alpha": reward.alpha,
        "teams": {names[t]: _team_name(cache, teams[chosen[t]]) for t in eval_tasks},
        "train_reward": {names[t]: train_score(rewards, t) for t in eval_tasks},
        "train_accuracy": {names[t]: train_score(correct, t) for t in eval_tasks},
        **pooled,
    }
    name = "static_team" if criterion == "reward" else "static_team_acc"
    return team_vote(name, cache, test, teams[chosen[test_tasks]], info)


# -- router ------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class RouterFit:
    """A fitted router: per team, a logistic regression of whether the team's vote is right.

    ``teams`` (K, N) bool from :func:`all_teams`; ``weights`` (K, 1 + F), the intercept first; ``center``
    and ``scale`` (F,) standardise the features (zeros and ones for task one-hots); ``inputs`` is
    ``"features"``, ``"tasks"`` or ``"features+tasks"``; ``l2`` the penalty used and ``l2_source`` where it
    came from (``"validation"``, ``"default"`` or ``"given"``); ``validation_log_loss`` maps each penalty
    tried to the validation log loss summed over teams (empty unless chosen on validation).
    """

    inputs: str
    teams: np.ndarray
    weights: np.ndarray
    center: np.ndarray
    scale: np.ndarray
    l2: float
    l2_source: str
    validation_log_loss: dict[float, float] = field(default_factory=dict)

    def design(self, cache: LogitCache, questions: np.ndarray) -> np.ndarray:
        """(Q, 1 + F) the router's inputs of ``questions``: a column of ones, then the features or one-hots."""
        return _design(cache, questions, self.inputs, self.center, self.scale)

    def predict(self, cache: LogitCache, questions: ArrayLike) -> np.ndarray:
        """(Q, K) the predicted probability that each team's vote is right on each of ``questions``."""
        if self.teams.shape[1] != cache.n_models:
            raise ValueError(f"the router was fitted for {self.teams.shape[1]} models, the cache has {cache.n_models}")
        rows = question_indices(cache, questions, "questions")
        return _sigmoid(self.design(cache, rows) @ self.weights.T)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -z))


def _resolve_inputs(cache: LogitCache, inputs: str) -> str:
    if inputs not in ROUTER_INPUTS:
        raise ValueError(f"inputs={inputs!r} is not one of {', '.join(ROUTER_INPUTS)}")
    if inputs == "auto":
        return "tasks" if cache.features is None else "features"
    if "features" in inputs and cache.features is None:
        raise ValueError(f"inputs={inputs!r} but the cache {cache.path} has no 'features' dataset")
    return inputs


def _design(cache: LogitCache, questions: np.ndarray, inputs: str, center: np.ndarray, scale: np.ndarray) -> np.ndarray:
    parts = [np.ones((questions.size, 1))]
    if "features" in inputs:
        parts.append((np.asarray(cache.features, dtype=np.float64)[questions] - center) / scale)
    if "tasks" in inputs:
        parts.append(np.eye(cache.n_tasks)[task_ids(cache)[questions]])
    return np.concatenate(parts, axis=1)


def _check_l2(value: Any, name: str) -> float:
    try:
        l2 = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}") from None
    if not (np.isfinite(l2) and l2 > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return l2


def _logistic_loss(x: np.ndarray, targets: np.ndarray, penalties: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """(K,) the penalised mean log loss of each row of ``weights`` on its row of ``targets``."""
    z = weights @ x.T
    data = np.where(targets, np.logaddexp(0.0, -z), np.logaddexp(0.0, z)).mean(axis=1)
    return data + 0.5 * ((weights * weights) @ penalties)


def _fit_logistic(
    x: np.ndarray, targets: np.ndarray, penalties: np.ndarray, start: np.ndarray, max_iter: int = _ROUTER_MAX_ITER
) -> np.ndarray:
    """(K, F) the L2-penalised logistic regressions of K binary ``targets`` ((K, Q) bool) on the rows of ``x``.

    Each row minimises ``mean log loss + 0.5 * sum(penalties * w**2)`` (``penalties`` (F,), all > 0: a
    strictly convex problem) by damped Newton steps from ``start`` (K, F), all K at once: the Hessians of a
    batch of targets come from one matrix product, and each target halves its step until the Armijo
    condition holds. A target stops when half its squared Newton decrement is below 1e-10 (as
    :func:`ensemble_env.baselines.stacking`'s solver) or after ``max_iter`` steps.
    """
    n_rows, n_features = x.shape
    weights = np.array(start, dtype=np.float64)
    loss = _logistic_loss(x, targets, penalties, weights)
    active = np.ones(targets.shape[0], dtype=bool)
    batch = max(1, 4_000_000 // (n_rows * n_features))  # targets per Hessian product (bounded memory)
    for _ in range(max_iter):
        rows = np.flatnonzero(active)
        if rows.size == 0:
            break
        probability = _sigmoid(weights[rows] @ x.T)  # (k, Q)
        gradient = (probability - targets[rows]) @ x / n_rows + penalties * weights[rows]
        curvature = probability * (1.0 - probability) / n_rows
        hessian = np.empty((rows.size, n_features, n_features))
        for first in range(0, rows.size, batch):
            part = curvature[first : first + batch]  # (b, Q)
            scaled = (part.T[:, :, None] * x[:, None, :]).reshape(n_rows, -1)  # (Q, b * F)
            product = (x.T @ scaled).reshape(n_features, part.shape[0], n_features)
            hessian[first : first + batch] = product.transpose(1, 0, 2) + np.diag(penalties)
        direction = -np.linalg.solve(hessian, gradient[:, :, None])[:, :, 0]
        decrement = -np.einsum("kf,kf->k", gradient, direction)
        converged = decrement / 2.0 < _NEWTON_TOLERANCE
        active[rows[converged]] = False
        rows, direction, decrement = rows[~converged], direction[~converged], decrement[~converged]
        length = np.ones(rows.size)
        pending = np.ones(rows.size, dtype=bool)
        while pending.any() and length.max() > 1e-12:
            candidate = weights[rows] + length[:, None] * direction
            new_loss = _logistic_loss(x, targets[rows], penalties, candidate)
            accept = pending & (new_loss <= loss[rows] - 0.25 * length * decrement)
            weights[rows[accept]], loss[rows[accept]] = candidate[accept], new_loss[accept]
            pending &= ~accept
            length = np.where(pending, length / 2.0, length)
        active[rows[pending]] = False  # no decrease possible: at the optimum up to round-off
    return weights


def fit_router(
    cache: LogitCache,
    train: ArrayLike,
    *,
    inputs: str = "auto",
    validation: ArrayLike | None = None,
    l2: float | None = None,
    l2_grid: Sequence[float] = ROUTER_L2_GRID,
) -> RouterFit:
    """Fit the router's per-team logistic regressions on the ``train`` questions.

    ``inputs`` (:data:`ROUTER_INPUTS`): ``"auto"`` reads the cache's features when it has them, else the
    task one-hots. The penalty on the mean log loss is ``l2`` when given; otherwise, with ``validation``
    questions, the value of ``l2_grid`` whose fit has the lowest log loss of the teams' correctness on them
    (summed over teams; ties to the larger penalty); otherwise :data:`ROUTER_DEFAULT_L2`. The intercept is
    barely penalised. Each fit starts from the previous penalty's optimum (the grid is tried from the
    largest penalty down), so the whole grid costs little more than one fit.
    """
    rows = question_indices(cache, train, "train")
    kind = _resolve_inputs(cache, inputs)
    teams = all_teams(cache.n_models)
    n_features = 0 if "features" not in kind else int(np.asarray(cache.features).shape[1])
    center, scale = np.zeros(n_features), np.ones(n_features)
    if n_features:
        values = np.asarray(cache.features, dtype=np.float64)[rows]
        center, spread = values.mean(axis=0), values.std(axis=0)
        scale = np.where(spread > 0, spread, 1.0)
    if l2 is not None:
        grid, source = [_check_l2(l2, "l2")], "given"
    elif validation is not None:
        grid = sorted((_check_l2(value, "l2_grid entry") for value in l2_grid), reverse=True)
        if not grid:
            raise ValueError("l2_grid is empty: give at least one penalty to try on the validation questions")
        source = "validation"
    else:
        grid, source = [ROUTER_DEFAULT_L2], "default"
    x = _design(cache, rows, kind, center, scale)
    targets = team_correct(cache, rows, teams)
    weights = np.zeros((teams.shape[0], x.shape[1]))
    fits: dict[float, np.ndarray] = {}
    for penalty in grid:
        penalties = np.full(x.shape[1], penalty)
        penalties[0] = _INTERCEPT_L2
        weights = _fit_logistic(x, targets, penalties, weights)
        fits[penalty] = weights.copy()
    losses: dict[float, float] = {}
    if validation is not None and source == "validation":
        held = question_indices(cache, validation, "validation")
        x_held, correct_held = _design(cache, held, kind, center, scale), team_correct(cache, held, teams)
        unpenalised = np.zeros(x_held.shape[1])
        losses = {
            penalty: float(_logistic_loss(x_held, correct_held, unpenalised, fits[penalty]).sum()) for penalty in grid
        }
    chosen = min(grid, key=lambda penalty: losses.get(penalty, 0.0))  # first (largest) among ties
    return RouterFit(kind, teams, fits[chosen], center, scale, chosen, source, losses)


def router(
    cache: LogitCache,
    train: ArrayLike,
    test: ArrayLike,
    *,
    reward: RewardSettings = DEFAULT_REWARD,
    inputs: str = "auto",
    validation: ArrayLike | None = None,
    l2: float | None = None,
    fitted: RouterFit | None = None,
) -> BaselineResult:
    """Per question, the team with the best expected ``reward``, answering by its mean vote.

    The router (:func:`fit_router` on ``train``, its penalty chosen on ``validation``; or ``fitted``, e.g.
    to sweep alpha without refitting) predicts the probability P that each team's vote is right on the
    question; the expected reward is P * reward(right) + (1 - P) * reward(wrong), both the environment's
    (:class:`~ensemble_env.game.reward.RewardSettings`: alpha, size penalty mode, shares by size or cost).
    Ties go to the earlier team of :func:`all_teams` (the smaller). The eval questions' labels are never
    read to choose.

    Returns
    -------
    BaselineResult
        Named ``"router"`` (``inputs="auto"``) or ``"router(INPUTS)"``; ``info`` holds ``inputs``, ``l2``,
        ``l2_source``, ``alpha`` and ``teams``: how many eval questions each chosen team answered.
    """
    train, test = train_test_indices(cache, train, test)
    if validation is not None:
        held = question_indices(cache, validation, "validation")
        for other, name in ((test, "test"), (train, "train")):
            if np.intersect1d(held, other).size:
                raise ValueError(
                    f"validation and {name} questions overlap: the penalty must be chosen on held-out ones"
                )
    if fitted is None:
        fitted = fit_router(cache, train, inputs=inputs, validation=validation, l2=l2)
    elif inputs not in ("auto", fitted.inputs):
        raise ValueError(f"inputs={inputs!r} differs from the fitted router's {fitted.inputs!r}")
    teams = fitted.teams
    probability = fitted.predict(cache, test).T  # (K, Q)
    share = team_shares(cache, test, teams, reward)
    right, wrong = reward.rewards(True, share), reward.rewards(False, share)
    pick = np.argmax(probability * right + (1.0 - probability) * wrong, axis=0)
    counts = np.bincount(pick, minlength=teams.shape[0])
    info = {
        "inputs": fitted.inputs,
        "l2": fitted.l2,
        "l2_source": fitted.l2_source,
        "alpha": reward.alpha,
        "teams": {"+".join(_team_name(cache, teams[k])): int(counts[k]) for k in np.flatnonzero(counts)},
    }
    name = "router" if inputs == "auto" else f"router({inputs})"
    return team_vote(name, cache, test, teams[pick], info)
