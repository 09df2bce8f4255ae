"""Tests of ensemble_env.baselines.partial, the unseen-task rules under team feedback: the revealed statistics and
every rule against a stream computed by hand, a naive re-simulation, the label flips and the non-members' outputs
no choice may read, Thompson's seed, the constants chosen on the training tasks, the checks, the registry and the
command's table. The label flips are checked on the full-feedback rules of ensemble_env.baselines.online too (the
same tests, over both feedbacks)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from testing.caches import flip_labels
from testing.rules import four_task_cache, naive_choices

from ensemble_env import datasets
from ensemble_env.baselines import BaselineResult, online, partial, registry, routing, unseen
from ensemble_env.baselines.outcomes import prior_rank, reward_range, team_outcomes
from ensemble_env.cache import LogitCache
from ensemble_env.game.reward import RewardSettings

# -- the hand-built cache --------------------------------------------------------------------------------------------
# Three models a, b, c (confidence 0.9, 0.8, 0.7 in the label when right, 1 minus that when wrong), two choices,
# label 0. A pair answers as its more confident member ({a, b} and {a, c} as a, {b, c} as b); the three models as
# their majority. At alpha 3 (N = 3) a right answer earns +1, a wrong one -1 - 3 * size / 3: -2 for one model, -3
# for a pair, -4 for all three; the reward range is (-4, 1), width 5.
# Team rows (routing.all_teams(3)): a 0, b 1, c 2, ab 3, ac 4, bc 5, abc 6.
#
#   task  question  right (a, b, c)   rewards a, b, c, ab, ac, bc, abc
#   t1    0         (0, 1, 0)         -2, +1, -2, -3, -3, +1, -4
#   t1    1         (0, 1, 1)         -2, +1, +1, -3, -3, +1, +1
#   t2    2         (1, 1, 0)         +1, +1, -2, +1, +1, +1, +1
#   t2    3         (0, 0, 1)         -2, -2, +1, -3, -3, -3, -4
#   new   4 .. 9    (1, 0, 1) x 3, (1, 1, 1), (1, 0, 0), (1, 0, 1)
#
# Training means (t1 and t2 pooled): a -1.25, b 0.25, c -0.5, ab -2, ac -2, bc 0, abc -1.5; prior rank b, bc, c, a,
# abc, ab, ac (ab and ac tie on reward, accuracy and share: the earlier row first).
PATTERNS = [(0, 1, 0), (0, 1, 1), (1, 1, 0), (0, 0, 1)] + [(1, 0, 1)] * 3 + [(1, 1, 1), (1, 0, 0), (1, 0, 1)]
REWARD = RewardSettings(alpha=3.0)
A, B, C, AB, AC, BC, ABC = range(7)
TRAIN, TEST = np.arange(4), np.arange(4, 10)


def hand_cache() -> LogitCache:
    right = np.array(PATTERNS, dtype=bool)
    probs = np.empty((10, 3, 2))
    probs[:, :, 0] = np.where(right, [0.9, 0.8, 0.7], [0.1, 0.2, 0.3])
    probs[:, :, 1] = 1.0 - probs[:, :, 0]
    return LogitCache(
        scores=probs,
        labels=np.zeros(10, dtype=int),
        models=("a", "b", "c"),
        score_kind="prob",
        tasks=np.array([0, 0, 1, 1, 2, 2, 2, 2, 2, 2]),
        task_names=("t1", "t2", "new"),
    )


def rows_of(result: BaselineResult, n_models: int = 3) -> list[int]:
    """The team row (all_teams order) of every answered question."""
    assert result.teams is not None
    teams = routing.all_teams(n_models)
    return [int(np.flatnonzero((teams == member).all(axis=1))[0]) for member in result.teams]


def test_the_hand_cache_is_as_described() -> None:
    outcomes = team_outcomes(hand_cache(), reward=REWARD)
    assert outcomes.rewards[:, :4].T.tolist() == [
        [-2, 1, -2, -3, -3, 1, -4],
        [-2, 1, 1, -3, -3, 1, 1],
        [1, 1, -2, 1, 1, 1, 1],
        [-2, -2, 1, -3, -3, -3, -4],
    ]
    assert outcomes.rewards[:, :4].mean(axis=1).tolist() == [-1.25, 0.25, -0.5, -2.0, -2.0, 0.0, -1.5]
    train = (outcomes.rewards[:, :4], outcomes.correct[:, :4], outcomes.share[:, :4])
    assert np.argsort(prior_rank(*train)).tolist() == [B, BC, C, A, ABC, AB, AC]
    assert outcomes.rewards[:, 4:].T.tolist()[0] == [1, -2, 1, 1, 1, -3, 1]  # (1, 0, 1): abc right by majority
    assert outcomes.rewards[:, 8].tolist() == [1, -2, -2, 1, 1, -3, -4]  # (1, 0, 0): abc wrong
    assert reward_range(REWARD) == (-4.0, 1.0)


# -- what a played team reveals ----------------------------------------------------------------------------------


def test_partial_statistics_by_hand() -> None:
    """Played b, b, bc, bc, c, c on "new" in the game's timing: the choice of question t reads questions 0 .. t - 2.
    t2 reads question 0 (b played: b's -2 alone); t3 adds question 1 (b -2); t4 adds question 2, played bc, so b
    (-2), c (+1) and bc (-3) are revealed, never a, ab, ac nor abc; t5 adds question 3 ((1, 1, 1): +1 for b, c, bc)."""
    rewards = team_outcomes(hand_cache(), TEST, REWARD).rewards
    counts, sums = partial.partial_statistics(rewards, routing.all_teams(3), [B, B, BC, BC, C, C])
    assert counts.tolist() == [
        [0, 0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 0],
        [0, 1, 0, 0, 0, 0, 0],
        [0, 2, 0, 0, 0, 0, 0],
        [0, 3, 1, 0, 0, 1, 0],
        [0, 4, 2, 0, 0, 2, 0],
    ]
    assert sums[:, [B, C, BC]].tolist() == [[0, 0, 0], [0, 0, 0], [-2, 0, 0], [-4, 0, 0], [-6, 1, -3], [-5, 2, -2]]
    assert not sums[:, [A, AB, AC, ABC]].any()
    # the full team reveals every team; without the delay question t reads question t - 1 too
    counts, sums = partial.partial_statistics(rewards, routing.all_teams(3), [ABC] * 6, delay=0)
    assert counts.tolist() == [[t] * 7 for t in range(6)]
    assert sums[1].tolist() == rewards[:, 0].tolist()
    assert partial.contained_teams(routing.all_teams(3))[BC].tolist() == [False, True, True, False, False, True, False]


# -- the rules by hand ---------------------------------------------------------------------------------------------


def test_greedy_by_hand() -> None:
    """n0 = 1: index (S_k + prior_k) / (1 + n_k). t0, t1 nothing revealed: b (the best prior). t2: b (-2 + 0.25) / 2
    = -0.875 < bc's untried 0: bc. t3: b -1.25: bc. t4 (question 2 played bc): b (-6 + 0.25) / 4, c (1 - 0.5) / 2 =
    0.25, bc (-3 + 0) / 2: c beats every prior. t5: c (2 - 0.5) / 3 = 0.5: c. Rewards -2, -2, -3, +1, -2, +1."""
    cache = hand_cache()
    result = partial.greedy_team(cache, TRAIN, TEST, reward=REWARD, pseudo_counts=(1.0,))
    assert rows_of(result) == [B, B, BC, BC, C, C]
    assert result.rewards(cache, REWARD).tolist() == [-2, -2, -3, 1, -2, 1]
    assert result.name == "greedy_team" and result.info["feedback"] == "team" and result.info["delay"] == 1
    assert result.info["first_team"] == "b" and result.info["switches"] == {"new": 2}
    assert result.info["teams_used"] == {"b": 2, "c": 2, "b+c": 2} and result.info["pseudo_count"] == 1.0
    assert result.info["training_tasks"] == ("t1", "t2") and result.info["held_out_tasks"] == ("new",)
    # the same rule on the stream directly
    rewards = team_outcomes(cache, TEST, REWARD).rewards
    prior, rank = np.array([-1.25, 0.25, -0.5, -2.0, -2.0, 0.0, -1.5]), np.array([3, 0, 2, 5, 6, 1, 4])
    teams = routing.all_teams(3)
    direct = partial.partial_choices(rewards, teams, prior, rank, pseudo_count=1.0, bounds=(-4.0, 1.0))
    assert direct.tolist() == rows_of(result)
    # without the delay t1 already reads question 0 and leaves b for bc; t2 reads question 1 (bc played: c +1): c
    undelayed = partial.partial_choices(rewards, teams, prior, rank, pseudo_count=1.0, bounds=(-4.0, 1.0), delay=0)
    assert undelayed.tolist() == [B, BC, C, C, C, C]


def test_explore_then_commit_by_hand() -> None:
    """m = 2, n0 = 1: all three models answer questions 0 and 1 (both (1, 0, 1), every team revealed). t2 reads
    question 0: a (1 - 1.25) / 2 = -0.125, c (1 - 0.5) / 2 = 0.25 (the best), abc (1 - 1.5) / 2; t3 reads both: c
    0.5 ahead of a 0.25; from t4 on only c is revealed (+1, +1): c. Rewards +1, +1, +1, +1, -2, +1: mean 0.5."""
    cache = hand_cache()
    result = partial.etc_team(cache, TRAIN, TEST, reward=REWARD, explores=(2,), pseudo_counts=(1.0,))
    assert rows_of(result) == [ABC, ABC, C, C, C, C]
    assert result.rewards(cache, REWARD).mean() == pytest.approx(0.5)
    assert result.info["explore"] == 2 and result.info["first_team"] == "a+b+c" and result.name == "etc_team"


def test_ucb_by_hand() -> None:
    """c = 1, n0 = 1, bonus 5 * sqrt(2 ln(1 + r) / (1 + n_k)) (width 5), r revealed questions. t0, t1 (r = 0, no bonus):
    b. t2 (r = 1): bc 0 + 5 sqrt(1.386) = 5.89 > c -0.5 + 5.89 > b -0.875 + 5 sqrt(0.693): bc. t3 (r = 2): bc 0 +
    7.41 ahead of c 6.91: bc. t4 (r = 3, 2 ln 4 = 2.773): a, never revealed, -1.25 + 8.33 = 7.08 > abc 6.83 > c 0.25
    + 5 sqrt(1.386) = 6.14: a. t5 (r = 4): a -1.25 + 8.97 = 7.72 > abc 7.47: a."""
    cache = hand_cache()
    result = partial.partial_ucb_team(cache, TRAIN, TEST, reward=REWARD, explorations=(1.0,), pseudo_counts=(1.0,))
    assert rows_of(result) == [B, B, BC, BC, A, A]
    assert result.name == "ucb_team(partial)" and result.info["exploration"] == 1.0
    bonus = 5 * math.sqrt(2 * math.log(4) / 1)
    assert -1.25 + bonus == pytest.approx(7.076, abs=1e-3) and 0.25 + 5 * math.sqrt(2 * math.log(4) / 2) < 7.0
    # c = 0 is greedy
    greedy = partial.partial_ucb_team(cache, TRAIN, TEST, reward=REWARD, explorations=(0.0,), pseudo_counts=(1.0,))
    assert rows_of(greedy) == [B, B, BC, BC, C, C]


def test_thompson_draws_around_greedy() -> None:
    """With no noise Thompson is greedy; a draw of +1 for abc at sigma 1 (width 5, n0 = 1: 5 / sqrt(1) = 5) lifts
    it over b's 0.25 at t0: abc answers question 0 and reveals every team."""
    rewards = team_outcomes(hand_cache(), TEST, REWARD).rewards
    prior, rank = np.array([-1.25, 0.25, -0.5, -2.0, -2.0, 0.0, -1.5]), np.array([3, 0, 2, 5, 6, 1, 4])
    teams, bounds = routing.all_teams(3), (-4.0, 1.0)
    quiet = np.zeros((6, 7))
    calm = partial.partial_choices(rewards, teams, prior, rank, pseudo_count=1.0, scale=1.0, noise=quiet, bounds=bounds)
    assert calm.tolist() == [B, B, BC, BC, C, C]
    lifted = quiet.copy()
    lifted[0, ABC] = 1.0  # -1.5 + 5 = 3.5 at t0
    chosen = partial.partial_choices(
        rewards, teams, prior, rank, pseudo_count=1.0, scale=1.0, noise=lifted, bounds=bounds
    )
    assert chosen[0] == ABC and chosen[1] == B  # t1 reads nothing yet (the game's delay): the prior again
    assert chosen[2] == C  # question 0 (1, 0, 1) revealed every team: c (1 - 0.5) / 2 = 0.25 leads
    with pytest.raises(ValueError, match="give noise"):
        partial.partial_choices(rewards, teams, prior, rank, pseudo_count=1.0, scale=1.0, bounds=bounds)
    with pytest.raises(ValueError, match=r"noise must have shape \(6, 7\), got shape \(7, 6\)"):
        partial.partial_choices(rewards, teams, prior, rank, pseudo_count=1.0, scale=1.0, noise=quiet.T, bounds=bounds)


# -- a naive re-simulation -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n0", "c", "m", "sigma", "delay"),
    [(1.0, 0.0, 0, 0.0, 1), (4.0, 0.0, 3, 0.0, 1), (0.5, 0.3, 0, 0.0, 1), (2.0, 0.0, 0, 0.4, 1), (1.0, 0.1, 2, 0.2, 0)],
)
def test_the_rules_match_a_naive_simulation(n0: float, c: float, m: int, sigma: float, delay: int) -> None:
    rng = np.random.default_rng(7)
    teams = routing.all_teams(3)
    rewards = np.where(rng.random((7, 40)) < 0.5, 1.0, rng.choice([-1.5, -2.0], size=(7, 40)))
    prior, rank = rng.normal(size=7) * 0.3, rng.permutation(7)
    noise = rng.standard_normal((40, 7))
    bounds = (-2.0, 1.0)
    chosen = partial.partial_choices(
        rewards, teams, prior, rank, pseudo_count=n0, exploration=c, explore=m, scale=sigma, noise=noise,
        bounds=bounds, delay=delay,
    )  # fmt: skip
    assert chosen.tolist() == naive_choices(rewards, teams, prior, rank, n0, c, m, sigma, noise, 3.0, delay)
    assert len(set(chosen.tolist())) > 1
    counts, sums = partial.partial_statistics(rewards, teams, chosen, delay)
    for t in (0, 5, 39):
        for k in range(7):
            seen = [s for s in range(max(0, t - delay)) if not (teams[k] & ~teams[chosen[s]]).any()]
            assert counts[t, k] == len(seen) and sums[t, k] == pytest.approx(rewards[k, seen].sum())


