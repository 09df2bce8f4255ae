"""Routing on tasks never seen (``ensemble_env/EnsembleUnseen-v1``): episodes that are one task, and the records
that describe the task's history instead of its identity (``episodes="task"``, ``task_record``, ``team_record``,
``member_record``).

PettingZoo's own tests on the registered id, every record checked by hand on a tiny cache after each step, an
episode is one task (all its questions, in cache order), the deck of tasks, the observations never tell the task
(two tasks with the same outcomes look the same) nor a label not yet revealed (flipping later labels changes no
earlier observation), exact snapshots and crafted ones refused, and today's game untouched.

The registration, PettingZoo's tests, the labels not yet revealed and the snapshots are checked on both versions of
the game: v1 and ``ensemble_env/EnsembleUnseen-v2``, the same game under partial feedback (its own checks are in
test_feedback.py).
"""

from __future__ import annotations

import numpy as np
import pettingzoo
import pytest
from pettingzoo.test import api_test, parallel_api_test, seed_test
from testing.game import CORRECT, LABELS, P0, TASKS, TEAMS, assert_same, hand_cache, random_team, through_savez

import ensemble_env
from ensemble_env import UNSEEN_ENV_ID, UNSEEN_V2_ENV_ID, LogitCache
from ensemble_env.game import task_record
from ensemble_env.game.components import TaskRecords
from ensemble_env.game.config import RECORD_EXTRAS, UNSEEN_GAME, EnvConfig, unseen_game
from ensemble_env.game.records import Counter
from ensemble_env.game.snapshot import SNAPSHOT_KEYS
from ensemble_env.synthetic import make_cache


@pytest.fixture(scope="module")
def synthetic() -> LogitCache:
    return make_cache(n_models=4, n_questions=300, n_tasks=3, n_choices=(2, 4, 3), seed=5)


def test_the_hand_tables_are_the_cache() -> None:
    cache = hand_cache()
    np.testing.assert_array_equal(cache.correct, CORRECT)
    masks = ensemble_env.game.actions.subset_masks(3)
    votes = (P0[:, None, :] * masks[None]).sum(axis=2) >= (masks.sum(axis=1)[None] / 2)
    np.testing.assert_array_equal(np.where(votes, 0, 1) == LABELS[:, None], TEAMS)


# -- the option set and its registration ----------------------------------------------------------------------


def test_the_option_set_hides_the_task() -> None:
    game = unseen_game(3)
    assert game == {**UNSEEN_GAME, "decider_extras": ("model_accuracy", "task_record", "team_record")}
    assert "team_record" not in unseen_game(11)["decider_extras"]
    for options, message in (
        ({"decider_extras": ("task",)}, r"hides the task's identity: decider_extras=\('task',\) shows it"),
        ({"fusion_extras": ("member_record", "task")}, r"fusion_extras=\('member_record', 'task'\) shows it"),
        ({"episodes": "stream"}, r"one task per episode: episodes='stream' must be 'task'"),
        ({"fusion_action": "weights", "fusion_agents": "per_model"}, r"fusion_agents='per_model' observe the task"),
    ):
        with pytest.raises(ValueError, match=message):
            unseen_game(3, options)
        with pytest.raises(ValueError, match=message):
            pettingzoo.make("parallel", UNSEEN_ENV_ID, cache=hand_cache(), **options)


def test_the_records_need_task_episodes_and_small_pools() -> None:
    for extras in (("decider_extras", ("task_record",)), ("fusion_extras", ("member_record",))):
        with pytest.raises(ValueError, match=rf"{extras[0]} '\w+_record': the task's record needs episodes='task'"):
            EnvConfig(**{extras[0]: extras[1]})
    with pytest.raises(ValueError, match=r"order='shuffled' must be 'sequential'"):
        EnvConfig(episodes="task", order="shuffled")
    with pytest.raises(ValueError, match=r"'team_record' has a value per team, 2\*\*N - 1, for pools of N <= 10"):
        ensemble_env.parallel_env(make_cache(n_models=11, n_questions=20, seed=0), **unseen_game(8))
    with pytest.raises(ValueError, match=r"episode_length=5 exceeds the 4 questions of the largest task"):
        ensemble_env.parallel_env(hand_cache(), **unseen_game(3), split="all", episode_length=5)
    assert set(RECORD_EXTRAS) <= {*unseen_game(3)["decider_extras"], *unseen_game(3)["fusion_extras"]}


