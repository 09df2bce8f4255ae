"""Tests of ensemble_env.baselines on small hand-built caches whose answers are computed by hand."""

from __future__ import annotations

import dataclasses
import doctest
import re

import numpy as np
import pytest

from ensemble_env import baselines, datasets
from ensemble_env.baselines import (
    BaselineResult,
    best_single,
    cost_format,
    cost_note,
    fixed_decimals,
    format_table,
    greedy_focal_team,
    mean_probability_vote,
    oracle,
    plurality_vote,
    random_team,
    run_all,
    stacking,
)
from ensemble_env.cache import LogitCache
from ensemble_env.game.reward import RewardSettings, question_rewards
from ensemble_env.metrics import focal_diversity

TRAIN, TEST = 0, 1


def one_hot_probs(preds: list[list[int]], n_choices: int, high: float = 0.7) -> np.ndarray:
    """(Q, N, C) probabilities putting ``high`` on each model's predicted choice, the rest evenly."""
    preds_array = np.asarray(preds)
    low = (1.0 - high) / (n_choices - 1)
    probs = np.full((*preds_array.shape, n_choices), low)
    np.put_along_axis(probs, preds_array[..., None], high, axis=2)
    return probs


def make_cache(
    probs: np.ndarray,
    labels: list[int] | np.ndarray,
    split: list[int] | np.ndarray,
    *,
    tasks: list[int] | np.ndarray | None = None,
    task_names: tuple[str, ...] | None = None,
    n_choices: list[int] | np.ndarray | None = None,
    score_kind: str = "prob",
) -> LogitCache:
    probs = np.asarray(probs, dtype=np.float64)
    return LogitCache(
        scores=probs,
        labels=np.asarray(labels),
        models=tuple("abcdefghijklmnop"[: probs.shape[1]]),
        score_kind=score_kind,
        split=np.asarray(split),
        tasks=None if tasks is None else np.asarray(tasks),
        task_names=task_names,
        n_choices=None if n_choices is None else np.asarray(n_choices),
    )


def random_cache(
    n_questions: int = 300, n_models: int = 5, max_choices: int = 5, n_tasks: int = 3, seed: int = 7
) -> LogitCache:
    """A logit cache with skills varying by model and task, mixed choice counts and splits."""
    rng = np.random.default_rng(seed)
    n_choices = rng.integers(2, max_choices + 1, n_questions)
    labels = rng.integers(0, 2, n_questions)  # valid for every choice count
    tasks = rng.integers(0, n_tasks, n_questions)
    skill = rng.uniform(0.0, 2.5, (n_tasks, n_models))
    scores = rng.normal(size=(n_questions, n_models, max_choices))
    scores[np.arange(n_questions), :, labels] += skill[tasks]
    invalid = np.arange(max_choices)[None, None, :] >= n_choices[:, None, None]
    scores = np.where(invalid, 50.0, scores)  # huge scores beyond n_choices must be ignored
    return LogitCache(
        scores=scores,
        labels=labels,
        models=tuple(f"model_{n}" for n in range(n_models)),
        score_kind="logit",
        n_choices=n_choices,
        tasks=tasks,
        task_names=tuple(f"task_number_{t}_long" for t in range(n_tasks)),
        split=rng.choice([TRAIN, TEST], n_questions, p=[0.6, 0.4]),
    )


def split_indices(cache: LogitCache) -> tuple[np.ndarray, np.ndarray]:
    return cache.select("train"), cache.select("test")


# -- votes ---------------------------------------------------------------------------------------


def test_plurality_vote_ties_go_to_the_lowest_choice() -> None:
    preds = [
        [0, 0, 0, 0],  # train question (unused)
        [3, 3, 0, 0],  # tie between 0 and 3 -> 0
        [2, 1, 1, 2],  # tie between 1 and 2 -> 1
        [2, 2, 2, 1],  # clear majority -> 2
        [3, 2, 1, 0],  # four-way tie -> 0
    ]
    cache = make_cache(one_hot_probs(preds, 4), [0, 3, 1, 1, 0], [TRAIN, TEST, TEST, TEST, TEST])
    train, test = split_indices(cache)
    result = plurality_vote(cache, train, test)
    assert result.predictions.tolist() == [0, 1, 2, 0]
    assert result.correct.tolist() == [False, True, False, True]
    assert result.accuracy == 0.5
    assert result.team_size.tolist() == [4.0] * 4
    assert result.questions.tolist() == [1, 2, 3, 4]
    assert result.name == "plurality_vote"


