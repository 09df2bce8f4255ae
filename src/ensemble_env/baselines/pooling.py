"""Team estimates that survive small samples: each team's reward per task, shrunk toward its reward over all tasks.

Choosing the best of the 2**N - 1 teams per task from its mean train reward on ~140 questions picks by noise as
much as by skill: the team that wins on train is rarely the test-best, and larger teams, with more ways to be
right by chance, win on train more often than they should (the winner's curse). The pooled estimate of team k on
task t is the shrinkage (empirical-Bayes, James-Stein style) mean

    r~_tk = (n_t * rbar_tk + lam * rbar_k) / (n_t + lam),

where ``n_t`` is the task's number of fitting questions, ``rbar_tk`` the team's mean reward on them, ``rbar_k``
its mean reward over the fitting questions of every task, and ``lam`` the pooling strength in pseudo-questions
(0: today's per-task mean; large: one team for every task). ``lam`` is chosen by K-fold cross-validation on the
fitting questions only (:func:`choose_strength`: within each task the questions are split into ``folds`` folds;
each fold is scored by the mean reward of the teams the other folds choose), never on the scored ones. Ties of the
estimate go to the team with the smaller mean share of the pool (smaller teams), then to the earlier team of
:func:`~ensemble_env.baselines.routing.all_teams`.

>>> import numpy as np
>>> rewards = np.array([[1.0, 1.0, -1.0, -1.0], [1.0, -1.0, 1.0, -1.0]])  # 2 teams, 4 questions
>>> tasks = np.array([0, 0, 1, 1])
>>> shrunk_means(rewards, tasks, 2, 0.0).tolist()  # per task
[[1.0, 0.0], [-1.0, 0.0]]
>>> shrunk_means(rewards, tasks, 2, 2.0).tolist()  # halfway to the pooled means (0, 0)
[[0.5, 0.0], [-0.5, 0.0]]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ensemble_env.cache.logit_cache import LogitCache

__all__ = [
    "ESTIMATORS",
    "STRENGTH_GRID",
    "TeamEstimate",
    "choose_strength",
    "estimate_teams",
    "pick_teams",
    "shrunk_means",
]

#: how a team's reward per task is estimated: the task's own mean ("mean"), or shrunk toward the team's reward
#: over all tasks with a cross-validated strength ("pooled")
ESTIMATORS = ("pooled", "mean")
#: the pooling strengths (pseudo-questions) cross-validation chooses among; 0 is the per-task mean
STRENGTH_GRID = (0.0, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 1280.0)
#: folds of the cross-validation
FOLDS = 5


def shrunk_means(rewards: np.ndarray, tasks: np.ndarray, n_tasks: int, strength: float) -> np.ndarray:
    """(n_tasks, K) each team's reward per task shrunk toward its pooled mean with ``strength`` pseudo-questions.

    ``rewards`` (K, Q) the teams' rewards on the fitting questions, ``tasks`` (Q,) their task ids. A task without
    fitting questions gets the pooled means.
    """
    rewards = np.asarray(rewards, dtype=np.float64)
    tasks = np.asarray(tasks, dtype=np.int64)
    pooled = rewards.mean(axis=1) if rewards.shape[1] else np.zeros(rewards.shape[0])
    sums = np.zeros((n_tasks, rewards.shape[0]))
    np.add.at(sums, tasks, rewards.T)
    counts = np.bincount(tasks, minlength=n_tasks).astype(np.float64)[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        estimate = (sums + strength * pooled[None, :]) / (counts + strength)
    return np.where(counts + strength > 0, estimate, pooled[None, :])


def pick_teams(estimates: np.ndarray, shares: np.ndarray, digits: int = 10) -> np.ndarray:
    """(n_tasks,) each task's team: the best estimate (rounded to ``digits``), ties to the smaller mean share
    ``shares`` (K,), then to the earlier team."""
    order = np.arange(estimates.shape[1])
    best = np.empty(estimates.shape[0], dtype=np.int64)
    rounded_share = np.round(shares, digits)
    for task, row in enumerate(np.round(estimates, digits)):
        best[task] = np.lexsort((order, rounded_share, -row))[0]
    return best


def choose_strength(
    rewards: np.ndarray,
    tasks: np.ndarray,
    n_tasks: int,
    shares: np.ndarray,
    grid: tuple[float, ...] = STRENGTH_GRID,
    folds: int = FOLDS,
    seed: int = 0,
) -> tuple[float, dict[float, float]]:
    """The pooling strength of ``grid`` whose choices score best out of fold: (strength, mean held-out reward per
    strength). Within each task the fitting questions are dealt into ``folds`` folds in a seeded random order; a
    fold's questions are scored with the teams chosen on the other folds. Ties go to the first strength of ``grid``."""
    rewards = np.asarray(rewards, dtype=np.float64)
    tasks = np.asarray(tasks, dtype=np.int64)
    fold_of = np.empty(tasks.size, dtype=np.int64)
    rng = np.random.default_rng(seed)
    for task in np.unique(tasks):
        rows = np.flatnonzero(tasks == task)
        fold_of[rows[rng.permutation(rows.size)]] = np.arange(rows.size) % folds
    scores: dict[float, float] = {}
    for strength in grid:
        total, count = 0.0, 0
        for fold in range(folds):
            held = fold_of == fold
            if not held.any() or held.all():
                continue
            chosen = pick_teams(shrunk_means(rewards[:, ~held], tasks[~held], n_tasks, strength), shares)
            total += float(rewards[chosen[tasks[held]], np.flatnonzero(held)].sum())
            count += int(held.sum())
        scores[float(strength)] = total / count if count else float("nan")
    best = max(grid, key=lambda s: (scores[float(s)], -grid.index(s)))
    return float(best), scores


@dataclass(frozen=True)
class TeamEstimate:
    """Each team's estimated reward per task, and how it was estimated."""

    estimates: np.ndarray
    """(n_tasks, K) the estimated mean reward of each team on each task."""
    chosen: np.ndarray
    """(n_tasks,) the index of each task's best team (:func:`pick_teams`)."""
    estimator: str
    strength: float
    """The pooling strength used (0 for the per-task mean)."""
    scores: dict[float, float]
    """The cross-validated mean reward of each strength tried (empty when none was chosen)."""


def estimate_teams(
    cache: LogitCache,
    rewards: np.ndarray,
    tasks: np.ndarray,
    shares: np.ndarray,
    *,
    estimator: str = "pooled",
    strength: float | None = None,
    seed: int = 0,
) -> TeamEstimate:
    """Estimate each team's reward per task from its ``rewards`` (K, Q) on fitting questions of ``tasks`` (Q,);
    ``shares`` (K,) break ties toward smaller teams. ``estimator="mean"`` is the per-task mean; ``"pooled"``
    shrinks toward the pooled mean with ``strength`` (None: chosen by cross-validation on these questions)."""
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator={estimator!r} is not one of {', '.join(ESTIMATORS)}")
    scores: dict[float, float] = {}
    if estimator == "mean":
        strength = 0.0
    elif strength is None:
        strength, scores = choose_strength(rewards, tasks, cache.n_tasks, shares, seed=seed)
    elif not (np.isfinite(strength) and strength >= 0):
        raise ValueError(f"strength must be a finite number >= 0, got {strength!r}")
    estimates = shrunk_means(rewards, tasks, cache.n_tasks, float(strength))
    return TeamEstimate(estimates, pick_teams(estimates, shares), estimator, float(strength), scores)