#: the two versions of the unseen-task game: (id, feedback)
VERSIONS = {1: (UNSEEN_ENV_ID, "all"), 2: (UNSEEN_V2_ENV_ID, "team")}


@pytest.mark.parametrize("version", [1, 2], ids=["v1", "v2"])
def test_registered_for_both_apis(synthetic: LogitCache, version: int) -> None:
    """Each id builds its version's game for both APIs: one task per episode, no task in sight, the records; under
    partial feedback (v2) each statistic and record with its count. Another feedback than the id's is refused."""
    env_id, feedback = VERSIONS[version]
    env = pettingzoo.make("parallel", env_id, cache=synthetic)
    assert env.engine.config == EnvConfig(**unseen_game(4, version=version)) and env.engine.config.feedback == feedback
    layout = env.engine.layout
    assert "task" not in layout.decider and "task" not in layout.fusion
    if version == 1:
        assert list(layout.decider)[2:] == ["statistics", "model_accuracy", "task_record", "team_record"]
        assert list(layout.fusion)[-1:] == ["member_record"]
    else:  # partial feedback: what was revealed, counted
        assert list(layout.decider)[2:] == [
            *("statistics", "statistics_count", "model_accuracy", "model_accuracy_count"),
            *("task_record", "task_record_count", "team_record", "team_record_count"),
        ]
        assert list(layout.fusion)[-2:] == ["member_record", "member_record_count"]
    sizes = {name: part.stop - part.start for name, part in (*layout.decider.items(), *layout.fusion.items())}
    assert (sizes["task_record"], sizes["team_record"], sizes["member_record"]) == (5, 15, 5)
    if version == 2:
        assert (sizes["task_record_count"], sizes["team_record_count"]) == (4, 15)
    assert env.state_space.shape == (layout.decider_size + layout.fusion_size,)
    aec = pettingzoo.make("aec", env_id, cache=synthetic, alpha=0.5)
    config = aec.unwrapped.engine.config
    assert config.alpha == 0.5 and config.episodes == "task" and config.feedback == feedback
    assert ensemble_env.unseen_vector_env(2, synthetic, version=version).config.feedback == feedback
    other = "team" if feedback == "all" else "all"
    with pytest.raises(ValueError, match=rf"EnsembleUnseen-v{version} is the game with feedback='{feedback}'"):
        pettingzoo.make("parallel", env_id, cache=synthetic, feedback=other)


@pytest.mark.parametrize("version", [1, 2], ids=["v1", "v2"])
def test_pettingzoo_api_tests(synthetic: LogitCache, version: int) -> None:
    env_id, _ = VERSIONS[version]
    parallel_api_test(pettingzoo.make("parallel", env_id, cache=synthetic, window=20), num_cycles=300)
    api_test(pettingzoo.make("aec", env_id, cache=synthetic, window=20), num_cycles=200)
    seed_test(lambda: pettingzoo.make("aec", env_id, cache=synthetic, episode_length=30), num_cycles=200)


