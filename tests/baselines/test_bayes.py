"""Tests of ensemble_env.baselines.bayes, the Bayesian rule under team feedback: the Gaussian update against hand
computations and the batch formula, what observing one team moves, the flat-prior limit, the constants chosen on
the training tasks (recomputed independently; the held-out labels never read), determinism, the checks, the
registry and the leave-one-task-out table."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from testing.caches import flip_labels

from ensemble_env.baselines import BaselineResult, bayes, online, partial, registry, routing, unseen
from ensemble_env.baselines.bayes import RIDGE, TeamPrior
from ensemble_env.baselines.outcomes import prior_rank, team_outcomes
from ensemble_env.cache import LogitCache, synthetic
from ensemble_env.game.reward import RewardSettings

REWARD = RewardSettings(alpha=1.0)
SMALL: dict[str, Any] = {"scales": (0.5, 2.0), "shrinkages": (0.0, 1.0)}


def skill_cache(seed: int = 0, n_tasks: int = 6, per_task: int = 60) -> LogitCache:
    """Three models whose accuracies vary independently from task to task, ``per_task`` questions a task."""
    accuracy = np.random.default_rng(seed).uniform(0.35, 0.9, size=(3, n_tasks))
    return synthetic.make_cache(
        n_models=3, n_questions=per_task * n_tasks, n_tasks=n_tasks, accuracy=accuracy, seed=seed
    )


def batch_posterior(prior: TeamPrior, covariance: np.ndarray, teams: np.ndarray, played, rewards) -> np.ndarray:
    """The posterior mean from every revealed question at once: y stacked, H its rows, noise block-diagonal."""
    contains = partial.contained_teams(teams)
    rows = [np.flatnonzero(contains[j]) for j in played]
    if not rows:
        return prior.mean.copy()
    design = np.concatenate([np.eye(prior.n_teams)[r] for r in rows])
    observed = np.concatenate([rewards[r, s] for s, r in enumerate(rows)])
    noise = np.zeros((design.shape[0], design.shape[0]))
    start = 0
    for r in rows:
        noise[start : start + r.size, start : start + r.size] = prior.noise[np.ix_(r, r)]
        start += r.size
    precision = np.linalg.inv(covariance) + design.T @ np.linalg.solve(noise, design)
    linear = np.linalg.solve(covariance, prior.mean) + design.T @ np.linalg.solve(noise, observed)
    return np.linalg.solve(precision, linear)


# -- the update by hand --------------------------------------------------------------------------------------------


def test_one_team_by_hand() -> None:
    """One team, prior N(0.2, s^2 v), noise variance r: after rewards summing to S over n questions the posterior
    mean is (0.2 / (s^2 v) + S / r) / (1 / (s^2 v) + n / r); v carries the ridge (1 + RIDGE)."""
    prior = TeamPrior(np.array([0.2]), np.array([[0.5]]), np.array([[2.0]]))
    rewards = np.array([[1.0, -1.0, 1.0, 1.0]])
    means = bayes.posterior_means(rewards, np.ones((1, 1), bool), [0, 0, 0, 0], prior, scale=2.0, shrinkage=0.3)
    v = 4.0 * 0.5 * (1 + RIDGE)
    expected = [0.2, 0.2, (0.2 / v + 1.0 / 2.0) / (1 / v + 1 / 2.0), (0.2 / v + 0.0 / 2.0) / (1 / v + 2 / 2.0)]
    assert means[:, 0] == pytest.approx(expected, rel=1e-12)  # the game's timing: question t reads up to t - 2


def test_two_correlated_teams_by_hand() -> None:
    """Teams a and b, prior means 0, variances 1 (v = 1 + RIDGE with the ridge), covariance 0.5, noise variance 1.
    Observing a once at +1 gives mu_a = v / (v + 1) and mu_b = 0.5 / (v + 1) (the regression of b on a's
    observation), with no question of b."""
    teams = np.array([[1, 0], [0, 1]], bool)
    prior = TeamPrior(np.zeros(2), np.array([[1.0, 0.5], [0.5, 1.0]]), np.eye(2))
    means = bayes.posterior_means(np.array([[1.0], [7.0]]), teams, [0], prior, scale=1.0, shrinkage=0.0, delay=0)
    assert means.shape == (1, 2) and means[0].tolist() == [0.0, 0.0]
    means = bayes.posterior_means(np.array([[1.0, 0.0], [7.0, 0.0]]), teams, [0, 0], prior, scale=1.0,
                                  shrinkage=0.0, delay=0)  # fmt: skip
    v = 1.0 + RIDGE
    assert means[1] == pytest.approx([v / (v + 1), 0.5 / (v + 1)], rel=1e-12)  # b's reward (7) never read


@pytest.mark.parametrize("delay", [0, 1, 3])
def test_the_update_is_the_batch_formula_with_correlated_noise(delay: int) -> None:
    """Three teams (a, b, ab) with correlated prior and correlated noise: each row of posterior_means is the batch
    posterior of the questions revealed by then (playing ab reveals all three, a or b one)."""
    rng = np.random.default_rng(0)
    teams = routing.all_teams(2)
    factor = rng.normal(size=(3, 3))
    noise = factor @ factor.T + 0.5 * np.eye(3)
    between = np.array([[0.3, 0.05, 0.2], [0.05, 0.2, 0.1], [0.2, 0.1, 0.25]])
    prior = TeamPrior(np.array([0.1, -0.2, 0.05]), between, noise)
    played = np.array([0, 2, 1, 2, 0, 0, 1, 2])
    rewards = rng.normal(size=(3, played.size))
    means = bayes.posterior_means(rewards, teams, played, prior, scale=1.5, shrinkage=0.4, delay=delay)
    covariance = 1.5**2 * prior.covariance(0.4)
    for t in range(played.size):
        revealed = max(0, t - delay)
        expected = batch_posterior(prior, covariance, teams, played[:revealed], rewards[:, :revealed])
        assert means[t] == pytest.approx(expected, rel=1e-9, abs=1e-12), t


# -- what one observation moves -------------------------------------------------------------------------------------


def test_observing_a_team_moves_the_teams_that_share_its_members() -> None:
    """Fitted on tasks where each model's skill varies on its own, the prior correlates a team with the teams that
    share its members. Observing {a} alone moves every team by its prior covariance with {a} (the regression on a:
    no more), so the teams holding a move more than those that do not, and a team of zero covariance not at all."""
    cache = skill_cache(seed=1, n_tasks=40, per_task=40)
    out = team_outcomes(cache, reward=REWARD)
    tasks = cache.tasks
    prior = bayes.fit_prior([out.rewards[:, tasks == t] for t in range(cache.n_tasks)])
    teams = routing.all_teams(3)
    a = 0
    covariance = prior.covariance(0.0)
    rewards = np.full((7, 4), -2.0)  # {a} wrong four times
    means = bayes.posterior_means(rewards, teams, [a] * 4, prior, scale=1.0, shrinkage=0.0, delay=0)
    shift = means[-1] - prior.mean
    assert shift[a] < 0
    assert shift == pytest.approx(covariance[:, a] / covariance[a, a] * shift[a], rel=1e-9)
    holding = teams[:, 0]
    correlation = covariance[:, a] / np.sqrt(np.diag(covariance) * covariance[a, a])
    assert correlation[holding & (np.arange(7) != a)].min() > np.abs(correlation[~holding]).max()
    assert np.abs(shift[holding & (np.arange(7) != a)]).min() > 10 * np.abs(shift[~holding]).max()
    # without the correlation (lambda = 1, S diagonal) only {a} moves
    means = bayes.posterior_means(rewards, teams, [a] * 4, prior, scale=1.0, shrinkage=1.0, delay=0)
    moved = means[-1] - prior.mean
    assert moved[a] < 0 and np.count_nonzero(np.abs(moved) > 1e-12) == 1


def test_a_flat_prior_gives_each_teams_observed_mean() -> None:
    """s -> infinity: with independent noise (R diagonal) the posterior mean of every revealed team is its observed
    mean S_k / n_k (partial_statistics), whichever teams were played; with correlated noise too when one team was
    played throughout (every question then has the same design)."""
    rng = np.random.default_rng(2)
    teams = routing.all_teams(3)
    cache = skill_cache(seed=2)
    out = team_outcomes(cache, reward=REWARD)
    fitted = bayes.fit_prior([out.rewards[:, cache.tasks == t] for t in range(cache.n_tasks)])
    independent = TeamPrior(fitted.mean, fitted.between, np.diag(np.diag(fitted.noise)))
    rewards = out.rewards[:, cache.tasks == 0][:, :40]
    played = rng.integers(0, 7, size=40)
    counts, sums = partial.partial_statistics(rewards, teams, played, delay=1)
    means = bayes.posterior_means(rewards, teams, played, independent, scale=1e5, shrinkage=0.5)
    seen = counts > 0
    assert means[seen] == pytest.approx(sums[seen] / counts[seen], abs=1e-6)
    full = np.full(40, 6)  # all three models: every team revealed on every question
    counts, sums = partial.partial_statistics(rewards, teams, full, delay=1)
    means = bayes.posterior_means(rewards, teams, full, fitted, scale=1e5, shrinkage=0.5)
    assert means[2:] == pytest.approx(sums[2:] / counts[2:], abs=1e-6)


# -- the rule on the protocol ---------------------------------------------------------------------------------------


def test_the_constants_are_the_best_on_the_training_streams() -> None:
    """Every setting's training score recomputed independently: each training task streamed with fit_prior on the
    other training tasks, bayes_choices, the rank of the other tasks; the best wins (ties to the first); the held-out
    task is then played with the prior of every training task."""
    cache = skill_cache(seed=3, n_tasks=5)
    train, test = cache.select(tasks=["task_0", "task_1", "task_2", "task_3"]), cache.select(tasks=["task_4"])
    result = bayes.bayes_team(cache, train, test, reward=REWARD, **SMALL)
    out = team_outcomes(cache, reward=REWARD)
    teams = routing.all_teams(3)
    streams = [out.rewards[:, cache.tasks == t] for t in range(4)]
    scores = {}
    for s in SMALL["scales"]:
        for shrinkage in SMALL["shrinkages"]:
            means = []
            for j, stream in enumerate(streams):
                others = [cache.tasks == t for t in range(4) if t != j]
                pooled = np.any(others, axis=0)
                rank = prior_rank(out.rewards[:, pooled], out.correct[:, pooled], out.share[:, pooled])
                prior = bayes.fit_prior([out.rewards[:, mask] for mask in others])
                chosen = bayes.bayes_choices(stream, teams, prior, rank, scale=s, shrinkage=shrinkage)
                means.append(stream[chosen, np.arange(chosen.size)].mean())
            scores[f"s={s:g},lambda={shrinkage:g}"] = float(np.mean(means))
    assert result.info["grid_scores"] == pytest.approx(scores, abs=1e-12)
    best = max(round(value, 9) for value in scores.values())
    first = next(key for key, value in scores.items() if round(value, 9) == best)
    assert f"s={result.info['prior_scale']:g},lambda={result.info['shrinkage']:g}" == first
    training = cache.tasks < 4
    rank = prior_rank(out.rewards[:, training], out.correct[:, training], out.share[:, training])
    prior = bayes.fit_prior(streams)
    expected = bayes.bayes_choices(out.rewards[:, test], teams, prior, rank, scale=result.info["prior_scale"],
                                   shrinkage=result.info["shrinkage"])  # fmt: skip
    assert result.teams is not None and np.array_equal(result.teams, teams[expected])
    assert result.info["first_team"] == "+".join(cache.models[m] for m in np.flatnonzero(teams[expected[0]]))


def test_bayes_team_is_deterministic_and_reads_no_held_out_label_early() -> None:
    """The same call twice, the same teams and info; flipping every held-out label changes neither the constants
    nor the first two teams; flipping the labels from question t on changes no choice up to question t + 1."""
    cache = skill_cache(seed=4, n_tasks=5)
    train, test = cache.select(tasks=["task_0", "task_1", "task_2", "task_3"]), cache.select(tasks=["task_4"])
    first, again = (bayes.bayes_team(cache, train, test, reward=REWARD, **SMALL) for _ in range(2))
    assert first.teams is not None and again.teams is not None
    assert np.array_equal(first.teams, again.teams) and first.info == again.info
    assert np.unique(first.teams, axis=0).shape[0] > 1  # it does change teams
    flipped = bayes.bayes_team(flip_labels(cache, test), train, test, reward=REWARD, **SMALL)
    keys = ("prior_scale", "shrinkage", "grid_scores", "first_team", "training_tasks")
    assert {k: first.info[k] for k in keys} == {k: flipped.info[k] for k in keys}
    assert flipped.teams is not None and np.array_equal(flipped.teams[:2], first.teams[:2])
    for t in (5, 20):
        later = bayes.bayes_team(flip_labels(cache, test[t:]), train, test, reward=REWARD, **SMALL)
        assert later.teams is not None and np.array_equal(later.teams[: t + 2], first.teams[: t + 2])


def test_the_registry_runs_it_as_a_partial_feedback_rule() -> None:
    cache = skill_cache(seed=5, n_tasks=4)
    train, test = cache.select(tasks=["task_0", "task_1", "task_2"]), cache.select(tasks=["task_3"])
    entry = registry.lookup("bayes_team")
    assert entry.feedback == "team" and entry.unseen_tasks and not entry.by_default and entry.enumerates_teams
    assert registry.reference("bayes_team", "team") is None and registry.reference("bayes_team", "bandit")
    assert "bayes_team" in registry.PARTIAL_DEFAULT_BASELINES
    by_registry: BaselineResult = entry.run(registry.Setting(cache, train, test, reward=REWARD))
    direct = bayes.bayes_team(cache, train, test, reward=REWARD)
    assert by_registry.name == "bayes_team" and np.array_equal(by_registry.predictions, direct.predictions)
    assert by_registry.info["feedback"] == "team" and by_registry.info["delay"] == online.GAME_DELAY
    assert len(by_registry.info["grid_scores"]) == len(bayes.PRIOR_SCALE_GRID) * len(bayes.SHRINKAGE_GRID)


def test_leave_one_task_out_shows_it_under_team_feedback() -> None:
    cache = skill_cache(seed=6, n_tasks=4)
    results = unseen.leave_one_task_out(cache, names=["greedy_team", "bayes_team"], feedback="team")
    assert [len(folds) for folds in results.values()] == [4, 4]
    table = unseen.format_summary(unseen.summarize(cache, results), feedback="team")
    assert "bayes_team " in table


# -- checks ---------------------------------------------------------------------------------------------------------

BAD = [
    ({"scales": (0.0,)}, r"scales\[0\] must be a number in \(0, 1e\+12\], got 0.0"),
    ({"scales": "1"}, "scales must be a list of values, got the string '1'"),
    ({"scales": (float("nan"),)}, r"scales\[0\] must be a finite number"),
    ({"shrinkages": (1.5,)}, r"shrinkages\[0\] must be a finite number in \[0, 1\], got 1.5"),
    ({"shrinkages": (True,)}, r"shrinkages\[0\] must be a number .*got True"),
    ({"shrinkages": ()}, "shrinkages is empty"),
]


@pytest.mark.parametrize(("options", "message"), BAD, ids=[str(options) for options, _ in BAD])
def test_bad_constants_are_refused(options: dict[str, object], message: str) -> None:
    cache = skill_cache(seed=7, n_tasks=4)
    train, test = cache.select(tasks=["task_0", "task_1", "task_2"]), cache.select(tasks=["task_3"])
    with pytest.raises(ValueError, match=message):
        bayes.bayes_team(cache, train, test, **options)  # type: ignore[arg-type]


def test_the_protocol_and_the_arrays_are_checked() -> None:
    cache = skill_cache(seed=7, n_tasks=4)
    two, test = cache.select(tasks=["task_0", "task_1"]), cache.select(tasks=["task_3"])
    with pytest.raises(ValueError, match=r"give at least three training tasks .*got 2"):
        bayes.bayes_team(cache, two, test)
    with pytest.raises(ValueError, match=r"task 'task_3' is both a held-out task \(test\) and a training task"):
        bayes.bayes_team(cache, cache.select(tasks=["task_0", "task_1", "task_3"]), test)
    teams = routing.all_teams(2)
    prior = TeamPrior(np.zeros(3), np.eye(3), np.eye(3))
    with pytest.raises(ValueError, match=r"played must hold one team row in 0\.\.2"):
        bayes.posterior_means(np.zeros((3, 2)), teams, [0, 3], prior, scale=1.0, shrinkage=0.0)
    with pytest.raises(ValueError, match=r"rewards must have shape \(3, B\)"):
        bayes.posterior_means(np.zeros((2, 2)), teams, [0, 1], prior, scale=1.0, shrinkage=0.0)
    with pytest.raises(ValueError, match=r"rank must rank the 3 arms"):
        bayes.bayes_choices(np.zeros((3, 2)), teams, prior, [0, 0, 1], scale=1.0, shrinkage=0.0)
    with pytest.raises(ValueError, match=r"scale must be a number in \(0, "):
        bayes.bayes_choices(np.zeros((3, 2)), teams, prior, [0, 1, 2], scale=0.0, shrinkage=0.0)
    with pytest.raises(ValueError, match=r"delay must be an integer"):
        bayes.bayes_choices(np.zeros((3, 2)), teams, prior, [0, 1, 2], scale=1.0, shrinkage=0.0, delay=-1)
    with pytest.raises(ValueError, match="prior must be a TeamPrior"):
        bayes.bayes_choices(np.zeros((3, 2)), teams, "prior", [0, 1, 2], scale=1.0, shrinkage=0.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="noise must be positive definite"):
        TeamPrior(np.zeros(2), np.eye(2), np.ones((2, 2)))
    with pytest.raises(ValueError, match="between must be positive semi-definite"):
        TeamPrior(np.zeros(2), np.array([[1.0, 2.0], [2.0, 1.0]]), np.eye(2))
    with pytest.raises(ValueError, match="between must be symmetric"):
        TeamPrior(np.zeros(2), np.array([[1.0, 0.5], [0.0, 1.0]]), np.eye(2))
    with pytest.raises(ValueError, match=r"noise must have shape \(2, 2\)"):
        TeamPrior(np.zeros(2), np.eye(2), np.eye(3))
    with pytest.raises(ValueError, match="streams must hold the rewards of two tasks at least"):
        bayes.fit_prior([np.zeros((3, 5))])
    with pytest.raises(ValueError, match=r"streams\[1\] must be \(3, T\)"):
        bayes.fit_prior([np.zeros((3, 5)), np.zeros((2, 5))])