def test_mean_probability_vote_differs_from_plurality_on_a_designed_question() -> None:
    # Two models lean to choice 0 (0.55), one is sure of choice 1: the votes say 0, the mean
    # probabilities (0.3667, 0.6333) say 1.
    probs = np.array(
        [
            [[0.55, 0.45], [0.55, 0.45], [0.0, 1.0]],
            [[0.55, 0.45], [0.55, 0.45], [0.0, 1.0]],
        ]
    )
    cache = make_cache(probs, [1, 1], [TRAIN, TEST])
    train, test = split_indices(cache)
    assert plurality_vote(cache, train, test).predictions.tolist() == [0]
    result = mean_probability_vote(cache, train, test)
    assert result.predictions.tolist() == [1]
    assert result.accuracy == 1.0
    assert result.team_size.tolist() == [3.0]


def test_mean_probability_vote_ties_go_to_the_lowest_choice() -> None:
    probs = np.array([[[0.25, 0.25, 0.25, 0.25], [0.1, 0.4, 0.1, 0.4]]] * 2)  # 1 and 3 tie
    cache = make_cache(probs, [0, 3], [TRAIN, TEST])
    train, test = split_indices(cache)
    assert mean_probability_vote(cache, train, test).predictions.tolist() == [1]


# -- best single ---------------------------------------------------------------------------------


def test_best_single_chooses_by_train_accuracy_not_test() -> None:
    # Model a: right on all 3 train questions, wrong on both test questions; b the reverse.
    labels = [0, 0, 0, 0, 0]
    preds = [[0, 1], [0, 1], [0, 0], [1, 0], [1, 0]]
    cache = make_cache(one_hot_probs(preds, 2), labels, [TRAIN, TRAIN, TRAIN, TEST, TEST])
    train, test = split_indices(cache)
    result = best_single(cache, train, test)
    assert result.info["model"] == "a"
    assert result.predictions.tolist() == [1, 1]
    assert result.accuracy == 0.0
    assert result.team_size.tolist() == [1.0, 1.0]
    assert result.name == "best_single"


def test_best_single_per_task_picks_a_model_per_task() -> None:
    # Task x: a is right on train, b wrong; task y: the reverse. Task z has no train question,
    # so it falls back to the overall best (a and b tie at 2/4 overall: lower index a).
    preds = [
        [0, 1],
        [0, 1],  # x train: a right
        [1, 0],
        [1, 0],  # y train: b right
        [0, 1],  # x test: a right
        [1, 0],  # y test: b right
        [1, 0],  # z test: a wrong
    ]
    cache = make_cache(
        one_hot_probs(preds, 2),
        [0] * 7,
        [TRAIN] * 4 + [TEST] * 3,
        tasks=[0, 0, 1, 1, 0, 1, 2],
        task_names=("x", "y", "z"),
    )
    train, test = split_indices(cache)
    result = best_single(cache, train, test, per_task=True)
    assert result.name == "best_single(per_task)"
    assert result.info["models"] == {"x": "a", "y": "b", "z": "a"}
    assert result.predictions.tolist() == [0, 0, 1]
    assert result.task_accuracy(cache) == {"x": 1.0, "y": 1.0, "z": 0.0}
    overall = best_single(cache, train, test)
    assert overall.info["model"] == "a"
    assert overall.predictions.tolist() == [0, 1, 1]


# -- oracle --------------------------------------------------------------------------------------


def test_oracle_is_right_when_any_model_is_and_else_votes() -> None:
    preds = [
        [0, 0, 0],
        [1, 1, 0],  # label 0: c is right -> 0
        [2, 1, 2],  # label 0: nobody right -> plurality 2
        [1, 2, 3],  # label 0: nobody right, three-way tie -> 1
    ]
    cache = make_cache(one_hot_probs(preds, 4), [0, 0, 0, 0], [TRAIN, TEST, TEST, TEST])
    train, test = split_indices(cache)
    result = oracle(cache, train, test)
    assert result.predictions.tolist() == [0, 2, 1]
    assert result.accuracy == pytest.approx(1 / 3)


