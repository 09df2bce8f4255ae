"""The window statistics the engine maintains by counts equal their plain definitions (ensemble_env.metrics).

Thousands of steps on random caches: the window filling, full (questions leaving), and emptied at episode
boundaries; every statistic, with the per-team plurality table (N <= 12) and without it (N = 13).
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest
from testing.game import ALL, definitions

import ensemble_env
from ensemble_env import metrics
from ensemble_env.game.window import (
    count_planes,
    n_triples,
    plurality_count,
    plurality_table,
    table_words,
    triple_index,
    unpack_teams,
    update_plurality,
)
from ensemble_env.synthetic import make_cache


@pytest.mark.parametrize(
    ("n_models", "window", "episode_length", "seed"),
    [(5, 7, 40, 0), (8, 50, 120, 1), (13, 9, 30, 2)],
    ids=["small-window", "table-N8", "rows-path-N13"],
)
def test_counted_statistics_equal_definitions_over_long_runs(
    n_models: int, window: int, episode_length: int, seed: int
) -> None:
    cache = make_cache(
        n_models=n_models, n_questions=400, n_tasks=3, n_choices=(2, 3, 5), error_correlation=0.4, seed=seed
    )
    num_envs = 3
    venv = ensemble_env.vector_env(
        num_envs,
        cache,
        split="all",
        order="shuffled",
        window=window,
        episode_length=episode_length,
        metrics=ALL,
        decider_extras=["model_accuracy"],
    )
    assert venv.uses_plurality_table == (n_models <= 12)
    layout = venv.layout
    obs, infos = venv.reset(seed=seed)
    history = [deque(maxlen=window) for _ in range(num_envs)]
    rng = np.random.default_rng(seed)
    steps = 700 if n_models < 13 else 300
    checked_full = checked_filling = 0
    for _ in range(steps):
        teams = rng.integers(0, 2, (num_envs, n_models))
        teams[rng.random(num_envs) < 0.1] = 0  # empty teams now and then
        single = rng.random(num_envs) < 0.1
        teams[single] = 0
        teams[single, rng.integers(0, n_models, single.sum())] = 1  # and lone members
        questions = [int(q) for q in venv.next_questions()]
        obs, _, _, truncations, infos = venv.step({"decider": teams, "fusion": rng.integers(0, 5, num_envs)})
        for env in range(num_envs):
            history[env].append(questions[env])
            if truncations["decider"][env]:
                history[env].clear()  # a new episode starts with an empty window
                final = infos["final_obs"]["decider"][env]
                members = np.flatnonzero(teams[env])
                # the finished episode's last observation still describes its (full or filling) window
                assert final[layout.decider["team_mask"]].tolist() == teams[env].tolist()
                assert np.all(np.isfinite(final))
                continue
            members = np.flatnonzero(teams[env])
            expected = definitions(cache, list(history[env]), members)
            observed = obs["decider"][env, layout.decider["statistics"]]
            np.testing.assert_allclose(observed, np.float32(expected), rtol=0, atol=2e-7)
            np.testing.assert_allclose(venv.window_statistics()[env], expected, rtol=0, atol=1e-9)
            assert infos["decider"]["focal_diversity"][env] == pytest.approx(expected[0], abs=1e-9)
            accuracy = cache.correct[list(history[env])].mean(axis=0) if history[env] else np.zeros(n_models)
            np.testing.assert_allclose(obs["decider"][env, layout.decider["model_accuracy"]], accuracy, atol=1e-7)
            if len(history[env]) == window:
                checked_full += 1
            else:
                checked_filling += 1
    assert checked_full > 100 and checked_filling > 30


def test_plurality_table_matches_votes() -> None:
    cache = make_cache(n_models=6, n_questions=200, n_tasks=2, n_choices=(3, 7), seed=5)
    bits = plurality_table(cache.preds, cache.labels, cache.n_choices, cache.n_models)
    assert bits.shape == (200, 1) and bits.dtype == np.uint64
    table = unpack_teams(bits, cache.n_models)
    assert table.shape == (200, 64)
    assert not table[:, 0].any()  # the empty team is never right
    for team in range(1, 64):
        members = np.flatnonzero((team >> np.arange(6)) & 1)
        for q in range(0, 200, 7):
            expected = metrics.plurality_accuracy(cache.preds[q : q + 1, members], cache.labels[q : q + 1])
            assert table[q, team] == expected


def test_counts_are_exact_after_many_episodes() -> None:
    """Integer counts do not drift: after thousands of steps the statistics still equal a fresh computation."""
    cache = make_cache(n_models=6, n_questions=300, seed=9)
    venv = ensemble_env.vector_env(4, cache, split="all", window=64, metrics=ALL)
    venv.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(3000):
        venv.step({"decider": rng.integers(0, 2, (4, 6)), "fusion": rng.integers(0, 4, 4)})
    for env in range(4):
        members = np.flatnonzero(venv.team[env])
        expected = definitions(cache, list(venv.window_contents(env)), members)
        np.testing.assert_allclose(venv.window_statistics()[env], expected, rtol=0, atol=1e-9)


def test_pools_of_32_models_work() -> None:
    """Beyond 12 models the plurality statistic reads the window's rows; everything else is counted."""
    cache = make_cache(n_models=32, n_questions=120, n_choices=4, seed=4)
    venv = ensemble_env.vector_env(2, cache, split="all", window=16, metrics=ALL)
    assert not venv.uses_plurality_table
    venv.reset(seed=0)
    rng = np.random.default_rng(1)
    answered: list[deque[int]] = [deque(maxlen=16), deque(maxlen=16)]
    for _ in range(40):
        questions = venv.next_questions().tolist()
        venv.step({"decider": rng.integers(0, 2, (2, 32)), "fusion": rng.integers(0, 4, 2)})
        for env in range(2):
            answered[env].append(questions[env])
            expected = definitions(cache, list(answered[env]), np.flatnonzero(venv.team[env]))
            np.testing.assert_allclose(venv.window_statistics()[env], expected, rtol=0, atol=1e-9)


