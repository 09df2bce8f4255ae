"""``vector_env``'s spaces in Gymnasium's vector conventions, per agent: a batched ``sample()`` is a valid batch."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

import ensemble_env

B = 5

#: every agent set and action encoding, the RLAE options included
CONFIGURATIONS: list[dict[str, Any]] = [
    {},
    {"decider_action": "multidiscrete"},
    {"decider_action": "subset"},
    {"fusion_action": "weights"},
    {"fusion_action": "weights", "fusion_agents": "per_model"},
    {"decider": False},
    {"decider": False, "fusion_action": "weights"},
    {"decider": False, "fusion_action": "weights", "fusion_agents": "per_model"},
    {"decider_extras": ("model_accuracy", "task", "features"), "fusion_extras": ("task", "features")},
]


def _name(options: dict[str, Any]) -> str:
    return ",".join(f"{key}={value}" for key, value in options.items()) or "default"


@pytest.mark.parametrize("options", CONFIGURATIONS, ids=_name)
def test_batched_samples_step_and_observations_lie_in_the_batched_spaces(options: dict[str, Any]) -> None:
    venv = ensemble_env.vector_env(B, "bbh5", window=20, episode_length=12, **options)
    parallel = ensemble_env.parallel_env("bbh5", window=20, episode_length=12, **options)
    obs, _ = venv.reset(seed=0)
    for agent in venv.agents:
        single = venv.single_action_space(agent)
        assert single == parallel.action_space(agent)
        assert venv.single_observation_space(agent) == parallel.observation_space(agent)
        assert venv.action_space(agent) == batch_space(single, B)
        assert venv.action_space(agent) is venv.action_space(agent)  # built once
        assert venv.observation_space(agent).shape == (B, *parallel.observation_space(agent).shape)
        assert venv.observation_space(agent).contains(obs[agent])
        venv.action_space(agent).seed(3)
    assert venv.single_state_space == parallel.state_space
    assert venv.state_space.shape == (B, *parallel.state_space.shape)
    for _ in range(30):  # whole sampled batches, across episode ends
        actions = {agent: venv.action_space(agent).sample() for agent in venv.agents}
        obs, rewards, *_ = venv.step(actions)
        for agent in venv.agents:
            assert venv.observation_space(agent).contains(obs[agent]), agent
            assert rewards[agent].shape == (B,)
        assert venv.state_space.contains(venv.state())


def test_batched_samples_are_seeded() -> None:
    def draws(seed: int) -> list[np.ndarray]:
        venv = ensemble_env.vector_env(B, "toy8")
        venv.reset(seed=0)
        out = []
        for agent in venv.agents:
            venv.action_space(agent).seed(seed)
            out += [venv.action_space(agent).sample() for _ in range(3)]
        return out

    for a, b in zip(draws(7), draws(7), strict=True):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, b) for a, b in zip(draws(7), draws(8), strict=True))


def test_the_batched_fusion_sample_takes_the_action_mask() -> None:
    venv = ensemble_env.vector_env(64, "toy8")
    _, infos = venv.reset(seed=0)
    space = venv.action_space("fusion")
    assert isinstance(space, spaces.MultiDiscrete)
    space.seed(0)
    for _ in range(20):
        mask = infos["fusion"]["action_mask"]
        answers = space.sample(mask=tuple(mask))
        assert mask[np.arange(64), answers].all()  # every sampled answer is a valid choice
        _, _, _, _, infos = venv.step({"decider": venv.action_space("decider").sample(), "fusion": answers})


def test_an_unknown_agent_names_the_agents() -> None:
    venv = ensemble_env.vector_env(2, "toy8", decider=False)
    for method in (venv.action_space, venv.observation_space, venv.single_action_space, venv.single_observation_space):
        with pytest.raises(ValueError, match=r"unknown agent 'decider'; the agents are \['fusion'\]"):
            method("decider")


def test_the_parallel_view_masked_sample_scores_about_chance() -> None:
    """The README's Quickstart loop (the fusion space's ``sample(mask=...)``): random valid answers, not 5%."""
    env = ensemble_env.parallel_env("toy8", split="test")
    _, infos = env.reset(seed=0)
    for agent in env.agents:
        env.action_space(agent).seed(0)
    chance = []
    while env.agents:
        chance.append(1.0 / infos["fusion"]["action_mask"].sum())
        actions = {agent: env.action_space(agent).sample(mask=infos[agent].get("action_mask")) for agent in env.agents}
        *_, infos = env.step(actions)
    # a random team is empty (always wrong) with probability 1 / 2**8; else a uniform valid answer
    expected = float(np.mean(chance)) * (1 - 2.0**-8)
    assert abs(infos["fusion"]["accuracy"] - expected) < 0.06
