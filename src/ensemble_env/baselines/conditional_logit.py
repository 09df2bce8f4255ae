"""Supervised stacking (:func:`stacking`): a conditional-logit model over the N models' probabilities, fitted by
damped Newton steps on the train questions.

Only numpy; the fit is deterministic (a strictly convex objective, solved from zero).
"""

from __future__ import annotations

import operator

import numpy as np
from numpy.typing import ArrayLike

from ensemble_env.baselines.fusion import full_teams, valid_choices
from ensemble_env.baselines.result import BaselineResult, task_ids, task_names, train_test_indices
from ensemble_env.cache.logit_cache import LogitCache

__all__ = ["STACKING_EPS", "stacking"]

#: added to a probability before its logarithm in the :func:`stacking` features
STACKING_EPS = 1e-6
_NEWTON_TOLERANCE = 1e-10  # stop when half the squared Newton decrement falls below this


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
        full_teams(test.size, cache.n_models),
    )
