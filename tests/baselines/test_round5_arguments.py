"""Issue 49 ("Reliability round 5"), classes 7 and 8: the partial-feedback rules' choice function checks its arguments
as its full-feedback sibling does, through :mod:`ensemble_env.baselines.arguments`, and every seed that enters the
project goes through its one rule (:func:`ensemble_env.seeds.check_seed`): ``True``, ``"0"``, ``[1, 2]``, ``1.0``
and ``-1`` are refused naming where they entered, never passed to numpy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ensemble_env.baselines import online, partial, pooling, registry, simple
from ensemble_env.baselines.comparison import bootstrap_difference
from ensemble_env.baselines.outcomes import team_outcomes
from ensemble_env.baselines.report import team_stats
from ensemble_env.baselines.routing import all_teams
from ensemble_env.cache.augment import permuted_copies
from ensemble_env.cache.convert.splits import split_by_task
from ensemble_env.seeds import check_seed
from ensemble_env.synthetic import make_cache, planted_cache

# -- class 7: partial_choices ------------------------------------------------------------------------------------------
STREAM = np.array([[-1.0] * 5, [1.0] * 5, [1.0] * 5])  # {a}, {b}, {a, b} (the function's example)
TEAMS = np.array([[1, 0], [0, 1], [1, 1]], bool)
VALID: dict[str, Any] = {"rewards": STREAM, "teams": TEAMS, "prior": [0.0, -1.0, -1.5], "rank": [0, 1, 2]}

BAD_CHOICES = [
    ({"prior": [0.0, np.nan, -1.5]}, r"prior must hold finite numbers: prior\[1\] is nan"),
    (
        {"rewards": np.where(np.eye(3, 5, dtype=bool), np.nan, STREAM)},
        r"rewards must hold finite numbers: rewards\[0, 0]",
    ),
    ({"rewards": STREAM * 3}, r"rewards must hold numbers in \[-2, 1\]: rewards\[0, 0\] is -3"),
    ({"prior": [0.0, -1.0, 5.0]}, r"prior must hold numbers in \[-2, 1\]: prior\[2\] is 5"),
    ({"rank": [0, 0, 1]}, r"rank must rank the 3 arms 0 .. 2, each once, got \[0, 0, 1\]"),
    ({"rank": [0, 1, 3]}, r"rank must rank the 3 arms 0 .. 2, each once"),
    ({"rank": [0.0, 1.0, 2.0]}, "rank must hold integer ranks, got an array of dtype float64"),
    ({"rank": [0, 1]}, r"rank must have shape \(3,\), got shape \(2,\)"),
    ({"bounds": (1.0, -2.0)}, r"bounds must be \(low, high\) with low < high .*got \[ 1. -2.\]"),
    ({"bounds": (1.0, 1.0)}, r"bounds must be \(low, high\) with low < high"),
    ({"bounds": (-2.0, np.inf)}, r"bounds must hold finite numbers: bounds\[1\] is inf"),
    ({"bounds": "(-2, 1)"}, "bounds must be an array of numbers, got the string"),
    ({"noise": np.full((5, 3), np.nan), "scale": 0.1}, r"noise must hold finite numbers: noise\[0, 0\] is nan"),
    ({"noise": np.zeros((3, 5)), "scale": 0.1}, r"noise must have shape \(5, 3\), got shape \(3, 5\)"),
    ({"prior": "0 -1 -1.5"}, "prior must be an array of numbers, got the string"),
]


@pytest.mark.parametrize(("change", "message"), BAD_CHOICES, ids=[m[:40] for _, m in BAD_CHOICES])
def test_partial_choices_refuses_what_ucb_choices_refuses(change: dict[str, Any], message: str) -> None:
    arguments = {**VALID, **change}
    with pytest.raises(ValueError, match=message):
        partial.partial_choices(
            arguments.pop("rewards"), arguments.pop("teams"), arguments.pop("prior"), arguments.pop("rank"),
            pseudo_count=1.0, **arguments,
        )  # fmt: skip


def test_the_same_bounds_are_refused_by_both_rules() -> None:
    for bounds in ((1.0, -2.0), (0.5, 0.5), (np.nan, 1.0)):
        messages = []
        with pytest.raises(ValueError) as caught:
            online.ucb_choices(STREAM, np.array([0.0, -1.0, -1.5]), [0, 1, 2], 0.1, 1.0, bounds=bounds)
        messages.append(str(caught.value))
        with pytest.raises(ValueError) as caught:
            partial.partial_choices(STREAM, TEAMS, [0.0, -1.0, -1.5], [0, 1, 2], pseudo_count=1.0, bounds=bounds)
        messages.append(str(caught.value))
        assert messages[0] == messages[1]


def test_valid_arguments_still_play_the_example() -> None:
    chosen = partial.partial_choices(STREAM, TEAMS, [0.0, -1.0, -1.5], np.array([0, 1, 2], np.uint8), pseudo_count=1.0,
                                     explore=2, bounds=[-2, 1])  # fmt: skip
    assert chosen.tolist() == [2, 2, 1, 1, 1]


# -- class 8: one seed rule at every entry ---------------------------------------------------------------------------
HOSTILE_SEEDS = [True, np.bool_(False), "0", [1, 2], 1.0, -1, np.int64(-3), b"1"]


def _cache():
    return make_cache(n_models=3, n_questions=120, n_tasks=3, seed=0)


def _estimate(seed: Any) -> Any:
    cache = _cache()
    questions = np.arange(cache.n_questions)
    teams = all_teams(3)
    outcomes = team_outcomes(cache, questions)
    return pooling.estimate_teams(cache, outcomes.rewards, np.asarray(cache.tasks), outcomes.share,
                                  estimator="certified", seed=seed, correct=outcomes.correct, teams=teams)  # fmt: skip


def _setting(seed: Any) -> Any:
    cache = _cache()
    return registry.Setting(cache, cache.select("train"), cache.select("test"), seed=seed)


def _pair(seed: Any) -> Any:
    cache = _cache()
    train, test = cache.select("train"), cache.select("test")
    first, second = simple.best_single(cache, train, test), simple.oracle(cache, train, test)
    return bootstrap_difference(cache, first, second, n_resamples=10, seed=seed)


ENTRIES: dict[str, tuple[Callable[[Any], Any], str, bool]] = {
    # name: (call with the seed, the name the message gives, None allowed)
    "certified estimator": (_estimate, "seed: seed must be", False),
    "choose_strength": (lambda s: pooling.choose_strength(np.zeros((2, 6)), np.array([0, 0, 0, 1, 1, 1]), 2,
                                                          np.ones(2), seed=s), "seed: seed must be", False),
    "certified_teams": (lambda s: pooling.certified_teams(np.zeros((2, 4)), np.zeros((2, 4), bool), np.ones((2, 4)),
                                                          np.zeros(4, int), 1, np.array([1, 2]), seed=s),
                        "seed: seed must be", False),
    "Setting": (_setting, "Setting.seed: seed must be", True),
    "permuted_copies": (lambda s: permuted_copies(_cache(), 1, seed=s), "permuted_copies: seed must be", False),
    "thompson_team": (lambda s: partial.thompson_team(_cache(), _cache().select(tasks=["task_0", "task_1"]),
                                                      _cache().select(tasks=["task_2"]), seed=s),
                      "seed: seed must be", False),
    "random_team": (lambda s: simple.random_team(_cache(), _cache().select("train"), _cache().select("test"), k=2,
                                                 seed=s), "random_team: seed must be", True),
    "team_stats": (lambda s: team_stats(_cache(), seed=s), "team_stats: seed must be", False),
    "bootstrap_difference": (_pair, "bootstrap_difference: seed must be", False),
    "make_cache": (lambda s: make_cache(n_models=2, n_questions=10, seed=s), "make_cache: seed must be", False),
    "planted_cache": (lambda s: planted_cache("dominant", seed=s), "planted_cache: seed must be", False),
    "split_by_task": (lambda s: split_by_task(np.zeros(10, dtype=int), 0.2, seed=s), "split_by_task: seed must be",
                      True),
}  # fmt: skip


@pytest.mark.parametrize("entry", list(ENTRIES))
@pytest.mark.parametrize("seed", HOSTILE_SEEDS, ids=repr)
def test_every_seed_entry_refuses_a_hostile_seed_naming_itself(entry: str, seed: Any) -> None:
    call, message, _ = ENTRIES[entry]
    with pytest.raises(ValueError, match=message) as caught:
        call(seed)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_every_seed_entry_takes_a_valid_seed_and_none_where_documented(entry: str) -> None:
    call, message, optional = ENTRIES[entry]
    call(np.uint64(7))  # a numpy integer is a seed
    call(2**70)  # of any size (numpy's SeedSequence takes it)
    if optional:
        call(None)
    else:
        with pytest.raises(ValueError, match=message):
            call(None)


def test_the_same_seed_gives_the_same_copies_and_the_rule_is_the_game_s() -> None:
    cache = _cache()
    a, b = permuted_copies(cache, 2, seed=np.int32(5)), permuted_copies(cache, 2, seed=5)
    np.testing.assert_array_equal(a.scores, b.scores)
    from ensemble_env.game.engine import check_seed as game_rule

    assert game_rule is check_seed