# -- the records, by hand -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("task", "questions"), [("a", [0, 2, 4, 5]), ("b", [1, 3, 6])], ids=["task_a", "task_b"])
def test_each_record_after_each_step(task: str, questions: list[int]) -> None:
    env = ensemble_env.unseen_parallel_env(hand_cache(), split="all", tasks=[task], window=2)
    layout = env.engine.layout
    obs, infos = env.reset(seed=0)
    np.testing.assert_array_equal(obs["decider"][layout.decider["task_record"]], np.zeros(4))  # nothing answered
    np.testing.assert_array_equal(obs["decider"][layout.decider["team_record"]], np.zeros(7))
    np.testing.assert_array_equal(obs["fusion"][layout.fusion["member_record"]], np.zeros(4))
    teams = ([1, 1, 0], [0, 0, 1], [1, 0, 1], [1, 1, 1])
    for t, q in enumerate(questions):
        obs, _, terminations, truncations, infos = env.step({"decider": np.array(teams[t]), "fusion": 0})
        assert infos["decider"]["question"] == q
        n = t + 1
        answered = questions[:n]
        count = n / (n + 16)  # the count feature: 1/17, 2/18, 3/19, 4/20
        rates = CORRECT[answered].sum(axis=0) / n
        decider, fusion = obs["decider"], obs["fusion"]
        np.testing.assert_allclose(decider[layout.decider["task_record"]], [count, *rates], rtol=1e-6)
        np.testing.assert_allclose(decider[layout.decider["team_record"]], TEAMS[answered].sum(axis=0) / n, rtol=1e-6)
        members = np.array(teams[t])  # the team just committed answers the fusion agent's next question
        np.testing.assert_allclose(fusion[layout.fusion["member_record"]], [count, *(rates * members)], rtol=1e-6)
        # the window (T = 2) forgets; the record keeps the whole task
        window = answered[-2:]
        np.testing.assert_allclose(decider[layout.decider["model_accuracy"]], CORRECT[window].mean(axis=0), rtol=1e-6)
        for agent in env.possible_agents:
            assert env.observation_space(agent).contains(obs[agent])
        assert env.state_space.contains(env.state())
    assert terminations == {"decider": True, "fusion": True} and truncations == {"decider": False, "fusion": False}


def test_hand_values_written_out() -> None:
    """Task a after its third question (q0, q2, q4): the values as literals."""
    env = ensemble_env.unseen_parallel_env(hand_cache(), split="all", tasks=["a"])
    env.reset(seed=0)
    for _ in range(3):
        obs, *_ = env.step({"decider": np.array([0, 1, 1]), "fusion": 0})
    layout = env.engine.layout
    np.testing.assert_allclose(obs["decider"][layout.decider["task_record"]], [3 / 19, 2 / 3, 1 / 3, 1 / 3], rtol=1e-6)
    np.testing.assert_allclose(
        obs["decider"][layout.decider["team_record"]], [2 / 3, 1 / 3, 1, 1 / 3, 2 / 3, 1 / 3, 2 / 3], rtol=1e-6
    )
    np.testing.assert_allclose(obs["fusion"][layout.fusion["member_record"]], [3 / 19, 0, 1 / 3, 1 / 3], rtol=1e-6)
    assert task_record.RECORD_COUNT_HALF == 16


# -- episodes are tasks ---------------------------------------------------------------------------------------


def test_an_episode_is_one_task_in_cache_order(synthetic: LogitCache) -> None:
    env = ensemble_env.unseen_parallel_env(synthetic, split="train")
    by_task = {task: synthetic.select("train", [synthetic.task_names[task]]) for task in range(3)}
    seen = []
    for episode in range(9):
        _, infos = env.reset(seed=episode)
        played = []
        while env.agents:
            _, _, terminations, truncations, infos = env.step({"decider": np.ones(4, np.int8), "fusion": 0})
            played.append(int(infos["fusion"]["question"]))
        task = int(synthetic.tasks[played[0]])
        np.testing.assert_array_equal(played, by_task[task])  # all of the task's questions, in cache order
        assert terminations["fusion"] and not truncations["fusion"]
        assert infos["fusion"]["step"] == by_task[task].size
        seen.append(task)
    assert set(seen) == {0, 1, 2}  # each reset deals from a fresh deck: a uniformly drawn task