# -- what a choice may read ------------------------------------------------------------------------------------------


RULES = tuple(partial.rules(seed=5))
SMALL = {
    "greedy_team": {"pseudo_counts": (0.25, 4.0)},
    "etc_team": {"explores": (2, 5), "pseudo_counts": (1.0, 8.0)},
    "ucb_team(partial)": {"explorations": (0.0, 0.3), "pseudo_counts": (1.0,)},
    "thompson_team": {"scales": (0.05, 0.3), "pseudo_counts": (1.0, 4.0)},
}


def run_rule(name: str, cache: LogitCache, train: np.ndarray, test: np.ndarray) -> BaselineResult:
    return partial.rules(seed=5)[name](cache, train, test, reward=RewardSettings(alpha=1.0), **SMALL[name])


#: the full-feedback rules of the unseen-task protocol (``baselines.online``): in the game's timing or without its
#: delay, and the global teams, one team throughout
ONLINE = (
    "ftl_team",
    "ftl_team(no_delay)",
    "ftl_single",
    "ftl_team(window)",
    "ucb_team",
    "global_team",
    "global_single",
)
#: the rules of the protocol with the feedback each reads: every model's output, or the answering team's
STREAMED = [*(("all", name) for name in ONLINE), *(("team", name) for name in RULES)]


