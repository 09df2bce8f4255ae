"""RLlib adapter: the MultiAgentEnv (encodings, order, render, state), the PPO config, one training iteration."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

pytest.importorskip("ray.rllib")

from gymnasium import spaces
from ray.rllib.env.multi_agent_env import MultiAgentEnv
from ray.rllib.utils.pre_checks.env import check_multiagent_environments

import ensemble_env
from ensemble_env import LogitCache
from ensemble_env.adapters.rllib import (
    MODEL_DEFAULTS,
    EnsembleMultiAgentEnv,
    MaskedPPOTorchRLModule,
    policy_for_agent,
    ppo_config,
    rllib_env,
    seed_everything,
)
from ensemble_env.synthetic import make_cache

# RLlib registers its env with gymnasium under one name for every env runner it builds in the process:
pytestmark = pytest.mark.filterwarnings("ignore:.*Overriding environment rllib-multi-agent-env-v0:UserWarning")

POLICIES = ("decider", "fusion")
HASH_SEED_ENV = {"env_vars": {"PYTHONHASHSEED": "0"}}


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


def test_ppo_config_has_one_policy_per_role_separate_value_layers_and_the_fusion_mask(cache: LogitCache) -> None:
    config = ppo_config({"cache": cache, "episode_length": 16}, num_env_runners=2, seed=3, lr=5e-4)
    assert list(config.policies) == ["decider", "fusion"]  # a fixed order, whatever the hash seed
    assert config.num_env_runners == 2 and config.lr == 5e-4 and config.seed == 3
    assert config.vf_clip_param == 1e4 and config.num_epochs == 8  # TRAINING_DEFAULTS under the override
    assert {policy_for_agent(agent) for agent in ("decider", "fusion")} == {"decider", "fusion"}
    assert config.env is EnsembleMultiAgentEnv and config.env_config["episode_length"] == 16
    specs = config.rl_module_spec.rl_module_specs
    assert specs["fusion"].module_class is MaskedPPOTorchRLModule
    mask = ensemble_env.parallel_env(cache).engine.layout.fusion["action_mask"]
    assert specs["fusion"].model_config["action_mask_slice"] == [mask.start, mask.stop]
    for name in ("decider", "fusion"):
        model_config = specs[name].model_config
        vf_share_layers = (
            model_config["vf_share_layers"] if isinstance(model_config, dict) else model_config.vf_share_layers
        )
        assert vf_share_layers is MODEL_DEFAULTS["vf_share_layers"] is False


def test_the_fusion_module_never_samples_an_invalid_answer(cache: LogitCache) -> None:
    import torch
    from ray.rllib.core.columns import Columns

    config = ppo_config({"cache": cache, "episode_length": 16}, num_env_runners=0)
    env = rllib_env(cache=cache, episode_length=16)
    spec = config.rl_module_spec.rl_module_specs["fusion"]
    spec.observation_space, spec.action_space = env.observation_spaces["fusion"], env.action_spaces["fusion"]
    module = spec.build()
    obs, infos = env.reset(seed=0)
    rows = [obs["fusion"]]
    masks = [infos["fusion"]["action_mask"]]
    for _ in range(15):
        obs, _, _, _, infos = env.step({"decider": np.ones(3, dtype=np.int64), "fusion": 0})
        rows.append(obs["fusion"])
        masks.append(infos["fusion"]["action_mask"])
    valid = torch.as_tensor(np.array(masks)) > 0
    assert not valid.all()  # questions with 2 of 4 choices are there
    batch = {Columns.OBS: torch.as_tensor(np.array(rows))}
    for forward in (module.forward_exploration, module.forward_inference, module.forward_train):
        logits = forward(batch)[Columns.ACTION_DIST_INPUTS]
        distribution = module.get_exploration_action_dist_cls().from_logits(logits)
        torch.manual_seed(0)
        samples = torch.stack([distribution.sample() for _ in range(200)])
        assert valid.gather(1, samples.T).all()  # every sampled answer is a valid choice
        assert (logits[~valid] < -1e30).all()


@pytest.mark.parametrize(("options", "terminated"), [({"episode_length": 12}, False), ({"split": "test"}, True)])
def test_env_runner_episodes_keep_termination_and_truncation_apart(
    cache: LogitCache, options: dict, terminated: bool
) -> None:
    """RLlib's GAE bootstraps per agent from the last observation only after a truncation: each agent's episode
    must say which end it was (an exhausted stream terminates, an ``episode_length`` cut truncates)."""
    from ray.rllib.env.multi_agent_env_runner import MultiAgentEnvRunner

    config = ppo_config({"cache": cache, **options}, num_env_runners=0, seed=0)
    runner = MultiAgentEnvRunner(config=config)
    episodes = [episode for episode in runner.sample(num_episodes=1) if episode.is_done]
    assert episodes
    for agent in ("decider", "fusion"):
        agent_episode = episodes[0].agent_episodes[agent]
        assert agent_episode.is_terminated is terminated
        assert agent_episode.is_truncated is not terminated
    if not terminated:  # the last observation is the real next question (a valid-choice mask, not zeros)
        last = episodes[0].agent_episodes["fusion"].get_observations(-1)
        mask = runner.env.unwrapped.envs[0].unwrapped.env.engine.layout.fusion["action_mask"]
        assert last[mask].sum() >= 2
    runner.stop()


def _one_iteration(seed: int) -> tuple[float, dict[str, np.ndarray]]:
    seed_everything(seed)
    config = ppo_config(
        {"episode_length": 32, "cache": "toy8", "order": "shuffled"},
        num_env_runners=1,
        seed=seed,
        train_batch_size_per_learner=128,
        minibatch_size=64,
        num_epochs=2,
    )
    algo = config.build_algo()
    try:
        result = algo.train()
        weights = {name: next(iter(algo.get_module(name).parameters())).detach().numpy().copy() for name in POLICIES}
        return result["env_runners"]["episode_return_mean"], weights
    finally:
        algo.stop()


@pytest.mark.slow
def test_one_seed_gives_identical_runs() -> None:
    """Seeds and the workers' hash seed fixed: two runs sample the same episodes and learn the same weights."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env=HASH_SEED_ENV)
    try:
        first, second, other = _one_iteration(0), _one_iteration(0), _one_iteration(1)
    finally:
        ray.shutdown()
    assert first[0] == second[0]
    for name in POLICIES:
        np.testing.assert_array_equal(first[1][name], second[1][name])
    assert first[0] != other[0]  # the seed matters


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


