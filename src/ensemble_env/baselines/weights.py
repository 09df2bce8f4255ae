"""Weighted-vote baselines (RLAE's competitors): the answer is the valid choice with the largest weighted sum of the
models' probabilities, with weights fitted on train, chosen on validation.

The rule is the environment's ``fusion_action="weights"`` answer (``ensemble_env.game.dynamics.weighted_answers``):
argmax over the question's valid choices of sum_i w_i p_i(c), summed in float64 in model order, ties to the
lowest choice, all-zero weights counting as equal ones (the mean vote). Here every model is in the team.

=====================================  =========================================================================
baseline                               weights
=====================================  =========================================================================
``mean_probability_vote``              uniform (:mod:`~ensemble_env.baselines.simple`; alias ``uniform_weights``)
:func:`per_task_weights`               one weight vector per task: the maximum-likelihood mixture weights of the
                                       task's train questions (EM), shrunk towards uniform by a share chosen on
                                       validation
:func:`per_question_weights`           a softmax regression from the question's features and task one-hot to the
                                       weights, fitted on train by the weighted vote's likelihood, its ridge
                                       penalty chosen on validation
=====================================  =========================================================================

The likelihood of a weighted vote: with weights on the simplex, sum_i w_i p_i(y) is a probability of the label y
(a mixture of the models' distributions), so the weights that make the train labels most likely are a concave
maximisation (per task: EM converges to the optimum). Only numpy is used; everything is deterministic.

>>> import numpy as np
>>> probs = np.array([[[0.6, 0.4], [0.2, 0.8]]])  # one question, two models, two choices
>>> valid = np.ones((1, 2), dtype=bool)
>>> weighted_vote(probs, np.array([[1.0, 1.0]]), valid).tolist()  # the mean vote: 0.4 against 0.6
[1]
>>> weighted_vote(probs, np.array([[0.9, 0.1]]), valid).tolist()  # 0.56 against 0.44
[0]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from ensemble_env.baselines.simple import (
    BaselineResult,
    question_indices,
    task_ids,
    task_names,
    train_test_indices,
    valid_choices,
)
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.checks import integer_option

__all__ = [
    "L2_GRID",
    "SHRINK_GRID",
    "fit_mixture_weights",
    "per_question_weights",
    "per_task_weights",
    "question_inputs",
    "weighted_vote",
]

#: shares of the uniform weights mixed into the per-task weights, the one with the best validation accuracy kept
#: (ties: the larger share, nearer the mean vote); 1.0 is the mean vote itself
SHRINK_GRID = (0.0, 0.25, 0.5, 0.75, 1.0)
#: ridge penalties of the per-question regression, the one with the best validation accuracy kept (ties: larger)
L2_GRID = (1e-1, 1e-2, 1e-3)
_EPS = 1e-9  # added to a mixture probability before its logarithm


def weighted_vote(probs: np.ndarray, weights: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """(Q,) the valid choice with the largest sum_i w_i p_i(c), per row (the environment's weighted answer).

    ``probs`` (Q, N, C), ``weights`` (Q, N) >= 0, ``valid`` (Q, C) bool. Summed in float64 in model order; ties go
    to the lowest choice; a row whose weights are all 0 counts every model 1 (the mean vote).
    """
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != probs.shape[:2] or np.any(weights < 0) or not np.all(np.isfinite(weights)):
        raise ValueError(f"weights must be finite, >= 0 and of shape {probs.shape[:2]}, got shape {weights.shape}")
    weights = np.where(weights.sum(axis=1, keepdims=True) > 0, weights, 1.0)
    total = np.zeros((probs.shape[0], probs.shape[2]))
    for model in range(probs.shape[1]):
        total += weights[:, model, None] * probs[:, model, :].astype(np.float64)
    return np.where(valid, total, -np.inf).argmax(axis=1)


def _label_probs(cache: LogitCache, questions: np.ndarray) -> np.ndarray:
    """(Q, N) each model's probability of the question's label."""
    probs = cache.probs[questions].astype(np.float64)
    return probs[np.arange(questions.size), :, cache.labels[questions]]


def fit_mixture_weights(label_probs: np.ndarray, *, max_iter: int = 500, tol: float = 1e-10) -> np.ndarray:
    """(N,) simplex weights maximising mean_q log sum_i w_i p_qi, by EM from uniform (``label_probs`` (Q, N)).

    >>> fit_mixture_weights(np.array([[0.9, 0.1], [0.8, 0.3]])).round(3).tolist()
    [1.0, 0.0]
    """
    n_models = label_probs.shape[1]
    weights = np.full(n_models, 1.0 / n_models)
    if label_probs.shape[0] == 0:
        return weights
    previous = -np.inf
    for _ in range(max_iter):
        mixture = label_probs @ weights + _EPS
        weights = (label_probs * weights / mixture[:, None]).mean(axis=0)
        weights /= weights.sum()
        value = float(np.log(label_probs @ weights + _EPS).mean())
        if value - previous < tol:
            break
        previous = value
    return weights


def _accuracy(cache: LogitCache, questions: np.ndarray, weights: np.ndarray) -> float:
    predictions = weighted_vote(cache.probs[questions], weights, valid_choices(cache, questions))
    return float((predictions == cache.labels[questions]).mean())


def _choose(
    cache: LogitCache, validation: np.ndarray | None, candidates: Sequence[tuple[float, np.ndarray]], default: float
) -> tuple[float, dict[str, float]]:
    """The setting whose weights (on ``validation``'s rows) score best there; ties to the earlier-listed candidate.
    Without validation questions: ``default``."""
    if validation is None or validation.size == 0:
        return default, {}
    scores = {f"{setting:g}": _accuracy(cache, validation, weights) for setting, weights in candidates}
    best = max(range(len(candidates)), key=lambda k: (scores[f"{candidates[k][0]:g}"], -k))
    return candidates[best][0], scores


def _validation(cache: LogitCache, validation: ArrayLike | None) -> np.ndarray | None:
    if validation is None:
        return None
    rows = question_indices(cache, validation, "validation")
    return rows if rows.size else None


def per_task_weights(
    cache: LogitCache,
    train: ArrayLike,
    test: ArrayLike,
    *,
    validation: ArrayLike | None = None,
    shrink: float | None = None,
) -> BaselineResult:
    """A weighted vote with one weight vector per task, fitted on the task's train questions.

    Per task, the weights maximise the train labels' likelihood under the weighted vote's mixture
    (:func:`fit_mixture_weights`; a task without train questions uses the fit on all of them); they are then mixed
    with the uniform weights, ``(1 - s) w + s / N``, at the share ``s`` of :data:`SHRINK_GRID` with the best
    accuracy on ``validation`` (ties: the larger share). ``shrink`` fixes ``s`` instead; without validation
    questions ``s`` is 0.5.

    Returns a :class:`BaselineResult` named ``"per_task_weights"``, team size N; ``info["weights"]`` maps each task
    to its weights, ``info["shrink"]`` is ``s`` and ``info["validation_accuracy"]`` the accuracy of each share.
    """
    train, test = train_test_indices(cache, train, test)
    validation_rows = _validation(cache, validation)
    tasks, names = task_ids(cache), task_names(cache)
    pooled = fit_mixture_weights(_label_probs(cache, train))
    table = np.tile(pooled, (cache.n_tasks, 1))
    for task in range(cache.n_tasks):
        rows = train[tasks[train] == task]
        if rows.size:
            table[task] = fit_mixture_weights(_label_probs(cache, rows))
    uniform = np.full(cache.n_models, 1.0 / cache.n_models)

    def shrunk(share: float, questions: np.ndarray) -> np.ndarray:
        return (1.0 - share) * table[tasks[questions]] + share * uniform

    scores: dict[str, float] = {}
    if shrink is None:
        grid = sorted(SHRINK_GRID, reverse=True)  # ties to the larger share
        candidates = [(share, shrunk(share, validation_rows)) for share in grid] if validation_rows is not None else []
        share, scores = _choose(cache, validation_rows, candidates, 0.5)
    else:
        share = float(shrink)
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"shrink must be in [0, 1], got {shrink!r}")
    predictions = weighted_vote(cache.probs[test], shrunk(share, test), valid_choices(cache, test))
    info = {
        "weights": {
            names[t]: ((1.0 - share) * table[t] + share * uniform).round(4).tolist() for t in range(len(names))
        },
        "shrink": share,
        "validation_accuracy": scores,
    }
    teams = np.ones((test.size, cache.n_models), dtype=bool)
    return BaselineResult.from_cache("per_task_weights", cache, test, predictions, cache.n_models, info, teams)


def question_inputs(cache: LogitCache, questions: np.ndarray, mean: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """(Q, F + n_tasks + 1): the questions' features standardised by ``mean`` and ``scale`` (none when the cache has
    no features), their task one-hot and a constant 1."""
    parts = []
    if cache.features is not None:
        parts.append((np.asarray(cache.features, dtype=np.float64)[questions] - mean) / scale)
    parts.append(np.eye(cache.n_tasks)[task_ids(cache)[questions]])
    parts.append(np.ones((questions.size, 1)))
    return np.hstack(parts)


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def _fit_regression(inputs: np.ndarray, label_probs: np.ndarray, l2: float, steps: int, rate: float) -> np.ndarray:
    """(D, N) softmax-regression weights maximising mean log sum_i softmax(x W)_i p_i(y) - l2/2 ||W||^2 (the constant
    input's row unpenalised), by full-batch Adam from 0 (the uniform weights)."""
    theta = np.zeros((inputs.shape[1], label_probs.shape[1]))
    penalty = np.ones((inputs.shape[1], 1))
    penalty[-1] = 0.0
    first, second = np.zeros_like(theta), np.zeros_like(theta)
    for step in range(1, steps + 1):
        weights = _softmax(inputs @ theta)
        joint = weights * label_probs
        responsibility = joint / (joint.sum(axis=1, keepdims=True) + _EPS)
        gradient = -(inputs.T @ (responsibility - weights)) / inputs.shape[0] + l2 * penalty * theta
        first = 0.9 * first + 0.1 * gradient
        second = 0.999 * second + 0.001 * gradient**2
        theta -= rate * (first / (1 - 0.9**step)) / (np.sqrt(second / (1 - 0.999**step)) + 1e-8)
    return theta


def per_question_weights(
    cache: LogitCache,
    train: ArrayLike,
    test: ArrayLike,
    *,
    validation: ArrayLike | None = None,
    l2: float | None = None,
    steps: int = 300,
    learning_rate: float = 0.05,
) -> BaselineResult:
    """A weighted vote whose weights are set per question from its context: w(x) = softmax(x W), x the question's
    features (standardised on train; none when the cache has none) with its task one-hot and a constant.

    ``W`` maximises the train labels' likelihood under the weighted vote's mixture minus ``l2 / 2 ||W||^2``
    (:func:`_fit_regression`: ``steps`` full-batch Adam steps at ``learning_rate`` from W = 0, the uniform weights);
    ``l2`` is chosen among :data:`L2_GRID` by accuracy on ``validation`` (ties: the larger), or 1e-2 without
    validation questions. Supervised: it reads the train labels, as stacking does, and no label of the questions
    it answers. Returns a :class:`BaselineResult` named ``"per_question_weights"``, team size N.
    """
    train, test = train_test_indices(cache, train, test)
    validation_rows = _validation(cache, validation)
    count = integer_option(steps, "steps", 1, 1_000_000)
    if cache.features is not None:
        features = np.asarray(cache.features, dtype=np.float64)[train]
        mean, scale = features.mean(axis=0), features.std(axis=0)
        scale = np.where(scale > 0, scale, 1.0)
    else:
        mean = scale = np.zeros(0)
    inputs = question_inputs(cache, train, mean, scale)
    targets = _label_probs(cache, train)

    def weights_of(theta: np.ndarray, questions: np.ndarray) -> np.ndarray:
        return _softmax(question_inputs(cache, questions, mean, scale) @ theta)

    scores: dict[str, float] = {}
    if l2 is None:
        grid = sorted(L2_GRID, reverse=True)
        fits = {penalty: _fit_regression(inputs, targets, penalty, count, learning_rate) for penalty in grid}
        candidates = [(p, weights_of(fits[p], validation_rows)) for p in grid] if validation_rows is not None else []
        penalty, scores = _choose(cache, validation_rows, candidates, 1e-2)
        theta = fits[penalty]
    else:
        penalty = float(l2)
        if not (np.isfinite(penalty) and penalty >= 0):
            raise ValueError(f"l2 must be a finite number >= 0, got {l2!r}")
        theta = _fit_regression(inputs, targets, penalty, count, learning_rate)
    weights = weights_of(theta, test)
    predictions = weighted_vote(cache.probs[test], weights, valid_choices(cache, test))
    info = {"l2": penalty, "validation_accuracy": scores, "mean_weights": weights.mean(axis=0).round(4).tolist()}
    teams = np.ones((test.size, cache.n_models), dtype=bool)
    return BaselineResult.from_cache("per_question_weights", cache, test, predictions, cache.n_models, info, teams)