def run_streamed(feedback: str, name: str, cache: LogitCache, train: np.ndarray, test: np.ndarray) -> BaselineResult:
    """Rule ``name`` of the protocol under ``feedback``: a partial rule on its small grid, a full-feedback one with its
    defaults (two windows for the window's choice)."""
    if feedback == "team":
        return run_rule(name, cache, train, test)
    options = {"windows": (4, 16)} if "window" in name else {}
    return online.UNSEEN_BASELINES[name](cache, train, test, reward=RewardSettings(alpha=1.0), **options)


@pytest.mark.parametrize(("feedback", "name"), STREAMED, ids=[f"{feedback}-{name}" for feedback, name in STREAMED])
def test_flipping_later_labels_never_changes_an_earlier_choice(feedback: str, name: str) -> None:
    """The choice for the t-th question of a held-out task reads only the questions before it (of its task): flip the
    labels of the t-th and every later question of a task, every choice up to the t-th stays, and in the game's
    timing up to the (t + 1)-th (question t is revealed after the next team is committed); the other held-out task's
    choices all stay. The held-out tasks are interleaved in the stream (320 questions under full feedback, 240 under
    team feedback)."""
    cache = four_task_cache(seed=3, n_questions=320 if feedback == "all" else 240)
    train, test = cache.select(tasks=["task_0", "task_1"]), cache.select(tasks=["task_2", "task_3"])
    before = run_streamed(feedback, name, cache, train, test)
    assert before.teams is not None
    if not name.startswith("global"):  # a global team is one team throughout
        assert np.unique(before.teams, axis=0).shape[0] > 1  # it does change teams
    delay = 0 if name == "ftl_team(no_delay)" else 1
    for task in (2, 3):
        positions = np.flatnonzero(cache.tasks[test] == task)
        for t in (0, 5, 30):
            after = run_streamed(feedback, name, flip_labels(cache, test[positions[t:]]), train, test)
            assert after.teams is not None
            kept = positions[: t + 1 + delay]
            assert np.array_equal(after.teams[kept], before.teams[kept]), (name, task, t)
            other = np.flatnonzero(cache.tasks[test] != task)  # the other held-out task never reads this one
            assert np.array_equal(after.teams[other], before.teams[other]), (name, task, t)


