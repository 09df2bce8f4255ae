"""The batched engine: copies are independent, equal to the PettingZoo view, and auto-reset."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import ensemble_env
from ensemble_env import LogitCache
from ensemble_env.game.engine import INFO_KEYS
from ensemble_env.synthetic import make_cache


@pytest.fixture(scope="module")
def cache() -> LogitCache:
    return make_cache(n_models=4, n_questions=300, n_tasks=2, n_choices=(3, 5), seed=11)


def random_actions(rng: np.random.Generator, num_envs: int, n_models: int) -> dict[str, np.ndarray]:
    return {"decider": rng.integers(0, 2, (num_envs, n_models)), "fusion": rng.integers(-1, 6, num_envs)}


def test_vector_copies_equal_separate_parallel_envs(cache: LogitCache) -> None:
    """Sequential order has no randomness: copy b of a vector env is exactly a parallel env fed b's actions."""
    num_envs, options = 3, {"split": "all", "window": 25, "decider_extras": ["model_accuracy", "task"]}
    venv = ensemble_env.vector_env(num_envs, cache, **options)
    singles = [ensemble_env.parallel_env(cache, **options) for _ in range(num_envs)]
    obs, infos = venv.reset(seed=0)
    single_obs = [env.reset(seed=0)[0] for env in singles]
    rng = np.random.default_rng(0)
    for _ in range(120):
        for b, env in enumerate(singles):
            for agent in ("decider", "fusion"):
                np.testing.assert_array_equal(obs[agent][b], single_obs[b][agent])
            np.testing.assert_array_equal(venv.state()[b], env.state())
        actions = random_actions(rng, num_envs, cache.n_models)
        obs, rewards, _, _, infos = venv.step(actions)
        for b, env in enumerate(singles):
            single_obs[b], single_rewards, _, _, single_infos = env.step(
                {"decider": actions["decider"][b], "fusion": actions["fusion"][b]}
            )
            assert rewards["fusion"][b] == pytest.approx(single_rewards["fusion"])
            for key in INFO_KEYS:
                assert infos["fusion"][key][b] == single_infos["fusion"][key], key


def test_autoreset_returns_first_observation_and_keeps_the_final_one(cache: LogitCache) -> None:
    venv = ensemble_env.vector_env(2, cache, split="test", episode_length=5, order="shuffled")
    obs, infos = venv.reset(seed=1)
    assert set(infos["decider"]) == set(INFO_KEYS)
    assert set(infos["fusion"]) == {*INFO_KEYS, "action_mask"}
    rng = np.random.default_rng(0)
    for step in range(5):
        obs, _, terminations, truncations, infos = venv.step(random_actions(rng, 2, cache.n_models))
        assert not terminations["decider"].any()  # 5 of the split's questions: cut, not exhausted
        if step < 4:
            assert not truncations["fusion"].any() and "final_obs" not in infos
    assert truncations["decider"].all() and truncations["fusion"].all()
    # the returned observation starts a new episode: the initial team (all models), empty reward history
    layout = venv.layout
    np.testing.assert_array_equal(obs["decider"][:, layout.decider["team_mask"]], 1)
    np.testing.assert_array_equal(obs["fusion"][:, layout.fusion["rewards"]], 0)
    np.testing.assert_array_equal(infos["fusion"]["step"], 0)
    # the finished episode's last observation and statistics are kept
    final = infos["final_obs"]["fusion"]
    assert final.shape == obs["fusion"].shape
    # the stream's real next question (tests/game/test_episode_ends.py checks which): a valid mask, probabilities
    assert (final[:, layout.fusion["action_mask"]].sum(1) >= 2).all()
    assert infos["final_state"].shape == venv.state().shape
    np.testing.assert_array_equal(infos["final_info"]["fusion"]["step"], 5)
    np.testing.assert_allclose(
        infos["final_info"]["fusion"]["episode_return"],
        infos["final_obs"]["fusion"][:, layout.fusion["rewards"]].sum(1),
    )


def test_subset_encoding_decodes_every_team(cache: LogitCache) -> None:
    venv = ensemble_env.vector_env(15, cache, decider_action="subset")
    venv.reset(seed=0)
    venv.step({"decider": np.arange(15), "fusion": np.zeros(15, dtype=int)})
    teams = venv.team
    codes = (teams.astype(int) << np.arange(4)).sum(axis=1)
    np.testing.assert_array_equal(codes, np.arange(1, 16))  # bit i of (index + 1) is model i
    expected = r"decider action: team index 15 is outside 0\.\.14; expected 15 actions of Discrete\(15\)"
    with pytest.raises(ValueError, match=expected):
        venv.step({"decider": np.full(15, 15), "fusion": np.zeros(15, dtype=int)})
    with pytest.raises(ValueError, match="supports N <= 12"):
        ensemble_env.vector_env(1, make_cache(n_models=13, n_questions=50), decider_action="subset")