def test_episode_length_is_a_window_of_the_task(synthetic: LogitCache) -> None:
    venv = ensemble_env.unseen_vector_env(3, synthetic, split="train", episode_length=10)
    venv.reset(seed=2)
    starts, cut = [], []
    for env in range(3):
        questions = venv.episode_questions(env)
        assert questions.size == 10 and np.unique(synthetic.tasks[questions]).size == 1
        stream = synthetic.select("train", [synthetic.task_names[synthetic.tasks[questions[0]]]])
        start = int(np.flatnonzero(stream == questions[0])[0])
        np.testing.assert_array_equal(questions, stream[start : start + 10])  # contiguous, in cache order
        starts.append(start)
        cut.append(start + 10 < stream.size)
    assert len(set(starts)) > 1
    for _ in range(9):
        *_, terminations, truncations, infos = venv.step(
            {"decider": np.ones((3, 4), np.int8), "fusion": np.zeros(3, np.int64)}
        )
    assert not terminations["fusion"].any() and not truncations["fusion"].any()
    *_, terminations, truncations, infos = venv.step(
        {"decider": np.ones((3, 4), np.int8), "fusion": np.zeros(3, np.int64)}
    )
    np.testing.assert_array_equal(truncations["fusion"], cut)  # a cut of a longer task: truncated, else terminated
    np.testing.assert_array_equal(terminations["fusion"], ~np.array(cut))
    # the final observation shows the task's real next question; the records start again at the next episode
    record = venv.layout.decider["task_record"]
    assert (infos["final_obs"]["decider"][:, record.start] == np.float32(10 / 26)).all()
    assert (venv.observations["decider"][:, record] == 0).all()


def test_the_deck_deals_every_task_once(synthetic: LogitCache) -> None:
    """After reset, copies take the tasks of a fresh deck in turn (B = task count: each task once); auto-resets
    deal on, a new deck shuffled when one is used up."""
    venv = ensemble_env.unseen_vector_env(3, synthetic, split="test")
    venv.reset(seed=0)
    first = [int(synthetic.tasks[venv.episode_questions(env)[0]]) for env in range(3)]
    assert sorted(first) == [0, 1, 2]
    sizes = {env: venv.episode_questions(env).size for env in range(3)}
    answered = {env: [] for env in range(3)}
    dealt = []
    for _ in range(max(sizes.values())):
        answering = venv.next_questions()  # what each copy answers at this step
        venv.step({"decider": np.ones((3, 4), np.int8), "fusion": np.zeros(3, np.int64)})
        for env in range(3):
            if len(answered[env]) < sizes[env]:
                answered[env].append(int(answering[env]))
                if len(answered[env]) == sizes[env]:  # auto-reset: the copy's next task is dealt
                    dealt.append(int(synthetic.tasks[venv.episode_questions(env)[0]]))
    played = np.sort(np.concatenate([answered[env] for env in range(3)]))
    np.testing.assert_array_equal(played, synthetic.select("test"))  # every test question once
    assert sorted(dealt) == [0, 1, 2]  # the second deck, dealt as the copies finish


# -- what the observations never show -------------------------------------------------------------------------


def _twin_cache() -> LogitCache:
    """Tasks "a" and "a2" have the same questions (probabilities, labels), interleaved in the cache."""
    probs = np.stack([P0, 1 - P0], axis=2)[[0, 2, 4, 5]]
    return LogitCache(
        scores=np.repeat(probs, 2, axis=0),
        labels=np.repeat(LABELS[[0, 2, 4, 5]], 2),
        models=("m0", "m1", "m2"),
        score_kind="prob",
        tasks=np.tile([0, 1], 4),
        task_names=("a", "a2"),
        split=np.zeros(8, dtype=int),
    )


