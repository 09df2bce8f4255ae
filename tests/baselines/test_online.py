"""Tests of ensemble_env.baselines.online, the unseen-task protocol: every online baseline against a stream computed
by hand, tie-breaking, the sliding window's forgetting, UCB's first choices, the constants chosen on training tasks.
That no choice reads a label it should not (labels flipped after the choice, held-out labels flipped) is checked for
these rules and the partial-feedback ones together, in test_partial.py."""

from __future__ import annotations

import numpy as np
import pytest
from testing.rules import four_task_cache

from ensemble_env import datasets
from ensemble_env.baselines import BaselineResult, comparison, online, registry, routing, unseen
from ensemble_env.baselines.outcomes import prior_rank, reward_range, team_outcomes
from ensemble_env.cache import LogitCache
from ensemble_env.game.reward import RewardSettings

REWARD = RewardSettings(alpha=1.0)
A, B, AB = 0, 1, 2  # the team rows of routing.all_teams(2): {a}, {b}, {a, b}

# -- the hand-built cache --------------------------------------------------------------------------------------
# Two models, a (confidence 0.9) and b (0.8), two choices, label 0: the pair {a, b} answers as a (more confident).
# Rewards at alpha 1 (N = 2): right +1; a single model wrong -1 - 1/2 = -1.5; the pair wrong -2.
#
# Task "seen" (questions 0-9, the training task): b right on 0-5, a right on 6-9.
#   summed rewards: b 6 x (+1) + 4 x (-1.5) = 0; a 4 - 6 x 1.5 = -5; the pair 4 - 6 x 2 = -8 (means 0, -0.5, -0.8)
#   prior rank: b (0), a (1), pair (2): ties go to b, and the empty history plays b.
# Task "unseen" (questions 10-19, held out): b right on the first 4, a right on the last 6.
#   rewards a: -1.5 x 4, +1 x 6; b: +1 x 4, -1.5 x 6; the pair: a's, with -2 for -1.5.
SEEN_B = [1, 1, 1, 1, 1, 1, 0, 0, 0, 0]
SEEN_A = [0, 0, 0, 0, 0, 0, 1, 1, 1, 1]
UNSEEN_A = [0, 0, 0, 0, 1, 1, 1, 1, 1, 1]
UNSEEN_B = [1, 1, 1, 1, 0, 0, 0, 0, 0, 0]


def hand_cache() -> LogitCache:
    right = np.array([SEEN_A + UNSEEN_A, SEEN_B + UNSEEN_B]).T.astype(bool)  # (20, 2)
    confidence = np.array([0.9, 0.8])
    probs = np.empty((20, 2, 2))
    probs[:, :, 0] = np.where(right, confidence, 1.0 - confidence)  # label 0
    probs[:, :, 1] = 1.0 - probs[:, :, 0]
    return LogitCache(
        scores=probs,
        labels=np.zeros(20, dtype=int),
        models=("a", "b"),
        score_kind="prob",
        tasks=np.array([0] * 10 + [1] * 10),
        task_names=("seen", "unseen"),
    )


TRAIN, TEST = np.arange(10), np.arange(10, 20)


def members(result: BaselineResult) -> np.ndarray:
    """(Q, N) bool: the team of every answered question."""
    assert result.teams is not None
    return result.teams


def rows_of(result: BaselineResult) -> list[int]:
    """The team row (all_teams(2) order) of every answered question."""
    teams = routing.all_teams(2)
    return [int(np.flatnonzero((teams == member).all(axis=1))[0]) for member in members(result)]


def test_the_hand_cache_is_as_described() -> None:
    cache = hand_cache()
    outcomes = team_outcomes(cache, reward=REWARD)
    assert outcomes.correct[AB].tolist() == outcomes.correct[A].tolist()  # the pair answers as a
    assert outcomes.rewards[:, :10].mean(axis=1).round(6).tolist() == [-0.5, 0.0, -0.8]
    seen = (outcomes.rewards[:, :10], outcomes.correct[:, :10], outcomes.share[:, :10])
    assert prior_rank(*seen).tolist() == [1, 0, 2]  # b, then a, then the pair
    assert reward_range(REWARD) == (-2.0, 1.0)


# -- follow the leader ----------------------------------------------------------------------------------------


