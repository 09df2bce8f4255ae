"""Team estimates that pool across tasks (ensemble_env.baselines.pooling): the shrinkage by hand, the strength chosen
by cross-validation on the fitting questions only, and a simulation where the true best team per task is known."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from testing.caches import flip_labels

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
            for estimator in ("mean", "pooled"):
                fit = pooling.estimate_teams(cache, rewards, fit_tasks, shares, estimator=estimator, seed=seed)
                hits[per_task][estimator] += int((fit.chosen == best).sum())
    assert hits[100]["pooled"] > hits[100]["mean"], hits
    assert hits[2000]["pooled"] >= hits[2000]["mean"], hits


def _with_validation():
    """A synthetic cache of 4 tasks with a validation split (a quarter of train), and its three splits."""
    cache = make_cache(n_models=4, n_questions=800, n_tasks=4, accuracy=[0.5, 0.55, 0.6, 0.65], seed=3)
    split = np.asarray(cache.split).copy()
    split[np.flatnonzero(split == 0)[::4]] = 2
    cache = dataclasses.replace(cache, split=split)
    return (cache, *(cache.select(name) for name in ("train", "validation", "test")))


def test_the_pooled_static_team_never_reads_the_scored_labels() -> None:
    cache, train, validation, test = _with_validation()
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


# -- the certified choice ------------------------------------------------------------------------------------------


def _bernoulli_rewards(p_right: np.ndarray, shares: np.ndarray, n: int, rng: np.random.Generator) -> tuple:
    """(K, n) rewards, correctness and shares of K arms right with probabilities ``p_right``, one task."""
    correct = rng.random((p_right.size, n)) < p_right[:, None]
    share = np.repeat(shares[:, None], n, axis=1)
    return DEFAULT_REWARD.rewards(correct, share), correct, share


def _switch_rate(p_right: list[float], n: int, trials: int, seed: int) -> float:
    """How often the certified choice replaces the single model (arm 0, size 1) by the team (arm 1, size 3)."""
    rng = np.random.default_rng(seed)
    switched = 0
    for trial in range(trials):
        rewards, correct, share = _bernoulli_rewards(np.array(p_right), np.array([0.2, 0.6]), n, rng)
        chosen, _, _ = pooling.certified_teams(
            rewards, correct, share, np.zeros(n, int), 1, np.array([1, 3]), seed=trial
        )  # fmt: skip
        switched += int(chosen[0] == 1)
    return switched / trials


def test_a_team_truly_better_is_certified_once_the_sample_is_large_enough() -> None:
    """The team is right 75% of the time, the single model 50% (+0.34 reward per question, size penalty included):
    on 20 questions the gain is often not certified (the single model is kept), on 200 it almost always is."""
    small, large = _switch_rate([0.5, 0.75], 20, 100, 0), _switch_rate([0.5, 0.75], 200, 100, 1)
    assert small < 0.7 and large >= 0.98, (small, large)


def test_with_no_team_truly_better_the_single_model_is_kept_at_the_stated_rate() -> None:
    """The team is right more often (66.2% against 60%) but pays a larger share when wrong: its expected reward is
    exactly the single model's (+0.12). The per-task mean switches whenever the team wins in sample (about half the
    trials); the certified choice about 1 - level of them (0.05 nominal; measured 7.75% of 400 trials on 120
    questions: the percentile bootstrap on a selected winner is a little optimistic, as the module says)."""
    equal = 1.72 / 2.6  # p - (1 - p) * 1.6 = 0.6 - 0.4 * 1.2
    rate = _switch_rate([0.6, equal], 120, 400, 2)
    assert rate <= 0.10, rate
    rng = np.random.default_rng(2)
    samples = (_bernoulli_rewards(np.array([0.6, equal]), np.array([0.2, 0.6]), 120, rng) for _ in range(400))
    wins = sum(int(rewards[1].mean() > rewards[0].mean()) for rewards, _, _ in samples)
    assert wins / 400 > 0.4, wins
    assert _switch_rate([0.6, 0.6], 120, 200, 3) <= 0.01  # a team truly worse (by 0.16 per question): rarely


def test_the_certified_choice_breaks_ties_as_the_other_estimators() -> None:
    # two single models with equal rewards: the smaller share is kept, then the earlier; a team tied with them in
    # reward loses on its larger share (equal accuracy)
    rewards = np.array([[1.0, -1.2, 1.0, -1.2]] * 3)
    correct = rewards > 0
    share = np.array([[0.3] * 4, [0.2] * 4, [0.4] * 4])
    chosen, estimates, info = pooling.certified_teams(rewards, correct, share, np.zeros(4, int), 1, np.array([1, 1, 2]))
    assert chosen.tolist() == [1] and info["certified"] == [0.0]
    assert pooling.pick_teams(estimates, share.mean(axis=1)).tolist() == [1]  # the estimates' best is the choice
    share[0] = 0.2  # now singles 0 and 1 tie on every key: the earlier
    assert pooling.certified_teams(rewards, correct, share, np.zeros(4, int), 1, np.array([1, 1, 2]))[0].tolist() == [0]


def test_the_certified_static_team_never_reads_the_scored_labels_and_is_seeded() -> None:
    cache, train, validation, test = _with_validation()
    entry = lookup("static_team(certified)")
    flipped = flip_labels(cache, test)
    first, second = (entry.run(Setting(c, train, test, validation=validation)) for c in (cache, flipped))
    assert first.info["teams"] == second.info["teams"] and first.info["lower_bound"] == second.info["lower_bound"]
    assert first.info["estimator"] == "certified" and first.info["level"] == pooling.CERTIFIED_LEVEL
    again = routing.static_team(cache, np.concatenate([train, validation]), test, estimator="certified")
    assert again.info["lower_bound"] == first.info["lower_bound"]
    # a team keeps a single model unless certified; the certified tasks are the teams of more than one model
    for task, team in first.info["teams"].items():
        assert (len(team) > 1) == bool(first.info["certified"][task])


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda r, t: pooling.shrunk_means(r, t, 2, -1.0), "strength"),
        (lambda r, t: pooling.shrunk_means(r, t, 2, float("nan")), "strength"),
        (lambda r, t: pooling.shrunk_means(r, t, 2, True), "strength"),
        (lambda r, t: pooling.shrunk_means(r * np.nan, t, 2, 1.0), "finite"),
        (lambda r, t: pooling.shrunk_means(r, t + 5, 2, 1.0), "ids in"),
        (lambda r, t: pooling.choose_strength(r, t, 2, np.ones(2), folds=0), "folds"),
        (lambda r, t: pooling.choose_strength(r, t, 2, np.ones(2), folds=1), "folds"),
        (lambda r, t: pooling.choose_strength(r, t, 2, np.ones(2), folds=True), "folds"),
        (lambda r, t: pooling.choose_strength(r, t, 2, np.ones(2), grid=(1.0, -2.0)), "grid"),
        (lambda r, t: pooling.choose_strength(r, t, 2, np.ones(2), grid=()), "grid"),
        (lambda r, t: pooling.choose_strength(r[:, :1], t[:1], 2, np.ones(2)), "too few"),
        (lambda r, t: pooling.certified_teams(r, r > 0, r * 0, t, 2, np.array([1, 2]), level=1.0), "level"),
        (lambda r, t: pooling.certified_teams(r, r > 0, r * 0, t, 2, np.array([1, 2]), level="0.9"), "level"),
        (lambda r, t: pooling.certified_teams(r, r > 0, r * 0, t, 2, np.array([2, 2])), "single"),
        (lambda r, t: pooling.certified_teams(r, r > 0, r * 0, t, 2, np.array([1, 2]), resamples=0), "resamples"),
    ],
)
def test_bad_arguments_of_the_estimators_are_refused(call, match) -> None:
    rewards = np.array([[1.0, 1.0, -1.0, -1.0], [1.0, -1.0, 1.0, -1.0]])
    with pytest.raises(ValueError, match=match):
        call(rewards, np.array([0, 0, 1, 1]))
