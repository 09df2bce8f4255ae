"""The team decider's start policy (ensemble_mappo.start): the offline start from the train outcomes, the size
prior, and the KL penalty (trust region) that holds PPO's fine-tuning near the start."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ensemble_env.baselines import routing  # noqa: E402
from ensemble_env.synthetic import make_cache  # noqa: E402
from ensemble_mappo.checkpoint import load_checkpoint  # noqa: E402
from ensemble_mappo.config import TrainConfig  # noqa: E402
from ensemble_mappo.networks import TeamDeciderActor  # noqa: E402
from ensemble_mappo.ppo import coefficients  # noqa: E402
from ensemble_mappo.start import StartPolicy, start_decider, team_train_rewards  # noqa: E402
from ensemble_mappo.training import Agents, env_options, make_env, train  # noqa: E402

TINY = {"num_envs": 4, "num_steps": 16, "episode_length": 32, "hidden_size": 8, "update_epochs": 2}


def small_cache():
    """Two tasks, four models of clearly different accuracy per task (no near ties between the best teams)."""
    accuracy = [[0.9, 0.4], [0.4, 0.85], [0.5, 0.6], [0.6, 0.5]]  # (models, tasks)
    return make_cache(n_models=4, n_questions=800, n_tasks=2, accuracy=accuracy, seed=3)


def _env(cache, config: TrainConfig, num_envs: int = 8):
    return make_env(cache, env_options(config, cache), num_envs=num_envs, split="train", episode_length=64)


def test_the_train_rewards_of_every_team_are_static_teams_scores() -> None:
    cache = small_cache()
    venv = _env(cache, TrainConfig())
    teams = TeamDeciderActor(3, cache.n_models).teams.numpy()
    per_task, pooled = team_train_rewards(venv, teams)
    assert per_task.shape == (2, 15) and pooled.shape == (15,)
    static = routing.static_team(cache, cache.select("train"), cache.select("test"))
    for task, name in enumerate(cache.task_names):
        chosen = np.array([model in static.info["teams"][name] for model in cache.models])
        row = int(np.flatnonzero((teams == chosen).all(axis=1))[0])
        assert per_task[task, row] == pytest.approx(static.info["train_reward"][name])
        assert per_task[task, row] == pytest.approx(per_task[task].max())
    # only the train stream's labels are read: changing every other label changes nothing
    labels = np.asarray(cache.labels).copy()
    others = np.flatnonzero(np.asarray(cache.split) != 0)
    labels[others] = (labels[others] + 1) % 2
    flipped = make_env(dataclasses.replace(cache, labels=labels), env_options(TrainConfig(), cache), num_envs=1,
                       split="train")  # fmt: skip
    assert np.array_equal(team_train_rewards(flipped, teams)[0], per_task)


def test_the_offline_start_plays_static_teams_team_of_each_task() -> None:
    cache = small_cache()
    config = TrainConfig(decider_start="offline", offline_temperature=0.02, **TINY)
    venv = _env(cache, config)
    torch.manual_seed(0)
    agents = Agents.build(venv, 16, decider_policy="teams")
    start = start_decider(agents, venv, config, fit=True, rollouts=4)
    assert isinstance(start, StartPolicy) and agents.decider.start is start
    static = routing.static_team(cache, cache.select("train"), cache.select("test"))
    obs, _ = venv.reset(seed=5)
    inputs = torch.from_numpy(obs["decider"])
    tasks = inputs[:, venv.layout.decider["task"]].argmax(-1)
    with torch.no_grad():
        played = agents.decider.mode(agents.decider(inputs)).numpy().astype(bool)
        _, _, kl = agents.decider.evaluate_with_start(inputs, agents.decider.teams[:1].expand(len(inputs), -1))
    for row, task in enumerate(tasks.tolist()):
        names = tuple(model for model, kept in zip(cache.models, played[row], strict=True) if kept)
        assert names == static.info["teams"][cache.task_names[task]]
    assert float(kl.mean()) < 0.05  # fitted: close to the start policy


def test_the_kl_to_the_start_is_zero_at_the_start_and_pulls_back_towards_it() -> None:
    torch.manual_seed(0)
    actor = TeamDeciderActor(obs_size=6, n_models=3, initial_prob=0.2)
    actor.start = StartPolicy.size_prior(actor, n_tasks=2, task_slice=slice(4, 6))
    inputs = torch.zeros(5, 6)
    actions = actor.teams[:1].expand(5, -1)
    _, _, kl = actor.evaluate_with_start(inputs, actions)
    assert kl.abs().max() < 1e-6  # the untrained decider is its prior
    with torch.no_grad():
        actor.net[-1].bias.add_(torch.randn(7))
    _, _, moved = actor.evaluate_with_start(inputs, actions)
    assert (moved > 1e-3).all()
    moved.mean().backward()
    with torch.no_grad():
        actor.net[-1].bias.sub_(0.5 * actor.net[-1].bias.grad)
    _, _, after = actor.evaluate_with_start(inputs, actions)
    assert after.mean() < moved.mean()
    # the same numbers as evaluate() for the PPO terms
    log_prob, entropy = actor.evaluate(inputs, actions)
    again = actor.evaluate_with_start(inputs, actions)
    torch.testing.assert_close(again[0], log_prob)
    torch.testing.assert_close(again[1], entropy)


def test_per_agent_coefficients() -> None:
    ent, kl = coefficients(TrainConfig(ent_coef=0.02, decider_kl_coef=0.3), ["decider", "fusion"])
    assert ent.tolist() == pytest.approx([0.02, 0.02]) and kl.tolist() == pytest.approx([0.3, 0.0])
    ent, _ = coefficients(TrainConfig(ent_coef=0.02, decider_ent_coef=0.0), ["decider", "fusion"])
    assert ent.tolist() == pytest.approx([0.0, 0.02])
    assert coefficients(TrainConfig(), ["fusion"])[0].tolist() == pytest.approx([0.01])


def test_a_run_with_the_offline_start_and_the_trust_region_resumes_exactly(tmp_path: Path) -> None:
    cache = small_cache()
    config = TrainConfig(
        decider_start="offline", decider_kl_coef=0.1, decider_credit="expected", passes=1, seed=2, **TINY
    )
    train(config, cache, tmp_path / "straight", progress=False)
    train(config, cache, tmp_path / "resumed", progress=False, stop_after=3)
    train(config, cache, tmp_path / "resumed", progress=False, resume=True)
    straight = load_checkpoint(tmp_path / "straight")["networks"]
    resumed = load_checkpoint(tmp_path / "resumed")["networks"]
    for name, state in straight.items():
        for key, value in state.items():
            assert torch.equal(value, resumed[name][key]), (name, key)
    log = (tmp_path / "straight" / "progress.csv").read_text().splitlines()
    assert len(log) > 4


def test_the_bernoulli_decider_starts_from_its_bias_and_trains_with_the_defaults(tmp_path: Path) -> None:
    """Pools of more than 12 models get the Bernoulli decider: no team table, so no offline start and no KL; the
    default configuration still trains on them."""
    cache = small_cache()
    config = TrainConfig(decider_start="offline", decider_kl_coef=0.5, decider_policy="bernoulli", **TINY)
    venv = _env(cache, config)
    agents = Agents.build(venv, 8, decider_policy="bernoulli")
    before = {key: value.clone() for key, value in agents.decider.state_dict().items()}
    assert start_decider(agents, venv, config, fit=True) is None
    assert all(torch.equal(before[key], value) for key, value in agents.decider.state_dict().items())
    wide = make_cache(n_models=13, n_questions=200, n_tasks=2, seed=0)
    train(dataclasses.replace(TrainConfig(passes=1, **TINY)), wide, tmp_path, progress=False)
    assert load_checkpoint(tmp_path)["networks"]["decider"]["net.4.bias"].shape == (13,)
    with pytest.raises(ValueError, match="decider_start='warm' is not one of"):
        TrainConfig(decider_start="warm")