def test_ftl_team_by_hand() -> None:
    """Sums of the questions answered before each question (a, b): t0 (0, 0) tie -> b; t1..t4 b leads; t5 (-5, 2.5)
    b; t6 (-4, 1) b; t7 (-3, -0.5) b; t8 (-2, -2) tie -> b (the prior rank, though a has the lower index); t9 (-1,
    -3.5) a. That is ``ftl_team(no_delay)``. In the game's timing (``ftl_team``, delay 1) question t reads the sums
    before question t - 1: t9 reads t8's tie and plays b, so b answers all ten."""
    cache = hand_cache()
    ahead = online.UNSEEN_BASELINES["ftl_team(no_delay)"](cache, TRAIN, TEST, reward=REWARD)
    assert rows_of(ahead) == [B] * 9 + [A]
    expected = [1, 1, 1, 1, -1.5, -1.5, -1.5, -1.5, -1.5, 1]
    assert ahead.rewards(cache, REWARD).tolist() == expected
    assert ahead.rewards(cache, REWARD).mean() == pytest.approx(-0.25)
    assert ahead.name == "ftl_team(no_delay)" and ahead.info["delay"] == 0
    assert ahead.info["first_team"] == "b" and ahead.info["switches"] == {"unseen": 1}
    assert ahead.info["held_out_tasks"] == ("unseen",) and ahead.info["training_tasks"] == ("seen",)
    assert ahead.info["teams_used"] == {"b": 9, "a": 1}
    result = online.ftl_team(cache, TRAIN, TEST, reward=REWARD)
    assert result.name == "ftl_team" and result.info["delay"] == online.GAME_DELAY == 1
    assert rows_of(result) == [B] * 10 and result.info["switches"] == {"unseen": 0}
    assert result.rewards(cache, REWARD).mean() == pytest.approx(-0.5)
    single = online.ftl_single(cache, TRAIN, TEST, reward=REWARD)  # the pair never leads: the same stream
    assert rows_of(single) == rows_of(result) and single.name == "ftl_single"
    with pytest.raises(ValueError, match=r"delay must be an integer in \[0, 2,147,483,647\], got -1"):
        online.ftl_team(cache, TRAIN, TEST, delay=-1)
    assert online.ftl_team(cache, TRAIN, TEST, delay=2).name == "ftl_team(delay=2)"


def test_ftl_ties_go_to_the_prior_rank_not_the_index() -> None:
    rewards = np.array([[1.0, -1.0, 1.0], [1.0, -1.0, 1.0], [-1.0, 1.0, 1.0]])
    assert online.ftl_choices(rewards, np.array([1, 0, 2])).tolist() == [1, 1, 1]
    assert online.ftl_choices(rewards, np.array([0, 1, 2])).tolist() == [0, 0, 0]
    # rank 2, 1, 0: t0 empty -> arm 2; t1 arms 0 and 1 lead, 1 ranks better; t2 every sum is 0 -> arm 2
    assert online.ftl_choices(rewards, np.array([2, 1, 0])).tolist() == [2, 1, 2]
    # sums equal up to round-off tie: at t2, 0.1 + 0.2 (0.30000000000000004 in floats) against 0.3
    close = np.array([[0.1, 0.2, 0.0, 0.0], [0.3, 0.0, 0.0, 0.0]])
    assert np.cumsum(close[0])[1] > 0.3
    assert online.ftl_choices(close, np.array([1, 0])).tolist() == [1, 1, 1, 1]
    assert online.ftl_choices(close, np.array([0, 1])).tolist() == [0, 1, 0, 0]


def test_the_sliding_window_forgets() -> None:
    """W = 2 (hand): t0-t3 b (+1 each); t4 window {2, 3}: b 2, a -3 -> b (-1.5); t5 {3, 4}: -0.5 each, tie -> b
    (-1.5); t6 {4, 5}: a 2, b -3 -> a; a to the end (+1 x 4): mean 0.5, against -0.25 with the whole history."""
    cache = hand_cache()
    result = online.ftl_team(cache, TRAIN, TEST, reward=REWARD, window=2, delay=0)
    assert rows_of(result) == [B] * 6 + [A] * 4
    assert result.rewards(cache, REWARD).mean() == pytest.approx(0.5)
    assert result.name == "ftl_team(window=2, delay=0)" and result.info["window"] == 2
    # the game's timing: question t reads the window before question t - 1: t6 {3, 4} ties -> b, t7 {4, 5} -> a
    timed = online.ftl_team(cache, TRAIN, TEST, reward=REWARD, window=2)
    assert rows_of(timed) == [B] * 7 + [A] * 3 and timed.name == "ftl_team(window=2)"
    assert timed.rewards(cache, REWARD).mean() == pytest.approx(0.25)
    # a window as long as the stream is the whole history
    assert rows_of(online.ftl_team(cache, TRAIN, TEST, reward=REWARD, window=10, delay=0)) == [B] * 9 + [A]
    # the window's sums read only the last W questions: a change before them does not move the choice
    rewards = team_outcomes(cache, TEST, REWARD).rewards
    changed = rewards.copy()
    changed[A, 0] = 100.0
    assert online.ftl_choices(changed, np.array([1, 0, 2]), window=2)[3:].tolist() == [B, B, B, A, A, A, A]