def with_output_moved(cache: LogitCache, question: int, model: int) -> LogitCache:
    """``cache`` with ``model``'s scores on ``question`` rolled by one choice (its answer changes)."""
    scores = np.array(cache.scores, dtype=np.float64)
    n = int(np.asarray(cache.n_choices)[question])
    scores[question, model, :n] = np.roll(scores[question, model, :n], 1)
    return dataclasses.replace(cache, scores=scores)


def test_a_non_members_output_never_changes_a_choice() -> None:
    """Move the output of a model outside the team that answered a held-out question: the rewards of the teams
    holding it change on that question, but team feedback never reveals them, so no rule changes any choice
    (while follow-the-leader, reading every model, does)."""
    cache = four_task_cache(seed=3)
    train, test = cache.select(tasks=["task_0", "task_1"]), cache.select(tasks=["task_2", "task_3"])
    reward = RewardSettings(alpha=1.0)
    before = {name: run_rule(name, cache, train, test) for name in RULES}
    ftl_before = online.ftl_team(cache, train, test, reward=reward)
    ftl_moved = 0
    for name, result in before.items():
        assert result.teams is not None
        for position in (2, 7, 19, 40, 61):
            outside = np.flatnonzero(~result.teams[position])
            if outside.size == 0:
                continue
            moved = with_output_moved(cache, int(test[position]), int(outside[0]))
            changed = team_outcomes(moved, test[position : position + 1], reward).correct
            original = team_outcomes(cache, test[position : position + 1], reward).correct
            if np.array_equal(changed, original):
                continue  # the move changed no team's answer: nothing to hide
            after = run_rule(name, moved, train, test)
            assert after.teams is not None and np.array_equal(after.teams, result.teams), (name, position)
            ftl = online.ftl_team(moved, train, test, reward=reward)
            assert ftl.teams is not None and ftl_before.teams is not None
            ftl_moved += not np.array_equal(ftl.teams, ftl_before.teams)
    assert ftl_moved > 0


