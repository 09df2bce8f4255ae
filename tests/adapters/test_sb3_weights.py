"""Stable-Baselines3 on RLAE's weights game: the single-agent view, its answers, episode ends, seeding, PPO."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

import gymnasium
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_checker import check_env

import ensemble_env
from ensemble_env import LogitCache
from ensemble_env.adapters.sb3 import SingleRoleEnv, sb3_env, start_at_uniform, weights_options
from ensemble_env.baselines.simple import mean_probability_vote
from ensemble_env.baselines.weights import weighted_vote
from ensemble_env.cache.datasets import resolve as resolve_cache
from ensemble_env.synthetic import make_cache
from ensemble_env.views.policies import MeanVote

torch.set_num_threads(1)

# Two questions, three models, C = 3, given as probabilities (score_kind "prob": used as they are).
#   q0 (3 choices, label 1): m0 [0.6, 0.3, 0.1], m1 [0.1, 0.2, 0.7], m2 [0.2, 0.5, 0.3]
#   q1 (2 choices, label 0): m0 [0.4, 0.6], m1 [0.8, 0.2], m2 [0.5, 0.5]; m0's third entry 0.9 is padding
_PROBS = [
    [[0.6, 0.3, 0.1], [0.1, 0.2, 0.7], [0.2, 0.5, 0.3]],
    [[0.4, 0.6, 0.9], [0.8, 0.2, 0.0], [0.5, 0.5, 0.0]],
]


@pytest.fixture(scope="module")
def hand_cache() -> LogitCache:
    return LogitCache(
        scores=np.array(_PROBS),
        labels=np.array([1, 0]),
        models=("m0", "m1", "m2"),
        score_kind="prob",
        n_choices=np.array([3, 2]),
        tasks=np.array([0, 1]),
        task_names=("a", "b"),
    )


@pytest.fixture(scope="module")
def cache() -> LogitCache:
    return make_cache(n_models=3, n_questions=200, n_tasks=2, n_choices=(2, 4), seed=1)


def weights_env(cache: LogitCache | str, **options: object) -> SingleRoleEnv:
    return SingleRoleEnv("fusion", cache=cache, **weights_options(cache, **options))


def test_the_view_passes_sb3s_check_env_and_has_rlaes_spaces() -> None:
    env = weights_env("bbh5", episode_length=16)
    assert env.action_space == gymnasium.spaces.Box(0.0, 1.0, (5,), np.float32)
    assert env.observation_space.shape == (199,)  # probs 95, team 5, rewards 0, valid 19, task 16, features 64
    parallel = ensemble_env.parallel_env(
        "bbh5", decider=False, fusion_action="weights", fusion_extras=("task", "features"), reward_history=0
    )
    assert env.observation_space == parallel.observation_space("fusion")
    with warnings.catch_warnings():  # SB3 advises a [-1, 1] Box; the weights' own space is [0, 1]
        warnings.filterwarnings("ignore", message="We recommend you to use a symmetric", category=UserWarning)
        check_env(env)
        check_env(weights_env("toy8", episode_length=16))


@pytest.mark.parametrize(
    ("question", "weights", "answer", "reward"),
    [
        (0, [1.0, 0.0, 0.0], 0, -2.0),  # m0 alone: 0.6 on choice 0
        (0, [0.0, 1.0, 0.0], 2, -2.0),  # m1 alone: 0.7 on choice 2
        (0, [0.5, 0.0, 1.0], 1, 1.0),  # 0.30 + 0.20, 0.15 + 0.50, 0.05 + 0.30: choice 1, right
        (0, [1.0, 1.0, 1.0], 2, -2.0),  # the mean vote: 0.9, 1.0, 1.1
        (0, [0.0, 0.0, 0.0], 2, -2.0),  # all zero: the mean vote
        (1, [1.0, 0.5, 0.0], 0, 1.0),  # 0.4 + 0.4 against 0.6 + 0.1 (the padded 0.9 is not a choice)
        (1, [1.0, 0.0, 0.0], 1, -2.0),  # m0 alone: 0.6 on choice 1
        (1, [0.0, 0.0, 1.0], 0, 1.0),  # m2's tie 0.5 / 0.5: the lowest choice
    ],
)
def test_the_views_answer_is_the_weighted_vote(
    hand_cache: LogitCache, question: int, weights: list[float], answer: int, reward: float
) -> None:
    env = weights_env(hand_cache)
    obs, info = env.reset(seed=0)
    if question == 1:
        obs, *_ = env.step(np.zeros(3, dtype=np.float32))
    action = np.array(weights, dtype=np.float32)
    expected = env.parallel.engine.weighted_answers(action[None])  # the env's own weighted answer
    valid = obs[env.parallel.engine.layout.fusion["action_mask"]] > 0.5
    vote = weighted_vote(hand_cache.probs[[question]], action[None].astype(np.float64), valid[None])
    _, got_reward, _, _, info = env.step(action)
    assert info["answer"] == answer == int(expected[0]) == int(vote[0])
    assert got_reward == reward == info["reward"]  # +1 right; -1 - alpha x N / N (alpha 1) wrong
    assert info["team_size"] == 3.0  # no decider: every model answers


def test_an_exhausted_stream_terminates_and_a_cut_truncates_as_sb3_reads_them(cache: LogitCache) -> None:
    env = weights_env(cache, split="test")
    env.reset(seed=0)
    n_test = int(cache.select("test").size)
    for step in range(n_test):
        *_, terminated, truncated, _ = env.step(np.full(3, 0.5, dtype=np.float32))
        assert (terminated, truncated) == (step == n_test - 1, False)
    for options, truncated in (({"episode_length": 6}, True), ({"split": "test"}, False)):
        venv = sb3_env("weights", cache=cache, num_envs=2, seed=0, **options)
        venv.reset()
        for _ in range(n_test + 1):
            _, _, dones, infos = venv.step(np.full((2, 3), 0.5, dtype=np.float32))
            if dones.any():
                break
        assert dones.all()
        for info in infos:
            assert info["TimeLimit.truncated"] is truncated  # SB3 bootstraps a truncation only
            assert venv.observation_space.contains(info["terminal_observation"])
            assert info["episode"]["l"] == (6 if truncated else n_test)


def test_a_seed_makes_the_view_and_ppo_reproducible(cache: LogitCache) -> None:
    def trace(seed: int) -> list[np.ndarray]:
        venv = sb3_env("weights", cache=cache, num_envs=2, seed=seed, order="shuffled", episode_length=15)
        rng = np.random.default_rng(0)
        out = [venv.reset()]
        for _ in range(40):
            obs, rewards, dones, _ = venv.step(rng.random((2, 3), dtype=np.float32))
            out += [obs, rewards, dones]
        return out

    for a, b in zip(trace(4), trace(4), strict=True):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, b) for a, b in zip(trace(4), trace(5), strict=True))

    def trained(seed: int) -> np.ndarray:
        venv = sb3_env("weights", cache=cache, num_envs=2, order="shuffled", episode_length=32)
        model = PPO("MlpPolicy", venv, n_steps=32, batch_size=32, n_epochs=1, gamma=0.0, seed=seed, device="cpu")
        model.learn(64)
        return torch.nn.utils.parameters_to_vector(model.policy.parameters()).detach().numpy()

    np.testing.assert_array_equal(trained(3), trained(3))
    assert not np.array_equal(trained(3), trained(4))


def test_start_at_uniform_plays_the_mean_vote(cache: LogitCache) -> None:
    model = start_at_uniform(
        PPO("MlpPolicy", sb3_env("weights", cache=cache), n_steps=32, batch_size=32, seed=0, device="cpu")
    )
    env = weights_env(cache, split="test")
    obs, _ = env.reset(seed=0)
    answers, done = [], False
    while not done:
        action, _ = model.predict(obs, deterministic=True)
        np.testing.assert_array_equal(action, np.full(3, 0.5, dtype=np.float32))
        obs, _, terminated, truncated, info = env.step(action)
        answers.append(int(info["answer"]))
        done = terminated or truncated
    vote = mean_probability_vote(cache, cache.select("train"), cache.select("test"))
    np.testing.assert_array_equal(answers, vote.predictions)


def test_wrong_arguments_are_refused_by_name(cache: LogitCache) -> None:
    with pytest.raises(ValueError, match=r"decider=True: the weights game is decider=False"):
        weights_options(cache, decider=True)
    with pytest.raises(ValueError, match=r"fusion_agents='per_model'"):
        sb3_env("weights", cache=cache, fusion_agents="per_model")
    with pytest.raises(ValueError, match=r"no other role to pass"):
        sb3_env("weights", cache=cache, other=object())
    with pytest.raises(ValueError, match=r"other=MeanVote: this game has no decider"):
        SingleRoleEnv("fusion", other=MeanVote, cache=cache, decider=False)
    with pytest.raises(ValueError, match=r"role='decider' is not an agent of this game \(its agents: \['fusion'\]\)"):
        SingleRoleEnv("decider", cache=cache, decider=False)
    with pytest.raises(ValueError, match=r"role='fusion' is not an agent.*per_model"):
        SingleRoleEnv("fusion", cache=cache, decider=False, fusion_action="weights", fusion_agents="per_model")
    env = weights_env(cache)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"a Box has no action mask.*PPO, not MaskablePPO"):
        env.action_masks()
    with pytest.raises(RuntimeError, match="before reset"):
        weights_env(cache).step(np.zeros(3, dtype=np.float32))
    discrete = PPO("MlpPolicy", sb3_env("fusion", cache=cache), n_steps=32, batch_size=32, seed=0, device="cpu")
    with pytest.raises(ValueError, match=r"start_at_uniform needs a model with a Box \(weights\) action space"):
        start_at_uniform(discrete)


@pytest.mark.slow
def test_ppo_learns_the_weights_on_toy8() -> None:
    """From SB3's own start (the mean action near 0: a vote of a few models with tiny weights, 0.657 on toy8's test
    split at seed 0), 20,480 steps of PPO on the train stream learn weights whose mean action plays the test split
    far better (0.848 when written) and about as well as the mean vote of all models (0.834) or better."""
    from ensemble_env.adapters.scoring import EpisodeTally, team_mask_of

    def play(model: PPO) -> float:
        env = weights_env("toy8", split="test")
        layout, tally = env.parallel.engine.layout, EpisodeTally(env.parallel.cache.models)
        obs, _ = env.reset(seed=0)
        done = False
        while not done:
            team = team_mask_of(obs, layout, "fusion")
            obs, _, terminated, truncated, info = env.step(model.predict(obs, deterministic=True)[0])
            tally.add(team, info)
            done = terminated or truncated
        return tally.figures()["accuracy"]

    venv = sb3_env("weights", cache="toy8", num_envs=8, seed=0, order="shuffled", episode_length=256)
    model = PPO(
        "MlpPolicy",
        venv,
        n_steps=256,
        batch_size=256,
        n_epochs=4,
        gamma=0.0,
        learning_rate=1e-3,
        policy_kwargs={"log_std_init": -1.6},
        seed=0,
        device="cpu",
    )
    before = play(model)
    model.learn(20_480)
    after = play(model)
    cache = resolve_cache("toy8")
    vote = mean_probability_vote(cache, cache.select("train"), cache.select("test")).accuracy
    assert after >= before + 0.1, (before, after)
    assert after >= vote - 0.01, (after, vote)
