"""The team reward of one step, and its bounds: change the reward here, and only here.

:func:`step_reward` is what the step kernel calls; :func:`reward_bounds` states the smallest and largest
value it can return under a configuration, and is where ``reward_range``, the bounds of the fusion agent's
reward history in its observation space, and the tests' bound checks come from. Keep the two side by side:
a change to one is a change to the other (``tests/game/test_reward.py`` plays random teams and answers under many
configurations and fails if a reward leaves the bounds).

The reward (RL-Focal): r_t = +1 if the answer is right, else -1 - alpha * share, where share is the team's
share of the pool, ``|E_t| / N`` (or of the cache's costs with ``use_costs``); ``size_penalty_mode="always"``
subtracts alpha * share on every step; ``diversity_bonus`` adds bonus x the focal diversity of the team that
answered (over the window before the answer, in [0, 1]). An empty team never answers right.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.checks import MAX_REAL, real_option
from ensemble_env.game.jit import kernel
from ensemble_env.game.records import Settings

__all__ = [
    "DEFAULT_REWARD",
    "SIZE_PENALTY_MODES",
    "RewardSettings",
    "check_alpha",
    "model_costs",
    "question_rewards",
    "reward_bounds",
    "reward_value",
    "step_reward",
    "team_share",
]

#: ``size_penalty_mode`` values: penalise the team's share on wrong answers only, or on every answer
SIZE_PENALTY_MODES = ("on_error", "always")


@kernel(inline="always")
def reward_value(right: bool, share: float, alpha: float, always_penalise: bool, bonus: float, focal: float) -> float:
    """The reward formula: ``right`` or not, a team taking ``share`` (in [0, 1]) of the pool, focal ``focal``."""
    penalty = alpha * share
    if always_penalise:
        reward = (1.0 if right else -1.0) - penalty
    else:
        reward = 1.0 if right else -1.0 - penalty
    return reward + bonus * focal


def check_alpha(alpha: Any) -> float:
    """``alpha`` (the size penalty) as a float, or ValueError naming it unless it is a number in [0, 1e6]."""
    return real_option(alpha, "alpha", 0.0, MAX_REAL)


@kernel(inline="always")
def team_share(team_size: int, team_cost: float, total_cost: float, n_models: int, use_costs: bool) -> float:
    """The answering team's share of the pool, in [0, 1]: ``team_size / n_models``, or with ``use_costs`` its
    share of the question's costs (0 when they total 0)."""
    if use_costs:
        return team_cost / total_cost if total_cost > 0 else 0.0
    return team_size / n_models


@kernel()
def _team_shares(
    team_size: np.ndarray, team_cost: np.ndarray, total_cost: np.ndarray, n_models: int, use_costs: bool
) -> np.ndarray:
    out = np.empty(team_size.shape[0])
    for k in range(team_size.shape[0]):
        out[k] = team_share(team_size[k], team_cost[k], total_cost[k], n_models, use_costs)
    return out


@kernel(inline="always")
def step_reward(
    right: bool, team_size: int, team_cost: float, total_cost: float, n_models: int, focal: float, settings: Settings
) -> float:
    """The shared reward of a step: the answer was ``right`` (or not) with a team of ``team_size`` models
    costing ``team_cost`` of ``total_cost``, whose focal diversity was ``focal``."""
    share = team_share(team_size, team_cost, total_cost, n_models, settings.use_costs)
    return reward_value(right, share, settings.alpha, settings.always_penalise, settings.diversity_bonus, focal)


@kernel()
def _reward_values(
    right: np.ndarray, share: np.ndarray, alpha: float, always_penalise: bool, bonus: float, focal: np.ndarray
) -> np.ndarray:
    out = np.empty(right.shape[0])
    for k in range(right.shape[0]):
        out[k] = reward_value(right[k], share[k], alpha, always_penalise, bonus, focal[k])
    return out


def question_rewards(
    right: ArrayLike,
    share: ArrayLike,
    *,
    alpha: float = 1.0,
    size_penalty_mode: str = "on_error",
    diversity_bonus: float = 0.0,
    focal: ArrayLike | None = None,
) -> np.ndarray:
    """The environment's reward for a batch of answered questions, outside the environment (baselines, reports).

    ``right``: (Q,) bools; ``share``: (Q,) the answering team's share of the pool, ``|E| / N`` (or its share of
    the costs), in [0, 1]; ``focal``: (Q,) the team's focal diversity (needed only with a ``diversity_bonus``).
    Same formula as the step kernel (:func:`reward_value`).

    >>> question_rewards([True, False, False], [0.2, 0.2, 1.0], alpha=1.0).tolist()
    [1.0, -1.2, -2.0]
    """
    right_array = np.asarray(right)
    if right_array.dtype != np.bool_ or right_array.ndim != 1:
        got = f"{right_array.dtype} {right_array.shape}"
        raise ValueError(f"question_rewards: right must be a 1-D bool array, got {got}")
    shares = np.ascontiguousarray(share, dtype=np.float64)
    if shares.shape != right_array.shape or not np.all((shares >= 0) & (shares <= 1)):
        raise ValueError(f"question_rewards: share must be {right_array.shape} values in [0, 1]")
    if size_penalty_mode not in SIZE_PENALTY_MODES:
        raise ValueError(f"size_penalty_mode={size_penalty_mode!r} is not one of {', '.join(SIZE_PENALTY_MODES)}")
    if focal is None:
        if diversity_bonus != 0.0:
            raise ValueError("question_rewards: a diversity_bonus needs the teams' focal diversity (focal=...)")
        focal_array = np.zeros(shares.shape)
    else:
        focal_array = np.ascontiguousarray(focal, dtype=np.float64)
        if focal_array.shape != shares.shape:
            raise ValueError(f"question_rewards: focal must have shape {shares.shape}, got {focal_array.shape}")
    always = size_penalty_mode == "always"
    bonus = float(diversity_bonus)
    return _reward_values(right_array.astype(np.uint8), shares, float(alpha), always, bonus, focal_array)


