"""TorchRL adapter, RLAE's views: the per-model weighting agents as one group with bounded continuous actions,
the centralized state, and answers that are the weighted vote of the models' probabilities."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torchrl")

import torch
from torchrl.envs.utils import check_env_specs

import ensemble_env
from ensemble_env import LogitCache
from ensemble_env.adapters.torchrl import WEIGHTS_GROUP, group_map_of, torchrl_env
from ensemble_env.synthetic import make_cache

torch.set_num_threads(1)

#: RLAE_MAPPO's game (docs/rlae.md)
PER_MODEL = {"decider": False, "fusion_action": "weights", "fusion_agents": "per_model", "reward_history": 0}


@pytest.fixture(scope="module")
def cache() -> LogitCache:
    return make_cache(n_models=3, n_questions=200, n_tasks=2, n_choices=(2, 4), seed=3)


def test_the_per_model_view_passes_check_env_specs_with_bounded_weights(cache: LogitCache) -> None:
    env = torchrl_env(cache, seed=0, episode_length=10, fusion_extras=("task",), **PER_MODEL)
    check_env_specs(env, seed=0)  # a rollout whose every tensor matches its spec
    assert env.group_map == {WEIGHTS_GROUP: ["weight_0", "weight_1", "weight_2"]}
    action = env.full_action_spec[WEIGHTS_GROUP, "action"]
    assert action.shape == (3, 1) and action.dtype == torch.float32
    assert torch.equal(action.space.low, torch.zeros(3, 1)) and torch.equal(action.space.high, torch.ones(3, 1))
    parallel = ensemble_env.parallel_env(cache, fusion_extras=("task",), **PER_MODEL)
    assert env.observation_spec[WEIGHTS_GROUP, "observation"].shape == (
        3,
        *parallel.observation_space("weight_0").shape,
    )
    assert env.observation_spec["state"].shape == parallel.state_space.shape  # for a centralized critic
    assert (WEIGHTS_GROUP, "action_mask") not in env.observation_spec.keys(True)  # a Box action has no mask
    assert env.observation_spec[WEIGHTS_GROUP, "info", "choice_mask"].shape == (3, cache.max_choices)


def test_bbh5s_rlae_mappo_game_with_features_passes_check_env_specs() -> None:
    options = {**PER_MODEL, "fusion_extras": ("task", "features")}
    env = torchrl_env("bbh5", split="validation", episode_length=16, seed=0, **options)
    check_env_specs(env, seed=0)
    assert env.observation_spec[WEIGHTS_GROUP, "observation"].shape == (5, 119)  # docs/rlae.md's scenario card
    assert env.observation_spec["state"].shape == (279,)
    rollout = env.rollout(16)
    assert rollout[WEIGHTS_GROUP, "action"].shape == (16, 5, 1)
    assert torch.all(rollout[WEIGHTS_GROUP, "action"] >= 0) and torch.all(rollout[WEIGHTS_GROUP, "action"] <= 1)
    torch.testing.assert_close(
        rollout["next", WEIGHTS_GROUP, "reward"][..., 0, :], rollout["next", WEIGHTS_GROUP, "reward"][..., 4, :]
    )


def test_the_answer_is_the_hand_computed_weighted_vote(cache: LogitCache) -> None:
    """Given weights per agent, the env answers argmax over the valid choices of sum_i w_i p_i(c), and the reward
    is the game's (+1 right, -1 - alpha wrong: every model is in the team)."""
    env = torchrl_env(cache, seed=0, split="test", **PER_MODEL)
    generator = torch.Generator().manual_seed(7)
    td = env.reset()
    for step in range(25):
        weights = torch.rand(3, 1, generator=generator)
        if step == 3:
            weights = torch.tensor([[1.0], [0.0], [0.0]])  # model 0 alone
        if step == 4:
            weights = torch.zeros(3, 1)  # all zero: the mean vote
        td[WEIGHTS_GROUP, "action"] = weights
        out = env.step(td)["next"]
        info = out[WEIGHTS_GROUP, "info"][0]
        question = int(info["question"].item())
        probs = cache.probs[question].astype(np.float64)  # (N, C)
        used = weights[:, 0].double().numpy() if weights.sum() > 0 else np.ones(3)
        total = sum(used[i] * probs[i] for i in range(3))
        total[cache.n_choices[question] :] = -np.inf
        expected = int(np.argmax(total))
        assert int(info["answer"].item()) == expected, f"step {step}"
        right = expected == cache.labels[question]
        assert info["correct"].item() == float(right)
        assert torch.all(out[WEIGHTS_GROUP, "reward"] == (1.0 if right else -2.0))  # alpha 1, shared by all
        # the weights reached the game as they were given
        np.testing.assert_array_equal(env._env.engine.last_weights[0], weights[:, 0].numpy())
        td = out


def test_one_weighting_agent_and_the_decider_with_weights(cache: LogitCache) -> None:
    single = torchrl_env(cache, seed=0, episode_length=8, decider=False, fusion_action="weights")
    check_env_specs(single, seed=0)
    assert single.group_map == {"fusion": ["fusion"]}
    assert single.full_action_spec["fusion", "action"].shape == (1, 3)
    both = torchrl_env(cache, seed=0, episode_length=8, fusion_action="weights", fusion_agents="per_model")
    check_env_specs(both, seed=0)
    assert both.group_map == {"decider": ["decider"], WEIGHTS_GROUP: ["weight_0", "weight_1", "weight_2"]}


def test_refusals_name_the_value(cache: LogitCache) -> None:
    with pytest.raises(ValueError, match=r"decider_action_mask needs a decider.*decider=False"):
        torchrl_env(cache, decider_action_mask=True, **PER_MODEL)
    with pytest.raises(ValueError, match="agent 'critic' is not"):
        group_map_of(["decider", "critic"])
    with pytest.raises(ValueError, match="PerChoiceFusion needs the agents"):
        torchrl_env(cache, fusion_view="per_choice", **PER_MODEL)
