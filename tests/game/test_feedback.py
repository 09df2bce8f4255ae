"""Partial feedback (``feedback="team"``, ``ensemble_env/EnsembleUnseen-v2``): answering q_t reveals its label and
the outputs of the team that answered it, nothing else.

An output no team revealed never changes anything the agents get (the perturbation test, with its counterpart under
``feedback="all"``, where it does, and its positive control: the same rewrite of one output a team did reveal
changes what the agents get); the revealed statistics equal their definitions on the revealed rows over long
runs (pools of 5, 13 and 70 models); with the whole pool answering every question, ``"team"`` shows what ``"all"``
shows; the records by hand on a tiny cache; snapshots exact while the window holds the episode; today's game never
runs the feedback kernels. What v2 shares with v1 is checked over both in tests/game/test_unseen.py: the registration
and PettingZoo's tests, no label shown before its question is answered, snapshot round trips and crafted ones refused.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import Any

import numpy as np
import pytest
from testing.game import (
    ALL,
    CORRECT,
    LABELS,
    TASKS,
    TEAMS,
    assert_same,
    definitions,
    hand_cache,
    random_team,
)

import ensemble_env
from ensemble_env import LogitCache
from ensemble_env.game import feedback
from ensemble_env.game.components import PartialFeedback
from ensemble_env.game.config import EnvConfig, unseen_game
from ensemble_env.game.feedback import revealed_masks
from ensemble_env.game.records import Counter
from ensemble_env.game.task_record import record_count
from ensemble_env.synthetic import make_cache


@pytest.fixture(scope="module")
def synthetic() -> LogitCache:
    """5 models; probabilities as the scores (``score_kind="prob"``), so that a test can rewrite one model's row."""
    cache = make_cache(n_models=5, n_questions=400, n_tasks=3, n_choices=(2, 4, 3), error_correlation=0.3, seed=7)
    return dataclasses.replace(cache, scores=cache.probs.astype(np.float64), score_kind="prob")


def count(n: float) -> np.float32:
    return np.float32(record_count(n))


# -- an output never revealed changes nothing ---------------------------------------------------------------------


def flip_outputs(cache: LogitCache, outputs: np.ndarray) -> LogitCache:
    """``cache`` with the probabilities of each output marked in ``outputs`` ((Q, N) bool) replaced by ones that flip
    its correctness (a wrong model now picks the label, a right one another choice); no other output changes."""
    scores = np.array(cache.scores, dtype=np.float64)
    for q, i in zip(*np.nonzero(outputs), strict=True):
        label, n_choices = int(cache.labels[q]), int(cache.n_choices[q])
        target = (label + 1) % n_choices if cache.correct[q, i] else label
        scores[q, i] = 0.05
        scores[q, i, target] = 0.9
    perturbed = dataclasses.replace(cache, scores=scores)
    np.testing.assert_array_equal(perturbed.correct != cache.correct, outputs)  # every marked output flipped, alone
    return perturbed