def test_oracle_is_at_least_every_other_baseline() -> None:
    cache = random_cache()
    results = run_all(cache, k=3)
    best = next(r for r in results if r.name == "oracle")
    for result in results:
        assert best.accuracy >= result.accuracy, result.name
        assert best.macro_accuracy(cache) >= result.macro_accuracy(cache), result.name
    # Question by question for the rules that answer with some model's argmax.
    train, test = split_indices(cache)
    for result in (
        best_single(cache, train, test, per_task=True),
        plurality_vote(cache, train, test),
        greedy_focal_team(cache, train, test, k=2),
    ):
        assert np.all(best.correct >= result.correct), result.name


# -- random team ---------------------------------------------------------------------------------


def test_random_team_with_all_models_equals_mean_probability_vote() -> None:
    cache = random_cache()
    train, test = split_indices(cache)
    full = random_team(cache, train, test, k=cache.n_models, seed=3)
    mean = mean_probability_vote(cache, train, test)
    np.testing.assert_array_equal(full.predictions, mean.predictions)
    assert full.team_size.tolist() == [float(cache.n_models)] * test.size
    assert full.name == f"random_team(k={cache.n_models})"


def test_random_team_is_reproducible_with_a_seed() -> None:
    cache = random_cache()
    train, test = split_indices(cache)
    first = random_team(cache, train, test, k=2, seed=11)
    again = random_team(cache, train, test, k=2, seed=11)
    other = random_team(cache, train, test, k=2, seed=12)
    np.testing.assert_array_equal(first.predictions, again.predictions)
    assert not np.array_equal(first.predictions, other.predictions)
    assert first.team_size.tolist() == [2.0] * test.size
    assert first.info == {"k": 2, "seed": 11}


def test_random_team_draws_members_uniformly() -> None:
    # Model n always answers n, so a team of one reveals which model was drawn.
    n_models, n_questions = 4, 4000
    preds = np.tile(np.arange(n_models), (n_questions, 1))
    cache = make_cache(
        one_hot_probs(preds.tolist(), n_models),
        np.zeros(n_questions, dtype=int),
        [TRAIN] + [TEST] * (n_questions - 1),
    )
    train, test = split_indices(cache)
    drawn = random_team(cache, train, test, k=1, seed=0).predictions
    counts = np.bincount(drawn, minlength=n_models)
    assert counts.sum() == n_questions - 1
    assert np.all(np.abs(counts - (n_questions - 1) / n_models) < 100)  # ~ 4.5 standard deviations


# -- greedy focal team ---------------------------------------------------------------------------


def greedy_cache() -> LogitCache:
    """Train (label 0 everywhere): a wrong on q3; b wrong on q3 too; c wrong on q0 and q1.

    a and b have train accuracy 3/4, c 1/2. The team starts from a (tie with b: lower index).
    Team {a, b}: both fail only on q3, together: GD on a's failures = 1 - 2*1/(1*2) = 0, on b's
    also 0, focal diversity 0. Team {a, c}: failures never coincide: GD 1 on a's and on c's
    failures, focal diversity 1. So c (the less accurate, complementary model) joins.
    Test: q4 a says 1, b says 1, c says 0 (label 0); q5 a says 1 with 1.0, c says 0 with 0.6.
    """
    probs = np.array(
        [
            [[0.9, 0.1], [0.9, 0.1], [0.1, 0.9]],
            [[0.9, 0.1], [0.9, 0.1], [0.1, 0.9]],
            [[0.9, 0.1], [0.9, 0.1], [0.9, 0.1]],
            [[0.1, 0.9], [0.1, 0.9], [0.9, 0.1]],
            [[0.2, 0.8], [0.2, 0.8], [0.9, 0.1]],
            [[0.0, 1.0], [0.2, 0.8], [0.6, 0.4]],
        ]
    )
    return make_cache(probs, [0] * 6, [TRAIN] * 4 + [TEST] * 2)


