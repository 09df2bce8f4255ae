"""The unseen-task protocol under partial feedback (``ensemble-env benchmark --protocol unseen-tasks --feedback
team``): the learners' game and start, the team-scorer decider, the best hand rule chosen per fold on validation, the
roles, the learning curves, and the refusals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ensemble_env.baselines import registry as baselines  # noqa: E402
from ensemble_env.cache import save_cache  # noqa: E402
from ensemble_env.game.layout import COUNT_HALF  # noqa: E402
from ensemble_env.synthetic import make_cache  # noqa: E402
from ensemble_mappo import algorithms, benchmark  # noqa: E402
from ensemble_mappo.agents import Agents  # noqa: E402
from ensemble_mappo.benchmark import curves, protocols  # noqa: E402
from ensemble_mappo.benchmark.registry import PARTIAL_DEFAULT_ALGORITHMS, default_algorithms  # noqa: E402
from ensemble_mappo.frame import make_env  # noqa: E402
from ensemble_mappo.networks import INDEX_SCALES, TeamIndexActor, TeamScorerActor  # noqa: E402


def small_cache(n_tasks: int = 8, seed: int = 1):
    return make_cache(n_models=3, n_questions=60 * n_tasks, n_tasks=n_tasks, accuracy=[0.5, 0.6, 0.7], seed=seed)


def test_the_learners_play_the_partial_feedback_scenario_from_a_start_that_encodes_no_rule() -> None:
    config_class = algorithms.get("mappo").config_class
    overrides = protocols.learner_overrides("mappo", config_class, 5, "team")
    assert overrides["env"]["feedback"] == "team" and overrides["env"]["episodes"] == "task"
    assert "team_record" in overrides["env"]["decider_extras"] and "task" not in overrides["env"]["decider_extras"]
    assert overrides["decider_start"] == "prior" and overrides["decider_kl_coef"] == 0.0
    assert overrides["decider_policy"] == "index"
    assert "feedback" not in protocols.learner_overrides("mappo", config_class, 5, "all")["env"]
    with pytest.raises(ValueError, match="no decider"):
        protocols.learner_overrides("rlae_ppo", algorithms.get("rlae_ppo").config_class, 5, "team")
    with pytest.raises(ValueError, match="--feedback"):
        protocols.learner_overrides("mappo", config_class, 5, "some")
    assert default_algorithms("unseen-tasks", "team") == PARTIAL_DEFAULT_ALGORITHMS
    assert {"mappo", "ippo", "ftl_team", "hindsight_team"} <= set(PARTIAL_DEFAULT_ALGORITHMS)
    assert default_algorithms("standard", "team") == benchmark.DEFAULT_ALGORITHMS


def test_feedback_goes_with_the_unseen_task_protocol_only(tmp_path: Path) -> None:
    cache = save_cache(tmp_path / "small.h5", small_cache())
    with pytest.raises(ValueError, match="--protocol unseen-tasks"):
        benchmark.benchmark(["best_single"], [0], [cache], tmp_path / "a", feedback="team", progress=False)
    with pytest.raises(ValueError, match="--feedback"):
        benchmark.benchmark(
            ["best_single"], [0], [cache], tmp_path / "b", protocol="unseen-tasks", feedback="full", progress=False
        )


def _scorer(feedback: str) -> tuple[TeamScorerActor, object]:
    cache = small_cache()
    options = protocols.learner_overrides("mappo", algorithms.get("mappo").config_class, 3, feedback)["env"]
    venv = make_env(cache, options, num_envs=4, split="train", episode_length=32)
    torch.manual_seed(0)
    agents = Agents.build(venv, 16, decider_policy="scorer")
    assert isinstance(agents.decider, TeamScorerActor)
    return agents.decider, venv


@pytest.mark.parametrize("feedback", ["team", "all"])
def test_the_untrained_scorer_plays_the_size_prior_and_scores_each_team_from_its_own_record(feedback: str) -> None:
    decider, venv = _scorer(feedback)
    obs, _ = venv.reset(seed=0)
    inputs = torch.from_numpy(obs["decider"])
    with torch.no_grad():
        logits = decider(inputs)
    # the output gain is 0.01: the untrained scorer is the size prior (uniform over the teams at 0.5) up to 1e-2
    np.testing.assert_allclose(logits.numpy(), decider.prior_logits().detach().expand_as(logits).numpy(), atol=0.05)
    # with the context cut off, team k's logit reads team k's record only: changing team 2's rate moves logit 2 alone
    with torch.no_grad():
        decider.logits.context_in.weight.zero_()
        before = decider(inputs)
        changed = inputs.clone()
        changed[:, decider.logits.rate_slice.start + 2] += 0.5
        after = decider(changed)
    moved = (after - before).abs().amax(dim=0) > 0
    assert moved.tolist() == [k == 2 for k in range(moved.numel())]


def test_the_scorer_needs_the_team_record() -> None:
    cache = small_cache()
    venv = make_env(cache, {"decider_extras": ("model_accuracy",)}, num_envs=2, split="train", episode_length=32)
    with pytest.raises(ValueError, match="team_record"):
        Agents.build(venv, 16, decider_policy="scorer")


def _index(feedback: str, initial_prob: float = 0.5) -> tuple[TeamIndexActor, torch.Tensor]:
    cache = small_cache()
    options = protocols.learner_overrides("mappo", algorithms.get("mappo").config_class, 3, feedback)["env"]
    venv = make_env(cache, options, num_envs=4, split="train", episode_length=32)
    agents = Agents.build(venv, 16, decider_initial_prob=initial_prob, decider_policy="index")
    assert isinstance(agents.decider, TeamIndexActor)
    obs, _ = venv.reset(seed=0)
    return agents.decider, torch.from_numpy(obs["decider"])


def _with_record(decider: TeamIndexActor, inputs: torch.Tensor, rates: list[float], counts: list[float]):
    """``inputs`` with every team's record set: rate r_k and count n_k (the count feature n / (n + 16))."""
    changed = inputs.clone()
    changed[:, decider.logits.rate_slice] = torch.tensor(rates)
    fraction = torch.tensor(counts) / (torch.tensor(counts) + COUNT_HALF)
    count = decider.logits.count_slice
    if count.stop - count.start == 1:  # feedback "all": the task's count, shared
        fraction = fraction[:1]
    changed[:, count] = fraction
    return changed