def test_the_window_is_chosen_on_the_training_task() -> None:
    """Streaming "seen" (prior b first) in the game's timing (question t reads the window before t - 1): the whole
    history keeps b to the end (6 x +1, 4 x -1.5: mean 0); W = 2 plays b to t8 (t8 reads {5, 6}: tie -> b), then a
    at t9: 6 - 4.5 + 1 = 2.5, mean 0.25."""
    cache = hand_cache()
    result = online.ftl_team_window(cache, TRAIN, TEST, reward=REWARD, windows=(2, 10))
    assert result.info["window_scores"] == {2: pytest.approx(0.25), 10: pytest.approx(0.0)}
    assert result.info["window"] == 2 and result.name == "ftl_team(window)"
    assert rows_of(result) == [B] * 7 + [A] * 3
    # ties go to the larger window
    assert online.ftl_team_window(cache, TRAIN, TEST, reward=REWARD, windows=(10, 20)).info["window"] == 20
    with pytest.raises(ValueError, match="windows"):
        online.ftl_team_window(cache, TRAIN, TEST, windows=(0,))
    with pytest.raises(ValueError, match="empty"):
        online.ftl_team_window(cache, TRAIN, TEST, windows=())


# -- the fixed teams ----------------------------------------------------------------------------------------------


def test_global_and_hindsight_teams_by_hand() -> None:
    cache = hand_cache()
    for function in (online.global_team, online.global_single):
        result = function(cache, TRAIN, TEST, reward=REWARD)
        assert rows_of(result) == [B] * 10
        assert result.info["team"] == "b" and result.info["train_reward"] == pytest.approx(0.0)
        assert result.info["train_accuracy"] == pytest.approx(0.6)
        assert result.rewards(cache, REWARD).mean() == pytest.approx(-0.5)  # 4 - 9
    # hindsight on "unseen": a 6 - 6 = 0, b 4 - 9 = -5, the pair 6 - 8 = -2: a
    hindsight = online.hindsight_team(cache, TRAIN, TEST, reward=REWARD)
    assert rows_of(hindsight) == [A] * 10 and hindsight.info["teams"] == {"unseen": "a"}
    assert hindsight.rewards(cache, REWARD).mean() == pytest.approx(0.0) and hindsight.info["uses_test_labels"]


def test_global_team_is_static_teams_fallback_and_hindsight_its_oracle() -> None:
    """The global team is the team routing.static_team gives a task without train questions; the hindsight team is
    static_team fitted on the test questions themselves (oracle_team(test)); both on the same keys."""
    cache = four_task_cache(n_questions=320)
    for alpha in (0.0, 1.0, 4.0):
        reward = RewardSettings(alpha=alpha)
        train, test = cache.select(tasks=["task_0", "task_1"]), cache.select(tasks=["task_2", "task_3"])
        fixed = online.global_team(cache, train, test, reward=reward)
        assert np.array_equal(members(fixed), members(routing.static_team(cache, train, test, reward=reward)))
        hindsight = online.hindsight_team(cache, train, test, reward=reward)
        assert np.array_equal(members(hindsight), members(routing.static_team(cache, test, test, reward=reward)))
        assert np.array_equal(hindsight.predictions, routing.static_team(cache, test, test, reward=reward).predictions)


# -- the bandit -----------------------------------------------------------------------------------------------------


