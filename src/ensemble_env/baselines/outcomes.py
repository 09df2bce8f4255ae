"""What every team would earn: the table the baselines of tasks never seen read (:mod:`ensemble_env.baselines.online`,
:mod:`~ensemble_env.baselines.partial`, :mod:`~ensemble_env.baselines.bayes`), and the rank that breaks their ties.

- :func:`team_outcomes`: every team's correctness, share of the pool and reward on some questions
  (:class:`TeamOutcomes`, (K, Q) each), computed once and shared by every baseline of a table;
- :func:`prior_rank`: the rank of teams (or models) by their scores on some questions, the keys of
  :func:`~ensemble_env.baselines.routing.static_team`, compared rounded to :data:`SCORE_DIGITS` decimals;
- :func:`reward_range`: the smallest and largest reward of a question, by which the bandits normalise rewards.

>>> from ensemble_env.cache import synthetic
>>> table = team_outcomes(synthetic.make_cache(n_models=3, n_questions=12, n_tasks=2, seed=0))
>>> table.rewards.shape, table.singles.tolist()
((7, 12), [0, 1, 2])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ensemble_env.baselines import arguments, routing
from ensemble_env.baselines.simple import question_indices
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.reward import DEFAULT_REWARD, RewardSettings, model_costs

__all__ = ["SCORE_DIGITS", "TeamOutcomes", "prior_rank", "reward_range", "team_outcomes"]

#: sums and means of rewards equal to this many decimals tie
SCORE_DIGITS = 9


@dataclass(frozen=True, eq=False)
class TeamOutcomes:
    """Every team's outcome on some questions: what the revealed label of a question tells (full information).

    ``teams`` (K, N) bool, :func:`~ensemble_env.baselines.routing.all_teams` order; ``questions`` (Q,) int64, the
    question indices covered, ascending and unique; ``correct`` (K, Q) bool, whether each team's mean vote is
    right (:func:`~ensemble_env.baselines.routing.team_correct`); ``share`` (K, Q) float64, each team's share of
    the pool as ``reward`` sees it; ``rewards`` (K, Q) float64, ``reward.rewards(correct, share)``; ``labels``
    (Q,) the labels they were computed with (to check a table against a cache); ``reward`` the settings.
    """

    teams: np.ndarray
    questions: np.ndarray
    correct: np.ndarray
    share: np.ndarray
    rewards: np.ndarray
    labels: np.ndarray
    reward: RewardSettings

    @property
    def singles(self) -> np.ndarray:
        """(N,) int64: the rows of the one-model teams, model 0 first."""
        rows = np.flatnonzero(self.teams.sum(axis=1) == 1)
        return rows[np.argsort(np.argmax(self.teams[rows], axis=1))]

    def columns(self, questions: np.ndarray) -> np.ndarray:
        """(len(questions),) int64: the column of each of ``questions`` (ValueError when one is not covered)."""
        position = np.searchsorted(self.questions, questions)
        inside = position < self.questions.size
        found = inside & (self.questions[np.minimum(position, self.questions.size - 1)] == questions)
        if not found.all():
            missing = np.asarray(questions)[~found][0]
            raise ValueError(f"outcomes: question {missing} is not among the questions the outcomes were computed on")
        return position

    def check(self, cache: LogitCache, reward: RewardSettings) -> None:
        """ValueError unless these outcomes were computed on ``cache`` (same models and labels) under ``reward``."""
        if self.reward != reward:
            raise ValueError(f"outcomes were computed under {self.reward}, the baseline scores with {reward}")
        if self.teams.shape[1] != cache.n_models or not np.array_equal(cache.labels[self.questions], self.labels):
            raise ValueError("outcomes were computed on another cache (models or labels differ)")


def team_outcomes(
    cache: LogitCache, questions: ArrayLike | None = None, reward: RewardSettings = DEFAULT_REWARD
) -> TeamOutcomes:
    """Every team's correctness, share and reward on ``questions`` (default: every question of the cache).

    The correctness is :func:`~ensemble_env.baselines.routing.team_correct` (mean-probability vote), the share and
    reward :class:`~ensemble_env.game.reward.RewardSettings`' (size over N, or with ``use_costs`` the team's share
    of the question's costs). Questions are stored ascending and unique.
    """
    cache = arguments.instance(cache, "cache", LogitCache)
    reward = arguments.instance(reward, "reward", RewardSettings)
    rows = np.arange(cache.n_questions) if questions is None else question_indices(cache, questions, "questions")
    rows = np.unique(rows)
    teams = routing.all_teams(cache.n_models)
    correct = routing.team_correct(cache, rows, teams)
    costs = model_costs(cache, rows)  # (Q, N)
    sizes = teams.sum(axis=1, dtype=np.float64)[:, None]
    share = reward.share(cache, sizes, teams.astype(np.float64) @ costs.T, costs.sum(axis=1)[None, :])
    share = np.broadcast_to(share, correct.shape).astype(np.float64)
    rewards = reward.rewards(correct, share)
    return TeamOutcomes(teams, rows, correct, share, rewards, cache.labels[rows].copy(), reward)


def reward_range(reward: RewardSettings = DEFAULT_REWARD) -> tuple[float, float]:
    """(low, high): the smallest and largest reward of a question under ``reward`` (a wrong answer by the whole
    pool, a right one by a team taking none of it), the bounds
    :func:`~ensemble_env.baselines.online.ucb_team` normalises rewards by.

    >>> reward_range(RewardSettings(alpha=1.0))
    (-2.0, 1.0)
    """
    reward = arguments.instance(reward, "reward", RewardSettings)
    low, high = reward.rewards(np.array([False, True]), np.array([1.0, 0.0]))
    return float(low), float(high)


def prior_rank(rewards: np.ndarray, correct: np.ndarray, share: np.ndarray) -> np.ndarray:
    """(A,) int64: the rank (0 best) of A arms (teams or models) by their scores on some questions.

    ``rewards``, ``correct``, ``share``: (A, Q) each, Q >= 1. The keys of
    :func:`~ensemble_env.baselines.routing.static_team`: mean reward (higher first), then accuracy (higher first),
    then mean share (smaller first), all rounded to :data:`SCORE_DIGITS` decimals, then the arm's index.

    >>> prior_rank(np.array([[1.0, -1.0], [1.0, 1.0], [1.0, 1.0]]), np.array([[1, 0], [1, 1], [1, 1]], bool),
    ...            np.array([[0.5, 0.5], [1.0, 1.0], [0.5, 0.5]])).tolist()
    [2, 1, 0]
    """
    rewards = arguments.real_array(rewards, "rewards", ndim=2)
    if rewards.shape[0] < 1 or rewards.shape[1] < 1:
        raise ValueError(f"rewards must have at least one arm and one question, got shape {rewards.shape}")
    correct = arguments.bool_array(correct, "correct", shape=rewards.shape)
    share = arguments.real_array(share, "share", ndim=2, shape=rewards.shape, low=0.0, high=1.0)
    keys = (
        np.arange(rewards.shape[0]),
        np.round(share.mean(axis=1), SCORE_DIGITS),
        -np.round(correct.mean(axis=1), SCORE_DIGITS),
        -np.round(rewards.mean(axis=1), SCORE_DIGITS),
    )
    order = np.lexsort(keys)  # last key first
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    return rank