def test_thompson_is_reproducible_from_its_seed() -> None:
    cache = four_task_cache(seed=1)
    train, test = cache.select(tasks=["task_0", "task_1", "task_3"]), cache.select(tasks=["task_2"])
    options = {"reward": RewardSettings(alpha=1.0), "scales": (0.3,), "pseudo_counts": (1.0,)}
    first = partial.thompson_team(cache, train, test, seed=11, **options)
    again = partial.thompson_team(cache, train, test, seed=11, **options)
    other = partial.thompson_team(cache, train, test, seed=12, **options)
    assert first.teams is not None and again.teams is not None and other.teams is not None
    assert np.array_equal(first.teams, again.teams) and first.info["grid_scores"] == again.info["grid_scores"]
    assert not np.array_equal(first.teams, other.teams) and first.info["seed"] == 11
    # a held-out task's draws depend on the seed and the task, not on the other tasks held out with it
    train = cache.select(tasks=["task_0", "task_1"])
    alone = partial.thompson_team(cache, train, test, seed=11, **options)
    both = partial.thompson_team(cache, train, cache.select(tasks=["task_2", "task_3"]), seed=11, **options)
    assert alone.teams is not None and both.teams is not None
    assert np.array_equal(both.teams[np.isin(both.questions, test)], alone.teams)


