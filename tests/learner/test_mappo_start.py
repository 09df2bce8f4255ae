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
from ensemble_mappo.agents import Agents  # noqa: E402
from ensemble_mappo.checkpoint import load_checkpoint  # noqa: E402
from ensemble_mappo.config import TrainConfig  # noqa: E402
from ensemble_mappo.frame import make_env  # noqa: E402
from ensemble_mappo.mappo import env_options  # noqa: E402
from ensemble_mappo.networks import TeamDeciderActor  # noqa: E402
from ensemble_mappo.ppo import coefficients  # noqa: E402
from ensemble_mappo.start import StartPolicy, start_decider, team_train_rewards  # noqa: E402
from ensemble_mappo.training import train  # noqa: E402

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


def test_the_default_start_keeps_the_single_model_where_no_team_is_certified() -> None:
    """On a task where a 3-model team wins on train by chance (the per-task mean's choice), the default start
    (``offline_estimator="certified"``) plays the task's best single model, as ``static_team(certified)`` does."""
    cache = make_cache(n_models=4, n_questions=300, n_tasks=2, accuracy=[0.7, 0.68, 0.66, 0.64], seed=2)
    train, test = cache.select("train"), cache.select("test")
    mean, certified = (routing.static_team(cache, train, test, estimator=name) for name in ("mean", "certified"))
    assert mean.info["teams"] != certified.info["teams"]  # the case this test is about
    config = TrainConfig(offline_temperature=0.02, **TINY)
    assert config.offline_estimator == "certified"
    venv = _env(cache, config)
    torch.manual_seed(0)
    agents = Agents.build(venv, 16, decider_policy="teams")
    start_decider(agents, venv, config, fit=True)
    obs, _ = venv.reset(seed=5)
    inputs = torch.from_numpy(obs["decider"])
    tasks = inputs[:, venv.layout.decider["task"]].argmax(-1)
    with torch.no_grad():
        played = agents.decider.mode(agents.decider(inputs)).numpy().astype(bool)
    for row, task in enumerate(tasks.tolist()):
        names = tuple(model for model, kept in zip(cache.models, played[row], strict=True) if kept)
        assert names == certified.info["teams"][cache.task_names[task]]


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
        actor.logits.net[-1].bias.add_(torch.randn(7))
    _, _, moved = actor.evaluate_with_start(inputs, actions)
    assert (moved > 1e-3).all()
    moved.mean().backward()
    with torch.no_grad():
        actor.logits.net[-1].bias.sub_(0.5 * actor.logits.net[-1].bias.grad)
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


def test_start_networks_are_the_offline_start_a_run_begins_from(tmp_path: Path) -> None:
    """What the benchmark weighs the checkpoints against: the same networks every call, playing static_team's
    team on every task (this cache has no near ties) with the mean vote; and a resumed run that never reached its
    first checkpoint fits that start again, so it equals an uninterrupted run."""
    from ensemble_mappo.evaluation import evaluate_agents
    from ensemble_mappo.training import start_networks

    cache = small_cache()
    config = TrainConfig(passes=1, seed=1, **TINY)
    first, second = start_networks(config, cache), start_networks(config, cache)
    assert all(torch.equal(first[n][k], second[n][k]) for n in first for k in first[n])
    played = evaluate_agents(first, config, cache, split="test")
    static = routing.static_team(cache, cache.select("train"), cache.select("test"))
    teams = np.asarray(played.teams, dtype=bool)
    same = np.zeros(len(teams), dtype=bool)
    for task, name in enumerate(cache.task_names):
        rows = cache.tasks[played.questions] == task
        expected = np.isin(np.arange(cache.n_models), [cache.models.index(m) for m in static.info["teams"][name]])
        same[rows] = (teams[rows] == expected).all(axis=1)
        assert same[rows].mean() >= 0.95, name  # the network fitted to the per-task table (a question may differ)
    agree = played.answers[same] == static.predictions[same]  # the fusion agent starts near the mean vote
    assert agree.mean() >= 0.95, agree.mean()

    train(config, cache, tmp_path / "straight", progress=False)
    train(config, cache, tmp_path / "resumed", progress=False, stop_after=0)  # config.json, no checkpoint
    assert not (tmp_path / "resumed" / "checkpoint.pt").exists()
    train(config, cache, tmp_path / "resumed", progress=False, resume=True)
    straight = load_checkpoint(tmp_path / "straight")["networks"]
    resumed = load_checkpoint(tmp_path / "resumed")["networks"]
    assert all(torch.equal(straight[n][k], resumed[n][k]) for n in straight for k in straight[n])


