"""The team decider (``decider_policy="teams"``): a categorical over the non-empty teams."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

import torch

from ensemble_env import baselines
from ensemble_env.game import actions
from ensemble_env.synthetic import make_cache, planted_cache
from ensemble_mappo.agents import Agents
from ensemble_mappo.checkpoint import load_checkpoint
from ensemble_mappo.config import TrainConfig
from ensemble_mappo.evaluation import evaluate_run
from ensemble_mappo.frame import make_env
from ensemble_mappo.networks import TeamDeciderActor, categorical_entropy
from ensemble_mappo.training import train


def test_teams_follow_the_environments_subset_encoding_and_honour_min_team_size() -> None:
    actor = TeamDeciderActor(obs_size=2, n_models=4)
    assert actor.teams.shape == (15, 4)
    for index in range(15):  # team k holds model i when bit i of k + 1 is set, as decider_action="subset"
        team = actor.teams[index].numpy().astype(bool)
        assert actions.encode_team(team, "subset") == index
    sized = TeamDeciderActor(obs_size=2, n_models=4, min_team_size=3)
    logits = sized(torch.randn(64, 2))
    assert (logits > -1e30).sum(-1).eq(5).all()  # 4 teams of 3 and the team of 4: the rest masked
    drawn = sized.sample(logits, torch.Generator().manual_seed(0))
    assert drawn.sum(-1).min() >= 3 and sized.mode(logits).sum(-1).min() >= 3
    assert TeamDeciderActor(2, 4).mode(TeamDeciderActor(2, 4)(torch.zeros(1, 2))).sum() >= 1  # never empty


def test_log_prob_and_entropy_are_the_categoricals_over_teams() -> None:
    torch.manual_seed(0)
    actor = TeamDeciderActor(obs_size=3, n_models=3)
    inputs = torch.randn(4000, 3)
    logits = actor(inputs) * 300  # far from uniform
    teams, log_probs, played = actor.act(inputs, torch.Generator().manual_seed(1))
    assert torch.equal(teams, played)
    expected = torch.log_softmax(actor(inputs), -1).gather(-1, actor.team_index(teams)[:, None]).squeeze(-1)
    torch.testing.assert_close(log_probs, expected)
    assert torch.equal(actor.teams[actor.team_index(teams)], teams)
    # sampling follows the probabilities: one input repeated, frequencies match within 3 standard errors
    one = logits[:1].detach().expand(20000, -1)
    draws = actor.team_index(actor.sample(one, torch.Generator().manual_seed(2)))
    frequencies = torch.bincount(draws, minlength=7).double() / draws.numel()
    probabilities = torch.softmax(one[0].double(), -1)
    assert (frequencies - probabilities).abs().max() < 3 * (0.25 / 20000) ** 0.5 + 1e-3
    torch.testing.assert_close(actor.entropy(logits), categorical_entropy(logits))


@pytest.mark.parametrize(("initial_prob", "min_team_size"), [(0.5, 0), (0.25, 0), (0.1, 2)])
def test_the_prior_sets_the_team_size_distribution_at_initialisation(initial_prob: float, min_team_size: int) -> None:
    """decider_initial_prob: each model in the team independently, the size binomial given an allowed team."""
    n = 5
    torch.manual_seed(0)
    actor = TeamDeciderActor(obs_size=7, n_models=n, min_team_size=min_team_size, initial_prob=initial_prob)
    sizes = actor.teams.sum(-1).long()
    smallest = max(1, min_team_size)
    binomial = np.array([math.comb(n, k) * initial_prob**k * (1 - initial_prob) ** (n - k) for k in range(n + 1)])
    binomial[:smallest] = 0.0
    binomial /= binomial.sum()
    for inputs, tolerance in ((torch.zeros(1, 7), 1e-6), (torch.randn(256, 7), 0.02)):  # any input, at the start
        probs = torch.softmax(actor(inputs), -1).detach().double()
        by_size = torch.zeros(inputs.shape[0], n + 1, dtype=torch.float64).index_add_(1, sizes, probs)
        assert (by_size - torch.from_numpy(binomial)).abs().max() < tolerance
    mean_size = float((binomial * np.arange(n + 1)).sum())
    if initial_prob == 0.5 and min_team_size == 0:  # uniform over the 31 teams: mean size 80 / 31
        assert mean_size == pytest.approx(80 / 31)
        assert torch.allclose(probs[0].float(), torch.full((31,), 1 / 31.0), atol=1e-3)
    # the trainer builds the decider with the config's prior
    cache = make_cache(n_models=n, n_questions=300, n_tasks=2, seed=0)
    venv = make_env(cache, {"decider_extras": ["task"]}, num_envs=1, split="train")
    built = Agents.build(venv, 8, decider_initial_prob=initial_prob, decider_policy="teams").decider
    probs = torch.softmax(built(torch.zeros(1, venv.layout.decider_size)), -1)[0].detach().double()
    assert float((probs * built.teams.sum(-1).double()).sum()) == pytest.approx(
        n * initial_prob / (1 - (1 - initial_prob) ** n), abs=1e-4
    )


def test_a_run_with_the_team_decider_resumes_and_evaluates(tmp_path: Path) -> None:
    cache = make_cache(n_models=3, n_questions=300, n_tasks=2, seed=0)
    config = TrainConfig(decider_policy="teams", passes=2, num_envs=4, num_steps=16, hidden_size=8)
    train(config, cache, tmp_path, progress=False)
    saved = load_checkpoint(tmp_path)["networks"]
    venv = make_env(cache, config.env, num_envs=1, split="test")
    agents = Agents.build(venv, 8, decider_policy="teams")
    agents.load_state_dict(saved)
    assert isinstance(agents.decider, TeamDeciderActor)
    evaluation = evaluate_run(tmp_path, cache, split="test")
    assert evaluation.teams.any(axis=1).all() and evaluation.teams.shape[1] == 3
    with pytest.raises(ValueError, match="decider_policy='tree' is not one of"):
        TrainConfig(decider_policy="tree")


@pytest.mark.slow
def test_the_team_decider_learns_the_planted_team_of_one(tmp_path: Path) -> None:
    """On ``planted_cache("dominant")`` (one strong model, five weak correlated ones; a cost per question) the
    team decider keeps the strong model alone, as the Bernoulli decider does (tests/learner/test_mappo_planted.py)."""
    cache = planted_cache("dominant")
    config = TrainConfig(decider_policy="teams", passes=160, env={"size_penalty_mode": "always"})
    train(config, cache, tmp_path, progress=False)
    summary = evaluate_run(tmp_path, cache, split="test").summary(cache)
    best = baselines.best_single(cache, cache.select("train"), cache.select("test")).accuracy
    assert summary["mean_team_size"] < 1.1 and summary["selection_frequency"]["strong"] > 0.95, summary
    assert summary["accuracy"] >= best - 0.01
    assert np.isfinite(summary["accuracy"])


def test_a_run_configured_in_python_evaluates_with_the_options_it_trained_with(tmp_path: Path) -> None:
    """TrainConfig(env=...) replaces the default options (no task one-hot here); the saved run must not gain them
    back when it is loaded (it did: the decider's input then had the wrong size)."""
    cache = make_cache(n_models=3, n_questions=300, n_tasks=2, seed=0)
    config = TrainConfig(passes=1, num_envs=4, num_steps=16, hidden_size=8, env={"size_penalty_mode": "always"})
    train(config, cache, tmp_path, progress=False)
    evaluation = evaluate_run(tmp_path, cache, split="test")
    assert evaluation.teams.any(axis=1).all()