def _play(env: ensemble_env.EnsembleParallelEnv, seed: int, actions_seed: int = 0) -> tuple[list, list, list]:
    """Observations (decider, fusion, state) from the reset to the episode's end, the questions answered, and the
    team committed at each step (the one that answers the next question)."""
    rng = np.random.default_rng(actions_seed)
    obs, _ = env.reset(seed=seed)
    trace, questions, teams = [(obs["decider"], obs["fusion"], env.state())], [], []
    while env.agents:
        actions = {"decider": rng.integers(0, 2, 3).astype(np.int8), "fusion": int(rng.integers(0, 2))}
        obs, _, _, _, infos = env.step(actions)
        trace.append((obs["decider"], obs["fusion"], env.state()))
        questions.append(int(infos["fusion"]["question"]))
        teams.append(actions["decider"])
    return trace, questions, teams


def test_two_tasks_with_the_same_outcomes_look_the_same() -> None:
    env = ensemble_env.unseen_parallel_env(_twin_cache(), split="all", reward_history=2)
    traces = {}
    for seed in range(20):
        trace, questions, _ = _play(env, seed)
        traces[env.cache.task_names[env.cache.tasks[questions[0]]]] = trace
        if len(traces) == 2:
            break
    assert set(traces) == {"a", "a2"}
    for (d1, f1, s1), (d2, f2, s2) in zip(traces["a"], traces["a2"], strict=True):
        np.testing.assert_array_equal(d1, d2)
        np.testing.assert_array_equal(f1, f2)
        np.testing.assert_array_equal(s1, s2)
    # with the task's one-hot (a plain game), the same episodes differ: the test can tell
    shown = ensemble_env.parallel_env(_twin_cache(), episodes="task", split="all", decider_extras=("task",))
    shown_traces = {}
    for seed in range(20):
        trace, questions, _ = _play(shown, seed)
        shown_traces[int(shown.cache.tasks[questions[0]])] = trace
    assert not np.array_equal(shown_traces[0][0][0], shown_traces[1][0][0])


@pytest.mark.parametrize("task", ["a", "b"])
@pytest.mark.parametrize("version", [1, 2], ids=["v1", "v2"])
def test_no_label_is_shown_before_its_question_is_answered(version: int, task: str) -> None:
    """Flip the labels of the questions after q_t: every observation up to step t stays the same (and a later one
    changes, so the flip is seen once revealed: under full feedback (v1) always, under partial feedback (v2) when the
    team that answered q_{t+1} held a model; the teams played include the empty one)."""
    questions = np.flatnonzero(TASKS == (0 if task == "a" else 1))
    options = {"split": "all", "tasks": [task], **({"version": 2, "window": 2} if version == 2 else {})}
    base, _, teams = _play(ensemble_env.unseen_parallel_env(hand_cache(), **options), seed=0)
    assert {bool(team.any()) for team in teams[: questions.size - 1]} == {True, False}  # an empty team answers too
    for t in range(questions.size - 1):
        labels = LABELS.copy()
        later = questions[t + 1 :]
        labels[later] = 1 - labels[later]
        flipped, _, _ = _play(ensemble_env.unseen_parallel_env(hand_cache(labels), **options), seed=0)
        for k in range(t + 2):  # the reset's observation, then those after steps 0 .. t
            for got, expected in zip(flipped[k], base[k], strict=True):
                np.testing.assert_array_equal(got, expected, err_msg=f"step {k - 1}, labels flipped after q_{t}")
        shown = not np.array_equal(flipped[t + 2][0], base[t + 2][0])  # revealed at step t + 1
        assert shown == (version == 1 or bool(teams[t].any())), (t, teams[t])


# -- snapshots ----------------------------------------------------------------------------------------------------


def _actions(rng: np.random.Generator, n_envs: int) -> dict[str, np.ndarray]:
    return {"decider": np.stack([random_team(rng, 4) for _ in range(n_envs)]), "fusion": rng.integers(0, 3, n_envs)}


def _venv(cache: LogitCache, version: int, autoreset: bool = True, **options: object) -> ensemble_env.EnsembleVectorEnv:
    config = EnvConfig(**unseen_game(cache.n_models, version=version), **options)
    return ensemble_env.EnsembleVectorEnv(cache, config, num_envs=3, autoreset=autoreset)


