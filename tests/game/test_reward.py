"""The step reward (``ensemble_env.game.reward``): its value, the diversity bonus, and its bounds over random play."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import ensemble_env
from ensemble_env import LogitCache
from ensemble_env.game.reward import question_rewards
from ensemble_env.synthetic import make_cache

N_MODELS = 5


@pytest.fixture(scope="module")
def cache() -> LogitCache:
    costs = [1.0, 2.0, 0.5, 4.0, 3.0]
    return make_cache(n_models=N_MODELS, n_questions=400, n_tasks=2, n_choices=(2, 4), costs=costs, seed=21)


def _random_play(venv, steps: int, seed: int):
    """Rewards, infos before each step (what the reward of that step reads) and the actions, over random play."""
    rng = np.random.default_rng(seed)
    _, infos = venv.reset(seed=seed)
    rewards, before, teams = [], [], []
    for _ in range(steps):
        bits = rng.integers(0, 2, (venv.num_envs, venv.n_models), dtype=np.int8)
        before.append({key: value.copy() for key, value in infos["fusion"].items()})
        teams.append(venv.team.copy())
        actions = {"decider": bits, "fusion": rng.integers(0, venv.max_choices, venv.num_envs)}
        _, step_rewards, _, _, infos = venv.step(actions)
        rewards.append(step_rewards["fusion"].astype(np.float64))
    return np.array(rewards), before, teams


def test_reward_is_plus_one_or_size_penalised_minus_one(cache: LogitCache) -> None:
    venv = ensemble_env.vector_env(4, cache=cache, alpha=0.6, window=20)
    rng = np.random.default_rng(0)
    venv.reset(seed=0)
    rights, wrongs = 0, 0
    for _ in range(200):
        size = venv.team.sum(axis=1)  # the team that answers this step's question
        actions = {"decider": rng.integers(0, 2, (4, N_MODELS)), "fusion": rng.integers(0, venv.max_choices, 4)}
        _, rewards, _, _, infos = venv.step(actions)
        right = infos["fusion"]["correct"].astype(bool)
        np.testing.assert_allclose(rewards["fusion"], np.where(right, 1.0, -1.0 - 0.6 * size / N_MODELS), rtol=1e-6)
        np.testing.assert_array_equal(infos["fusion"]["team_size"], size)
        rights, wrongs = rights + right.sum(), wrongs + (~right & (size > 0)).sum()
    assert rights > 50 and wrongs > 50


def test_diversity_bonus_adds_bonus_times_the_focal_diversity_of_the_team_that_answered(cache: LogitCache) -> None:
    options = dict(alpha=0.5, window=30, metrics=("focal_diversity",))
    plain = ensemble_env.vector_env(3, cache=cache, **options)
    bonused = ensemble_env.vector_env(3, cache=cache, diversity_bonus=0.8, **options)
    base, before, _ = _random_play(plain, 300, seed=4)
    with_bonus, before_bonus, _ = _random_play(bonused, 300, seed=4)
    focal = np.array([infos["focal_diversity"] for infos in before])
    np.testing.assert_array_equal(focal, np.array([infos["focal_diversity"] for infos in before_bonus]))
    assert (focal > 0.05).mean() > 0.5  # the bonus is exercised, not multiplied by zero
    np.testing.assert_allclose(with_bonus - base, 0.8 * focal, atol=1e-6)  # rewards are float32
    assert with_bonus.max() > 1.0  # a right answer by a diverse team earns more than +1


def test_negative_diversity_bonus_penalises_diverse_teams(cache: LogitCache) -> None:
    options = dict(window=30)
    base, before, _ = _random_play(ensemble_env.vector_env(2, cache=cache, **options), 150, seed=9)
    malus, _, _ = _random_play(ensemble_env.vector_env(2, cache=cache, diversity_bonus=-0.5, **options), 150, seed=9)
    focal = np.array([infos["focal_diversity"] for infos in before])
    np.testing.assert_allclose(malus - base, -0.5 * focal, atol=1e-6)


CONFIGURATIONS = [
    dict(alpha=alpha, size_penalty_mode=mode, use_costs=costs, diversity_bonus=bonus, min_team_size=min_size)
    for alpha, mode, costs, bonus, min_size in itertools.product(
        (0.0, 1.0, 3.0), ("on_error", "always"), (False, True), (-0.6, 0.0, 0.9), (0, 2)
    )
]


@pytest.mark.parametrize("options", CONFIGURATIONS, ids=lambda options: "-".join(map(str, options.values())))
def test_rewards_of_random_play_stay_within_reward_range(cache: LogitCache, options: dict) -> None:
    venv = ensemble_env.vector_env(4, cache=cache, window=10, episode_length=40, **options)
    low, high = venv.reward_range
    rng = np.random.default_rng(1)
    venv.reset(seed=1)
    seen = []
    for _ in range(120):
        bits = rng.integers(0, 2, (4, N_MODELS), dtype=np.int8)
        bits[:, : options["min_team_size"]] = 1  # a team below min_team_size is refused
        rng.shuffle(bits, axis=1)
        if rng.random() < 0.1:
            bits[:] = 1  # the whole pool now and then: the largest penalty
        _, rewards, _, _, _ = venv.step({"decider": bits, "fusion": rng.integers(0, venv.max_choices, 4)})
        seen.append(rewards["fusion"])
    seen = np.concatenate(seen).astype(np.float64)
    assert low - 1e-6 <= seen.min() and seen.max() <= high + 1e-6, (seen.min(), seen.max(), low, high)
    # the observation space's reward-history bounds come from the same place
    env = ensemble_env.parallel_env(cache=cache, window=10, episode_length=40, reward_history=4, **options)
    obs, _ = env.reset(seed=2)
    space = env.observation_space("fusion")
    for _ in range(60):
        team = rng.integers(0, 2, N_MODELS).astype(np.int8)
        team[: options["min_team_size"]] = 1
        obs, *_ = env.step({"decider": team, "fusion": int(rng.integers(0, 2))})
        if not env.agents:
            obs, _ = env.reset()
        assert space.contains(obs["fusion"]), obs["fusion"]


def test_reward_range_is_tight_for_the_plain_reward(cache: LogitCache) -> None:
    assert ensemble_env.vector_env(1, cache=cache, alpha=1.0).reward_range == (-2.0, 1.0)
    assert ensemble_env.vector_env(1, cache=cache, alpha=0.5, diversity_bonus=0.4).reward_range == (-1.5, 1.4)
    assert ensemble_env.vector_env(1, cache=cache, alpha=0.5, diversity_bonus=-0.4).reward_range == (-1.9, 1.0)


def test_question_rewards_equal_the_environments_rewards(cache: LogitCache) -> None:
    """The batch formula (for baselines and reports) gives what the step kernel gives, for each mode."""
    for mode, use_costs in (("on_error", False), ("always", False), ("on_error", True)):
        venv = ensemble_env.vector_env(4, cache=cache, alpha=0.7, size_penalty_mode=mode, use_costs=use_costs)
        rng = np.random.default_rng(3)
        venv.reset(seed=3)
        for _ in range(50):
            team = venv.team
            actions = {"decider": rng.integers(0, 2, (4, N_MODELS)), "fusion": rng.integers(0, venv.max_choices, 4)}
            _, rewards, _, _, infos = venv.step(actions)
            share = team.sum(axis=1) / N_MODELS
            if use_costs:
                costs = np.broadcast_to(cache.costs, (cache.n_questions, N_MODELS))[
                    infos["fusion"]["question"].astype(int)
                ]
                share = (costs * team).sum(axis=1) / costs.sum(axis=1)
            right = infos["fusion"]["correct"].astype(bool)
            expected = question_rewards(right, share, alpha=0.7, size_penalty_mode=mode)
            np.testing.assert_allclose(rewards["fusion"], expected, rtol=1e-6)


def test_question_rewards_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="1-D bool"):
        question_rewards([1, 0], [0.5, 0.5])
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        question_rewards([True], [1.5])
    with pytest.raises(ValueError, match="size_penalty_mode='never'"):
        question_rewards([True], [0.5], size_penalty_mode="never")
    with pytest.raises(ValueError, match="needs the teams' focal"):
        question_rewards([True], [0.5], diversity_bonus=0.3)