def test_the_fusion_agent_starts_as_exactly_the_mean_vote() -> None:
    """The fusion actor's gate starts with no weight on the question's context (task, features, window): its
    most probable answer is the team's mean-probability vote on every question, whatever the context says, and
    training still reaches the context weights (their gradient is not zero)."""
    from ensemble_env import datasets

    cache = datasets.load("bbh5")
    config = TrainConfig()
    venv = make_env(cache, env_options(config, cache), num_envs=64, split="validation", episode_length=64)
    torch.manual_seed(0)
    agents = Agents.build(venv, 8)
    assert torch.count_nonzero(agents.fusion.gate.weight) == 0
    obs, _ = venv.reset(seed=0)
    inputs = agents.fusion.prepare(torch.as_tensor(obs["fusion"]))
    answers = agents.fusion(inputs).argmax(-1).numpy()
    slices = venv.layout.fusion
    teams = obs["fusion"][:, slices["team_mask"]] > 0
    probs = obs["fusion"][:, slices["probs"]].reshape(len(teams), cache.n_models, -1)
    valid = obs["fusion"][:, slices["action_mask"]] > 0
    vote = np.where(valid, (probs * teams[:, :, None]).sum(1), -np.inf).argmax(-1)
    np.testing.assert_array_equal(answers, vote)
    other = torch.as_tensor((vote + 1) % probs.shape[-1])  # any target: the gradient reaches the context weights
    loss = -torch.log_softmax(agents.fusion(inputs), -1).gather(1, other[:, None]).clamp(min=-1e4).mean()
    loss.backward()
    assert torch.count_nonzero(agents.fusion.gate.weight.grad) > 0


def test_on_tasks_never_seen_the_decider_starts_by_following_the_leader() -> None:
    """Without the task one-hot (ensemble_env/EnsembleUnseen-v1) the start is written into the decider exactly: each
    team's logit is its mean reward over the task's answered questions (from the team record), ties and an empty
    record going to the training tasks' best team."""
    from ensemble_env.game.config import unseen_game
    from ensemble_mappo.start import RecordStart
    from ensemble_mappo.training import setup

    cache = make_cache(n_models=3, n_questions=240, n_tasks=4, accuracy=[0.5, 0.6, 0.7], seed=2)
    env = {key: list(value) if isinstance(value, tuple) else value for key, value in unseen_game(3).items()}
    config = TrainConfig(env=env, question_features=False, num_envs=4, num_steps=8, hidden_size=16)
    run = setup(config, cache, fit=True)
    decider = run.learner.agents.decider
    start = decider.start
    assert isinstance(start, RecordStart) and start.leader
    layout = run.venv.layout.decider
    inputs = torch.rand(64, layout["team_record"].stop + 8)[:, : run.venv.layout.decider_size]
    with torch.no_grad():
        torch.testing.assert_close(decider(inputs), start.logits(inputs).masked_fill(decider.allowed <= 0, -1e30))
    rates = torch.zeros(1, run.venv.layout.decider_size)
    rates[0, layout["team_record"]] = torch.linspace(0.1, 0.9, layout["team_record"].stop - layout["team_record"].start)
    best = int((rates[0, layout["team_record"]] * start.gap + start.wrong).argmax())
    assert int(decider(rates).argmax()) == best


@pytest.mark.parametrize(("policy", "hidden"), [("scorer", 16), ("teams", 16), ("teams", 4)])
def test_on_tasks_never_seen_a_new_run_and_a_resumed_one_take_the_same_start(policy: str, hidden: int) -> None:
    """The offline start on tasks never seen is the record start where the decider can play it exactly (an MLP of
    hidden layers of at least K + 1 units: the team decider at hidden 16 over 3 models' 7 teams), else the table start
    a new run fits: the team scorer, or the team decider at hidden 4. A resumed run (fit=False: its networks come from
    the checkpoint) takes the same start, its KL anchored where the uninterrupted run's was."""
    from ensemble_mappo import algorithms
    from ensemble_mappo.benchmark import protocols
    from ensemble_mappo.start import RecordStart

    cache = make_cache(n_models=3, n_questions=360, n_tasks=6, accuracy=[0.5, 0.6, 0.7], seed=1)
    overrides = protocols.learner_overrides("mappo", algorithms.get("mappo").config_class, 3, "all")
    config = TrainConfig(
        **{**overrides, "decider_start": "offline", "decider_policy": policy, "question_features": False}
    )
    starts = []
    for fit in (True, False):
        venv = make_env(cache, env_options(config, cache), num_envs=4, split="train", episode_length=32)
        torch.manual_seed(0)
        agents = Agents.build(venv, hidden, decider_policy=policy)
        starts.append(start_decider(agents, venv, config, fit=fit))
    new, resumed = starts
    assert isinstance(new, RecordStart) == (policy == "teams" and hidden == 16)
    assert type(resumed) is type(new)
    inputs = torch.rand(32, venv.layout.decider_size)
    torch.testing.assert_close(resumed.of(inputs), new.of(inputs), rtol=0, atol=0)
