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

**The certified choice** (``estimator="certified"``, :func:`certified_teams`) keeps each task's best single model and
switches to the task's best team only where the team's paired gain over that model is certified: the one-sided
lower bound of a bootstrap interval at ``level`` (0.95: the 5th percentile of :data:`BOOTSTRAP_RESAMPLES` seeded
resamples of the task's fitting questions) of the team's mean reward minus the single model's, both on the same
questions, is above 0. The best single model and the best team are ranked by the keys every estimator here uses
(:func:`rank_teams`: mean reward, then accuracy, then mean share of the pool, then the earlier team).

What it guarantees: where no team is truly better than the task's best single model, a team replaces it on
about ``1 - level`` of the tasks or fewer (the bootstrap's lower bound is an approximate one-sided test at that
level; picking the best team on the same questions makes it a little optimistic: with a team exactly as good as
the single model, 7.75% of 400 simulated tasks of 120 questions switched at level 0.95, and 0.5% of 200 with a
team truly worse by 0.16 per question; ``tests/baselines/test_pooling.py``). What it
costs: where a team is truly better but the sample is too small to show it (a gain of 0.05 per question on 40
questions is rarely certified), it keeps the single model and gives up that gain; with more questions the gain is
found.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ensemble_env.baselines import arguments
from ensemble_env.cache.logit_cache import LogitCache

__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "CERTIFIED_LEVEL",
    "ESTIMATORS",
    "STRENGTH_GRID",
    "TeamEstimate",
    "certified_teams",
    "choose_strength",
    "estimate_teams",
    "pick_teams",
    "rank_teams",
    "shrunk_means",
]

#: how a team's reward per task is estimated: the task's own mean ("mean"), shrunk toward the team's reward over
#: all tasks with a cross-validated strength ("pooled"), or the task's best single model unless a team's gain over
#: it is certified ("certified")
ESTIMATORS = ("certified", "pooled", "mean")
#: the default confidence level of the certified choice (one-sided)
CERTIFIED_LEVEL = 0.95
#: bootstrap resamples of the certified choice
BOOTSTRAP_RESAMPLES = 2000
#: scores equal to this many decimals tie
DIGITS = 10
#: how far below the kept single model the certified estimates put the teams whose gain is not certified (a
#: reward difference far below one question's), so that the estimates' best team is the choice
UNCERTIFIED_GAP = 1e-3
#: the pooling strengths (pseudo-questions) cross-validation chooses among; 0 is the per-task mean
STRENGTH_GRID = (0.0, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 1280.0)
#: folds of the cross-validation
FOLDS = 5


#: the largest pooling strength (pseudo-questions) and count of resamples or folds the estimators take
MAX_STRENGTH = 1e12
MAX_COUNT = 10**7


def _strength(value: object, name: str = "strength") -> float:
    """A pooling strength: a finite number >= 0 (not a bool)."""
    return arguments.real(value, name, 0.0, MAX_STRENGTH)


def _whole(value: object, name: str, minimum: int) -> int:
    """A whole number >= ``minimum`` (not a bool)."""
    return arguments.whole(value, name, minimum, MAX_COUNT)


def _level(value: object) -> float:
    """A confidence level: a number strictly between 0 and 1."""
    level = arguments.real(value, "level", 0.0, 1.0, above=True)
    if level >= 1.0:
        raise ValueError(f"level must be a number in (0, 1), got {value!r}")
    return level


def _scores(rewards: np.ndarray, tasks: np.ndarray, n_tasks: int) -> tuple[np.ndarray, np.ndarray]:
    """``rewards`` as (K, Q) finite float64 and ``tasks`` as (Q,) ids in [0, n_tasks); ValueError otherwise."""
    n_tasks = _whole(n_tasks, "n_tasks", 1)
    rewards = np.asarray(rewards, dtype=np.float64)
    tasks = np.asarray(tasks)
    if rewards.ndim != 2:
        raise ValueError(f"rewards must be a (teams, questions) array, got shape {rewards.shape}")
    if not np.isfinite(rewards).all():
        raise ValueError("rewards must be finite numbers (a NaN or an infinity was found)")
    if tasks.shape != (rewards.shape[1],) or (tasks.size and not np.issubdtype(tasks.dtype, np.integer)):
        raise ValueError(f"tasks must be ({rewards.shape[1]},) integer task ids, got {tasks.dtype} {tasks.shape}")
    if tasks.size and (tasks.min() < 0 or tasks.max() >= n_tasks):
        raise ValueError(f"tasks must be ids in [0, {n_tasks}), got values from {tasks.min()} to {tasks.max()}")
    return rewards, tasks.astype(np.int64)