ALIGNED = {"decider_extras": ("task",), "fusion_extras": ("task",), "fusion_view": "per_choice", "credit": "aligned"}


@pytest.mark.parametrize("options", [{"episode_length": 12}, {"split": "test"}])
def test_aligned_credit_plays_the_same_game_by_turns(cache: LogitCache, options: dict) -> None:
    """By turns (the fuser answers, then the decider commits) the game is the raw one: the same observations,
    rewards and episode ends; the decider is paid r_{t+1} when the fuser answers q_{t+1}, before its next commit."""
    raw = rllib_env(cache=cache, **options, decider_extras=("task",), fusion_extras=("task",), fusion_view="per_choice")
    turns = rllib_env(cache=cache, **options, **ALIGNED)
    rng = np.random.default_rng(0)
    obs, _ = raw.reset(seed=5)
    shown, _ = turns.reset(seed=5)
    assert list(shown) == ["fusion"]
    np.testing.assert_array_equal(shown["fusion"], obs["fusion"])
    decider_paid, game_rewards, step = [], [], 0
    while True:
        actions = {"decider": rng.integers(0, 2, 3), "fusion": int(rng.integers(0, 4))}
        shown, rewards, terminated, truncated, _ = turns.step({"fusion": actions["fusion"]})
        assert list(shown) == ["decider"] and not terminated["__all__"] and not truncated["__all__"]
        np.testing.assert_array_equal(shown["decider"], obs["decider"])
        assert ("decider" in rewards) is (step > 0)  # the first question's team is initial_team, no commit's
        decider_paid.append(rewards.get("decider"))
        obs, game, raw_terminated, raw_truncated, _ = raw.step(actions)
        game_rewards.append(game["fusion"])
        assert rewards["fusion"] == game["fusion"]  # the fuser's answer is scored at once, as the game scores it
        shown, rewards, terminated, truncated, _ = turns.step({"decider": actions["decider"]})
        assert terminated["__all__"] == raw_terminated["__all__"] and truncated["__all__"] == raw_truncated["__all__"]
        step += 1
        if raw_terminated["__all__"] or raw_truncated["__all__"]:
            assert terminated == raw_terminated and truncated == raw_truncated  # every agent's end, as the game's
            assert set(shown) == {"decider", "fusion"} and rewards == {"decider": 0.0, "fusion": 0.0}
            for agent in shown:
                np.testing.assert_array_equal(shown[agent], obs[agent])
            break
        assert list(shown) == ["fusion"] and rewards == {"fusion": 0.0}
        np.testing.assert_array_equal(shown["fusion"], obs["fusion"])
    assert decider_paid[1:] == game_rewards[1:]  # paid at the fuser's turn of q_{t+1}: r_{t+1}, for the commit at t
    with pytest.raises(ValueError, match="fuser's turn takes the action of 'fusion' alone"):
        turns.reset(seed=0)
        turns.step({"decider": np.ones(3, dtype=np.int64), "fusion": 0})