def reward_bounds(settings: Settings) -> tuple[float, float]:
    """(low, high): every value :func:`step_reward` can return under ``settings``.

    share and focal diversity lie in [0, 1]; the lowest reward is a wrong answer by the whole pool with the
    bonus at its worst, the highest a right answer with the bonus at its best (and, with ``"always"``, the
    penalty of a team that costs nothing).
    """
    bonus = settings.diversity_bonus
    low = -1.0 - settings.alpha + min(bonus, 0.0)
    high = 1.0 + max(bonus, 0.0)
    return float(low), float(high)


# -- the batch form: baselines, reports and the benchmark score answers with it -------------------------


def model_costs(cache: LogitCache, questions: np.ndarray) -> np.ndarray:
    """(Q, N) float64: the cost of asking each model each of ``questions`` (1 each when the cache has none)."""
    if cache.costs is None:
        return np.ones((questions.size, cache.n_models))
    costs = np.asarray(cache.costs, dtype=np.float64)
    return np.array(np.broadcast_to(costs if costs.ndim == 1 else costs[questions], (questions.size, cache.n_models)))


@dataclass(frozen=True)
class RewardSettings:
    """How answers are scored: the environment's reward (:func:`step_reward`), without diversity bonus.

    A right answer earns +1, a wrong one -1 - ``alpha`` * share (``size_penalty_mode="always"``: the
    penalty on every answer), the share being the team's size over N or, with ``use_costs``, its share of
    the cache's costs of the question, as the environment's options of the same names.
    """

    alpha: float = 1.0
    """Size penalty, a finite number >= 0."""
    size_penalty_mode: str = "on_error"
    """``"on_error"`` (the paper) or ``"always"``."""
    use_costs: bool = False
    """Penalise the team's share of the cache's ``costs`` instead of its share of the model count."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "alpha", check_alpha(self.alpha))
        if self.size_penalty_mode not in SIZE_PENALTY_MODES:
            modes = ", ".join(SIZE_PENALTY_MODES)
            raise ValueError(f"size_penalty_mode={self.size_penalty_mode!r} is not one of {modes}")
        if not isinstance(self.use_costs, bool):
            raise ValueError(f"use_costs must be True or False, got {self.use_costs!r}")

    @classmethod
    def of(cls, options: Any) -> RewardSettings:
        """The reward of an environment's options (an :class:`~ensemble_env.game.config.EnvConfig`, or anything with
        ``alpha``, ``size_penalty_mode`` and ``use_costs``); its diversity bonus is left out, as here everywhere."""
        return cls(alpha=options.alpha, size_penalty_mode=options.size_penalty_mode, use_costs=options.use_costs)

    def share(self, cache: LogitCache, team_size: ArrayLike, team_cost: ArrayLike, total_cost: ArrayLike) -> np.ndarray:
        """The team's share of the pool, as the environment's step computes it: ``team_size / N``, or with
        ``use_costs`` ``team_cost / total_cost`` (0 where the total is 0; ValueError when the cache has no
        costs). The arguments broadcast together, and so does the share."""
        size, cost, total = np.broadcast_arrays(
            *(np.asarray(a, dtype=np.float64) for a in (team_size, team_cost, total_cost))
        )
        if self.use_costs and cache.costs is None:
            raise ValueError(f"use_costs=True but the cache {cache.path} has no 'costs' dataset")
        flat = [np.ascontiguousarray(a).ravel() for a in (size, cost, total)]  # one signature: C-contiguous float64
        shares = _team_shares(*flat, int(cache.n_models), bool(self.use_costs))
        return shares.reshape(size.shape)

    def rewards(self, right: ArrayLike, share: ArrayLike) -> np.ndarray:
        """The rewards of answers (``right``, bool) by teams taking ``share`` of the pool, of any equal shapes."""
        answers, shares = np.broadcast_arrays(np.asarray(right), np.asarray(share, dtype=np.float64))
        mode = self.size_penalty_mode
        return question_rewards(answers.ravel(), shares.ravel(), alpha=self.alpha, size_penalty_mode=mode).reshape(
            answers.shape
        )


#: the default scoring: the environment's defaults (alpha 1, penalty on errors, shares by model count)
DEFAULT_REWARD = RewardSettings()
