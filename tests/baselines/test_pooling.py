"""Team estimates that pool across tasks (ensemble_env.baselines.pooling): the shrinkage by hand, the strength chosen
by cross-validation on the fitting questions only, and a simulation where the true best team per task is known."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import flip_labels

from ensemble_env.baselines import pooling, routing
from ensemble_env.baselines.registry import Setting, lookup
from ensemble_env.game.reward import DEFAULT_REWARD
from ensemble_env.synthetic import make_cache

N_MODELS, N_TASKS = 5, 8
#: models of different strengths whose accuracy varies a little from task to task (so pooling has something to
#: share and something to lose)
ACCURACY = np.clip(
    np.array([0.42, 0.48, 0.52, 0.58, 0.62])[:, None] + np.random.default_rng(123).normal(0, 0.05, (5, 8)), 0.05, 0.95
)


def _rewards(cache):
    questions = np.arange(cache.n_questions)
    teams = routing.all_teams(cache.n_models)
    correct = routing.team_correct(cache, questions, teams)
    share = routing.team_shares(cache, questions, teams, DEFAULT_REWARD)
    return DEFAULT_REWARD.rewards(correct, share), share.mean(axis=1), np.asarray(cache.tasks)


def test_shrinkage_and_ties_by_hand() -> None:
    rewards = np.array([[1.0, 1.0, 1.0, -1.0], [1.0, 1.0, -1.0, -1.0]])  # team 0 better on task 1
    tasks = np.array([0, 0, 1, 1])
    np.testing.assert_allclose(pooling.shrunk_means(rewards, tasks, 3, 0.0), [[1, 1], [0, -1], [0.5, 0]])  # task 2
    np.testing.assert_allclose(pooling.shrunk_means(rewards, tasks, 3, 1e12), [[0.5, 0.0]] * 3, atol=1e-9)
    # equal estimates: the smaller share (a smaller team) wins, then the earlier team
    assert pooling.pick_teams(np.array([[1.0, 1.0, 0.0]]), np.array([0.6, 0.2, 0.1])).tolist() == [1]
    assert pooling.pick_teams(np.array([[1.0, 1.0]]), np.array([0.2, 0.2])).tolist() == [0]
    strength, scores = pooling.choose_strength(rewards, tasks, 2, np.array([0.2, 0.4]), grid=(0.0, 10.0), folds=2)
    assert set(scores) == {0.0, 10.0} and strength in scores


def test_the_pooled_estimate_finds_the_true_best_team_more_often_on_small_samples() -> None:
    """A synthetic pool whose true best team per task is known (measured on 20,000 questions per task): with 100
    fitting questions per task the pooled estimator picks it more often than the per-task mean, and with 2,000 no
    less often."""
    truth, _, tasks = _rewards(
        make_cache(n_models=N_MODELS, n_questions=N_TASKS * 20000, n_tasks=N_TASKS, accuracy=ACCURACY, seed=999,
                   test_fraction=0.0)
    )  # fmt: skip
    best = pooling.shrunk_means(truth, tasks, N_TASKS, 0.0).argmax(axis=1)
    hits = {}
    for per_task in (100, 2000):
        hits[per_task] = {"mean": 0, "pooled": 0}
        for seed in range(8):
            cache = make_cache(n_models=N_MODELS, n_questions=N_TASKS * per_task, n_tasks=N_TASKS,
                               accuracy=ACCURACY, seed=seed, test_fraction=0.0)  # fmt: skip
            rewards, shares, fit_tasks = _rewards(cache)
            for estimator in pooling.ESTIMATORS:
                fit = pooling.estimate_teams(cache, rewards, fit_tasks, shares, estimator=estimator, seed=seed)
                hits[per_task][estimator] += int((fit.chosen == best).sum())
    assert hits[100]["pooled"] > hits[100]["mean"], hits
    assert hits[2000]["pooled"] >= hits[2000]["mean"], hits


def test_the_pooled_static_team_never_reads_the_scored_labels() -> None:
    cache = make_cache(n_models=4, n_questions=800, n_tasks=4, accuracy=[0.5, 0.55, 0.6, 0.65], seed=3)
    split = np.asarray(cache.split).copy()
    split[np.flatnonzero(split == 0)[::4]] = 2  # a validation split
    cache = dataclasses.replace(cache, split=split)
    train, validation, test = (cache.select(name) for name in ("train", "validation", "test"))
    flipped = flip_labels(cache, test)
    entry = lookup("static_team(pooled)")
    first, second = (entry.run(Setting(c, train, test, validation=validation)) for c in (cache, flipped))
    assert first.info["teams"] == second.info["teams"] and first.info["strength"] == second.info["strength"]
    assert first.info["estimator"] == "pooled" and first.info["fitted_on"] == "train+val"
    assert set(first.info["cv_reward"]) == set(pooling.STRENGTH_GRID)


def test_bad_options_are_refused() -> None:
    cache = make_cache(n_models=3, n_questions=60, n_tasks=2, seed=0)
    train, test = cache.select("train"), cache.select("test")
    with pytest.raises(ValueError, match="estimator"):
        routing.static_team(cache, train, test, estimator="median")
    with pytest.raises(ValueError, match="criterion='reward'"):
        routing.static_team(cache, train, test, estimator="pooled", criterion="accuracy")
    with pytest.raises(ValueError, match="strength"):
        routing.static_team(cache, train, test, estimator="pooled", strength=-1.0)