def test_greedy_focal_team_adds_the_complementary_model() -> None:
    cache = greedy_cache()
    train, test = split_indices(cache)
    correct = cache.correct[train]
    assert focal_diversity(correct[:, [0, 1]]) == 0.0  # the hand computation above
    assert focal_diversity(correct[:, [0, 2]]) == 1.0
    result = greedy_focal_team(cache, train, test, k=2)
    assert result.info["team"] == ("a", "c")
    assert result.info["focal_diversity"] == 1.0
    assert result.name == "greedy_focal_team(k=2)"
    # Plurality of two: q4 votes (1, 0) tie -> 0; q5 votes (1, 0) tie -> 0.
    assert result.predictions.tolist() == [0, 0]
    assert result.team_size.tolist() == [2.0, 2.0]
    # Mean fusion: q4 (0.2 + 0.9, 0.8 + 0.1) -> 0; q5 (0.0 + 0.6, 1.0 + 0.4) -> 1.
    mean = greedy_focal_team(cache, train, test, k=2, fuse="mean")
    assert mean.predictions.tolist() == [0, 1]
    assert mean.name == "greedy_focal_team(k=2,mean)"
    # k = 1 is the best single model; k = 3 adds the last model.
    assert greedy_focal_team(cache, train, test, k=1).info["team"] == ("a",)
    assert greedy_focal_team(cache, train, test, k=3).info["team"] == ("a", "c", "b")


def test_greedy_focal_team_breaks_ties_by_accuracy_then_index() -> None:
    # Six train questions, label 0. a wrong on q5 (acc 5/6); b wrong on q0-q2 (3/6); c wrong on
    # q0, q1 (4/6); d wrong on q3, q4 (4/6). None of b, c, d fails with a: each pair scores
    # focal diversity 1. Higher accuracy beats b; c and d tie on accuracy: lower index c.
    wrong = {0: [5], 1: [0, 1, 2], 2: [0, 1], 3: [3, 4]}
    preds = np.zeros((7, 4), dtype=int)
    for model, rows in wrong.items():
        preds[rows, model] = 1
    cache = make_cache(one_hot_probs(preds.tolist(), 2), [0] * 7, [TRAIN] * 6 + [TEST])
    train, test = split_indices(cache)
    for model in (1, 2, 3):
        assert focal_diversity(cache.correct[train][:, [0, model]]) == 1.0
    assert greedy_focal_team(cache, train, test, k=2).info["team"] == ("a", "c")


# -- stacking ------------------------------------------------------------------------------------


def follow_cache(wrong_model_confident: bool, seed: int = 0) -> LogitCache:
    """Model a is always right (0.4..0.7 on the label, the rest split evenly); b is either noise
    or always confidently wrong (0.9 on a wrong choice); c is noise. 4 choices, 60 questions."""
    rng = np.random.default_rng(seed)
    n_questions, n_choices = 60, 4
    labels = rng.integers(0, n_choices, n_questions)
    rows = np.arange(n_questions)
    probs = rng.dirichlet(np.ones(n_choices), size=(n_questions, 3))
    sure = rng.uniform(0.4, 0.7, n_questions)
    probs[:, 0, :] = ((1.0 - sure) / (n_choices - 1))[:, None]
    probs[rows, 0, labels] = sure
    if wrong_model_confident:
        wrong_choice = (labels + rng.integers(1, n_choices, n_questions)) % n_choices
        probs[:, 1, :] = 0.1 / (n_choices - 1)
        probs[rows, 1, wrong_choice] = 0.9
    split = np.array([TRAIN] * 40 + [TEST] * 20)
    return make_cache(probs, labels, split)


def test_stacking_learns_to_follow_the_model_that_is_always_right() -> None:
    cache = follow_cache(wrong_model_confident=False)
    train, test = split_indices(cache)
    assert cache.correct[:, 0].all()
    result = stacking(cache, train, test)
    assert result.accuracy == 1.0
    np.testing.assert_array_equal(result.predictions, cache.preds[test, 0])
    assert result.team_size.tolist() == [3.0] * test.size
    assert result.name == "stacking(per_task)"
    assert set(result.info["weights"]) == {"default"}
    assert result.info["weights"]["default"].shape == (6,)
    assert 0 < result.info["iterations"]["default"] < 500  # converged


