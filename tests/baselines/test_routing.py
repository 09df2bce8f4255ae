"""Tests of ensemble_env.baselines.routing: the fixed team per task and the per-question router, on caches whose answer
is known by construction."""

from __future__ import annotations

import dataclasses
import doctest
import itertools

import numpy as np
import pytest

from ensemble_env import baselines
from ensemble_env.baselines import routing
from ensemble_env.baselines.routing import all_teams, fit_router, router, static_team, team_correct
from ensemble_env.cache import LogitCache
from ensemble_env.game.reward import RewardSettings, question_rewards

TRAIN, TEST, VALIDATION = 0, 1, 2


def confident_probs(preds: np.ndarray, confidence: np.ndarray, n_choices: int = 2) -> np.ndarray:
    """(Q, N, C): model n puts ``confidence[n]`` on its predicted choice, the rest evenly on the others."""
    preds = np.asarray(preds)
    high = np.broadcast_to(np.asarray(confidence, dtype=np.float64), preds.shape)
    probs = np.repeat(((1.0 - high) / (n_choices - 1))[..., None], n_choices, axis=2)
    np.put_along_axis(probs, preds[..., None], high[..., None], axis=2)
    return probs


def shrinking_team_cache() -> LogitCache:
    """One task, 2 choices (label 0), 3 models with confidences a 0.9 > b 0.8 > c 0.7, so a pair answers as its
    more confident member and the trio as its majority.

    Train (10 questions): a wrong on q0, q1 (accuracy 0.8); b wrong on q2..q5 (0.6); c wrong on q0, q6..q8
    (0.6). The trio is wrong only on q0 (a and c): accuracy 0.9. Mean rewards at alpha (share |S|/3):
    {a}: 0.8 - 0.2 (1 + alpha/3); trio: 0.9 - 0.1 (1 + alpha). The trio wins for alpha < 6, {a} above;
    every pair answers like one of its members at a larger share, so it never wins. Test: 4 questions.
    """
    wrong = {0: [0, 1], 1: [2, 3, 4, 5], 2: [0, 6, 7, 8]}
    preds = np.zeros((14, 3), dtype=int)
    for model, questions in wrong.items():
        preds[questions, model] = 1
    preds[10:, :] = [[0, 1, 1], [1, 0, 0], [0, 0, 1], [1, 1, 0]]
    return LogitCache(
        scores=confident_probs(preds, [0.9, 0.8, 0.7]),
        labels=np.zeros(14, dtype=int),
        models=("a", "b", "c"),
        score_kind="prob",
        split=np.array([TRAIN] * 10 + [TEST] * 4),
    )