# -- constants chosen on the training tasks --------------------------------------------------------------------------


def test_the_constants_are_the_best_on_the_training_streams() -> None:
    """Each training task streamed whole, with the other training tasks as the prior (their means and rank), in the
    game's timing: the score of a setting is the mean over training tasks of the mean reward per question."""
    cache = four_task_cache()
    reward = RewardSettings(alpha=1.0)
    train, test = cache.select(tasks=["task_0", "task_1", "task_2"]), cache.select(tasks=["task_3"])
    explores, counts = (1, 4), (0.5, 8.0)
    result = partial.etc_team(cache, train, test, reward=reward, explores=explores, pseudo_counts=counts)
    outcomes = team_outcomes(cache, train, reward)
    tasks = cache.tasks[outcomes.questions]
    scores = {}
    for m in explores:
        for n0 in counts:
            means = []
            for task in range(3):
                own, others = tasks == task, tasks != task
                parts = (outcomes.rewards[:, others], outcomes.correct[:, others], outcomes.share[:, others])
                stream = outcomes.rewards[:, own]
                chosen = partial.partial_choices(
                    stream, outcomes.teams, parts[0].mean(axis=1), prior_rank(*parts), pseudo_count=n0,
                    explore=m, bounds=reward_range(reward),
                )  # fmt: skip
                means.append(stream[chosen, np.arange(stream.shape[1])].mean())
            scores[f"m={m},n0={n0:g}"] = float(np.mean(means))
    assert result.info["grid_scores"] == pytest.approx(scores)
    best = max(scores.values())
    first = next(key for key, value in scores.items() if round(value, 9) == round(best, 9))
    assert f"m={result.info['explore']},n0={result.info['pseudo_count']:g}" == first
    assert len(set(np.round(list(scores.values()), 9))) > 1


#: the constant each partial rule chooses on its training tasks, beside the pseudo-count they all choose
PARTIAL_CONSTANTS = {
    "greedy_team": (),
    "etc_team": ("explore",),
    "ucb_team(partial)": ("exploration",),
    "thompson_team": ("scale",),
}
#: what each rule chose on its training tasks: (feedback, rule, the info fields that hold it)
CHOSEN = [
    ("all", "global_team", ("team", "train_reward")),
    ("all", "global_single", ("team", "train_reward")),
    ("all", "ftl_team", ("first_team",)),
    ("all", "ftl_team(window)", ("window", "window_scores", "first_team")),
    ("all", "ucb_team", ("exploration", "pseudo_count", "grid_scores", "first_team")),
    *(
        ("team", name, ("pseudo_count", *PARTIAL_CONSTANTS[name], "grid_scores", "first_team", "training_tasks"))
        for name in RULES
    ),
]


@pytest.mark.parametrize(("feedback", "name", "fields"), CHOSEN, ids=[f"{f}-{n}" for f, n, _ in CHOSEN])
def test_flipping_the_held_out_labels_never_changes_what_training_chose(
    feedback: str, name: str, fields: tuple[str, ...]
) -> None:
    """Flip every label of the held-out task: the constants, scores and first team chosen on the training tasks stay
    (the full-feedback rules on their default grids, the partial ones on their small grids), and a fixed team answers
    the same."""
    cache = four_task_cache(seed=4, n_questions=320 if feedback == "all" else 240)
    train, test = cache.select(tasks=["task_0", "task_1", "task_3"]), cache.select(tasks=["task_2"])
    flipped = flip_labels(cache, test)
    assert not np.array_equal(cache.labels[test], flipped.labels[test])
    if feedback == "team":
        first, second = run_rule(name, cache, train, test), run_rule(name, flipped, train, test)
    else:
        run = online.UNSEEN_BASELINES[name]
        first, second = (run(held, train, test, reward=RewardSettings(alpha=1.0)) for held in (cache, flipped))
    assert {f: first.info[f] for f in fields} == {f: second.info[f] for f in fields}, name
    if name in ("global_team", "global_single"):  # the fixed teams answer the same whatever the held-out labels
        run = online.UNSEEN_BASELINES[name]
        assert np.array_equal(run(cache, train, test).predictions, run(flipped, train, test).predictions)