def test_ucb_first_choices_by_hand() -> None:
    """Normalised by (-2, 1): right 1, a single model wrong 1/6, the pair wrong 0; priors b 2/3, a 1/2, pair 0.4.

    c = 0, n0 = 1: b's smoothed mean stays above a's 1/2 (after four rights and six wrongs: (2/3 + 4 + 1) / 11 =
    0.52), so b plays throughout. c = 2: t0 has no bonus (ln 1 = 0): b, right (mean 5/6, 2 plays); t1 (2 ln 2 =
    1.386): a 1/2 + 2 sqrt(1.386) = 2.85 > b 5/6 + 2 sqrt(0.693) = 2.50: a, wrong (mean 1/3); t2 (2 ln 3 = 2.197):
    the pair 0.4 + 2 sqrt(2.197) = 3.36 > b 0.83 + 2.10 > a 0.33 + 2.10: the pair. That is without delay; in the
    game's timing (the protocol's) every step reads one outcome less: t0 and t1 have no bonus and no outcome (b, b),
    t2 is the undelayed t1 (a)."""
    cache = hand_cache()
    greedy = online.ucb_team(cache, TRAIN, TEST, reward=REWARD, explorations=(0.0,), pseudo_counts=(1.0,))
    assert rows_of(greedy) == [B] * 10 and greedy.name == "ucb_team"
    assert greedy.info["exploration"] == 0.0 and greedy.info["pseudo_count"] == 1.0
    assert greedy.info["feedback"] == "bandit"
    exploring = online.ucb_team(cache, TRAIN, TEST, reward=REWARD, explorations=(2.0,), pseudo_counts=(1.0,))
    assert rows_of(exploring)[:3] == [B, B, A] and exploring.info["delay"] == 1
    outcomes = team_outcomes(cache, TEST, REWARD)
    prior = team_outcomes(cache, TRAIN, REWARD).rewards.mean(axis=1)
    rank = np.array([1, 0, 2])
    direct = online.ucb_choices(outcomes.rewards, prior, rank, exploration=2.0, pseudo_count=1.0, delay=1)
    assert direct.tolist() == rows_of(exploring)
    undelayed = online.ucb_choices(outcomes.rewards, prior, rank, exploration=2.0, pseudo_count=1.0)
    assert undelayed.tolist()[:3] == [B, A, AB]


def test_ucb_reads_only_the_played_teams_reward() -> None:
    rng = np.random.default_rng(1)
    rewards = np.where(rng.random((7, 60)) < 0.5, 1.0, -1.5)
    prior, rank = rng.normal(size=7) * 0.1, np.argsort(np.argsort(-rng.normal(size=7)))
    chosen = online.ucb_choices(rewards, prior, rank, exploration=0.3, pseudo_count=2.0)
    hidden = rewards.copy()
    unplayed = np.ones(rewards.shape, dtype=bool)
    unplayed[chosen, np.arange(60)] = False
    hidden[unplayed] = rng.choice([1.0, -1.5, -2.0], size=int(unplayed.sum()))
    assert np.array_equal(online.ucb_choices(hidden, prior, rank, exploration=0.3, pseudo_count=2.0), chosen)
    assert len(set(chosen.tolist())) > 1  # it does explore
    with pytest.raises(ValueError, match=r"pseudo_count must be a number in \(0, 1e\+06\], got 0.0"):
        online.ucb_choices(rewards, prior, rank, exploration=0.3, pseudo_count=0.0)


def test_ucb_constants_are_the_best_on_the_training_streams() -> None:
    cache = four_task_cache(n_questions=320)
    train, test = cache.select(tasks=["task_0", "task_1", "task_2"]), cache.select(tasks=["task_3"])
    explorations, counts = (0.0, 0.1, 0.5), (1.0, 8.0)
    result = online.ucb_team(cache, train, test, reward=REWARD, explorations=explorations, pseudo_counts=counts)
    outcomes = team_outcomes(cache, train, REWARD)
    rank = prior_rank(outcomes.rewards, outcomes.correct, outcomes.share)
    prior = outcomes.rewards.mean(axis=1)
    scores = {}
    for c in explorations:
        for n0 in counts:
            means = []
            for task in range(3):
                columns = np.flatnonzero(cache.tasks[outcomes.questions] == task)
                stream = outcomes.rewards[:, columns]
                chosen = online.ucb_choices(stream, prior, rank, c, n0, reward_range(REWARD), delay=1)
                means.append(stream[chosen, np.arange(columns.size)].mean())
            scores[f"c={c:g},n0={n0:g}"] = float(np.mean(means))
    assert result.info["grid_scores"] == pytest.approx(scores)
    best = max(scores.values())
    first = next(key for key, value in scores.items() if round(value, 9) == round(best, 9))
    assert f"c={result.info['exploration']:g},n0={result.info['pseudo_count']:g}" == first