def test_step_before_reset_and_bad_num_envs(cache: LogitCache) -> None:
    venv = ensemble_env.vector_env(2, cache)
    with pytest.raises(RuntimeError, match="before reset"):
        venv.step(random_actions(np.random.default_rng(0), 2, cache.n_models))
    with pytest.raises(ValueError, match="num_envs must be an integer >= 1"):
        ensemble_env.vector_env(0, cache)
    with pytest.raises(TypeError, match="cache must be a built-in name, a path, a LogitCache or None"):
        ensemble_env.vector_env(1, cache=42)


def test_observations_never_reveal_the_next_label(cache: LogitCache) -> None:
    """Two caches that differ only in the label of question 1 give identical observations until q1 is answered."""
    labels = cache.labels.copy()
    labels[1] = (labels[1] + 1) % cache.n_choices[1]
    other = dataclasses.replace(cache, labels=labels)
    options = {"split": "all", "metrics": list(ensemble_env.metrics.METRICS), "decider_extras": ["model_accuracy"]}
    first, second = ensemble_env.vector_env(1, cache, **options), ensemble_env.vector_env(1, other, **options)
    obs_a, _ = first.reset(seed=0)
    obs_b, _ = second.reset(seed=0)
    actions = {"decider": np.ones((1, 4), dtype=int), "fusion": np.zeros(1, dtype=int)}
    obs_a, *_ = first.step(actions)
    obs_b, *_ = second.step(actions)
    # after step 0 the decider commits E_2 and fusion sees q1: q1's label is still hidden
    for agent in ("decider", "fusion"):
        np.testing.assert_array_equal(obs_a[agent], obs_b[agent])
    np.testing.assert_array_equal(first.state(), second.state())


# -- seeds (issue "Reliability, round 2", problem 3): ints (not bools), non-negative, or None ---------------------

BAD_SEEDS = (True, False, np.bool_(True), -1, np.int64(-3), 1.0, 0.5, float("nan"), "1", b"1", [1], (1,), np.array(1))
GOOD_SEEDS = (0, 1, np.int8(7), np.uint64(2**64 - 1), 2**64, 2**200, None)


@pytest.mark.parametrize("seed", BAD_SEEDS, ids=repr)
def test_a_seed_that_is_not_a_non_negative_integer_is_refused(cache: LogitCache, seed: object) -> None:
    venv = ensemble_env.vector_env(2, cache, order="shuffled", episode_length=5)
    venv.reset(seed=3)
    before = venv.np_random.bit_generator.state
    questions = venv.episode_questions(1)
    message = r"^reset: seed must be None or a non-negative integer \(int or numpy integer, not a bool\), got "
    with pytest.raises(ValueError, match=message):
        venv.reset(seed=seed)
    assert venv.np_random.bit_generator.state == before  # refused before anything changed
    np.testing.assert_array_equal(venv.episode_questions(1), questions)
    with pytest.raises(ValueError, match=r"^seed: seed must be None or a non-negative integer"):
        venv.seed(seed)
    env = ensemble_env.parallel_env(cache)
    with pytest.raises(ValueError, match=message):
        env.reset(seed=seed)
    assert env.agents == []  # the view did not start an episode
    aec = ensemble_env.env(cache)
    with pytest.raises(ValueError, match=message):
        aec.reset(seed=seed)


def test_true_is_not_seed_one(cache: LogitCache) -> None:
    env = ensemble_env.parallel_env(cache, order="shuffled", episode_length=5)
    with pytest.raises(ValueError, match="got True of type bool"):
        env.reset(seed=True)


@pytest.mark.parametrize("seed", GOOD_SEEDS, ids=repr)
def test_non_negative_integer_seeds_of_any_size_are_taken_as_numpy_takes_them(cache: LogitCache, seed: object) -> None:
    venv = ensemble_env.vector_env(2, cache, order="shuffled", episode_length=5)
    venv.reset(seed=seed)
    if seed is not None:
        expected = np.random.default_rng(int(seed)).bit_generator.state
        venv.seed(seed)
        assert venv.np_random.bit_generator.state == expected
    env = ensemble_env.parallel_env(cache, order="shuffled", episode_length=5)
    env.reset(seed=seed)
    assert env.agents == ["decider", "fusion"]