def shown_outputs(cache: LogitCache, answered: list[tuple[int, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The outputs a team revealed ((Q, N) bool: on each question, the members of each team it was seen through) and
    the questions played (Q,). ``answered``: (question, team mask) pairs, each question answered and the one the run
    ends on."""
    shown = np.zeros((cache.n_questions, cache.n_models), dtype=bool)
    played = np.zeros(cache.n_questions, dtype=bool)
    for question, team in answered:
        shown[question] |= team.astype(bool)
        played[question] = True
    return shown, played


def hide(cache: LogitCache, answered: list[tuple[int, np.ndarray]]) -> LogitCache:
    """``cache`` with, on each question played, the outputs of every model outside each team it was seen through
    flipped (:func:`flip_outputs`)."""
    shown, played = shown_outputs(cache, answered)
    hidden = played[:, None] & ~shown
    assert hidden.sum() >= 20
    return flip_outputs(cache, hidden)


def play_parallel(env: ensemble_env.EnsembleParallelEnv, steps: int) -> tuple[list[Any], list[tuple[int, Any]]]:
    """Everything a parallel env gives over ``steps`` steps of random teams and answers (resets included), and the
    (question, answering team) of each step."""
    rng = np.random.default_rng(3)
    n_models, n_choices = env.engine.n_models, env.engine.max_choices
    obs, infos = env.reset(seed=11)
    trace: list[Any] = [(obs, infos, env.state())]
    answered = []
    for _ in range(steps):
        if not env.agents:
            obs, infos = env.reset()
            trace.append((obs, infos, env.state()))
        team = env.engine.team[0].copy()
        result = env.step({"decider": random_team(rng, n_models, 0.1), "fusion": int(rng.integers(n_choices))})
        trace.append((*result, env.state()))
        answered.append((int(result[4]["fusion"]["question"]), team))
    answered.append((int(env.engine.next_questions()[0]), env.engine.team[0]))  # seen, not yet answered
    return trace, answered


def play_vector(venv: ensemble_env.EnsembleVectorEnv, steps: int) -> tuple[list[Any], list[tuple[int, Any]]]:
    """The same for the B copies of a vector env (auto-resetting)."""
    rng = np.random.default_rng(5)
    b, n_models, n_choices = venv.num_envs, venv.n_models, venv.max_choices
    obs, infos = venv.reset(seed=11)
    trace: list[Any] = [(obs, infos, venv.state())]
    answered = []
    for _ in range(steps):
        questions, teams = venv.next_questions(), venv.team
        teams_next = np.stack([random_team(rng, n_models, 0.1) for _ in range(b)])
        result = venv.step({"decider": teams_next, "fusion": rng.integers(0, n_choices, b)})
        trace.append((*result, venv.state()))
        answered += [(int(q), team) for q, team in zip(questions, teams, strict=True)]
    answered += [(int(q), team) for q, team in zip(venv.next_questions(), venv.team, strict=True)]  # seen only
    return trace, answered


#: episodes end by exhausting their stream (one task: ~130 questions), never cut: a cut episode's final observation
#: shows the stream's next question through the committed team, which never answers it in that episode
V1_TEAM = {"feedback": "team", "split": "all", "window": 25, "tasks": ("task_0",)}
#: every statistic, the models' window accuracy and a diversity bonus (the reward then reads the focal diversity)
V1_TEAM_RICH = {**V1_TEAM, "metrics": ALL, "decider_extras": ("model_accuracy",), "diversity_bonus": 0.5}
GAMES = {
    "v1-team": (ensemble_env.parallel_env, ensemble_env.vector_env, V1_TEAM),
    "v1-team-every-statistic": (ensemble_env.parallel_env, ensemble_env.vector_env, V1_TEAM_RICH),
    "unseen-v2": (ensemble_env.unseen_parallel_env, ensemble_env.unseen_vector_env, {"version": 2, "window": 10}),
}


@pytest.mark.parametrize("game", list(GAMES))
@pytest.mark.parametrize("api", ["parallel", "vector"])
def test_an_output_no_team_revealed_changes_nothing(synthetic: LogitCache, game: str, api: str) -> None:
    """Perturb the outputs of the models outside the answering teams on every question played: the observations,
    state, rewards, episode ends and infos are identical; under ``feedback="all"`` the same perturbation shows. The
    positive control: the same rewrite of a single output a team did reveal (a member of the first team that
    answered a question) changes what the agents get, by the step after that answer."""
    parallel, vector, options = GAMES[game]

    def play(cache: LogitCache, steps: int | None = None, **changes: Any) -> tuple[list[Any], list[tuple[int, Any]]]:
        if api == "parallel":
            return play_parallel(parallel(cache, **{**options, **changes}), steps or 400)
        return play_vector(vector(3, cache, **{**options, **changes}), steps or 200)

    base, answered = play(synthetic)
    perturbed = hide(synthetic, answered)
    again, answered_again = play(perturbed)
    assert_same(answered_again, answered)
    assert_same(again, base)
    every = {"version": 1} if game == "unseen-v2" else {"feedback": "all"}  # the counterpart: everything revealed
    shown, _ = play(synthetic, **every)
    shown_perturbed, _ = play(perturbed, **every)
    with pytest.raises(AssertionError):
        assert_same(shown_perturbed, shown)
    # the positive control, under the same game: one output of a member of an answering team, flipped as above
    index, (question, team) = next((i, pair) for i, pair in enumerate(answered) if pair[1].any())
    member = np.zeros(synthetic.correct.shape, dtype=bool)
    member[question, np.flatnonzero(team)[0]] = True
    assert shown_outputs(synthetic, answered)[0][member].all()  # a revealed output, flipped alone
    steps = index // (1 if api == "parallel" else 3) + 2  # the answering step and the next one
    head, _ = play(synthetic, steps)
    revealed, _ = play(flip_outputs(synthetic, member), steps)
    with pytest.raises(AssertionError):
        assert_same(revealed, head)


# -- the revealed statistics are their definitions on the revealed rows -------------------------------------------


@pytest.mark.parametrize(
    ("n_models", "window", "seed"), [(5, 9, 0), (13, 12, 1), (70, 6, 2)], ids=["N5", "rows-path-N13", "two-words-N70"]
)
def test_revealed_statistics_equal_definitions_on_the_revealed_rows(n_models: int, window: int, seed: int) -> None:
    """Over long runs (windows filling, full, emptied at episode ends), each statistic of the committed team equals
    its definition (``ensemble_env.metrics``) on the window rows whose answering team contained it; the count
    features and ``model_accuracy`` count what was revealed; the info ``focal_diversity`` is the revealed one."""
    cache = make_cache(
        n_models=n_models, n_questions=300, n_tasks=3, n_choices=(2, 3, 5), error_correlation=0.4, seed=seed
    )
    b = 3
    venv = ensemble_env.vector_env(
        b,
        cache,
        split="all",
        order="shuffled",
        window=window,
        episode_length=40,
        metrics=ALL,
        decider_extras=("model_accuracy",),
        feedback="team",
    )
    layout = venv.layout.decider
    rows: list[deque[tuple[int, np.ndarray]]] = [deque(maxlen=window) for _ in range(b)]
    venv.reset(seed=seed)
    rng = np.random.default_rng(seed)
    covered_sizes = []
    for step in range(300):
        questions, teams = venv.next_questions(), venv.team
        action = {"decider": np.stack([random_team(rng, n_models) for _ in range(b)]), "fusion": rng.integers(0, 5, b)}
        obs, _, terminations, truncations, infos = venv.step(action)
        for env in range(b):
            rows[env].append((int(questions[env]), teams[env]))
            if terminations["decider"][env] or truncations["decider"][env]:
                rows[env].clear()  # a new episode starts from an empty window
        if step % 7:
            continue
        statistics = venv.window_statistics()
        for env in range(b):
            members = np.flatnonzero(venv.team[env])
            covered = [q for q, team in rows[env] if team[members].all()]
            covered_sizes.append(len(covered))
            expected = definitions(cache, covered, members)
            np.testing.assert_allclose(statistics[env], expected, rtol=0, atol=1e-9)
            decider = obs["decider"][env]
            np.testing.assert_array_equal(decider[layout["statistics"]], statistics[env].astype(np.float32))
            assert decider[layout["statistics_count"]][0] == count(len(covered))
            assert infos["decider"]["focal_diversity"][env] == statistics[env][ALL.index("focal_diversity")]
            seen = np.sum([team for _, team in rows[env]], axis=0, dtype=np.int64) if rows[env] else 0 * members
            right = np.sum([team * cache.correct[q] for q, team in rows[env]], axis=0) if rows[env] else seen
            accuracy = np.where(seen > 0, right / np.maximum(seen, 1), 0.0).astype(np.float32)
            np.testing.assert_array_equal(decider[layout["model_accuracy"]], accuracy * np.ones(n_models))
            np.testing.assert_array_equal(decider[layout["model_accuracy_count"]], count(seen * np.ones(n_models)))
    assert 0 in covered_sizes and max(covered_sizes) >= 3  # empty and non-empty revealed windows both met


def test_with_the_whole_pool_answering_team_feedback_shows_what_all_shows() -> None:
    """Every question answered by every model: each block of ``feedback="all"`` has the same values under
    ``"team"`` (bit for bit), and every count feature is that of the rows or questions answered."""
    cache = make_cache(n_models=4, n_questions=300, n_tasks=3, n_choices=(2, 4, 3), seed=5)
    options = {**unseen_game(4), "metrics": ALL, "window": 7, "split": "all", "diversity_bonus": 0.25}
    every = ensemble_env.vector_env(3, cache, **options)
    team = ensemble_env.vector_env(3, cache, **options, feedback="team")
    assert [name for name in team.layout.decider if name not in every.layout.decider] == [
        "statistics_count",
        "model_accuracy_count",
        "task_record_count",
        "team_record_count",
    ]
    every.reset(seed=2)
    team.reset(seed=2)
    rng = np.random.default_rng(0)
    for _ in range(150):  # episodes end (tasks of about 100 questions) and auto-reset
        action = {"decider": np.ones((3, 4), np.int8), "fusion": rng.integers(0, 4, 3)}
        obs_all, rewards_all, *_, infos_all = every.step(action)
        obs_team, rewards_team, *_, infos_team = team.step(action)
        for agent in ("decider", "fusion"):
            blocks = getattr(team.layout, agent)
            for name, part in getattr(every.layout, agent).items():
                np.testing.assert_array_equal(obs_team[agent][:, blocks[name]], obs_all[agent][:, part])
        assert_same(rewards_team, rewards_all)
        assert_same(infos_team["fusion"], infos_all["fusion"])
        counters = team.get_state()["counters"]
        window, answered = counters[:, Counter.COUNT], counters[:, Counter.ANSWERED]
        decider, parts = obs_team["decider"], team.layout.decider
        np.testing.assert_array_equal(decider[:, parts["statistics_count"]], count(window)[:, None])
        for name, n in (("model_accuracy_count", window), ("task_record_count", answered)):
            np.testing.assert_array_equal(decider[:, parts[name]], np.repeat(count(n)[:, None], 4, axis=1))
        teams = np.repeat(count(answered)[:, None], 15, axis=1)
        np.testing.assert_array_equal(decider[:, parts["team_record_count"]], teams)


# -- the records, by hand ---------------------------------------------------------------------------------------


def test_hand_values_under_team_feedback() -> None:
    """Task a (q0 q2 q4 q5, the tables of ``testing.game``), window 2, answered by E_0 = every model, then {m0 m1},
    {m1}, {m0 m2}; the committed team is {m0 m2}. Each value written out from the tables."""
    assert list(np.flatnonzero(TASKS == 0)) == [0, 2, 4, 5] and list(LABELS[[0, 2, 4, 5]]) == [0, 1, 0, 1]
    env = ensemble_env.unseen_parallel_env(
        hand_cache(), version=2, split="all", tasks=["a"], window=2, metrics=("disagreement", "plurality_accuracy")
    )
    layout = env.engine.layout
    env.reset(seed=0)
    for team in ([1, 1, 0], [0, 1, 0], [1, 0, 1], [1, 0, 1]):
        obs, *_ = env.step({"decider": np.array(team), "fusion": 0})
    decider, fusion = obs["decider"], obs["fusion"]

    def block(name: str) -> np.ndarray:
        parts = layout.decider if name in layout.decider else layout.fusion
        return (decider if name in layout.decider else fusion)[parts[name]]

    # the window: q4 (answered by {m1}), q5 (by {m0 m2}); only q5 revealed both members of {m0 m2}, both right on it
    np.testing.assert_allclose(block("statistics"), [0.0, 1.0])  # under "all": disagreement 1/2 (m0 wrong on q4)
    np.testing.assert_allclose(block("statistics_count"), [1 / 17])
    # window accuracy: m0 seen on q5 (right), m1 on q4 (right), m2 on q5 (right); under "all" m0 would be 1/2
    np.testing.assert_allclose(block("model_accuracy"), [1, 1, 1])
    np.testing.assert_allclose(block("model_accuracy_count"), [1 / 17, 1 / 17, 1 / 17])
    # the task: m0 revealed on q0 q2 q5 (right on all), m1 on q0 q2 q4 (right on q4), m2 on q0 q5 (right on q5)
    np.testing.assert_allclose(block("task_record"), [4 / 20, 1, 1 / 3, 1 / 2], rtol=1e-6)
    np.testing.assert_allclose(block("task_record_count"), [3 / 19, 3 / 19, 2 / 18], rtol=1e-6)
    # teams {m0} {m1} {m0 m1} {m2} {m0 m2} {m1 m2} {m0 m1 m2}: the questions whose answering team held them
    np.testing.assert_allclose(block("team_record"), [1, 1 / 3, 1, 1 / 2, 1, 0, 1], rtol=1e-6)
    np.testing.assert_allclose(
        block("team_record_count"), [3 / 19, 3 / 19, 2 / 18, 2 / 18, 2 / 18, 1 / 17, 1 / 17], rtol=1e-6
    )
    np.testing.assert_allclose(block("member_record"), [4 / 20, 1, 0, 1 / 2], rtol=1e-6)
    np.testing.assert_allclose(block("member_record_count"), [3 / 19, 0, 2 / 18], rtol=1e-6)
    # the tables behind those numbers
    assert_same([CORRECT[[0, 2, 5], 0], CORRECT[[0, 2, 4], 1], CORRECT[[0, 5], 2]], [[1, 1, 1], [0, 0, 1], [0, 1]])
    assert_same([TEAMS[[0, 2, 4], 1], TEAMS[[0, 5], 3], TEAMS[0, 5]], [[0, 0, 1], [0, 1], 0])


# -- snapshots --------------------------------------------------------------------------------------------------


def test_a_snapshot_is_exact_while_the_window_holds_the_episode(synthetic: LogitCache) -> None:
    """With the whole episode in the window, one revealed output more or fewer is refused; the newest slot's team
    is that of the info ``team_size``; a slot not yet written holds no team."""
    config = EnvConfig(**unseen_game(5, version=2), split="all", window=50)
    venv = ensemble_env.EnsembleVectorEnv(synthetic, config, num_envs=2)
    venv.reset(seed=1)
    rng = np.random.default_rng(0)
    for _ in range(4):
        venv.step({"decider": np.stack([random_team(rng, 5) for _ in range(2)]), "fusion": np.zeros(2, np.int64)})
    masks = revealed_masks(venv.get_state()["revealed"], 5)
    assert masks.shape == (2, 50, 5) and not masks[:, 4:].any()
    for field, index, change, message in (
        ("model_seen", (0, 0), 1, r"model_seen\[0, 0\] = \d+ is not the count .* plus 0 to 0 more"),
        ("revealed", (1, 3, 0), -int(venv.get_state()["revealed"][1, 3, 0]), r"revealed\[1, 3\] = 0 is a team of 0"),
        ("revealed", (0, 9, 0), 1, r"revealed\[0, 9\] = 1 is not 0: copy 0's window has 4 slots written"),
    ):
        snapshot = venv.get_state()
        snapshot[field][index] += np.asarray(change).astype(snapshot[field].dtype)
        with pytest.raises(ValueError, match=message):
            venv.set_state(snapshot)


# -- today's game is untouched ----------------------------------------------------------------------------------


def test_option_vocabulary_and_todays_game_never_runs_the_feedback_kernels(
    synthetic: LogitCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ValueError, match=r"feedback='none' is not one of 'all', 'team'"):
        EnvConfig(feedback="none")
    assert EnvConfig(feedback=np.str_("team")).feedback == "team"
    with pytest.raises(ValueError, match=r"EnsembleUnseen-v2 is the game with feedback='team', got feedback='all'"):
        unseen_game(3, {"feedback": "all"}, version=2)
    with pytest.raises(ValueError, match=r"version=3 is not one of 1, 2"):
        unseen_game(3, version=3)

    def never(*args: object) -> None:
        raise AssertionError("a feedback kernel ran with feedback='all'")

    for name in ("step_team", "observe_team", "revealed_statistics", "feedback_step", "observe_feedback"):
        monkeypatch.setattr(feedback, name, never)  # before the engines are built: their components take them
    for venv in (ensemble_env.vector_env(2, synthetic), ensemble_env.unseen_vector_env(2, synthetic)):
        assert not any(isinstance(part, PartialFeedback) for part in venv.components)
        venv.reset(seed=0)
        for _ in range(5):
            venv.step({"decider": np.ones((2, 5), np.int8), "fusion": np.zeros(2, np.int64)})
        venv.window_statistics()
        snapshot = venv.get_state()
        assert not {"revealed", "seen", "seen_right", "model_seen", "team_seen"} & set(snapshot)
        assert "feedback" not in str(snapshot["signature"])
        assert not any(name.endswith("_count") for name in (*venv.layout.decider, *venv.layout.fusion))