@pytest.mark.parametrize("feedback", ["team", "all"])
def test_the_untrained_index_decider_plays_the_size_prior_whatever_the_record_shows(feedback: str) -> None:
    decider, inputs = _index(feedback)
    n_teams = decider.teams.shape[0]
    rng = np.random.default_rng(0)
    with torch.no_grad():
        for _ in range(3):
            record = _with_record(decider, inputs, rng.uniform(0, 1, n_teams).tolist(), [7.0] * n_teams)
            np.testing.assert_allclose(decider(record).numpy(), 0.0)  # uniform over the 7 teams at 0.5
    decider, inputs = _index(feedback, initial_prob=0.25)
    with torch.no_grad():
        logits = decider(inputs)[0]
    sizes = decider.teams.sum(-1)
    np.testing.assert_allclose(logits.numpy(), (sizes * np.log(1 / 3)).numpy(), rtol=1e-5)  # size prior of 0.25
    np.testing.assert_allclose(decider.prior_logits().detach().numpy(), logits.numpy(), rtol=1e-5)


def test_the_index_shrinks_each_team_s_rate_toward_its_learned_prior_by_its_own_count() -> None:
    decider, inputs = _index("team")
    n_teams = decider.teams.shape[0]
    with torch.no_grad():
        decider.logits.weight[0] = 1.0 / INDEX_SCALES["weight"]  # w = 1 logit per unit of rate for every team
        decider.logits.prior.fill_(0.2 / INDEX_SCALES["prior"])  # b_k = 0.7
        rates, counts = [0.0] * n_teams, [0.0] * n_teams
        rates[1], counts[1] = 0.9, 4.0  # n0 = 4: halfway from 0.7 to 0.9
        rates[2], counts[2] = 0.9, 400.0  # nearly its rate
        rates[3], counts[3] = 0.1, 0.0  # never seen: its rate (0 in the game) is not read
        logits = decider(_with_record(decider, inputs, rates, counts))[0]
    expected = [0.7] * n_teams
    expected[1], expected[2] = 0.8, (4 * 0.7 + 400 * 0.9) / 404
    np.testing.assert_allclose(logits.numpy(), expected, rtol=1e-4)
    # the uncertainty term: u / sqrt(n0 + n_k), a bonus for the teams seen least
    with torch.no_grad():
        decider.logits.weight.zero_()
        decider.logits.bonus.fill_(2.0 / INDEX_SCALES["bonus"])
        logits = decider(_with_record(decider, inputs, rates, counts))[0]
    np.testing.assert_allclose(logits[[0, 1, 2]].numpy(), [2 / 2, 2 / np.sqrt(8), 2 / np.sqrt(404)], rtol=1e-4)