def test_env_runner_credits_the_decider_with_the_question_its_team_answers(cache: LogitCache) -> None:
    from ray.rllib.env.multi_agent_env_runner import MultiAgentEnvRunner

    config = ppo_config({"cache": cache, "episode_length": 12, **ALIGNED}, num_env_runners=0, seed=0)
    runner = MultiAgentEnvRunner(config=config)
    episode = next(episode for episode in runner.sample(num_episodes=1) if episode.is_done)
    decider = np.asarray(episode.agent_episodes["decider"].get_rewards())
    fusion = np.asarray(episode.agent_episodes["fusion"].get_rewards())
    assert len(decider) == len(fusion) == 12
    np.testing.assert_array_equal(decider[:-1], fusion[1:])  # the commit at t earns r_{t+1}
    assert decider[-1] == 0.0  # the last commit's team answers nothing in the episode
    assert episode.agent_episodes["decider"].is_truncated and episode.agent_episodes["fusion"].is_truncated
    runner.stop()


def test_the_per_choice_fusion_module_starts_as_the_mean_vote_and_masks(cache: LogitCache) -> None:
    import torch
    from ray.rllib.core.columns import Columns

    from ensemble_env.adapters.rllib import PerChoicePPOTorchRLModule
    from ensemble_env.adapters.wrappers import per_choice_rows

    config = ppo_config({"cache": cache, "episode_length": 40, **ALIGNED}, num_env_runners=0)
    spec = config.rl_module_spec.rl_module_specs["fusion"]
    assert spec.module_class is PerChoicePPOTorchRLModule
    env = rllib_env(cache=cache, episode_length=40, **{**ALIGNED, "credit": "game"})
    spec.observation_space, spec.action_space = env.observation_spaces["fusion"], env.action_spaces["fusion"]
    module = spec.build()
    obs, _ = env.reset(seed=0)
    rows = [obs["fusion"]]
    for _ in range(39):
        obs, *_ = env.step({"decider": np.ones(3, dtype=np.int64), "fusion": 0})
        rows.append(obs["fusion"])
    per_choice = per_choice_rows(np.array(rows), env.env.layout)  # (40, C, N + 2)
    valid = per_choice[..., -1] > 0.5
    assert not valid.all()
    with torch.no_grad():
        output = module.forward_inference({Columns.OBS: torch.as_tensor(np.array(rows))})
        values = module.compute_values({Columns.OBS: torch.as_tensor(np.array(rows))})
    logits = output[Columns.ACTION_DIST_INPUTS].numpy()
    assert (logits[~valid] < -1e30).all()
    mean_vote = np.where(valid, per_choice[..., -2], -np.inf).argmax(axis=1)
    np.testing.assert_array_equal(logits.argmax(axis=1), mean_vote)
    assert values.shape == (40,)