def rank_teams(mean_reward: np.ndarray, accuracy: np.ndarray, mean_share: np.ndarray) -> np.ndarray:
    """(K,) the teams' indices from best to worst by the keys every estimator breaks ties with: mean reward (higher
    first), then accuracy (higher first), then mean share of the pool (smaller first), each rounded to
    :data:`DIGITS` decimals, then the earlier team.

    >>> rank_teams(np.array([0.5, 0.5, 0.2]), np.array([0.7, 0.8, 0.9]), np.array([0.2, 0.6, 0.2])).tolist()
    [1, 0, 2]
    """
    keys = (
        np.arange(np.asarray(mean_reward).shape[0]),
        np.round(mean_share, DIGITS),
        -np.round(accuracy, DIGITS),
        -np.round(mean_reward, DIGITS),
    )
    return np.lexsort(keys)  # last key first


def shrunk_means(rewards: np.ndarray, tasks: np.ndarray, n_tasks: int, strength: float) -> np.ndarray:
    """(n_tasks, K) each team's reward per task shrunk toward its pooled mean with ``strength`` pseudo-questions.

    ``rewards`` (K, Q) the teams' rewards on the fitting questions, ``tasks`` (Q,) their task ids. A task without
    fitting questions gets the pooled means.
    """
    rewards, tasks = _scores(rewards, tasks, n_tasks)
    strength = _strength(strength)
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
    fold's questions are scored with the teams chosen on the other folds. Ties go to the first strength of ``grid``.
    ValueError for a strength of ``grid`` that is not a finite number >= 0, an empty grid, or ``folds`` below 2."""
    rewards, tasks = _scores(rewards, tasks, n_tasks)
    grid = tuple(arguments.grid(grid, "grid", _strength))
    folds = _whole(folds, "folds", 2)
    fold_of = np.empty(tasks.size, dtype=np.int64)
    rng = np.random.default_rng(arguments.seed(seed))
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
    if not count:
        raise ValueError(f"too few fitting questions to cross-validate a strength: {tasks.size} (need 2 or more)")
    best = max(grid, key=lambda s: (scores[float(s)], -grid.index(s)))
    return float(best), scores


def certified_teams(
    rewards: np.ndarray,
    correct: np.ndarray,
    share: np.ndarray,
    tasks: np.ndarray,
    n_tasks: int,
    sizes: np.ndarray,
    *,
    level: float = CERTIFIED_LEVEL,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, dict[str, list[float]]]:
    """The certified choice per task: ``(chosen (n_tasks,), estimates (n_tasks, K), info)``.

    ``rewards``, ``correct``, ``share``: (K, Q) each team's reward, correctness and share of the pool on the fitting
    questions of ``tasks`` (Q,); ``sizes`` (K,) the teams' sizes (1: a single model). Per task, the best single model s
    and the best team b by :func:`rank_teams` on the task's questions (all questions for a task without any); b is
    chosen when its paired gain over s is certified at ``level`` (the ``1 - level`` quantile of the mean gain over
    ``resamples`` bootstrap resamples of the task's questions is above 0; the resamples of task t are drawn from
    ``SeedSequence([seed, t])``), s otherwise. ``estimates`` are the per-task mean rewards, with every team but the
    choice that would tie or beat it set :data:`UNCERTIFIED_GAP` below it (so the estimates' best team is the
    choice). ``info``: ``"lower_bound"`` (the certified gain's lower bound per task, 0 where b is s) and
    ``"certified"`` (1.0 where a team replaced the single model).

    >>> rewards = np.array([[1.0, -1.2] * 20, [1.0, 1.0] * 20])  # a single model, then a team right twice as often
    >>> chosen, _, info = certified_teams(rewards, rewards > 0, np.full((2, 40), 0.5), np.zeros(40, int), 1,
    ...                                   np.array([1, 2]))
    >>> chosen.tolist(), info["certified"]
    ([1], [1.0])
    """
    rewards, tasks = _scores(rewards, tasks, n_tasks)
    level, resamples, seed = _level(level), _whole(resamples, "resamples", 1), arguments.seed(seed)
    correct = np.asarray(correct, dtype=np.float64)
    share = np.asarray(share, dtype=np.float64)
    sizes = np.asarray(sizes)
    if correct.shape != rewards.shape or share.shape != rewards.shape or sizes.shape != rewards.shape[:1]:
        raise ValueError(
            f"correct and share must be {rewards.shape} like rewards and sizes ({rewards.shape[0]},), got "
            f"{correct.shape}, {share.shape} and {sizes.shape}"
        )
    if not (sizes == 1).any():
        raise ValueError("sizes must include single models (size 1): the certified choice keeps the best of them")
    if not tasks.size:
        raise ValueError("the certified choice needs fitting questions, got none")
    estimates = shrunk_means(rewards, tasks, n_tasks, 0.0)
    singles = np.flatnonzero(sizes == 1)
    chosen = np.empty(n_tasks, dtype=np.int64)
    lower, certified = [0.0] * n_tasks, [0.0] * n_tasks
    for task in range(n_tasks):
        rows = np.flatnonzero(tasks == task)
        rows = rows if rows.size else np.arange(tasks.size)
        means = (rewards[:, rows].mean(axis=1), correct[:, rows].mean(axis=1), share[:, rows].mean(axis=1))
        best = int(rank_teams(*means)[0])
        single = int(singles[rank_teams(*(m[singles] for m in means))[0]])
        chosen[task] = single
        if best != single:
            gain = rewards[best, rows] - rewards[single, rows]
            rng = np.random.default_rng(np.random.SeedSequence([seed, task]))
            counts = rng.multinomial(rows.size, np.full(rows.size, 1.0 / rows.size), size=resamples)
            lower[task] = float(np.quantile(counts @ gain / rows.size, 1.0 - level))
            if np.round(lower[task], DIGITS) > 0:
                chosen[task], certified[task] = best, 1.0
        others = np.arange(rewards.shape[0]) != chosen[task]
        top = estimates[task, chosen[task]]
        estimates[task, others] = np.minimum(estimates[task, others], top - UNCERTIFIED_GAP)
    return chosen, estimates, {"lower_bound": lower, "certified": certified}


@dataclass(frozen=True)
class TeamEstimate:
    """Each team's estimated reward per task, and how it was estimated."""

    estimates: np.ndarray
    """(n_tasks, K) the estimated mean reward of each team on each task."""
    chosen: np.ndarray
    """(n_tasks,) the index of each task's team (:func:`pick_teams`; the certified choice for "certified")."""
    estimator: str
    strength: float
    """The pooling strength used (0 for the per-task mean and the certified choice)."""
    scores: dict[float, float]
    """The cross-validated mean reward of each strength tried (empty when none was chosen)."""
    level: float | None = None
    """The certified choice's confidence level (None for the other estimators)."""
    certified: dict[str, list[float]] | None = None
    """The certified choice's lower bounds and decisions per task (:func:`certified_teams`)."""


def estimate_teams(
    cache: LogitCache,
    rewards: np.ndarray,
    tasks: np.ndarray,
    shares: np.ndarray,
    *,
    estimator: str = "pooled",
    strength: float | None = None,
    seed: int = 0,
    correct: np.ndarray | None = None,
    teams: np.ndarray | None = None,
    level: float = CERTIFIED_LEVEL,
) -> TeamEstimate:
    """Estimate each team's reward per task from its ``rewards`` (K, Q) on fitting questions of ``tasks`` (Q,);
    ``shares`` (K,) the teams' mean shares of the pool, or (K, Q) per question, break ties toward smaller teams.
    ``estimator="mean"`` is the per-task mean; ``"pooled"`` shrinks toward the pooled mean with ``strength`` (None:
    chosen by cross-validation on these questions); ``"certified"`` is :func:`certified_teams` at ``level`` (it needs
    ``correct`` (K, Q) and the ``teams`` (K, N) masks, and per-question ``shares``)."""
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator={estimator!r} is not one of {', '.join(ESTIMATORS)}")
    seed = arguments.seed(seed)  # every estimator draws from it (the folds, the bootstrap): checked whichever runs
    shares = np.asarray(shares, dtype=np.float64)
    if estimator == "certified":
        if correct is None or teams is None or shares.ndim != 2:
            raise ValueError("estimator='certified' needs correct (K, Q), teams (K, N) and shares per question")
        sizes = np.asarray(teams).sum(axis=1)
        chosen, estimates, info = certified_teams(
            rewards, correct, shares, tasks, cache.n_tasks, sizes, level=level, seed=seed
        )
        return TeamEstimate(estimates, chosen, estimator, 0.0, {}, _level(level), info)
    mean_share = shares.mean(axis=1) if shares.ndim == 2 else shares
    scores: dict[float, float] = {}
    if estimator == "mean":
        strength = 0.0
    elif strength is None:
        strength, scores = choose_strength(rewards, tasks, cache.n_tasks, mean_share, seed=seed)
    else:
        strength = _strength(strength)
    estimates = shrunk_means(rewards, tasks, cache.n_tasks, float(strength))
    return TeamEstimate(estimates, pick_teams(estimates, mean_share), estimator, float(strength), scores)
