"""The online baselines check their arguments by type and value (issue 41, class 4), as the environment checks its
options: huge windows and delays, NaN or infinite rewards, equal or reversed bounds, wrong types and shapes, a string
of names are refused with a ValueError naming the argument; nothing overflows, broadcasts or is read letter by letter.
Valid extremes (a window longer than the stream, a delay that reveals nothing) are accepted with the values they mean.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ensemble_env.baselines import online, unseen
from ensemble_env.baselines.outcomes import prior_rank, reward_range, team_outcomes
from ensemble_env.cache import synthetic
from ensemble_env.game.reward import RewardSettings

REWARDS = np.array([[1.0, -1.0, -1.0, 1.0], [-1.0, 1.0, 1.0, 1.0]])  # 2 arms x 4 questions
RANK = np.array([0, 1])
CORRECT = REWARDS > 0
SHARE = np.full(REWARDS.shape, 0.5)
PRIOR = np.array([0.5, -0.5])


def ftl(**changes: Any) -> Any:
    arguments = {"rewards": REWARDS, "rank": RANK, **changes}
    return online.ftl_choices(**arguments)


def ucb(**changes: Any) -> Any:
    arguments = {"rewards": REWARDS, "prior": PRIOR, "rank": RANK, "exploration": 0.1, "pseudo_count": 2.0, **changes}
    return online.ucb_choices(**arguments)


def rank(**changes: Any) -> Any:
    return prior_rank(**{"rewards": REWARDS, "correct": CORRECT, "share": SHARE, **changes})


CACHE = synthetic.make_cache(n_models=3, n_questions=90, n_tasks=3, seed=0)
HELD = CACHE.select(tasks=["task_0"])
TRAIN = np.setdiff1d(np.arange(CACHE.n_questions), HELD)


def baseline(function: Callable[..., Any], **changes: Any) -> Any:
    arguments = {"cache": CACHE, "train": TRAIN, "test": HELD, **changes}
    return function(**arguments)


HOSTILE: dict[str, tuple[Callable[[], Any], str]] = {
    # ftl_choices
    "window 2**70": (
        lambda: ftl(window=2**70),
        r"window must be an integer in \[1, 1,000,000\], got 1180591620717411303424",
    ),
    "window 0": (lambda: ftl(window=0), r"window must be an integer in \[1, 1,000,000\], got 0"),
    "window True": (lambda: ftl(window=True), r"window must be an integer .*, got True"),
    "window 2.0": (lambda: ftl(window=2.0), r"window must be an integer .*, got 2.0"),
    "window '16'": (lambda: ftl(window="16"), r"window must be an integer .*, got '16'"),
    "delay 10**30": (lambda: ftl(delay=10**30), r"delay must be an integer in \[0, 2,147,483,647\], got 10{30}"),
    "delay -1": (lambda: ftl(delay=-1), r"delay must be an integer .*, got -1"),
    "delay numpy bool": (lambda: ftl(delay=np.bool_(True)), r"delay must be an integer .*, got np.True_|True"),
    "rewards NaN": (
        lambda: ftl(rewards=np.where(CORRECT, np.nan, -1.0)),
        r"rewards must hold finite numbers: rewards\[0, 0\] is nan",
    ),
    "rewards infinite": (lambda: ftl(rewards=REWARDS * np.inf), r"rewards must hold finite numbers"),
    "rewards text": (
        lambda: ftl(rewards=[["1", "2"], ["3", "4"]]),
        r"rewards must hold real numbers, got an array of dtype <U1",
    ),
    "rewards a string": (lambda: ftl(rewards="1.0"), r"rewards must be an array of numbers, got the string '1.0'"),
    "rewards 1-D": (lambda: ftl(rewards=REWARDS[0]), r"rewards must have shape \(A, B\), got shape \(4,\)"),
    "rewards ragged": (lambda: ftl(rewards=[[1.0], [1.0, 2.0]]), r"rewards must be an array of numbers"),
    "rewards no arm": (
        lambda: ftl(rewards=np.zeros((0, 4)), rank=np.zeros(0, int)),
        r"rewards must have one row per arm",
    ),
    "rank too short": (lambda: ftl(rank=[0]), r"rank must have shape \(2,\), got shape \(1,\)"),
    "rank repeated": (lambda: ftl(rank=[0, 0]), r"rank must rank the 2 arms 0 .. 1, each once, got \[0, 0\]"),
    "rank floats": (lambda: ftl(rank=[0.0, 1.0]), r"rank must hold integer ranks, got an array of dtype float64"),
    "rank out of range": (lambda: ftl(rank=[1, 2]), r"rank must rank the 2 arms"),
    # ucb_choices
    "bounds equal": (lambda: ucb(bounds=(1.0, 1.0)), r"bounds must be \(low, high\) with low < high"),
    "bounds reversed": (lambda: ucb(bounds=(1.0, -2.0)), r"bounds must be \(low, high\) with low < high"),
    "bounds NaN": (lambda: ucb(bounds=(float("nan"), 1.0)), r"bounds must hold finite numbers"),
    "bounds three": (lambda: ucb(bounds=(-2.0, 0.0, 1.0)), r"bounds must have shape \(2,\)"),
    "reward outside bounds": (
        lambda: ucb(bounds=(-1.0, 0.5)),
        r"rewards must hold numbers in \[-1, 0.5\]: rewards\[0, 0\] is 1",
    ),
    "prior NaN": (lambda: ucb(prior=[np.nan, 0.0]), r"prior must hold finite numbers: prior\[0\] is nan"),
    "prior of 3 arms": (lambda: ucb(prior=[0.0, 0.0, 0.0]), r"prior must have shape \(2,\), got shape \(3,\)"),
    "exploration NaN": (
        lambda: ucb(exploration=float("nan")),
        r"exploration must be a finite number in \[0, 1e\+06\], got nan",
    ),
    "exploration negative": (lambda: ucb(exploration=-0.1), r"exploration must be a finite number"),
    "exploration text": (lambda: ucb(exploration="0.1"), r"exploration must be a number in \[0, 1e\+06\], got '0.1'"),
    "pseudo-count 0": (lambda: ucb(pseudo_count=0), r"pseudo_count must be a number in \(0, 1e\+06\], got 0"),
    "pseudo-count 1e400": (lambda: ucb(pseudo_count=1e400), r"pseudo_count must be a finite number"),
    "ucb delay huge": (lambda: ucb(delay=2**63), r"delay must be an integer"),
    # prior_rank
    "correct as floats": (lambda: rank(correct=CORRECT.astype(float)), r"correct must hold booleans"),
    "share above 1": (lambda: rank(share=SHARE * 3), r"share must hold numbers in \[0, 1\]: share\[0, 0\] is 1.5"),
    "share of another shape": (lambda: rank(share=SHARE[:, :2]), r"share must have shape \(2, 4\), got shape \(2, 2\)"),
    "no question": (
        lambda: rank(rewards=np.zeros((2, 0)), correct=np.zeros((2, 0), bool), share=np.zeros((2, 0))),
        r"rewards must have at least one arm and one question",
    ),
    # the baselines on a cache
    "reward a float": (
        lambda: baseline(online.global_team, reward=1.0),
        r"reward must be a RewardSettings, got float 1.0",
    ),
    "cache a path": (lambda: baseline(online.ftl_team, cache="bbh5"), r"cache must be a LogitCache, got str 'bbh5'"),
    "outcomes a dict": (lambda: baseline(online.hindsight_team, outcomes={}), r"outcomes must be a TeamOutcomes"),
    "ftl window huge": (
        lambda: baseline(online.ftl_team, window=10**12),
        r"window must be an integer in \[1, 1,000,000\]",
    ),
    "windows a string": (
        lambda: baseline(online.ftl_team_window, windows="16"),
        r"windows must be a list of values, got the string '16'",
    ),
    "windows a number": (
        lambda: baseline(online.ftl_team_window, windows=16),
        r"windows must be a list of values, got 16",
    ),
    "windows empty": (lambda: baseline(online.ftl_team_window, windows=[]), r"windows is empty"),
    "windows NaN": (
        lambda: baseline(online.ftl_team_window, windows=[8, float("nan")]),
        r"windows\[1\] must be an integer",
    ),
    "windows too many": (
        lambda: baseline(online.ftl_team_window, windows=range(1, 1000)),
        r"windows holds 999 values, more than the 64",
    ),
    "explorations a string": (
        lambda: baseline(online.ucb_team, explorations="0.1"),
        r"explorations must be a list of values",
    ),
    "pseudo-counts negative": (
        lambda: baseline(online.ucb_team, pseudo_counts=[1.0, -4.0]),
        r"pseudo_counts\[1\] must be a finite number",
    ),
    "team_outcomes reward None": (
        lambda: team_outcomes(CACHE, reward=None),
        r"reward must be a RewardSettings, got NoneType",
    ),
    "reward_range of a dict": (lambda: reward_range({"alpha": 1.0}), r"reward must be a RewardSettings"),
    "names a string": (
        lambda: unseen.leave_one_task_out(CACHE, names="ftl_team"),
        r"names must be a list of values, got the string 'ftl_team'",
    ),
    "names unknown": (
        lambda: unseen.leave_one_task_out(CACHE, names=["ftl_teams"]),
        r"names: unknown name 'ftl_teams'; the names are global_single",
    ),
    "names not strings": (
        lambda: unseen.leave_one_task_out(CACHE, names=[1]),
        r"names must hold names \(strings\), got 1",
    ),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_arguments_are_refused_naming_them(case: str) -> None:
    call, message = HOSTILE[case]
    with pytest.raises(ValueError, match=message):
        call()


def test_valid_extremes_mean_what_they_say() -> None:
    """A window longer than the stream is the whole history; a delay longer than the stream reveals nothing (every
    question goes to the first of the rank); numpy integers are whole numbers; a grid may be any list of numbers."""
    assert ftl(window=10**6).tolist() == ftl().tolist() == [0, 0, 0, 1]
    assert ftl(delay=2**31 - 1).tolist() == [0, 0, 0, 0]
    assert ftl(window=np.int64(1), delay=np.uint8(0)).tolist() == [0, 0, 1, 1]
    assert ucb(delay=2**31 - 1, exploration=np.float32(0.0)).tolist() == [0, 0, 0, 0]
    assert ucb(bounds=[-2, 1]).tolist() == ucb().tolist()
    result = baseline(online.ftl_team_window, windows=np.array([2, 4]), reward=RewardSettings(alpha=0.5))
    assert result.info["window"] in (2, 4)
    assert baseline(online.ucb_team, explorations=(0,), pseudo_counts=[np.float64(1.0)]).info["exploration"] == 0.0