def feature_cache(n_questions: int = 900, seed: int = 0, with_features: bool = True) -> LogitCache:
    """Two tasks, 3 models, 4 choices; a feature x decides who is right: a when x > 0, b when x < 0
    (each 95%), c at random (40%). Per task no fixed team beats ~55%; a router reading x reaches ~95%.
    Column 1 of the features is noise. Splits: 60% train, 20% validation, 20% test."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n_questions)
    labels = rng.integers(0, 4, n_questions)
    right = np.stack(
        [
            np.where(x > 0, rng.random(n_questions) < 0.95, rng.random(n_questions) < 0.1),
            np.where(x < 0, rng.random(n_questions) < 0.95, rng.random(n_questions) < 0.1),
            rng.random(n_questions) < 0.4,
        ],
        axis=1,
    )
    wrong_answer = (labels[:, None] + rng.integers(1, 4, (n_questions, 3))) % 4
    preds = np.where(right, labels[:, None], wrong_answer)
    probs = confident_probs(preds, rng.uniform(0.5, 0.9, (n_questions, 3)), n_choices=4)
    return LogitCache(
        scores=probs,
        labels=labels,
        models=("a", "b", "c"),
        score_kind="prob",
        tasks=rng.integers(0, 2, n_questions),
        task_names=("first", "second"),
        split=rng.choice([TRAIN, VALIDATION, TEST], n_questions, p=[0.6, 0.2, 0.2]),
        features=np.stack([x, rng.normal(size=n_questions)], axis=1) if with_features else None,
    )


def task_cache(seed: int = 3) -> LogitCache:
    """Three tasks, 4 models, each task with a different best model (90% right there, 30% elsewhere)."""
    rng = np.random.default_rng(seed)
    n_questions = 600
    tasks = rng.integers(0, 3, n_questions)
    labels = rng.integers(0, 3, n_questions)
    skill = np.full((3, 4), 0.3)
    skill[[0, 1, 2], [2, 0, 3]] = 0.9
    right = rng.random((n_questions, 4)) < skill[tasks]
    preds = np.where(right, labels[:, None], (labels[:, None] + rng.integers(1, 3, (n_questions, 4))) % 3)
    return LogitCache(
        scores=confident_probs(preds, rng.uniform(0.4, 0.9, (n_questions, 4)), n_choices=3),
        labels=labels,
        models=("m0", "m1", "m2", "m3"),
        score_kind="prob",
        tasks=tasks,
        task_names=("t0", "t1", "t2"),
        split=rng.choice([TRAIN, TEST], n_questions, p=[0.7, 0.3]),
    )


def split(cache: LogitCache) -> tuple[np.ndarray, np.ndarray]:
    return cache.select("train"), cache.select("test")


def with_labels(cache: LogitCache, labels: np.ndarray) -> LogitCache:
    return dataclasses.replace(cache, labels=labels)


# -- teams ---------------------------------------------------------------------------------------


def test_all_teams_lists_every_nonempty_team_once_by_size() -> None:
    teams = all_teams(4)
    assert teams.shape == (15, 4)
    assert len({tuple(row) for row in teams}) == 15
    assert teams.any(axis=1).all()
    assert np.all(np.diff(teams.sum(axis=1)) >= 0)
    assert all_teams(12).shape == (4095, 12)
    for bad in (0, 13):
        with pytest.raises(ValueError, match="12 models"):
            all_teams(bad)


def test_team_correct_of_the_whole_pool_is_the_mean_probability_vote() -> None:
    cache = feature_cache()
    train, test = split(cache)
    correct = team_correct(cache, test, all_teams(3))
    np.testing.assert_array_equal(correct[-1], baselines.mean_probability_vote(cache, train, test).correct)
    np.testing.assert_array_equal(correct[:3].T, cache.correct[test])  # single models: their own argmax


# -- static team ---------------------------------------------------------------------------------


def test_static_team_picks_the_reward_best_team_and_shrinks_as_alpha_grows() -> None:
    cache = shrinking_team_cache()
    train, test = split(cache)
    low, high = (
        static_team(cache, train, test, reward=RewardSettings(1.0)),
        static_team(cache, train, test, reward=RewardSettings(10.0)),
    )
    assert low.info["teams"] == {"default": ("a", "b", "c")} and high.info["teams"] == {"default": ("a",)}
    # the trio's train reward at alpha = 1: 0.9 - 0.1 * 2 = 0.7; {a}'s at alpha = 10: 0.8 - 0.2 * (1 + 10/3)
    assert low.info["train_reward"]["default"] == pytest.approx(0.7)
    assert high.info["train_reward"]["default"] == pytest.approx(0.8 - 0.2 * 13 / 3)
    # by accuracy, the trio whatever alpha; the test answers are the trio's majority
    chosen = static_team(cache, train, test, reward=RewardSettings(10.0), criterion="accuracy")
    assert chosen.name == "static_team_acc" and chosen.info["teams"] == {"default": ("a", "b", "c")}
    assert chosen.predictions.tolist() == [1, 0, 0, 1]
    assert chosen.team_size.tolist() == [3.0] * 4


def test_static_team_matches_a_brute_force_search() -> None:
    cache = task_cache()
    train, test = split(cache)
    for alpha, mode in ((0.0, "on_error"), (1.0, "on_error"), (3.0, "always")):
        result = static_team(cache, train, test, reward=RewardSettings(alpha, mode))
        for task, name in enumerate(cache.task_names):
            rows = train[cache.tasks[train] == task]
            best, best_key = None, None
            for size in range(1, 5):
                for team in itertools.combinations(range(4), size):
                    total = cache.probs[rows][:, list(team)].astype(np.float64).sum(axis=1)
                    right = total.argmax(axis=1) == cache.labels[rows]
                    reward = question_rewards(right, np.full(rows.size, size / 4), alpha=alpha, size_penalty_mode=mode)
                    key = (-round(reward.mean(), 10), -round(right.mean(), 10), size)
                    if best_key is None or key < best_key:
                        best, best_key = team, key
            assert result.info["teams"][name] == tuple(cache.models[m] for m in best), (alpha, mode, name)


def test_larger_alpha_never_raises_the_penalised_quantity() -> None:
    # The mean reward is 2 acc - 1 - alpha * mean(share * error) ("on_error") or 2 acc - 1 - alpha * share
    # ("always"): the optimum's mean(share * error), resp. share, can only fall as alpha grows.
    cache = task_cache(seed=5)
    train, test = split(cache)
    for mode in ("on_error", "always"):
        previous = np.full(cache.n_tasks, np.inf)
        for alpha in (0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 32.0):
            result = static_team(cache, train, test, reward=RewardSettings(alpha, mode))
            quantity = np.empty(cache.n_tasks)
            for task, name in enumerate(cache.task_names):
                rows = train[cache.tasks[train] == task]
                members = [cache.model_index(model) for model in result.info["teams"][name]]
                total = cache.probs[rows][:, members].astype(np.float64).sum(axis=1)
                error = total.argmax(axis=1) != cache.labels[rows]
                quantity[task] = len(members) / 4 * (error.mean() if mode == "on_error" else 1.0)
            assert np.all(quantity <= previous + 1e-12), (mode, alpha)
            previous = quantity
        assert result.mean_team_size == 1.0  # alpha = 32: a single model per task


def test_static_team_by_cost_share_avoids_the_expensive_model() -> None:
    cache = task_cache()
    one_task = np.zeros(cache.n_questions, dtype=int)
    plain = LogitCache(scores=cache.scores, labels=cache.labels, models=cache.models, score_kind="prob",
                       tasks=one_task, split=cache.split)  # fmt: skip
    train, test = split(plain)
    (favourite,) = static_team(plain, train, test, reward=RewardSettings(50.0)).info["teams"][
        "default"
    ]  # one model at alpha 50
    costs = np.where(np.array(cache.models) == favourite, 10.0, 1.0)
    priced = LogitCache(scores=cache.scores, labels=cache.labels, models=cache.models, score_kind="prob",
                        tasks=one_task, split=cache.split, costs=costs)  # fmt: skip
    assert static_team(priced, train, test, reward=RewardSettings(50.0)).info["teams"]["default"] == (
        favourite,
    )  # shares by size
    by_cost = static_team(priced, train, test, reward=RewardSettings(50.0, use_costs=True))
    assert favourite not in by_cost.info["teams"]["default"]
    np.testing.assert_allclose(by_cost.costs(priced), by_cost.teams.sum(axis=1))  # cheap members cost 1 each
    expected = question_rewards(by_cost.correct, by_cost.costs(priced) / costs.sum(), alpha=50.0)
    np.testing.assert_allclose(by_cost.rewards(priced, RewardSettings(50.0, use_costs=True)), expected)


def test_static_team_rejects_bad_input() -> None:
    cache = shrinking_team_cache()
    train, test = split(cache)
    for bad, message in (
        ({"alpha": -1.0}, "alpha"),
        ({"alpha": float("inf")}, "alpha"),
        ({"size_penalty_mode": "sometimes"}, "size_penalty_mode"),
        ({"use_costs": "yes"}, "use_costs"),
    ):
        with pytest.raises(ValueError, match=message):
            RewardSettings(**bad)
    with pytest.raises(ValueError, match="criterion"):
        static_team(cache, train, test, criterion="speed")
    with pytest.raises(ValueError, match="costs"):
        static_team(cache, train, test, reward=RewardSettings(use_costs=True))
    wide = LogitCache(
        scores=np.full((2, 13, 2), 0.5), labels=np.zeros(2, dtype=int), models=tuple(f"m{n}" for n in range(13)),
        score_kind="prob", split=np.array([TRAIN, TEST]),
    )  # fmt: skip
    with pytest.raises(ValueError, match="12 models"):
        static_team(wide, [0], [1])


# -- router --------------------------------------------------------------------------------------


def test_router_reads_the_feature_and_beats_every_team_per_task() -> None:
    cache = feature_cache()
    train, test = split(cache)
    validation = cache.select("validation")
    per_task = static_team(cache, train, test)
    routed = router(cache, train, test, validation=validation)
    assert routed.name == "router" and routed.info["inputs"] == "features"
    assert routed.info["l2_source"] == "validation" and routed.info["l2"] in routing.ROUTER_L2_GRID
    assert routed.accuracy > 0.85 and per_task.accuracy < 0.65
    assert routed.rewards(cache).mean() > per_task.rewards(cache).mean() + 0.4
    # a answers where x > 0, b where x < 0 (mostly alone: a single right model beats any larger team)
    x = cache.features[test, 0]
    a_alone, b_alone = np.array([True, False, False]), np.array([False, True, False])
    assert np.mean((routed.teams == a_alone).all(axis=1)[x > 0.5]) > 0.9
    assert np.mean((routed.teams == b_alone).all(axis=1)[x < -0.5]) > 0.9


def test_router_without_features_falls_back_to_task_one_hots() -> None:
    cache = task_cache()
    train, test = split(cache)
    assert cache.features is None
    routed = router(cache, train, test, l2=1e-6)
    assert routed.info["inputs"] == "tasks" and routed.info["l2_source"] == "given"
    for task in range(cache.n_tasks):
        rows = cache.tasks[test] == task
        assert len({tuple(team) for team in routed.teams[rows]}) == 1  # one team per task
    # with almost no penalty it predicts each team's train accuracy per task: the static team's choice
    np.testing.assert_array_equal(routed.teams, static_team(cache, train, test).teams)
    assert router(cache, train, test).info["l2_source"] == "default"
    with pytest.raises(ValueError, match="features"):
        router(cache, train, test, inputs="features")


def test_router_team_shrinks_as_alpha_grows() -> None:
    # One task, no features: the router predicts each team's train accuracy (0.9 for the trio, 0.8 for a),
    # so like static_team it takes the trio below alpha = 6 and a alone above.
    cache = shrinking_team_cache()
    train, test = split(cache)
    fitted = fit_router(cache, train, l2=1e-6)
    trio = router(cache, train, test, reward=RewardSettings(1.0), fitted=fitted)
    alone = router(cache, train, test, reward=RewardSettings(10.0), fitted=fitted)
    assert trio.teams.all() and trio.predictions.tolist() == [1, 0, 0, 1]
    assert (alone.teams == [True, False, False]).all() and alone.predictions.tolist() == [0, 1, 0, 1]


def test_router_chooses_teams_by_expected_reward_at_alpha() -> None:
    cache = feature_cache(seed=1)
    train, test = split(cache)
    fitted = fit_router(cache, train, validation=cache.select("validation"))
    # the expected reward of the chosen team is the best one, computed with the environment's reward
    probability = fitted.predict(cache, test)
    share = fitted.teams.sum(axis=1) / 3
    right = question_rewards(np.ones(share.size, dtype=bool), share, alpha=1.0)
    wrong = question_rewards(np.zeros(share.size, dtype=bool), share, alpha=1.0)
    expected = probability * right + (1 - probability) * wrong
    chosen = router(cache, train, test, reward=RewardSettings(1.0), fitted=fitted).teams
    picked = np.array([np.flatnonzero((fitted.teams == team).all(axis=1))[0] for team in chosen])
    np.testing.assert_allclose(expected[np.arange(test.size), picked], expected.max(axis=1))


def test_router_penalty_is_chosen_on_validation_and_refuses_overlaps() -> None:
    cache = feature_cache(seed=2)
    train, test = split(cache)
    validation = cache.select("validation")
    fitted = fit_router(cache, train, validation=validation)
    assert set(fitted.validation_log_loss) == set(routing.ROUTER_L2_GRID)
    assert fitted.l2 == min(fitted.validation_log_loss, key=fitted.validation_log_loss.get)
    with pytest.raises(ValueError, match="overlap"):
        router(cache, train, test, validation=test)
    with pytest.raises(ValueError, match="l2"):
        fit_router(cache, train, l2=0.0)
    with pytest.raises(ValueError, match="inputs"):
        fit_router(cache, train, inputs="words")


def test_selection_never_reads_test_labels() -> None:
    cache = feature_cache(seed=4)
    train, test = split(cache)
    validation = cache.select("validation")
    labels = cache.labels.copy()
    rng = np.random.default_rng(0)
    labels[test] = rng.permutation(labels[test])
    labels[test[:40]] = (labels[test[:40]] + 1) % 4  # and some changed outright
    shuffled = with_labels(cache, labels)
    for run in (
        lambda c: static_team(c, train, test),
        lambda c: static_team(c, train, test, criterion="accuracy"),
        lambda c: router(c, train, test, validation=validation),
        lambda c: router(c, train, test, inputs="tasks", validation=validation),
    ):
        before, after = run(cache), run(shuffled)
        np.testing.assert_array_equal(before.teams, after.teams)
        np.testing.assert_array_equal(before.predictions, after.predictions)
    # the same check is sensitive: changing train labels does change the router's teams
    labels = cache.labels.copy()
    labels[train] = rng.permutation(labels[train])
    moved = router(with_labels(cache, labels), train, test, validation=validation)
    assert not np.array_equal(moved.teams, router(cache, train, test, validation=validation).teams)


def test_module_doctest_passes() -> None:
    failures, attempted = doctest.testmod(routing, optionflags=doctest.ELLIPSIS)
    assert attempted > 0 and failures == 0