def test_stacking_beats_plurality_when_a_model_is_confidently_wrong() -> None:
    cache = follow_cache(wrong_model_confident=True)
    train, test = split_indices(cache)
    assert not cache.correct[:, 1].any()
    result = stacking(cache, train, test, per_task=False)
    plurality = plurality_vote(cache, train, test)
    mean = mean_probability_vote(cache, train, test)
    assert result.name == "stacking"
    assert result.accuracy == 1.0
    assert plurality.accuracy < 1.0
    assert mean.accuracy < 1.0
    assert set(result.info["weights"]) == {"all"}


def test_stacking_fits_one_model_per_task() -> None:
    # On task x model a is right and b confidently wrong; on task y the reverse.
    rng = np.random.default_rng(1)
    n_per_task, n_choices = 30, 3
    labels = rng.integers(0, n_choices, 2 * n_per_task)
    wrong = (labels + 1) % n_choices
    probs = np.full((2 * n_per_task, 2, n_choices), 0.05)
    for block, (good, bad) in enumerate(((0, 1), (1, 0))):
        rows = np.arange(block * n_per_task, (block + 1) * n_per_task)
        probs[rows, good, labels[rows]] = 0.6
        probs[rows, good, wrong[rows]] = 0.35
        probs[rows, bad, wrong[rows]] = 0.9
    split = np.tile([TRAIN] * 20 + [TEST] * 10, 2)
    cache = make_cache(probs, labels, split, tasks=np.repeat([0, 1], n_per_task), task_names=("x", "y"))
    train, test = split_indices(cache)
    result = stacking(cache, train, test)
    assert result.accuracy == 1.0
    assert set(result.info["weights"]) == {"x", "y"}
    weights = result.info["weights"]
    # Each task's model puts the larger weight on its reliable model's probability.
    assert weights["x"][0] > weights["x"][1]
    assert weights["y"][1] > weights["y"][0]


def test_stacking_is_deterministic() -> None:
    cache = random_cache()
    train, test = split_indices(cache)
    first, again = stacking(cache, train, test), stacking(cache, train, test)
    np.testing.assert_array_equal(first.predictions, again.predictions)
    for task, weights in first.info["weights"].items():
        np.testing.assert_array_equal(weights, again.info["weights"][task])


# -- variable choice counts ----------------------------------------------------------------------


def test_stacking_never_predicts_a_choice_beyond_n_choices() -> None:
    # Model a always puts the least probability on the label, so stacking learns negative
    # weights: choices beyond n_choices (probability 0) would then score highest if not masked.
    rng = np.random.default_rng(2)
    n_questions, max_choices = 80, 4
    n_choices = np.where(np.arange(n_questions) % 2 == 0, 2, 4)
    labels = rng.integers(0, 2, n_questions)
    probs = np.zeros((n_questions, 2, max_choices))
    for q in range(n_questions):
        valid = n_choices[q]
        probs[q, 0, :valid] = 0.9 / (valid - 1)
        probs[q, 0, labels[q]] = 0.1
        probs[q, 1, :valid] = rng.dirichlet(np.ones(valid))
    split = np.where(np.arange(n_questions) < 60, TRAIN, TEST)
    cache = make_cache(probs, labels, split, n_choices=n_choices)
    train, test = split_indices(cache)
    result = stacking(cache, train, test)
    assert result.info["weights"]["default"][0] < 0  # follows model a inverted
    assert np.all(result.predictions < cache.n_choices[test])
    assert result.accuracy == 1.0


def test_two_choice_questions_never_get_choice_2_or_3() -> None:
    cache = random_cache(max_choices=4)
    two = cache.n_choices == 2
    assert two.sum() > 20
    for result in (*run_all(cache, k=2), random_team(cache, *split_indices(cache), k=1, seed=5)):
        limit = cache.n_choices[result.questions]
        assert np.all(result.predictions < limit), result.name
        assert np.all(result.predictions[two[result.questions]] <= 1), result.name


# -- results, tables, run_all --------------------------------------------------------------------


