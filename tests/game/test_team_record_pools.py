"""The decider's ``team_record`` for pools up to :data:`~ensemble_env.game.config.MAX_TEAM_RECORD_MODELS` = 10 models
(1,023 teams): the team-vote table against a plain per-team sum, the record of a 10-model pool after every step
under both feedbacks against a recount from the answered questions, its snapshots restored exactly and a crafted
count refused, and pools beyond the limit refused by name.
"""

from __future__ import annotations

import numpy as np
import pytest

import ensemble_env
from ensemble_env.game.actions import subset_masks
from ensemble_env.game.config import MAX_TEAM_RECORD_MODELS, unseen_game
from ensemble_env.game.task_record import RECORD_COUNT_HALF, team_vote_table
from ensemble_env.synthetic import make_cache


def plain_votes(probs: np.ndarray, n_choices: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(Q, K) each team's mean vote right: members' probabilities summed in float64 in model order, ties low."""
    masks = subset_masks(probs.shape[1])
    table = np.zeros((probs.shape[0], masks.shape[0]), dtype=np.uint8)
    for q in range(probs.shape[0]):
        for k, mask in enumerate(masks):
            sums = np.zeros(n_choices[q])
            for i in np.flatnonzero(mask):  # the same additions, in the same order
                sums = sums + probs[q, i, : n_choices[q]].astype(np.float64)
            table[q, k] = int(np.argmax(sums)) == labels[q]
    return table


@pytest.mark.parametrize("n_models", [1, 2, 5, 7])
def test_the_team_vote_table_is_the_plain_sum(n_models: int) -> None:
    cache = make_cache(n_models=n_models, n_questions=40, n_tasks=2, n_choices=(2, 5), seed=n_models)
    for probs in (cache.probs, (np.round(cache.probs * 4) / 4).astype(np.float32)):  # the second has real ties
        rows = np.arange(0, 40, 3)
        got = team_vote_table(probs, cache.n_choices, cache.labels, rows)
        expected = plain_votes(probs, cache.n_choices, cache.labels)
        np.testing.assert_array_equal(got[rows], expected[rows])
        assert not got[np.setdiff1d(np.arange(40), rows)].any()  # the rows not asked for stay 0


def ten_model_cache() -> ensemble_env.LogitCache:
    return make_cache(n_models=10, n_questions=90, n_tasks=3, n_choices=(2, 4, 3), seed=3)


@pytest.mark.parametrize("version", [1, 2])
def test_a_ten_model_pool_plays_with_its_team_record(version: int) -> None:
    cache = ten_model_cache()
    assert MAX_TEAM_RECORD_MODELS == 10 and "team_record" in unseen_game(10)["decider_extras"]
    venv = ensemble_env.unseen_vector_env(3, cache, version=version, split="all", window=8)
    layout = venv.layout.decider
    assert layout["team_record"].stop - layout["team_record"].start == 1023
    votes = plain_votes(cache.probs, cache.n_choices, cache.labels).astype(np.int64)
    masks = subset_masks(10).astype(bool)
    rng = np.random.default_rng(0)
    venv.reset(seed=1)
    answered: list[list[tuple[int, np.ndarray]]] = [[] for _ in range(3)]
    for _ in range(40):
        teams = venv.team  # the teams that answer this step
        questions = venv.next_questions()
        action = rng.integers(0, 2, (3, 10)).astype(np.int8)
        obs, _, terminations, truncations, infos = venv.step({"decider": action, "fusion": np.zeros(3, np.int64)})
        ended = terminations["decider"] | truncations["decider"]
        for env in range(3):
            answered[env].append((int(questions[env]), teams[env]))
            decider = infos["final_obs"]["decider"][env] if ended[env] else obs["decider"][env]
            rows = np.array([q for q, _ in answered[env]])
            if version == 1:  # every answered question counts for every team
                seen = np.full(1023, rows.size)
                right = votes[rows].sum(axis=0)
            else:  # a team counts the questions its answering team contained it on
                holds = np.array([~(masks & ~team[None, :]).any(axis=1) for _, team in answered[env]])  # (n, K)
                seen, right = holds.sum(axis=0), (holds * votes[rows]).sum(axis=0)
            expected = np.where(seen > 0, right / np.maximum(seen, 1), 0.0)
            np.testing.assert_allclose(decider[layout["team_record"]], expected, rtol=1e-6, atol=1e-7)
            if version == 2:
                np.testing.assert_allclose(
                    decider[layout["team_record_count"]], seen / (seen + RECORD_COUNT_HALF), rtol=1e-6
                )
            if ended[env]:
                answered[env] = []
    snapshot = venv.get_state()
    again = ensemble_env.unseen_vector_env(3, cache, version=version, split="all", window=8)
    again.set_state(snapshot)
    action = {"decider": np.ones((3, 10), np.int8), "fusion": np.ones(3, np.int64)}
    ours, theirs = venv.step(action)[0], again.step(action)[0]
    for agent, array in ours.items():
        np.testing.assert_array_equal(theirs[agent], array)
    snapshot["team_right"][1, 1022] = -1
    with pytest.raises(ValueError, match=r"set_state: team_right\[1, 1022\]"):
        again.set_state(snapshot)


def test_a_pool_beyond_the_limit_is_refused_by_name() -> None:
    cache = make_cache(n_models=11, n_questions=20, seed=0)
    assert "team_record" not in unseen_game(11)["decider_extras"]  # the unseen game leaves it out
    with pytest.raises(ValueError, match=r"'team_record' has a value per team, 2\*\*N - 1, for pools of N <= 10 "):
        ensemble_env.parallel_env(cache, **unseen_game(10))