# -- checks ----------------------------------------------------------------------------------------------------------

BAD = [
    ("greedy_team", {"pseudo_counts": (0.0,)}, r"pseudo_counts\[0\] must be a number in \(0, 1e\+12\], got 0.0"),
    ("greedy_team", {"pseudo_counts": (-1.0,)}, r"pseudo_counts\[0\] must be a finite number in \[0, .*got -1.0"),
    ("greedy_team", {"pseudo_counts": (float("nan"),)}, r"pseudo_counts\[0\] must be a finite number .*got nan"),
    ("greedy_team", {"pseudo_counts": (math.inf,)}, r"pseudo_counts\[0\] must be a finite number .*got inf"),
    ("greedy_team", {"pseudo_counts": (True,)}, r"pseudo_counts\[0\] must be a number .*got True"),
    ("greedy_team", {"pseudo_counts": ("4",)}, r"pseudo_counts\[0\] must be a number .*got '4'"),
    ("greedy_team", {"pseudo_counts": "4"}, "pseudo_counts must be a list of values, got the string '4'"),
    ("greedy_team", {"pseudo_counts": 4.0}, "pseudo_counts must be a list of values, got 4.0"),
    ("greedy_team", {"pseudo_counts": ()}, "pseudo_counts is empty"),
    ("etc_team", {"explores": (0,)}, r"explores\[0\] must be an integer in \[1, .*got 0"),
    ("etc_team", {"explores": (2.5,)}, r"explores\[0\] must be an integer.*got 2.5"),
    ("etc_team", {"explores": (True,)}, r"explores\[0\] must be an integer.*got True"),
    ("ucb_team(partial)", {"explorations": (-0.1,)}, r"explorations\[0\] must be a finite number in \[0, .*got -0.1"),
    ("ucb_team(partial)", {"explorations": (float("nan"),)}, r"explorations\[0\] must be a finite number .*got nan"),
    ("thompson_team", {"scales": (0.0,)}, r"scales\[0\] must be a number in \(0, 1e\+12\], got 0.0"),
    ("thompson_team", {"seed": -1}, r"seed must be a non-negative integer .*got -1"),
    ("thompson_team", {"seed": 1.5}, "seed must be a non-negative integer.*got 1.5"),
    ("thompson_team", {"seed": True}, "seed must be a non-negative integer.*got True"),
    ("thompson_team", {"seed": None}, "seed must be a non-negative integer.*got None"),
]


@pytest.mark.parametrize(("name", "options", "message"), BAD, ids=[f"{n}-{o}" for n, o, _ in BAD])
def test_bad_constants_are_refused(name: str, options: dict[str, object], message: str) -> None:
    cache = four_task_cache()
    train, test = cache.select(tasks=["task_0", "task_1"]), cache.select(tasks=["task_2"])
    function = {**partial.rules(), "thompson_team": partial.thompson_team}[name]
    arguments = {"seed": 0, **options} if name == "thompson_team" else options
    with pytest.raises(ValueError, match=message):
        function(cache, train, test, **arguments)


def test_the_protocol_checks_hold() -> None:
    cache = four_task_cache()
    one, test = cache.select(tasks=["task_0"]), cache.select(tasks=["task_2"])
    with pytest.raises(ValueError, match="give at least two training tasks, got 1"):
        partial.greedy_team(cache, one, test)
    overlap = cache.select(tasks=["task_0", "task_2"])
    for function in partial.rules().values():
        with pytest.raises(ValueError, match=r"task 'task_2' is both a held-out task \(test\) and a training task"):
            function(cache, overlap, test)
    rewards = np.zeros((7, 4))
    with pytest.raises(ValueError, match=r"played must hold one team row in 0\.\.6"):
        partial.partial_statistics(rewards, routing.all_teams(3), [0, 1, 7, 0])
    with pytest.raises(ValueError, match=r"rewards must have shape \(7, B\), got shape \(3, 4\)"):
        partial.partial_statistics(np.zeros((3, 4)), routing.all_teams(3), [0, 1, 2, 0])
    with pytest.raises(ValueError, match=r"delay must be an integer.*got -1"):
        partial.partial_statistics(rewards, routing.all_teams(3), [0, 1, 2, 0], delay=-1)
    with pytest.raises(ValueError, match=r"prior must have shape \(7,\), got shape \(3,\)"):
        partial.partial_choices(rewards, routing.all_teams(3), np.zeros(3), np.arange(7), pseudo_count=1.0)


