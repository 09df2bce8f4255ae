"""Stable-Baselines3 adapter: single-role VecEnvs, the SuperSuit shared-policy path, seeding, a PPO smoke run."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")
pytest.importorskip("supersuit")
pytest.importorskip("sb3_contrib")

import torch
from sb3_contrib import MaskablePPO
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import VecEnv

import ensemble_env
from ensemble_env import LogitCache
from ensemble_env.adapters.sb3 import SingleRoleEnv, sb3_env
from ensemble_env.synthetic import make_cache

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def cache() -> LogitCache:
    return make_cache(n_models=3, n_questions=200, n_tasks=2, n_choices=(2, 4), seed=1)


def play(venv: VecEnv, steps: int, seed: int) -> list[np.ndarray]:
    """Observations, rewards and dones of ``steps`` steps of seeded random valid actions."""
    space = venv.action_space
    space.seed(seed)
    trace = [venv.reset()]
    for _ in range(steps):
        masks = venv.env_method("action_masks")  # the shared path refuses padded actions
        obs, rewards, dones, _ = venv.step(np.array([space.sample(mask=m.astype(np.int8)) for m in masks]))
        trace += [obs, rewards, dones]
    return trace


@pytest.mark.parametrize("role", ["decider", "fusion"])
def test_single_role_vec_env_has_the_roles_spaces_and_float32_obs(cache: LogitCache, role: str) -> None:
    venv = sb3_env(role, num_envs=2, cache=cache, seed=0, episode_length=20)
    parallel = ensemble_env.parallel_env(cache)
    assert venv.observation_space == parallel.observation_space(role)
    assert venv.action_space == parallel.action_space(role)
    obs = venv.reset()
    assert obs.shape == (2, *parallel.observation_space(role).shape) and obs.dtype == np.float32
    for step in range(25):  # across the episode end (auto-reset) at step 20
        obs, _, dones, infos = venv.step(np.array([venv.action_space.sample() for _ in range(2)]))
        assert all(venv.observation_space.contains(row) for row in obs)
        assert {"accuracy", "team_size", "correct"} <= set(infos[0])
        assert dones.all() == (step == 19)
        if step == 19:  # VecMonitor's episode statistics: the return is the game's episode_return
            assert infos[0]["episode"]["l"] == 20
            assert infos[0]["episode"]["r"] == pytest.approx(infos[0]["episode_return"], abs=1e-4)


def test_seed_makes_the_vec_envs_reproducible(cache: LogitCache) -> None:
    for train in ("fusion", "shared"):
        options = {"cache": cache, "order": "shuffled", "episode_length": 15}
        first = play(sb3_env(train, num_envs=2, seed=4, **options), 40, seed=0)
        second = play(sb3_env(train, num_envs=2, seed=4, **options), 40, seed=0)
        for a, b in zip(first, second, strict=True):
            np.testing.assert_array_equal(a, b)


def test_shared_path_pads_re_encodes_and_indicates_the_agent(cache: LogitCache) -> None:
    venv = sb3_env("shared", num_envs=1, cache=cache, seed=0, episode_length=10)
    parallel = ensemble_env.parallel_env(cache)
    decider_size = parallel.observation_space("decider").shape[0]
    fusion_size = parallel.observation_space("fusion").shape[0]
    assert venv.num_envs == 2  # one sub-env per agent: decider, fusion
    assert venv.observation_space.shape == (max(decider_size, fusion_size) + 2,)  # padding + one-hot indicator
    assert venv.action_space.n == 2**3 - 1  # the decider's subset index; fusion answers are padded to it
    obs = venv.reset()
    np.testing.assert_array_equal(obs[:, -2:], np.eye(2))
    np.testing.assert_array_equal(obs[0, decider_size:-2], 0.0)  # the decider's padding
    # subset index 2 (binary 011 = models 0 and 1) for the decider, answer 1 for the fuser
    _, _, _, infos = venv.step(np.array([2, 1]))
    assert infos[1]["answer"] == 1.0
    obs, _, _, infos = venv.step(np.array([6, 0]))
    assert infos[1]["team_size"] == 2.0  # the team committed at the first step answered the second question
    np.testing.assert_array_equal(obs[0, :3], [1, 1, 1])  # and the decider now sees its new team: index 6 = 111
    for _ in range(8):
        _, _, dones, infos = venv.step(np.array([6, 0]))
    assert dones.all() and infos[1]["step"] == 10.0  # the last step's infos survive SuperSuit's auto-reset


def test_shared_path_masks_each_row_to_its_roles_actions_and_refuses_padded_ones(cache: LogitCache) -> None:
    venv = sb3_env("shared", num_envs=2, cache=cache, seed=0, episode_length=10)
    obs = venv.reset()
    assert venv.has_attr("action_masks")
    masks = np.stack(venv.env_method("action_masks"))  # what MaskablePPO reads (sb3_contrib's get_action_masks)
    assert masks.shape == (4, 7)
    parallel = ensemble_env.parallel_env(cache)
    valid = obs[:, parallel.engine.layout.fusion["action_mask"]] > 0.5
    for row in (0, 2):  # deciders: every team index
        assert masks[row].all()
    for row in (1, 3):  # fusion agents: exactly the question's valid choices, never a padded action
        np.testing.assert_array_equal(masks[row, :4], valid[row, :4])
        assert not masks[row, 4:].any() and 2 <= masks[row].sum() <= 4
    with pytest.raises(ValueError, match=r"row 1 \(fusion\) got action 5, a padded action.*MaskablePPO"):
        venv.step(np.array([0, 5, 0, 0]))


@pytest.mark.parametrize("train", ["fusion", "shared"])
def test_truncation_and_termination_reach_sb3_apart(cache: LogitCache, train: str) -> None:
    """An episode_length cut is a truncation SB3 bootstraps from; an exhausted stream is a termination."""
    for options, truncated in (({"episode_length": 6}, True), ({"split": "test"}, False)):
        venv = sb3_env(train, cache=cache, seed=0, **options)
        venv.reset()
        for _ in range(200):
            _, _, dones, infos = venv.step(np.array([0] * venv.num_envs))
            if dones.any():
                break
        assert dones.all()
        for info in infos:
            assert info["TimeLimit.truncated"] is truncated
            assert venv.observation_space.contains(info["terminal_observation"])
        if truncated:  # the final observation shows the real next question: its mask is a real valid-choice mask
            final = infos[-1]["terminal_observation"]
            mask = final[ensemble_env.parallel_env(cache).engine.layout.fusion["action_mask"]]
            assert 2 <= mask.sum() <= 4


@pytest.mark.slow
@pytest.mark.parametrize("train", ["decider", "fusion", "shared"])
def test_ppo_trains_on_each_path(cache: LogitCache, train: str) -> None:
    algorithm = MaskablePPO if train == "shared" else PPO  # the shared path needs the masks
    model = algorithm("MlpPolicy", sb3_env(train, num_envs=2, cache=cache, episode_length=32), n_steps=64, seed=0)
    model.learn(128)
    action, _ = model.predict(model.get_env().reset(), deterministic=True)
    assert all(model.action_space.contains(a) for a in action)


@pytest.mark.slow
def test_plain_ppo_on_the_shared_path_is_refused(cache: LogitCache) -> None:
    """Unmasked, the shared policy samples padded actions; they must not reach the game as answers."""
    model = PPO("MlpPolicy", sb3_env("shared", num_envs=2, cache=cache, episode_length=32), n_steps=64, seed=0)
    with pytest.raises(ValueError, match="padded action"):
        model.learn(256)


@pytest.mark.slow
def test_a_frozen_sb3_model_plays_the_other_role(cache: LogitCache) -> None:
    fusion = PPO("MlpPolicy", sb3_env("fusion", cache=cache, episode_length=16), n_steps=32, batch_size=32, seed=0)
    fusion.learn(32)
    env = SingleRoleEnv("decider", other=fusion, cache=cache, episode_length=16)
    env.reset(seed=0)
    fusion_obs = env._other_obs
    *_, info = env.step(env.action_space.sample())
    expected, _ = fusion.predict(fusion_obs, deterministic=True)
    assert info["answer"] == float(expected)


def test_the_per_choice_policy_starts_as_the_mean_vote() -> None:
    """MaskablePPO with the per-choice scorer policy, untrained: its greedy answers are the team's mean vote."""
    from ensemble_env.adapters.networks import sb3_policy, sb3_policy_kwargs
    from ensemble_env.adapters.wrappers import PerChoiceLayout, per_choice_observation
    from ensemble_env.views.policies import MeanVote

    options = {"cache": "bbh5", "split": "validation", "fusion_extras": ("task",), "episode_length": 128}
    venv = sb3_env("fusion", fusion_view="per_choice", seed=0, **options)
    layout = PerChoiceLayout.from_env(venv.envs[0].parallel)
    model = MaskablePPO(sb3_policy(), venv, policy_kwargs=sb3_policy_kwargs(layout), n_steps=64, seed=0)
    assert not model.policy.action_net.weight.requires_grad  # the logits are the scorer's
    env = ensemble_env.parallel_env(**options)
    vote = MeanVote.from_env(env)
    obs, infos = env.reset(seed=1)
    while env.agents:
        view = per_choice_observation(obs["fusion"][None], env.engine.layout, layout)
        mask = infos["fusion"]["action_mask"][None].astype(bool)
        answer, _ = model.predict(view, deterministic=True, action_masks=mask)
        assert int(answer[0]) == int(vote(obs["fusion"][None])[0])
        obs, _, _, _, infos = env.step({"decider": np.ones(5, dtype=np.int8), "fusion": int(answer[0])})


def test_aligned_credit_trains_the_decider_through_ppo() -> None:
    """SB3's PPO runs on the aligned decider env with the task extras (shapes and dtypes SB3 accepts)."""
    venv = sb3_env("decider", credit="aligned", cache="toy8", decider_extras=("task",), episode_length=64, seed=0)
    model = PPO("MlpPolicy", venv, n_steps=64, batch_size=32, n_epochs=1, gamma=0.0, seed=0)
    model.learn(128)
    assert model.num_timesteps == 128