def test_task_accuracy_and_macro_accuracy() -> None:
    preds = [[0, 0]] * 6
    cache = make_cache(
        one_hot_probs(preds, 2),
        [0, 0, 0, 1, 1, 0],
        [TRAIN, TEST, TEST, TEST, TEST, TRAIN],
        tasks=[2, 0, 0, 0, 1, 2],
        task_names=("x", "y", "z"),
    )
    result = BaselineResult.from_cache("hand", cache, [1, 2, 3, 4], [0, 0, 0, 0], 2)
    # x: questions 1, 2, 3 with labels 0, 0, 1 -> 2/3; y: question 4 with label 1 -> 0; z: none.
    assert result.task_accuracy(cache) == pytest.approx({"x": 2 / 3, "y": 0.0})
    assert list(result.task_accuracy(cache)) == ["x", "y"]
    assert result.accuracy == 0.5
    assert result.macro_accuracy(cache) == pytest.approx(1 / 3)
    assert result.mean_team_size == 2.0
    assert result.n_questions == 4


def test_result_checks_the_cache_and_freezes_its_arrays() -> None:
    cache = greedy_cache()
    result = plurality_vote(cache, *split_indices(cache))
    with pytest.raises(ValueError, match="read-only"):
        result.predictions[0] = 1
    other = make_cache(one_hot_probs([[0, 0, 0]] * 2, 2), [1, 1], [TRAIN, TEST])
    with pytest.raises(ValueError, match="cache"):
        result.task_accuracy(other)
    with pytest.raises(ValueError, match="team_size"):
        BaselineResult("x", np.zeros(2, dtype=int), np.ones(3), np.arange(2), np.zeros(2, dtype=int))
    with pytest.raises(ValueError, match="predictions"):
        BaselineResult("x", np.zeros(2), np.ones(2), np.arange(2), np.zeros(2, dtype=int))


def test_run_all_runs_every_baseline_on_the_named_splits() -> None:
    cache = random_cache()
    results = run_all(cache, k=2, seed=4)
    assert [r.name for r in results] == [
        "best_single",
        "plurality_vote",
        "mean_probability_vote",
        "random_team(k=2)",
        "greedy_focal_team(k=2)",
        "stacking(per_task)",
        "oracle",
    ]
    test = cache.select("test")
    for result in results:
        np.testing.assert_array_equal(result.questions, test)
    train, _ = split_indices(cache)
    np.testing.assert_array_equal(results[3].predictions, random_team(cache, train, test, k=2, seed=4).predictions)
    assert run_all(cache, split="train")[0].questions.tolist() == train.tolist()
    with pytest.raises(ValueError, match="validation"):
        run_all(cache, split="validation")  # no validation question
    with pytest.raises(ValueError, match="k="):
        run_all(cache, k=cache.n_models + 1)


def test_format_table_lists_every_baseline_and_full_task_names_aligned() -> None:
    cache = random_cache()  # tasks of unequal sizes, no costs
    results = run_all(cache)
    table = format_table(cache, results, RewardSettings(0.5))
    summary, per_task = table.split("\n\n")
    lines = summary.splitlines()
    header = ["baseline", "accuracy", "accuracy(all questions)", "reward(alpha=0.5)", "team"]  # no cost column
    assert re.split(r"\s{2,}", lines[0]) == header
    assert len(lines) == 2 + len(results) + 2  # the header, its rule, a row per result, two lines of notes
    assert len({len(line) for line in lines[:2]}) == 1  # the rule spans the header
    for number, (result, line) in enumerate(zip(results, lines[2:], strict=False), start=1):
        cells = line.split()
        assert cells[:2] == [f"b{number}", result.name]
        scores = result.scores(cache, RewardSettings(0.5))
        assert cells[2:] == [
            f"{scores['accuracy']:.4f}",
            f"{result.accuracy:.4f}",
            f"{scores['reward']:.4f}",
            f"{result.mean_team_size:.2f}",
        ]
    assert lines[-2].startswith("accuracy: mean over tasks; accuracy(all questions): over every question;")
    assert lines[-1] == "no cost column: the cache has no costs (every model costs 1, so a team's cost is its size)"
    task_lines = per_task.splitlines()[1:]
    assert task_lines[0].split() == ["task", *(f"b{n}" for n in range(1, len(results) + 1))]
    for name, line in zip(cache.task_names, task_lines[2:], strict=True):
        assert line.startswith(name + " ")  # full names, never cut
    # A result without questions of a task shows "-" there.
    train, test = split_indices(cache)
    only_first = test[cache.tasks[test] == 0]
    partial = plurality_vote(cache, train, only_first)
    rows = format_table(cache, [results[0], partial]).splitlines()
    assert rows[-1].split()[-1] == "-" and rows[-2].split()[-1] == "-"
    with pytest.raises(ValueError, match="results"):
        format_table(cache, [])