#: the round trips: each version's game (v2 in a window of 3: most of each episode has left the window), the steps
#: played before the snapshot, and the arrays the version adds to the snapshot
ROUND_TRIPS = {
    1: ({"split": "test", "window": 5}, 7, {"task_deck", "model_right", "team_right"}),
    2: (
        {"split": "all", "window": 3},
        40,
        {"task_deck", "model_right", "team_right", "revealed", "seen", "seen_right", "model_seen", "team_seen"},
    ),
}


@pytest.mark.parametrize("autoreset", [True, False])
@pytest.mark.parametrize("version", [1, 2], ids=["v1", "v2"])
def test_snapshot_round_trip_mid_episode(synthetic: LogitCache, version: int, autoreset: bool) -> None:
    """A snapshot taken mid-episode, through ``np.savez``, restored into an engine reset otherwise: every later step
    gives what the first engine gave (across episode ends with auto-reset), and both deal the same next episode."""
    options, steps, arrays = ROUND_TRIPS[version]
    first = _venv(synthetic, version, autoreset, **options)
    first.reset(seed=4)
    rng = np.random.default_rng(1)
    for _ in range(steps):
        first.step(_actions(rng, 3))
    snapshot = first.get_state()
    assert set(snapshot) == {*SNAPSHOT_KEYS, *arrays}
    if version == 2:
        assert "feedback='team'" in str(snapshot["signature"])
    else:
        assert "feedback" not in str(snapshot["signature"])
    later = [_actions(rng, 3) for _ in range(150 if autoreset else 20)]
    expected = [first.step(action) for action in later]
    second = _venv(synthetic, version, autoreset, **options)
    second.reset(seed=99)
    second.set_state(through_savez(snapshot))
    for action, want in zip(later, expected, strict=True):
        assert_same(second.step(action), want)
    assert_same(second.state(), first.state())
    first.reset()  # the generator and the deck moved on identically
    second.reset()
    np.testing.assert_array_equal(first.state(), second.state())


#: the snapshots the crafted ones are made of: each version's game and its steps (v2 in a window of 3)
PLAYED = {1: ({"split": "test", "window": 5}, 6), 2: ({"split": "all", "window": 3}, 8)}


def _played(synthetic: LogitCache, version: int = 1) -> ensemble_env.EnsembleVectorEnv:
    options, steps = PLAYED[version]
    venv = ensemble_env.unseen_vector_env(3, synthetic, version=version, **options)
    venv.reset(seed=4)
    rng = np.random.default_rng(2)
    for _ in range(steps):
        venv.step(_actions(rng, 3))
    return venv


CRAFTED = [
    (1, "model_right", (1, 2), 1, r"set_state: model_right\[1, 2\] = \d+ is not \d+, the count the 6 questions"),
    (1, "team_right", (2, 14), -1, r"set_state: team_right\[2, 14\] = -?\d+ is not \d+, the count"),
    (1, "task_deck", (3,), 1, r"set_state: task_deck\[3\] = 4 is outside \[0, 3\] \(the tasks dealt\)"),
    (2, "revealed", (0, 0, 0), 1 << 7, r"set_state: revealed\[0, 0\] = \d+ sets a bit beyond the N=4 models"),
    (2, "seen", (1, 2), 1, r"set_state: seen\[1, 2\] = \d+ is not \d+, the count the 3 rows of copy 1's window"),
    (2, "seen_right", (2, 0), -1, r"set_state: seen_right\[2, 0\] = -?\d+ is not \d+"),
    (2, "model_seen", (0, 1), 100, r"set_state: model_seen\[0, 1\] = \d+ is not the count of copy 0's window rows"),
    (2, "team_right", (1, 14), 100, r"set_state: team_right\[1, 14\] = \d+ is not the count of copy 1's window"),
]


