"""``ensemble_env/EnsembleGen-v0``: every episode a generated task (``ensemble_env.views.generated``).

The deck is the generator's stream (task i = ``sample(1, task_seed, first=i)``'s, held-out draws disjoint), seeded
(the same seeds the same tasks and order, other seeds other tasks), an episode is one whole generated task and the first
``deck_size`` episodes from a seeded reset are distinct tasks in every view, partial feedback by default and
``feedback="all"`` allowed, keywords that would change the scenario refused in one line, 10 models with the team
record, a hostile generator file refused in one line, the AEC and parallel views agreeing, PettingZoo's API tests on
the registered id, snapshots restored into the same scenario and refused by another, and the same width for every
deck of a generator.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pettingzoo
import pytest
from pettingzoo.test import api_test, parallel_api_test, seed_test

import ensemble_env
from ensemble_env import GEN_ENV_ID, HELD_OUT_FIRST, ID_OPTIONS, TaskGenerator
from ensemble_env.cache.logit_cache import CacheError
from ensemble_env.synthetic import make_cache
from ensemble_env.views.generated import DEFAULT_DECK_SIZE, gen_deck


@pytest.fixture(scope="module")
def generator() -> TaskGenerator:
    """A small generator: 4 models, three tasks of 2, 3 and 4 choices."""
    accuracy = [0.4, 0.5, 0.6, 0.8]
    real = make_cache(n_models=4, n_questions=600, n_tasks=3, n_choices=[2, 3, 4], accuracy=accuracy, seed=1)
    return ensemble_env.fit_generator(real)


def small(generator: Any, **keywords: Any) -> dict[str, Any]:
    """Keywords of a small scenario: the module's generator, 6 tasks of 20-40 questions, a short window."""
    return {"generator": generator, "deck_size": 6, "questions": (20, 40), "window": 16, **keywords}


def play(env: Any, episodes: int, seed: int | None = 0) -> list[list[int]]:
    """The questions each of ``episodes`` episodes of a parallel view answered (the first reset seeded)."""
    played = []
    for episode in range(episodes):
        env.reset(seed=seed if episode == 0 else None)
        questions = []
        while env.agents:
            team = np.ones(env.engine.n_models, dtype=np.int8)
            *_, terminations, truncations, infos = env.step({"decider": team, "fusion": 0})
            questions.append(int(infos["fusion"]["question"]))
        assert terminations["fusion"] and not truncations["fusion"]
        played.append(questions)
    return played


def test_the_deck_is_the_generator_s_stream(generator: TaskGenerator) -> None:
    env = ensemble_env.gen_parallel_env(**small(generator, task_seed=3, first=10))
    deck = env.cache
    assert deck.task_names == tuple(f"gen-{i:06d}" for i in range(10, 16))
    assert deck.max_choices == 4 and deck.n_models == 4  # the generator's widest task, whatever the draw
    for name in ("gen-000012", "gen-000015"):  # task i of the deck is sample(1, task_seed, first=i)'s
        one = generator.sample(1, 3, first=int(name[4:]), questions=(20, 40), model_seed=3)
        rows = deck.select("all", [name])
        np.testing.assert_array_equal(deck.labels[rows], one.labels)
        np.testing.assert_array_equal(deck.probs[rows][:, :, : one.max_choices], one.probs)
    held_out = gen_deck(generator, task_seed=3, first=HELD_OUT_FIRST, deck_size=6, questions=(20, 40))
    assert held_out.task_names[0] == "gen-1000000000" and not set(held_out.task_names) & set(deck.task_names)
    shared = ensemble_env.gen_vector_env(2, **small(generator, task_seed=3, first=10))
    assert env.cache is shared.cache  # one deck for both


def test_seeded_the_same_tasks_in_the_same_order(generator: TaskGenerator) -> None:
    first = play(ensemble_env.gen_parallel_env(**small(generator, task_seed=1)), 8, seed=5)
    again = play(ensemble_env.gen_parallel_env(**small(generator, task_seed=1)), 8, seed=5)
    assert first == again
    deck = gen_deck(generator, task_seed=1, deck_size=6, questions=(20, 40))
    other = gen_deck(generator, task_seed=2, deck_size=6, questions=(20, 40))
    assert deck.n_questions != other.n_questions or not np.array_equal(deck.labels, other.labels)
    assert not np.array_equal(deck.probs[:20], other.probs[:20])  # another stream: other tasks
    reordered = play(ensemble_env.gen_parallel_env(**small(generator, task_seed=1)), 6, seed=6)
    tasks = [{int(deck.tasks[q]) for q in episode} for episode in first[:6]]
    assert tasks != [{int(deck.tasks[q]) for q in episode} for episode in reordered]  # another deal order
    venv = ensemble_env.gen_vector_env(3, **small(generator, task_seed=1))
    venv.reset(seed=5)
    snapshot = [venv.episode_questions(b).tolist() for b in range(3)]
    venv.reset(seed=5)
    assert snapshot == [venv.episode_questions(b).tolist() for b in range(3)]