# -- the registry and the table ----------------------------------------------------------------------------------


def test_the_registry_marks_what_each_rule_reads() -> None:
    for name in RULES:
        entry = registry.lookup(name)
        assert entry.feedback == "team" and entry.unseen_tasks and not entry.by_default and entry.enumerates_teams
        assert registry.reference(name, "team") is None and registry.reference(name, "all") is None
        assert registry.reference(name, "bandit") == "team feedback"
    assert registry.reference("ftl_team", "team") == "full feedback" and registry.reference("ftl_team") is None
    assert registry.reference("hindsight_team", "team") == "test labels"
    assert registry.reference("ucb_team", "team") is None and registry.lookup("ucb_team").feedback == "bandit"
    assert registry.lookup("global_team").feedback == registry.lookup("mean_probability_vote").feedback == "none"
    assert registry.lookup("static_team").feedback == "all"  # the default: it streams nothing
    assert all(name in registry.BASELINES for name in registry.PARTIAL_DEFAULT_BASELINES)
    assert [n for n in registry.PARTIAL_DEFAULT_BASELINES if registry.reference(n, "team")] == [
        "ftl_team",
        "hindsight_team",
    ]
    with pytest.raises(ValueError, match="feedback 'some' is not one of all, team, bandit, none"):
        registry.reference("ftl_team", "some")
    with pytest.raises(ValueError, match="baseline 'x': feedback 'full' is not one of"):
        registry.Baseline("x", lambda s: None, feedback="full")  # type: ignore[arg-type,return-value]


def test_the_registry_runs_them_with_the_settings_seed() -> None:
    cache = four_task_cache()
    train, test = cache.select(tasks=["task_0", "task_1"]), cache.select(tasks=["task_2"])
    for name in RULES:
        by_registry = registry.lookup(name).run(registry.Setting(cache, train, test, seed=3))
        direct = partial.rules(seed=3)[name](cache, train, test)
        assert by_registry.name == name and np.array_equal(by_registry.predictions, direct.predictions)
    with pytest.raises(ValueError, match=r"seed must be a non-negative integer.*got None"):
        registry.lookup("thompson_team").run(registry.Setting(cache, train, test, seed=None))


def test_leave_one_task_out_under_team_feedback() -> None:
    cache = four_task_cache()
    results = unseen.leave_one_task_out(cache, feedback="team", seed=2)
    assert list(results) == list(registry.PARTIAL_DEFAULT_BASELINES)
    assert all(len(folds) == 4 for folds in results.values())
    assert results["thompson_team"][0].info["seed"] == 2
    table = unseen.format_summary(unseen.summarize(cache, results), feedback="team")
    assert "ftl_team (full feedback)" in table and "hindsight_team (test labels)" in table
    assert "greedy_team " in table and "(full feedback)" not in unseen.format_summary(unseen.summarize(cache, results))
    with pytest.raises(ValueError, match="feedback 'bandit': the protocol's held-out tasks reveal all or team"):
        unseen.leave_one_task_out(cache, feedback="bandit")


@pytest.mark.slow
def test_leave_one_task_out_on_bbh5_under_team_feedback() -> None:
    """The numbers of docs/baselines.md (alpha 1, seed 0; means over the 16 held-out tasks of the mean reward per
    question): every partial-feedback rule between the global team and follow-the-leader.

    Only the baselines checked here are run: each fold fits every baseline on its own (one shared table of team
    outcomes), so leaving the others out changes none of these numbers; bayes_team's 25 settings per fold, nine
    tenths of the default list's CPU, are run by docs/baselines.md's command (tests/test_docs_snippets.py)."""
    cache = datasets.load("bbh5")
    reward = RewardSettings(alpha=1.0)
    expected = {"greedy_team": -0.1194, "etc_team": -0.1145, "ucb_team(partial)": -0.1187, "thompson_team": -0.1153}
    names = ["global_team", *expected, "ftl_team"]
    results = unseen.leave_one_task_out(cache, reward=reward, feedback="team", names=names)
    summary = unseen.summarize(cache, results, reward)
    for name, value in expected.items():
        assert summary[name]["reward"] == pytest.approx(value, abs=5e-5), name
        assert summary["global_team"]["reward"] < summary[name]["reward"] < summary["ftl_team"]["reward"]