# -- checks, the registry, the protocol on bbh5 ---------------------------------------------------------------------


def test_a_held_out_task_may_not_be_a_training_task() -> None:
    cache = four_task_cache(n_questions=320)
    train, test = cache.select(tasks=["task_0", "task_1"]), cache.select(tasks=["task_1", "task_2"])
    for name in online.UNSEEN_BASELINES:
        if name == "mean_probability_vote":
            continue
        with pytest.raises(ValueError, match=r"task 'task_1' is both a held-out task \(test\) and a training task"):
            online.UNSEEN_BASELINES[name](cache, train, test)
    validation = cache.select(tasks=["task_3"])
    with pytest.raises(ValueError, match=r"'task_3' is both a held-out task \(test\) and a training task \(valid"):
        online.ftl_team(cache, train, cache.select(tasks=["task_3"]), validation=validation)
    with pytest.raises(ValueError, match="test is empty"):
        online.ftl_team(cache, train, np.array([], dtype=int))
    with pytest.raises(ValueError, match="twice"):
        online.ftl_team(cache, train, np.repeat(cache.select(tasks=["task_2"]), 2))
    outcomes = team_outcomes(cache, reward=RewardSettings(alpha=2.0))
    with pytest.raises(ValueError, match="outcomes were computed under"):
        online.ftl_team(cache, train, cache.select(tasks=["task_2"]), outcomes=outcomes)


def test_validation_questions_join_the_training_pool() -> None:
    cache = four_task_cache(n_questions=320)
    train, validation = cache.select(tasks=["task_0"]), cache.select(tasks=["task_1"])
    test = cache.select(tasks=["task_2"])
    pooled = online.global_team(cache, np.concatenate([train, validation]), test)
    split = online.global_team(cache, train, test, validation=validation)
    assert split.info["team"] == pooled.info["team"] and split.info["training_tasks"] == ("task_0", "task_1")


def test_the_registry_lists_and_runs_them() -> None:
    names = [name for name, entry in registry.BASELINES.items() if entry.unseen_tasks and entry.feedback != "team"]
    assert names == ["mean_probability_vote", *[name for name in online.UNSEEN_BASELINES if name != names[0]]]
    for name in names[1:]:
        entry = registry.lookup(name)
        assert not entry.in_evaluate and not entry.by_default and entry.enumerates_teams
        assert entry.uses_test_labels == (name == "hindsight_team")
    cache = four_task_cache(n_questions=320)
    setting = registry.Setting(cache, cache.select(tasks=["task_0", "task_1"]), cache.select(tasks=["task_2"]))
    for name in names:
        by_registry = registry.lookup(name).run(setting)
        direct = online.UNSEEN_BASELINES[name](cache, setting.train, setting.test)
        assert by_registry.name == name and np.array_equal(by_registry.predictions, direct.predictions)
    assert set(names[1:]).isdisjoint(comparison.default_baselines(cache))
    with pytest.raises(ValueError, match="both a held-out task"):  # the standard split holds every task on both sides
        comparison.compare(cache, names=["ftl_team"])


def test_leave_one_task_out_on_bbh5_reproduces_the_headroom() -> None:
    """The numbers of docs/baselines.md (alpha 1): a global team -0.1396, follow-the-leader in the game's timing
    -0.0287 (-0.0265 without the delay), the best fixed team per task in hindsight +0.0221 (means over the 16
    held-out tasks of the mean reward per question)."""
    cache = datasets.load("bbh5")
    names = ["global_team", "ftl_team", "ftl_team(no_delay)", "hindsight_team"]
    results = unseen.leave_one_task_out(cache, reward=REWARD, names=names)
    summary = unseen.summarize(cache, results, REWARD)
    assert [len(folds) for folds in results.values()] == [16, 16, 16, 16]
    assert summary["global_team"]["reward"] == pytest.approx(-0.1396, abs=5e-5)
    assert summary["ftl_team"]["reward"] == pytest.approx(-0.02875, abs=5e-5)
    assert summary["ftl_team(no_delay)"]["reward"] == pytest.approx(-0.02645, abs=5e-5)
    assert summary["hindsight_team"]["reward"] == pytest.approx(0.0221, abs=5e-5)
    assert "ftl_team" in unseen.format_summary(summary, REWARD)