def test_format_table_shows_costs_in_fixed_notation_with_their_unit_and_one_accuracy_when_tasks_are_alike() -> None:
    """Tasks of one size: the accuracy over all questions is the macro one, so one column says both; costs are
    never in scientific notation (5.027e+00), and a note says their unit."""
    base = random_cache(n_questions=240, n_tasks=3)
    tasks = np.repeat(np.arange(3), 80)  # every task as large as the others, in both splits
    split = np.tile(np.repeat([TRAIN, TEST], [48, 32]), 3)
    costs = np.array([0.0003, 0.002, 0.0005, 0.001, 0.0004])  # e.g. dollars per question
    cache = dataclasses.replace(base, tasks=tasks, split=split, costs=costs)
    results = run_all(cache)
    lines = format_table(cache, results).split("\n\n")[0].splitlines()
    assert re.split(r"\s{2,}", lines[0]) == ["baseline", "accuracy", "reward(alpha=1)", "team", "cost"]
    oracle = next(line for line in lines if " oracle " in line)
    assert oracle.split()[-1] == f"{costs.sum():.6f}" == "0.004200"  # 3 significant digits of the cheapest model
    assert not re.search(r"\de[-+]\d", "\n".join(lines))
    assert lines[-2].startswith("accuracy: mean over tasks (here also over all questions); reward, team (models), cost")
    assert lines[-1].startswith("cost unit: the cache maker's")
    bbh5 = datasets.load("bbh5")
    assert cost_note(bbh5) == "cost unit: billion active parameters x thousand prompt characters"
    assert cost_format(bbh5).format(39.4687) == "39.47" and fixed_decimals(5.027) == 2


def test_every_baseline_records_its_teams() -> None:
    cache = random_cache()
    train, test = split_indices(cache)
    for result in [*run_all(cache, k=2), best_single(cache, train, test, per_task=True)]:
        assert result.teams.shape == (test.size, cache.n_models), result.name
        np.testing.assert_array_equal(result.teams.sum(axis=1), result.team_size)
    chosen = best_single(cache, train, test, per_task=True)
    np.testing.assert_array_equal(chosen.predictions, cache.preds[test][chosen.teams])  # its one member answers
    greedy = greedy_focal_team(cache, train, test, k=2)
    members = tuple(cache.models[m] for m in np.flatnonzero(greedy.teams[0]))
    assert set(members) == set(greedy.info["team"]) and (greedy.teams == greedy.teams[0]).all()
    with pytest.raises(ValueError, match="team_size"):
        BaselineResult.from_cache("x", cache, test[:2], [0, 0], 2, teams=np.ones((2, cache.n_models), dtype=bool))


