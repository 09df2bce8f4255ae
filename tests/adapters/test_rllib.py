"""RLlib adapter: the MultiAgentEnv (encodings, order, render, state), the PPO config, one training iteration."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

pytest.importorskip("ray.rllib")

from gymnasium import spaces
from ray.rllib.env.multi_agent_env import MultiAgentEnv
from ray.rllib.utils.pre_checks.env import check_multiagent_environments

from ensemble_env import LogitCache
from ensemble_env.adapters.rllib import EnsembleMultiAgentEnv, policy_for_agent, ppo_config, rllib_env
from ensemble_env.synthetic import make_cache


@pytest.fixture(scope="module")
def cache() -> LogitCache:
    return make_cache(n_models=3, n_questions=200, n_tasks=2, n_choices=(2, 4), seed=2)


def test_env_is_an_rllib_multi_agent_env_that_rllib_checks_accept(cache: LogitCache) -> None:
    env = rllib_env(cache=cache, episode_length=12)
    assert isinstance(env, MultiAgentEnv)
    check_multiagent_environments(env)
    assert env.possible_agents == ["decider", "fusion"]
    assert env.get_action_space("decider") == spaces.MultiDiscrete([2, 2, 2])  # RLlib has no MultiBinary
    assert env.get_action_space("fusion") == spaces.Discrete(4)
    assert env.get_observation_space("fusion") is env.observation_spaces["fusion"]


def test_agents_order_done_flags_render_and_state(cache: LogitCache) -> None:
    env = rllib_env(cache=cache, episode_length=3, render_mode="ansi")
    obs, infos = env.reset(seed=0)
    assert list(obs) == list(infos) == env.agents == ["decider", "fusion"]
    assert "initial team" in env.render()
    np.testing.assert_array_equal(env.state(), np.concatenate([obs["decider"], obs["fusion"]]))
    assert env.state_space.contains(env.state())
    for step in range(3):
        obs, rewards, terminations, truncations, infos = env.step(
            {"decider": env.action_spaces["decider"].sample(), "fusion": 1}
        )
        assert list(obs) == list(rewards) == ["decider", "fusion"]
        assert truncations["__all__"] == (step == 2) and terminations["__all__"] is False
        assert "t=" in env.render()
    assert env.agents == []


@pytest.mark.parametrize("encoding", ["multidiscrete", "subset"])
def test_decider_encodings_rllib_samples(cache: LogitCache, encoding: str) -> None:
    env = rllib_env(cache=cache, decider_action=encoding, episode_length=50)
    space = env.action_spaces["decider"]
    assert isinstance(space, spaces.MultiDiscrete if encoding == "multidiscrete" else spaces.Discrete)
    env.reset(seed=1)
    space.seed(1)
    while env.agents:
        action = space.sample()
        obs, *_ = env.step({"decider": action, "fusion": 0})
        team = obs["decider"][:3]
        expected = action if encoding == "multidiscrete" else (int(action) + 1) >> np.arange(3) & 1
        np.testing.assert_array_equal(team, expected)


def test_multibinary_is_refused_with_the_alternatives(cache: LogitCache) -> None:
    with pytest.raises(ValueError, match="does not work with RLlib: use 'multidiscrete' or 'subset'"):
        rllib_env(cache=cache, decider_action="multibinary")
    with pytest.raises(ValueError, match="does not work with RLlib"):
        ppo_config({"decider_action": "multibinary"})


def test_env_class_pickles_by_reference() -> None:
    assert pickle.loads(pickle.dumps(EnsembleMultiAgentEnv)) is EnsembleMultiAgentEnv


def test_ppo_config_has_one_policy_per_role() -> None:
    config = ppo_config({"episode_length": 16}, num_env_runners=2, seed=3, lr=1e-3)
    assert config.policies.keys() == {"decider", "fusion"}
    assert config.num_env_runners == 2 and config.lr == 1e-3 and config.seed == 3
    assert {policy_for_agent(agent) for agent in ("decider", "fusion")} == {"decider", "fusion"}
    assert config.env is EnsembleMultiAgentEnv and config.env_config == {"episode_length": 16}


@pytest.mark.slow
def test_one_training_iteration_updates_both_policies() -> None:
    import ray

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        config = ppo_config(
            {"episode_length": 32},
            num_env_runners=0,
            seed=0,
            train_batch_size_per_learner=64,
            minibatch_size=32,
            num_epochs=1,
        )
        algo = config.build_algo()
        result = algo.train()
        assert set(result["learners"]) >= {"decider", "fusion"}
        assert result["env_runners"]["num_env_steps_sampled"] >= 64
        algo.stop()
    finally:
        ray.shutdown()