def test_trained_from_the_size_prior_the_index_decider_learns_to_read_the_record(tmp_path: Path) -> None:
    """Each task has its own best model (0.85 against 0.35): no fixed team can do well on a held-out task, and the
    untrained decider (the size prior) reads nothing. After 8,192 steps the deployed decider weighs the record
    (w > 0) and beats the training tasks' best team on the held-out tasks by a wide margin."""
    from ensemble_mappo.benchmark.learners import learner_answers
    from ensemble_mappo.evaluation import policy_checkpoint
    from ensemble_mappo.runs import read_config

    accuracy = np.full((3, 8), 0.35)
    accuracy[np.arange(8) % 3, np.arange(8)] = 0.85
    cache = make_cache(n_models=3, n_questions=800, n_tasks=8, accuracy=accuracy, error_correlation=0.0, seed=0)
    unit = protocols.units(cache, k=4, seed=0)[0][0].cache
    entry = algorithms.get("mappo")
    overrides = {**protocols.learner_overrides("mappo", entry.config_class, 3, "team"), "total_steps": 8192}
    answers = learner_answers(unit, 0, 1.0, tmp_path / "run", passes=1.0, checkpoints=4, overrides=overrides)
    assert answers.info["selected_iteration"] > 0
    from ensemble_env.game.reward import RewardSettings

    reward = RewardSettings(alpha=1.0)
    questions = np.asarray(answers.questions)
    correct = np.asarray(answers.predictions) == np.asarray(unit.labels)[questions]
    learned = float(reward.rewards(correct, np.asarray(answers.teams).sum(axis=1) / 3).mean())
    fit = np.union1d(unit.select("train"), unit.select("validation"))
    setting = baselines.Setting(unit, fit, unit.select("test"), reward=reward)
    fixed = float(baselines.lookup("global_team").run(setting).rewards(unit, reward).mean())
    assert learned > fixed + 0.3, (learned, fixed)
    decider = policy_checkpoint(tmp_path / "run", read_config(tmp_path / "run")).networks["decider"]
    assert float(decider["logits.weight"][0]) > 0.0  # the estimate's weight, 0 at the start


def test_the_index_decider_needs_the_team_record() -> None:
    cache = small_cache()
    venv = make_env(cache, {"decider_extras": ("model_accuracy",)}, num_envs=2, split="train", episode_length=32)
    with pytest.raises(ValueError, match=r"decider_policy='index'.*team_record"):
        Agents.build(venv, 16, decider_policy="index")


def test_the_best_rule_is_chosen_per_fold_on_validation_among_the_playable_ones() -> None:
    lines = [
        {"global_team": -0.1, "greedy_team": 0.2, "ftl_team": 0.5, "hindsight_team": 0.9},
        {"global_team": 0.3, "greedy_team": 0.3, "ftl_team": 0.1},
    ]
    assert curves.best_rules(lines, "team") == ["greedy_team", "global_team"]  # ftl_team: full feedback; ties: first
    assert curves.best_rules(lines, "all") == ["ftl_team", "global_team"]
    assert baselines.reference("ftl_team", "team") == "full feedback" and baselines.reference("ftl_team") is None


def test_a_partial_feedback_benchmark_reports_the_best_rule_the_gap_and_the_learning_curves(tmp_path: Path) -> None:
    """A tiny run: mappo at the tiny budget, two hand rules and the full-feedback reference, 2 folds. The learner's
    info keeps each fold's deployed update and validation plays; the best rule of each fold is one of the playable
    rules and its answers on that fold are that rule's; ftl_team is marked as a reference; the figure is written."""
    pytest.importorskip("matplotlib")
    path = save_cache(tmp_path / "small.h5", small_cache())
    names = ["mappo", "greedy_team", "global_team", "ftl_team"]
    results = benchmark.benchmark(
        names, [0], [path], tmp_path / "out", protocol="unseen-tasks", feedback="team", folds=2, budget="tiny",
        progress=False,
    )  # fmt: skip
    (per_algorithm,) = results["caches"].values()
    protocol = results["protocol"]
    assert protocol["feedback"] == "team"
    (rules,) = protocol["best_rules"].values()
    assert len(rules) == 2 and set(rules) <= {"greedy_team", "global_team"}
    assert per_algorithm["ftl_team"]["reference"] == "full feedback"
    assert per_algorithm[curves.BEST_RULE]["reference"] is None
    (run,) = per_algorithm["mappo"]["runs"]
    assert [fold["unit"] for fold in run["info"]["folds"]] == ["fold 1", "fold 2"]
    assert all(fold["selected_iteration"] >= 0 and fold["validation"] for fold in run["info"]["folds"])
    stored = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    best = stored["caches"][next(iter(stored["caches"]))][curves.BEST_RULE]["runs"][0]["info"]["folds"]
    assert [fold["rule"] for fold in best] == rules
    text = (tmp_path / "out" / "results.md").read_text(encoding="utf-8")
    assert "reference (full feedback: not playable in this game)" in text
    means = {name: per_algorithm[name]["aggregate"]["reward"]["mean"] for name in ("ftl_team", curves.BEST_RULE)}
    assert ("Share of the gap" in text) == (means["ftl_team"] > means[curves.BEST_RULE])
    assert (tmp_path / "out" / curves.FILE).is_file()