def test_an_episode_is_a_whole_generated_task_and_the_deck_is_dealt_once(generator: TaskGenerator) -> None:
    env = ensemble_env.gen_parallel_env(**small(generator))
    deck = env.cache
    tasks = []
    for questions in play(env, 9):
        task = int(deck.tasks[questions[0]])
        np.testing.assert_array_equal(questions, np.flatnonzero(deck.tasks == task))  # all of it, in order
        tasks.append(task)
    assert sorted(tasks[:6]) == list(range(6))  # the first deck_size episodes: every task once
    unseen = ensemble_env.unseen_parallel_env(deck, split="all")  # the unseen ids' views: a new deck at each reset
    assert not unseen.deal_on and env.deal_on
    venv = ensemble_env.gen_vector_env(4, **small(generator))
    venv.reset(seed=0)
    dealt = [int(deck.tasks[venv.episode_questions(b)[0]]) for b in range(4)]
    while len(dealt) < 6:
        *_, terminations, _, _ = venv.step({"decider": np.ones((4, 4), np.int8), "fusion": np.zeros(4, np.int64)})
        dealt += [int(deck.tasks[venv.episode_questions(b)[0]]) for b in np.flatnonzero(terminations["fusion"])]
    assert sorted(dealt[:6]) == list(range(6))


def test_partial_feedback_by_default_and_full_feedback_allowed(generator: TaskGenerator) -> None:
    for api in ("parallel", "aec"):
        env = pettingzoo.make(api, GEN_ENV_ID, **small(generator)).unwrapped
        layout = env.engine.layout.decider
        assert env.engine.config.feedback == "team" and "team_record_count" in layout and "task" not in layout
        full = pettingzoo.make(api, GEN_ENV_ID, **small(generator), feedback="all").unwrapped.engine
        assert full.config.feedback == "all" and "team_record_count" not in full.layout.decider
        assert full.config.episodes == "task" and full.config.split == "all"
    assert ID_OPTIONS[GEN_ENV_ID] == {}  # nothing fixed: feedback is a default a keyword may change


@pytest.mark.parametrize("api", ["parallel", "aec"])
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"split": "test"}, r"EnsembleGen-v0 plays every question of its deck's generated tasks: split='test' cannot"),
        ({"tasks": ["gen-000001"]}, r"tasks=\['gen-000001'\] cannot be given"),
        ({"cache": "bbh5"}, r"EnsembleGen-v0 plays generated tasks: cache= is not one of its keywords"),
        ({"episodes": "stream"}, r"one task per episode: episodes='stream' must be 'task'"),
        ({"decider_extras": ("task",)}, r"hides the task's identity: decider_extras=\('task',\) shows it"),
        ({"feedback": "none"}, r"feedback='none' is not one of 'all', 'team'"),
        ({"deck_size": 0}, r"deck_size must be an integer in \[1, 1,000,000\], got 0"),
        ({"task_seed": True}, r"EnsembleGen-v0 task_seed: seed must be a non-negative integer"),
        ({"first": -1}, r"first must be a whole number in 0\.\.\d+, got -1"),
        ({"n_models": 0}, r"n_models must be a whole number in 1\.\.\d+, got 0"),
        ({"generator": 3}, r"generator must be a TaskGenerator, a generator file's path, a LogitCache"),
        ({"alpha": -1.0}, r"alpha"),
    ],
)
def test_a_keyword_that_changes_the_scenario_is_refused_in_one_line(
    generator: TaskGenerator, api: str, options: dict[str, Any], message: str
) -> None:
    keywords = {**small(generator), **options}
    with pytest.raises(ValueError, match=message) as caught:
        pettingzoo.make(api, GEN_ENV_ID, **keywords)
    assert "\n" not in str(caught.value)


def test_ten_models_play_with_the_team_record(generator: TaskGenerator) -> None:
    venv = ensemble_env.gen_vector_env(3, **small(generator, n_models=10))
    assert venv.cache.models[4:] == tuple(f"gen-model-{k:02d}" for k in range(4, 10))
    record = venv.layout.decider["team_record"]
    assert record.stop - record.start == 1023
    venv.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(50):
        obs, *_ = venv.step({"decider": rng.integers(0, 2, (3, 10)), "fusion": np.zeros(3, np.int64)})
        assert venv.observation_space("decider").contains(obs["decider"])