@pytest.mark.parametrize(
    ("version", "field", "index", "change", "message"), CRAFTED, ids=[f"v{v}-{f}" for v, f, *_ in CRAFTED]
)
def test_a_crafted_snapshot_is_refused(
    synthetic: LogitCache, version: int, field: str, index: tuple[int, ...], change: int, message: str
) -> None:
    venv = _played(synthetic, version)
    snapshot = venv.get_state()
    before = {name: array.copy() for name, array in snapshot.items()}
    snapshot[field][index] += np.asarray(change).astype(snapshot[field].dtype)
    with pytest.raises(ValueError, match=message):
        venv.set_state(snapshot)
    after = venv.get_state()
    assert all(np.array_equal(after[name], before[name]) for name in before)  # nothing changed


def test_snapshot_refuses_a_deck_that_is_not_a_permutation_and_a_start_outside_a_task(synthetic: LogitCache) -> None:
    venv = _played(synthetic)
    snapshot = venv.get_state()
    snapshot["task_deck"][:3] = [0, 0, 1]
    with pytest.raises(ValueError, match=r"task_deck\[:3\] = \[0, 0, 1\] is not a permutation of 0..2"):
        venv.set_state(snapshot)
    snapshot = venv.get_state()
    counters, bounds = snapshot["counters"], venv.task_bounds
    task = int(np.searchsorted(bounds, counters[0, Counter.START], side="right")) - 1
    counters[0, Counter.START] = bounds[task + 1] - 1  # the task's last question: the whole task cannot fit
    with pytest.raises(ValueError, match=rf"counters\[0, START\] = \d+ is outside \[{bounds[task]}, {bounds[task]}\]"):
        venv.set_state(snapshot)
    other = (task + 1) % (bounds.size - 1)  # the start of another task, its STREAM right: the window tells
    counters[0, Counter.START] = bounds[other]
    counters[0, Counter.STREAM] = bounds[other + 1] - bounds[other]
    with pytest.raises(ValueError, match=r"set_state: window\[0, \d\] = \d+ is not question \d+"):
        venv.set_state(snapshot)


def test_a_snapshot_of_a_copy_past_its_task_replays(synthetic: LogitCache) -> None:
    """Without auto-reset a copy stepped past its task's end answers the task's last question again (and counts it
    again); its snapshot restores and replays exactly."""
    options = EnvConfig(**unseen_game(4), split="test")
    venv = ensemble_env.EnsembleVectorEnv(synthetic, options, num_envs=3, autoreset=False)
    venv.reset(seed=1)
    rng = np.random.default_rng(0)
    for _ in range(int(np.diff(venv.task_bounds).max()) + 3):
        venv.step(_actions(rng, 3))
    counters = venv.get_state()["counters"]
    assert (counters[:, Counter.POS] > counters[:, Counter.STREAM]).all()
    twin = ensemble_env.EnsembleVectorEnv(synthetic, options, num_envs=3, autoreset=False)
    twin.set_state(venv.get_state())
    action = _actions(rng, 3)
    np.testing.assert_array_equal(twin.step(action)[0]["decider"], venv.step(action)[0]["decider"])


# -- today's game is untouched -------------------------------------------------------------------------------------


def test_without_the_records_nothing_runs_and_snapshots_are_as_they_were(
    synthetic: LogitCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    def never(*args: object) -> None:
        raise AssertionError("a record kernel ran without a record extra")

    monkeypatch.setattr(task_record, "record_step", never)  # before the engines are built: their components take it
    monkeypatch.setattr(task_record, "observe_record", never)
    for options in ({}, {"episodes": "task"}):
        venv = ensemble_env.vector_env(2, synthetic, **options)
        assert not any(isinstance(part, TaskRecords) for part in venv.components)
        venv.reset(seed=0)
        for _ in range(5):
            venv.step({"decider": np.ones((2, 4), np.int8), "fusion": np.zeros(2, np.int64)})
        snapshot = venv.get_state()
        extra = {"task_deck"} if options else set()
        assert set(snapshot) == {*SNAPSHOT_KEYS, *extra}
        assert ("episodes" in str(snapshot["signature"])) == bool(options)