def test_scores_use_the_environments_reward_and_costs() -> None:
    cache = random_cache(n_models=4)
    train, test = split_indices(cache)
    result = best_single(cache, train, test, per_task=True)
    for alpha, mode in ((1.0, "on_error"), (2.5, "always")):
        expected = question_rewards(result.correct, np.full(test.size, 0.25), alpha=alpha, size_penalty_mode=mode)
        np.testing.assert_allclose(result.rewards(cache, RewardSettings(alpha, mode)), expected)
        scores = result.scores(cache, RewardSettings(alpha, mode))
        assert scores["reward"] == pytest.approx(expected.mean())
        assert scores["accuracy"] == pytest.approx(result.macro_accuracy(cache))
        assert scores["team_size"] == 1.0 and scores["cost"] == 1.0
        for task, entry in scores["tasks"].items():
            rows = cache.tasks[test] == cache.task_index(task)
            assert entry == pytest.approx(
                {
                    "accuracy": result.correct[rows].mean(),
                    "reward": expected[rows].mean(),
                    "team_size": 1.0,
                    "cost": 1.0,
                }
            )
    # with per-question costs: a question costs its team's costs; the share is of the whole pool's
    costs = np.random.default_rng(1).uniform(0.5, 2.0, (cache.n_questions, 4))
    priced = LogitCache(scores=cache.scores, labels=cache.labels, models=cache.models, score_kind=cache.score_kind,
                        n_choices=cache.n_choices, tasks=cache.tasks, task_names=cache.task_names, split=cache.split,
                        costs=costs)  # fmt: skip
    result = best_single(priced, train, test, per_task=True)
    spent = costs[test][result.teams]
    np.testing.assert_allclose(result.costs(priced), spent)
    expected = question_rewards(result.correct, spent / costs[test].sum(axis=1), alpha=3.0)
    np.testing.assert_allclose(result.rewards(priced, RewardSettings(3.0, use_costs=True)), expected)
    assert result.scores(priced)["cost"] == pytest.approx(spent.mean())
    # a result built without teams has no cost on a priced cache, and no cost share
    bare = BaselineResult.from_cache("policy", priced, test, result.predictions, 1.0)
    assert bare.scores(priced)["cost"] is None
    with pytest.raises(ValueError, match="teams"):
        bare.rewards(priced, RewardSettings(use_costs=True))
    with pytest.raises(ValueError, match="costs"):
        best_single(cache, train, test).rewards(cache, RewardSettings(use_costs=True))
    for alpha in (-0.1, float("nan"), "x"):
        with pytest.raises(ValueError, match="alpha"):
            RewardSettings(alpha)


# -- validation ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "function",
    [
        best_single,
        plurality_vote,
        mean_probability_vote,
        random_team,
        greedy_focal_team,
        stacking,
        oracle,
    ],
)
def test_every_baseline_rejects_empty_or_bad_indices(function) -> None:
    cache = greedy_cache()
    train, test = split_indices(cache)
    with pytest.raises(ValueError, match="train"):
        function(cache, np.array([], dtype=int), test)
    with pytest.raises(ValueError, match="test"):
        function(cache, train, [])
    with pytest.raises(ValueError, match="test"):
        function(cache, train, [cache.n_questions])
    with pytest.raises(ValueError, match="train"):
        function(cache, [0.5], test)
    with pytest.raises(ValueError, match="train"):
        function(cache, np.zeros(cache.n_questions, dtype=bool), test)


def test_boolean_masks_are_accepted() -> None:
    cache = greedy_cache()
    by_mask = plurality_vote(cache, cache.split == TRAIN, cache.split == TEST)
    assert by_mask.questions.tolist() == [4, 5]


@pytest.mark.parametrize("k", [0, 4, -1, 2.5, "2"])
def test_team_baselines_reject_k_outside_one_to_n(k) -> None:
    cache = greedy_cache()
    train, test = split_indices(cache)
    with pytest.raises(ValueError, match="k"):
        random_team(cache, train, test, k=k)
    with pytest.raises(ValueError, match="k"):
        greedy_focal_team(cache, train, test, k=k)


def test_unknown_fuse_and_bad_stacking_options_are_rejected() -> None:
    cache = greedy_cache()
    train, test = split_indices(cache)
    with pytest.raises(ValueError, match="fuse"):
        greedy_focal_team(cache, train, test, fuse="max")
    for l2 in (0.0, -1.0, float("nan"), "big"):
        with pytest.raises(ValueError, match="l2"):
            stacking(cache, train, test, l2=l2)
    with pytest.raises(ValueError, match="max_iter"):
        stacking(cache, train, test, max_iter=0)


# -- module hygiene --------------------------------------------------------------------


def test_module_doctest_passes() -> None:
    failures, attempted = doctest.testmod(baselines.simple, optionflags=doctest.ELLIPSIS)
    assert attempted > 0
    assert failures == 0


def test_logit_and_prob_caches_give_the_same_answers() -> None:
    cache = greedy_cache()
    logits = np.log(np.clip(np.asarray(cache.scores), 1e-9, None))
    as_logits = make_cache(logits, cache.labels, cache.split, score_kind="logit")
    for function in (plurality_vote, mean_probability_vote, oracle, stacking):
        expected = function(cache, *split_indices(cache)).predictions
        np.testing.assert_array_equal(function(as_logits, *split_indices(as_logits)).predictions, expected)
