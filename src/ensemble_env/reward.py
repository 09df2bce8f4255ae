"""The team reward of one step, and its bounds: change the reward here, and only here.

:func:`step_reward` is what the step kernel calls; :func:`reward_bounds` states the smallest and largest
value it can return under a configuration, and is where ``reward_range``, the bounds of the fusion agent's
reward history in its observation space, and the tests' bound checks come from. Keep the two side by side:
a change to one is a change to the other (``tests/test_reward.py`` plays random teams and answers under many
configurations and fails if a reward leaves the bounds).

The reward (RL-Focal): r_t = +1 if the answer is right, else -1 - alpha * share, where share is the team's
share of the pool, |E_t| / N (or of the cache's costs with ``use_costs``); ``size_penalty_mode="always"``
subtracts alpha * share on every step; ``diversity_bonus`` adds bonus x the focal diversity of the team that
answered (over the window before the answer, in [0, 1]). An empty team never answers right.
"""

from __future__ import annotations

from numba import njit

from ensemble_env.records import Settings

__all__ = ["reward_bounds", "step_reward"]


@njit(cache=True, inline="always")
def step_reward(
    right: bool, team_size: int, team_cost: float, total_cost: float, n_models: int, focal: float, settings: Settings
) -> float:
    """The shared reward of a step: the answer was ``right`` (or not) with a team of ``team_size`` models
    costing ``team_cost`` of ``total_cost``, whose focal diversity was ``focal``."""
    if settings.use_costs:
        share = team_cost / total_cost if total_cost > 0 else 0.0
    else:
        share = team_size / n_models
    penalty = settings.alpha * share
    if settings.always_penalise:
        reward = (1.0 if right else -1.0) - penalty
    else:
        reward = 1.0 if right else -1.0 - penalty
    return reward + settings.diversity_bonus * focal


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