@pytest.mark.parametrize("window", [1, 63, 64, 255, 700])
def test_bit_sliced_counts_equal_integer_counts(window: int) -> None:
    """The plurality counts' bit planes hold exactly the window counts, up to a window full of right teams."""
    rng = np.random.default_rng(window)
    n_models = 7  # two words per row
    words = table_words(n_models)
    rows = rng.integers(0, 2**63, (60, words), dtype=np.uint64) | rng.integers(0, 2**63, (60, words), dtype=np.uint64)
    rows[::3] = np.iinfo(np.uint64).max  # every team right: counts climb to the window length
    planes = np.zeros((count_planes(window), words), dtype=np.uint64)
    carry, borrow = np.empty(words, dtype=np.uint64), np.empty(words, dtype=np.uint64)
    stream = rng.integers(0, rows.shape[0], 3 * window + 50)
    stream[:window] = 0  # a first window of all-right rows: every count reaches the window length
    expected = np.zeros(1 << n_models, dtype=np.int64)
    peak = 0
    for t, row in enumerate(stream):
        full = t >= window
        leaving = stream[t - window] if full else 0
        update_plurality(planes, rows[row], rows[leaving], full, carry, borrow)
        expected += unpack_teams(rows[row], n_models)
        if full:
            expected -= unpack_teams(rows[leaving], n_models)
        if t % 7 == 0 or t == stream.size - 1:
            weights = 1 << np.arange(planes.shape[0], dtype=np.int64)
            counted = (unpack_teams(planes, n_models).astype(np.int64) * weights[:, None]).sum(axis=0)
            np.testing.assert_array_equal(counted, expected)
            team = int(rng.integers(0, 1 << n_models))
            assert plurality_count(planes, team) == expected[team]
        peak = max(peak, int(expected.max()))
    assert peak == window  # the top plane was exercised


def test_triple_index_packs_every_set_once() -> None:
    n_models = 9
    seen = [triple_index(i, j, k) for k in range(n_models) for j in range(k) for i in range(j)]
    assert sorted(seen) == list(range(n_triples(n_models)))