def test_a_hostile_generator_file_is_refused_in_one_line(generator: TaskGenerator, tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    ensemble_env.save_generator(good, generator)
    assert ensemble_env.gen_parallel_env(**small(good)).cache.n_tasks == 6  # a file is read
    cases = {
        "not_json.json": (b"\x00\x01{", r"not_json\.json"),
        "number.json": (good.read_bytes().replace(b'"format_version": 1', b'"format_version": 1e999'), "1e999"),
        "unknown_key.json": (good.read_bytes().replace(b'"score_kind"', b'"score_kind": "bad", "x"', 1), "x"),
    }
    for name, (content, message) in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(CacheError, match=message) as caught:
            pettingzoo.make("parallel", GEN_ENV_ID, **small(path))
        assert "\n" not in str(caught.value) and name in str(caught.value)
    with pytest.raises(CacheError, match="folder") as caught:
        ensemble_env.gen_vector_env(1, **small(tmp_path))
    assert "\n" not in str(caught.value)
    if hasattr(os, "mkfifo"):  # a FIFO is refused without blocking on it
        os.mkfifo(tmp_path / "fifo")
        with pytest.raises(CacheError) as caught:
            ensemble_env.gen_env(**small(tmp_path / "fifo"))
        assert "\n" not in str(caught.value)


def test_the_aec_and_parallel_views_agree(generator: TaskGenerator) -> None:
    parallel = ensemble_env.gen_parallel_env(**small(generator, task_seed=4))
    aec = ensemble_env.gen_env(**small(generator, task_seed=4))
    rng = np.random.default_rng(1)
    for episode in range(3):
        seed = 7 if episode == 0 else None
        obs, _ = parallel.reset(seed=seed)
        aec.reset(seed=seed)
        while parallel.agents:
            actions = {"decider": rng.integers(0, 2, 4).astype(np.int8), "fusion": int(rng.integers(0, 4))}
            for agent in ("decider", "fusion"):
                np.testing.assert_array_equal(aec.observe(agent), obs[agent])
            obs, rewards, *_ = parallel.step(actions)
            for agent in ("decider", "fusion"):
                assert aec.agent_selection == agent
                aec.step(actions[agent])
            assert aec.rewards == rewards
        for agent in ("decider", "fusion"):
            assert aec.terminations[agent]
            aec.step(None)


def test_pettingzoo_api_tests() -> None:
    keywords = {"deck_size": 4, "questions": (20, 30), "window": 20}
    parallel_api_test(pettingzoo.make("parallel", GEN_ENV_ID, **keywords), num_cycles=200)
    api_test(pettingzoo.make("aec", GEN_ENV_ID, **keywords), num_cycles=150)
    seed_test(lambda: pettingzoo.make("aec", GEN_ENV_ID, **keywords, episode_length=15), num_cycles=150)


def test_snapshots_restore_into_the_same_scenario_only(generator: TaskGenerator) -> None:
    venv = ensemble_env.gen_vector_env(3, **small(generator, task_seed=2))
    venv.reset(seed=1)
    actions = {"decider": np.ones((3, 4), np.int8), "fusion": np.zeros(3, np.int64)}
    for _ in range(45):  # past the first episodes' ends: auto-resets dealt on
        venv.step(actions)
    snapshot = venv.get_state()
    again = ensemble_env.gen_vector_env(3, **small(generator, task_seed=2))
    again.set_state(snapshot)
    for _ in range(60):
        ours, theirs = venv.step(actions), again.step(actions)
        for part in range(4):
            for agent in ours[part]:
                np.testing.assert_array_equal(ours[part][agent], theirs[part][agent])
    for other in ({"task_seed": 9}, {"first": 100}):
        elsewhere = ensemble_env.gen_vector_env(3, **small(generator, **{"task_seed": 2, **other}))
        with pytest.raises(ValueError, match="set_state: the snapshot was taken from another configuration or cache"):
            elsewhere.set_state(snapshot)


def test_every_deck_of_a_generator_has_its_width(generator: TaskGenerator) -> None:
    widths = {gen_deck(generator, deck_size=1, first=first, questions=(20, 40)).max_choices for first in range(8)}
    assert widths == {4}
    assert generator.sample(1, 0, first=0, questions=(20, 40)).max_choices in (2, 3, 4)  # by default: the task's
    with pytest.raises(ValueError, match=r"choices must be a whole number in 4\.\.64, got 3"):
        generator.sample(2, 0, choices=3)
    assert DEFAULT_DECK_SIZE == 2048
